// The OS boundary of the C baseline: PCI functions under a sysfs root, BAR0, hugepage DMA
// memory with physical addresses. Mirrors crates/platform, with the same one-line errors.
#ifndef SAFENIC_C_PLATFORM_H
#define SAFENIC_C_PLATFORM_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#define HUGEPAGE_SIZE ((size_t)2 << 20)

// Prints "<program>: <message>" on one line and exits 1. Every setup failure ends here.
__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);

// The name used in error messages (set once by main).
extern const char *program_name;

struct pci_function {
	char address[16]; // normalised DDDD:BB:DD.F
	char dir[4096];
	const char *root;
	int config_fd; // `config`, or the VFIO device descriptor
	// Through VFIO (vfio.h): where configuration space and BAR0 lie in the device descriptor.
	int vfio;
	off_t config_base;
	off_t bar0_offset;
	size_t bar0_size;
	int bar0_mappable;
};

// Opens `address` under `root`: checks it is vendor:device, not bound to a kernel driver
// (never unbinds it), enables memory space and bus mastering. Dies with a message naming the
// fix on any failure.
void pci_open(struct pci_function *f, const char *root, const char *address, uint16_t vendor, uint16_t device,
              const char *expected);

// The vendor ID of `address` under `root`, or 0 if it cannot be read (the caller's
// pci_open then says why).
unsigned pci_vendor(const char *root, const char *address);

// Maps BAR0 (resource0) whole; dies unless it has exactly `expected_len` bytes.
volatile uint32_t *pci_map_bar0(const struct pci_function *f, size_t expected_len);

// A block of hugepage memory from a file on a hugetlbfs mount, zeroed and faulted in, with the
// physical address of each 2 MiB page.
struct dma_block {
	uint8_t *virt;
	size_t len;
	uint64_t *page_phys;
};

void dma_allocate(struct dma_block *b, size_t len);
uint64_t dma_phys(const struct dma_block *b, size_t offset);

// Places objects of `size` bytes aligned to `align` so that none crosses a hugepage (only
// memory within a page is physically contiguous). Returns the offset.
size_t layout_place(size_t *end, size_t size, size_t align);

void pin_to_cpu(int cpu);

// SIGINT/SIGTERM set this flag.
extern volatile sig_atomic_t terminate_requested;
void install_termination_handlers(void);

#endif
