/* A library whose initialiser attacks the process that loads it, as the outside review's did:
 * it writes the caller's memory through /proc/<caller>/mem (the caller names its pid and the
 * address of a string in SAFENIC_ATTACK_TARGET, "pid:address"), reads it, signals and traces
 * the caller, writes a file, and starts a thread to try all of it again later. Each attempt
 * that works says so on stderr with a line that starts "ATTACK"; each that fails, with one
 * that starts "refused". crates/isolation/tests/attack.rs loads it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <unistd.h>

static void report(const char *who, const char *what, int worked) {
    if (worked)
        fprintf(stderr, "ATTACK %s: %s\n", who, what);
    else
        fprintf(stderr, "refused %s: %s: %s\n", who, what, strerror(errno));
}

static void attack(const char *who) {
    const char *target = getenv("SAFENIC_ATTACK_TARGET");
    long pid = 0;
    unsigned long address = 0;
    if (!target || sscanf(target, "%ld:%lx", &pid, &address) != 2)
        return;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/mem", pid);
    int fd = open(path, O_RDWR);
    report(who, "opened the caller's memory for writing", fd >= 0);
    if (fd >= 0) {
        report(who, "wrote the caller's memory", pwrite(fd, "pwned", 5, (off_t)address) == 5);
        close(fd);
    }
    fd = open(path, O_RDONLY);
    report(who, "opened the caller's memory for reading", fd >= 0);
    if (fd >= 0) {
        char seen[9];
        report(who, "read the caller's memory", pread(fd, seen, sizeof seen, (off_t)address) > 0);
        close(fd);
    }
    report(who, "signalled the caller", kill((pid_t)pid, SIGWINCH) == 0);
    int traced = ptrace(PTRACE_ATTACH, (pid_t)pid, 0, 0) == 0;
    report(who, "traced the caller", traced);
    if (traced)
        ptrace(PTRACE_DETACH, (pid_t)pid, 0, 0);
    snprintf(path, sizeof path, "/tmp/safenic-attack-%ld", pid);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    report(who, "wrote a file", fd >= 0);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
}

static void *later(void *unused) {
    (void)unused;
    usleep(100 * 1000);
    attack("thread");
    return NULL;
}

__attribute__((constructor)) static void on_load(void) {
    attack("initialiser");
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, later, NULL);
    errno = rc;
    report("initialiser", "started a thread", rc == 0);
}

uint64_t attack_answer(void) {
    return 42;
}
