/* The C library's allocator inside an MPK domain (docs/isolation.md, "The MPK backend").
 * Loaded first into the library's own link namespace (dlmopen), so that the library's and its
 * libc's calls to malloc resolve here and never reach the process's allocator. Its state lives in
 * this object's .bss, which the domain's key tags and which a discard restores from a snapshot,
 * so a fault cannot leave the allocator half-updated. Blocks come from one region given by
 * isolation_heap_install, in power-of-two classes with a 16-byte header; a class's freed blocks
 * are reused first. Until the region is installed (the library's constructors), a small static
 * pool serves. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HEADER 16u
#define CLASSES 40u
#define BOOT_BYTES (32u * 1024u)

struct block_header {
    uint32_t class;   /* the block holds (1 << class) bytes, header included */
    uint32_t magic;
    uint64_t offset;  /* from the block's start to the pointer handed out (aligned allocations) */
};

#define MAGIC 0x51a7e5u

static unsigned char boot_pool[BOOT_BYTES] __attribute__((aligned(64)));
static unsigned char *region;
static size_t region_bytes;
static size_t bumped;
static size_t boot_bumped;
static void *free_lists[CLASSES];
static uint64_t allocations;

void isolation_heap_install(void *base, size_t bytes) {
    region = base;
    region_bytes = bytes;
    bumped = 0;
}

uint64_t isolation_heap_allocations(void) { return allocations; }

static unsigned class_for(size_t total) {
    unsigned c = 5; /* 32 bytes at least */
    while (c < CLASSES && ((size_t)1 << c) < total)
        c++;
    return c;
}

static unsigned char *take(unsigned c) {
    size_t bytes = (size_t)1 << c;
    if (free_lists[c]) {
        unsigned char *b = free_lists[c];
        free_lists[c] = *(void **)(b + HEADER);
        return b;
    }
    if (region && bumped + bytes <= region_bytes) {
        unsigned char *b = region + bumped;
        bumped += bytes;
        return b;
    }
    if (!region && boot_bumped + bytes <= BOOT_BYTES) {
        unsigned char *b = boot_pool + boot_bumped;
        boot_bumped += bytes;
        return b;
    }
    return NULL;
}

static void *allocate(size_t n, size_t align) {
    if (n > ((size_t)1 << (CLASSES - 2)) || align > 4096)
        return NULL;
    size_t total = n + HEADER + (align > HEADER ? align : 0);
    unsigned c = class_for(total);
    unsigned char *b = take(c);
    if (!b) {
        errno = ENOMEM;
        return NULL;
    }
    allocations++;
    uintptr_t p = (uintptr_t)b + HEADER;
    if (align > HEADER)
        p = (p + align - 1) & ~(uintptr_t)(align - 1);
    struct block_header *h = (struct block_header *)(p - HEADER);
    h->class = c;
    h->magic = MAGIC;
    h->offset = p - (uintptr_t)b;
    return (void *)p;
}

static struct block_header *header_of(void *p) {
    return (struct block_header *)((unsigned char *)p - HEADER);
}

void *malloc(size_t n) { return allocate(n, HEADER); }

void free(void *p) {
    if (!p)
        return;
    struct block_header *h = header_of(p);
    unsigned char *b = (unsigned char *)p - h->offset;
    unsigned c = h->class;
    if (h->magic != MAGIC || c >= CLASSES)
        __builtin_trap(); /* a corrupted or foreign pointer: fault, so the domain is discarded */
    h->magic = 0;
    if ((uintptr_t)b >= (uintptr_t)boot_pool && (uintptr_t)b < (uintptr_t)boot_pool + BOOT_BYTES)
        return;
    *(void **)(b + HEADER) = free_lists[c];
    free_lists[c] = b;
}

size_t malloc_usable_size(void *p) {
    if (!p)
        return 0;
    struct block_header *h = header_of(p);
    return ((size_t)1 << h->class) - h->offset;
}

void *calloc(size_t count, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n))
        return NULL;
    void *p = malloc(n);
    if (p)
        memset(p, 0, n);
    return p;
}

void *realloc(void *p, size_t n) {
    if (!p)
        return malloc(n);
    size_t room = malloc_usable_size(p);
    if (n <= room)
        return p;
    void *q = malloc(n);
    if (q) {
        memcpy(q, p, room);
        free(p);
    }
    return q;
}

void *reallocarray(void *p, size_t count, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n))
        return NULL;
    return realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n) {
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = allocate(n, align);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n) { return allocate(n, align); }
void *memalign(size_t align, size_t n) { return allocate(n, align); }
void *valloc(size_t n) { return allocate(n, 4096); }
void *pvalloc(size_t n) { return allocate((n + 4095) & ~(size_t)4095, 4096); }

/* longjmp without glibc's cancellation bookkeeping: glibc's longjmp records the unwound
 * cleanup buffers in the thread's control block (key 0), which a domain may not write, and
 * libraries such as libpng longjmp out of every error. Resolved in the domain's namespace
 * before libc's; restores what setjmp saved (glibc's x86-64 jmp_buf: rbx, rbp, r12-r15, rsp,
 * rip, the last three mangled with the thread's pointer guard at fs:0x30) and the signal mask
 * if sigsetjmp saved it. */
#include <setjmp.h>
#include <signal.h>

__attribute__((noreturn)) void isolation_longjmp_registers(void *registers, int value);
__asm__(
    ".text\n"
    ".globl isolation_longjmp_registers\n"
    ".type isolation_longjmp_registers,@function\n"
    "isolation_longjmp_registers:\n"
    "    mov 0x30(%rdi), %r8\n"   /* rsp, mangled */
    "    mov 0x08(%rdi), %r9\n"   /* rbp, mangled */
    "    mov 0x38(%rdi), %rdx\n"  /* rip, mangled */
    "    ror $0x11, %r8\n"
    "    xor %fs:0x30, %r8\n"
    "    ror $0x11, %r9\n"
    "    xor %fs:0x30, %r9\n"
    "    ror $0x11, %rdx\n"
    "    xor %fs:0x30, %rdx\n"
    "    mov 0x00(%rdi), %rbx\n"
    "    mov 0x10(%rdi), %r12\n"
    "    mov 0x18(%rdi), %r13\n"
    "    mov 0x20(%rdi), %r14\n"
    "    mov 0x28(%rdi), %r15\n"
    "    mov %esi, %eax\n"
    "    test %eax, %eax\n"
    "    jnz 1f\n"
    "    inc %eax\n"
    "1:  mov %r8, %rsp\n"
    "    mov %r9, %rbp\n"
    "    jmp *%rdx\n");

__attribute__((noreturn)) static void jump(struct __jmp_buf_tag *env, int value) {
    if (env->__mask_was_saved)
        sigprocmask(SIG_SETMASK, &env->__saved_mask, NULL);
    isolation_longjmp_registers(env->__jmpbuf, value);
}

__attribute__((noreturn)) void longjmp(jmp_buf env, int value) { jump(env, value); }
__attribute__((noreturn)) void _longjmp(jmp_buf env, int value) { jump(env, value); }
__attribute__((noreturn)) void siglongjmp(sigjmp_buf env, int value) { jump(env, value); }
__attribute__((noreturn)) void __longjmp_chk(jmp_buf env, int value) { jump(env, value); }
