/* A deliberately broken C library: each entry point commits one memory error, so that the tests
 * (tests/faults.rs) can check that a domain turns it into an Err and that the caller's memory
 * stays intact. Built with the stack protector, as distributions build their libraries. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Sums the input; the well-behaved call the tests make after every fault. */
uint64_t broken_sum(const uint8_t *input, size_t len) {
    uint64_t sum = 0;
    for (size_t i = 0; i < len; i++)
        sum += input[i];
    return sum;
}

/* Writes `len` bytes into a 64-byte heap block: runs off the heap. */
void broken_heap_overflow(size_t len) {
    unsigned char *p = malloc(64);
    memset(p, 0x41, len);
    __asm__ volatile("" ::"r"(p) : "memory");
    free(p);
}

/* Writes through an address the caller handed over as a number. */
void broken_wild_write(uintptr_t address) {
    *(volatile uint64_t *)address = 0xbadbadbadbadbadull;
}

/* Overflows a stack buffer: the stack protector stops the return. */
void broken_stack_smash(size_t len) {
    char buf[16];
    memset(buf, 0x42, len);
    __asm__ volatile("" ::"r"(buf) : "memory");
}

static uint64_t *kept;

/* Keeps a pointer to the caller's object, as a context or callback argument would be kept. */
void broken_keep(uintptr_t object) { kept = (uint64_t *)object; }

/* Writes through the kept pointer after the caller freed the object. */
void broken_use_after_free(void) {
    for (int i = 0; i < 8; i++)
        kept[i] = 0xdeaddeaddeaddeadull;
}

/* Calls through a null function pointer. */
void broken_null_call(void) {
    void (*volatile f)(void) = 0;
    f();
}

/* Never returns. */
void broken_spin(void) {
    for (;;)
        __asm__ volatile("" ::: "memory");
}

#include <fcntl.h>
#include <unistd.h>

/* Opens a file: a system call outside the helper process's allowlist. Returns the descriptor
 * (closed again) or -1. */
int broken_open_file(void) {
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd >= 0)
        close(fd);
    return fd;
}
