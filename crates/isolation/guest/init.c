/* /init of the guest that make test-mpk boots (scripts/test-mpk): mounts what the tests need,
 * runs every test program in /tests one after the other, prints one verdict line per program
 * and a summary, and powers the guest off. Static, so the initramfs needs no shell. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/wait.h>
#include <unistd.h>

static int run(const char *path) {
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {(char *)path, "--test-threads=1", NULL};
        char *envp[] = {"SAFENIC_ISOLATION_REQUIRE_MPK=1", "RUST_BACKTRACE=1", "PATH=/tests", NULL};
        execve(path, argv, envp);
        perror("execve");
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(void) {
    mount("proc", "/proc", "proc", 0, NULL);
    mount("sysfs", "/sys", "sysfs", 0, NULL);
    mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
    mount("tmpfs", "/dev/shm", "tmpfs", 0, NULL);
    FILE *cpu = fopen("/proc/cpuinfo", "r");
    char line[4096];
    int pku = 0;
    while (cpu && fgets(line, sizeof line, cpu))
        if (strncmp(line, "flags", 5) == 0 && strstr(line, " pku") && strstr(line, " ospke"))
            pku = 1;
    printf("MPK-GUEST: pku %s\n", pku ? "yes" : "no");
    DIR *dir = opendir("/tests");
    struct dirent *e;
    int failed = 0, ran = 0;
    while (dir && (e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "/tests/%s", e->d_name);
        fflush(stdout);
        int code = run(path);
        printf("MPK-GUEST: %s exit %d\n", e->d_name, code);
        failed += code != 0;
        ran++;
    }
    printf("MPK-GUEST: done, %d programs, %d failed\n", ran, failed);
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    return 0;
}
