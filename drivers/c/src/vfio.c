// VFIO for the C baseline (see vfio.h) [Linux: Documentation/driver-api/vfio.rst].
#include "vfio.h"
#include "platform.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/vfio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

// IOVAs from 4 GiB up, in 2 MiB steps: above the 32-bit space and its interrupt window.
static int container = -1;
static uint64_t next_iova = 1ull << 32;
static uint64_t mapped;

int vfio_active(void)
{
	return container >= 0;
}

int vfio_bound(const char *dir)
{
	char link[4200], target[PATH_MAX];
	snprintf(link, sizeof link, "%s/driver", dir);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n <= 0) {
		return 0;
	}
	target[n] = '\0';
	return strcmp(basename(target), "vfio-pci") == 0;
}

static void open_container(void)
{
	container = open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);
	if (container < 0) {
		die("cannot open /dev/vfio/vfio (%s): load vfio-pci (`modprobe vfio-pci`)", strerror(errno));
	}
	if (ioctl(container, VFIO_GET_API_VERSION) != VFIO_API_VERSION) {
		die("the kernel speaks another VFIO API than %d: this driver knows only it", VFIO_API_VERSION);
	}
}

static void set_iommu(void)
{
	int kind = ioctl(container, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) > 0 ? VFIO_TYPE1v2_IOMMU
	           : ioctl(container, VFIO_CHECK_EXTENSION, VFIO_TYPE1_IOMMU) > 0  ? VFIO_TYPE1_IOMMU
	                                                                           : -1;
	if (kind < 0) {
		die("the kernel offers no type1 IOMMU to VFIO: enable the IOMMU (intel_iommu=on)");
	}
	if (ioctl(container, VFIO_SET_IOMMU, kind) != 0) {
		die("VFIO_SET_IOMMU: %s", strerror(errno));
	}
}

static struct vfio_region_info region(int device, unsigned index, const char *address)
{
	struct vfio_region_info info = {.argsz = sizeof info, .index = index};
	if (ioctl(device, VFIO_DEVICE_GET_REGION_INFO, &info) != 0) {
		die("VFIO_DEVICE_GET_REGION_INFO %u for %s: %s", index, address, strerror(errno));
	}
	return info;
}

void vfio_open(struct pci_function *f)
{
	char link[4200], target[PATH_MAX];
	snprintf(link, sizeof link, "%s/iommu_group", f->dir);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n <= 0) {
		die("%s is bound to vfio-pci but is in no IOMMU group: the kernel runs without an IOMMU; enable it "
		    "(intel_iommu=on or amd_iommu=on on the kernel command line), or unbind the function and run as root "
		    "through sysfs",
		    f->address);
	}
	target[n] = '\0';
	char *end;
	const char *name = basename(target);
	long group = strtol(name, &end, 10);
	if (*name == '\0' || *end != '\0') {
		die("%s's IOMMU group is `%s`, not a number: this is vfio-pci's no-IOMMU mode, which gives the device all "
		    "of memory and is refused; enable the IOMMU instead",
		    f->address, target);
	}
	char node[64];
	snprintf(node, sizeof node, "/dev/vfio/%ld", group);
	int group_fd = open(node, O_RDWR | O_CLOEXEC);
	if (group_fd < 0) {
		if (errno == EACCES || errno == EPERM) {
			die("no permission to open %s (IOMMU group of %s): give it to your user (`chown $USER %s`, or a udev "
			    "rule) or run as root",
			    node, f->address, node);
		}
		if (errno == EBUSY) {
			die("%s (IOMMU group of %s) is open in another process: stop that driver first, or give another port",
			    node, f->address);
		}
		die("opening %s: %s", node, strerror(errno));
	}
	struct vfio_group_status status = {.argsz = sizeof status};
	if (ioctl(group_fd, VFIO_GROUP_GET_STATUS, &status) != 0) {
		die("VFIO_GROUP_GET_STATUS on %s: %s", node, strerror(errno));
	}
	if (!(status.flags & VFIO_GROUP_FLAGS_VIABLE)) {
		die("IOMMU group %ld of %s is not viable: every function in it must be bound to vfio-pci or to no driver "
		    "(see /sys/kernel/iommu_groups/%ld/devices)",
		    group, f->address, group);
	}
	int first = container < 0;
	if (first) {
		open_container();
	}
	if (ioctl(group_fd, VFIO_GROUP_SET_CONTAINER, &container) != 0) {
		die("joining %s to this process's VFIO container: %s", node, strerror(errno));
	}
	if (first) {
		set_iommu();
	}
	int device = ioctl(group_fd, VFIO_GROUP_GET_DEVICE_FD, f->address);
	if (device < 0) {
		die("VFIO_GROUP_GET_DEVICE_FD for %s: %s", f->address, strerror(errno));
	}
	struct vfio_region_info bar0 = region(device, VFIO_PCI_BAR0_REGION_INDEX, f->address);
	struct vfio_region_info config = region(device, VFIO_PCI_CONFIG_REGION_INDEX, f->address);
	// Mapped whole only without sparse areas (pci_map_bar0 checks it; a virtio BAR0 is I/O).
	f->bar0_mappable = (bar0.flags & VFIO_REGION_INFO_FLAG_MMAP) && !(bar0.flags & VFIO_REGION_INFO_FLAG_CAPS);
	f->vfio = 1;
	f->config_fd = device;
	f->config_base = (off_t)config.offset;
	f->bar0_offset = (off_t)bar0.offset;
	f->bar0_size = (size_t)bar0.size;
}

uint64_t vfio_map_dma(void *virt, size_t len)
{
	uint64_t iova = (next_iova + HUGEPAGE_SIZE - 1) / HUGEPAGE_SIZE * HUGEPAGE_SIZE;
	struct vfio_iommu_type1_dma_map map = {
	    .argsz = sizeof map,
	    .flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
	    .vaddr = (uint64_t)(uintptr_t)virt,
	    .iova = iova,
	    .size = len,
	};
	if (ioctl(container, VFIO_IOMMU_MAP_DMA, &map) != 0) {
		if (errno == ENOMEM) {
			struct rlimit limit;
			getrlimit(RLIMIT_MEMLOCK, &limit);
			uint64_t needed = (mapped + len + (1u << 20) - 1) >> 20;
			die("VFIO could not pin %zu MiB of DMA memory: RLIMIT_MEMLOCK is %llu MiB, and the driver needs %llu MiB "
			    "locked; raise it (`ulimit -l %llu` or `prlimit --memlock=%llu`, LimitMEMLOCK= for a service)",
			    len >> 20, (unsigned long long)(limit.rlim_cur >> 20), (unsigned long long)needed,
			    (unsigned long long)(needed << 10), (unsigned long long)(needed << 20));
		}
		die("VFIO_IOMMU_MAP_DMA: %s", strerror(errno));
	}
	next_iova = iova + len;
	mapped += len;
	return iova;
}
