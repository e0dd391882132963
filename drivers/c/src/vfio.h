// VFIO with a type1 IOMMU, as crates/platform's vfio.rs does it: a function bound to vfio-pci
// is opened through its IOMMU group and this process's one container, its configuration space
// and BAR0 reached through the device descriptor, and DMA memory mapped at IOVAs chosen here.
// No root, no pagemap. Same one-line errors as the Rust driver.
#ifndef SAFENIC_C_VFIO_H
#define SAFENIC_C_VFIO_H

#include <stddef.h>
#include <stdint.h>

struct pci_function;

// Whether the function in `dir` is bound to vfio-pci.
int vfio_bound(const char *dir);

// Opens `f` (its address and dir set) through VFIO: sets its config descriptor and base, and
// where BAR0 lies in the device descriptor. Dies naming the fix.
void vfio_open(struct pci_function *f);

// Whether this process has a VFIO container (DMA addresses are IOVAs).
int vfio_active(void);

// Maps `len` bytes at `virt` into the container; returns their IOVA.
uint64_t vfio_map_dma(void *virt, size_t len);

#endif
