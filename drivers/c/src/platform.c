// The OS boundary of the C baseline. Same checks, same order and same messages as
// crates/platform, so the two drivers fail identically.
#include "platform.h"
#include "vfio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>

const char *program_name = "safenic-c";
volatile sig_atomic_t terminate_requested = 0;

void die(const char *fmt, ...)
{
	va_list args;
	va_start(args, fmt);
	fprintf(stderr, "%s: ", program_name);
	vfprintf(stderr, fmt, args);
	fputc('\n', stderr);
	va_end(args);
	exit(1);
}

__attribute__((noreturn)) static void not_root(const char *what)
{
	die("%s needs root (CAP_SYS_ADMIN): run the command as root, e.g. with sudo", what);
}

// Parses `len` hex digits (1..width) into *out, at most max.
static int parse_hex(const char *s, size_t len, size_t width, unsigned max, unsigned *out)
{
	if (len == 0 || len > width) {
		return 0;
	}
	unsigned v = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		unsigned d;
		if (c >= '0' && c <= '9') {
			d = (unsigned)(c - '0');
		} else if (c >= 'a' && c <= 'f') {
			d = (unsigned)(c - 'a') + 10;
		} else if (c >= 'A' && c <= 'F') {
			d = (unsigned)(c - 'A') + 10;
		} else {
			return 0;
		}
		v = v * 16 + d;
	}
	*out = v;
	return v <= max;
}

// DDDD:BB:DD.F or BB:DD.F → DDDD:BB:DD.F in lower case.
static void normalize_address(const char *address, char out[16])
{
	const char *first = strchr(address, ':');
	const char *second = first ? strchr(first + 1, ':') : NULL;
	const char *dot = strrchr(address, '.');
	unsigned domain = 0, bus = 0, dev = 0, fn = 0;
	int ok;
	if (!first || !dot || dot < first || (second && strchr(second + 1, ':'))) {
		ok = 0;
	} else if (second) {
		ok = parse_hex(address, (size_t)(first - address), 4, 0xFFFF, &domain) &&
		     parse_hex(first + 1, (size_t)(second - first - 1), 2, 0xFF, &bus) && dot > second &&
		     parse_hex(second + 1, (size_t)(dot - second - 1), 2, 0x1F, &dev) &&
		     parse_hex(dot + 1, strlen(dot + 1), 1, 7, &fn);
	} else {
		ok = parse_hex(address, (size_t)(first - address), 2, 0xFF, &bus) &&
		     parse_hex(first + 1, (size_t)(dot - first - 1), 2, 0x1F, &dev) &&
		     parse_hex(dot + 1, strlen(dot + 1), 1, 7, &fn);
	}
	if (!ok) {
		die("`%s` is not a PCI address: write it as DDDD:BB:DD.F (e.g. 0000:5e:00.0) or BB:DD.F", address);
	}
	snprintf(out, 16, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
}

static unsigned read_hex_file(const struct pci_function *f, const char *name)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", f->dir, name);
	FILE *file = fopen(path, "r");
	if (!file) {
		die("reading %s: %s", path, strerror(errno));
	}
	unsigned v;
	int n = fscanf(file, "%x", &v);
	fclose(file);
	if (n != 1) {
		die("parsing %s: not a hexadecimal number", path);
	}
	return v;
}

unsigned pci_vendor(const char *root, const char *address)
{
	char normal[16], path[4200];
	normalize_address(address, normal);
	snprintf(path, sizeof path, "%s/%s/vendor", root, normal);
	FILE *file = fopen(path, "r");
	unsigned v = 0;
	if (file) {
		if (fscanf(file, "%x", &v) != 1) {
			v = 0;
		}
		fclose(file);
	}
	return v;
}

static uint16_t config_read_u16(const struct pci_function *f, off_t offset)
{
	uint16_t v;
	if (pread(f->config_fd, &v, sizeof v, f->config_base + offset) != (ssize_t)sizeof v) {
		die("reading %s/config: %s", f->dir, strerror(errno));
	}
	return v;
}

static void config_write_u16(const struct pci_function *f, off_t offset, uint16_t v)
{
	if (pwrite(f->config_fd, &v, sizeof v, f->config_base + offset) != (ssize_t)sizeof v) {
		die("writing %s/config: %s", f->dir, strerror(errno));
	}
}

// The process holding a flock on `fd`, from /proc/locks, whose lines read
// `1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF` (device in hex, inode in decimal); 0 if unknown.
static pid_t lock_owner(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		return 0;
	}
	char want[64];
	snprintf(want, sizeof want, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino);
	FILE *locks = fopen("/proc/locks", "r");
	if (!locks) {
		return 0;
	}
	char line[256], kind[32], mode[32], access[32], dev[64];
	long pid = 0, found = 0;
	while (!found && fgets(line, sizeof line, locks)) {
		// Waiters read `1: -> FLOCK …` and do not parse: they are not owners.
		if (sscanf(line, "%*s %31s %31s %31s %ld %63s", kind, mode, access, &pid, dev) == 5 &&
		    strcmp(kind, "FLOCK") == 0 && strcmp(dev, want) == 0) {
			found = pid;
		}
	}
	fclose(locks);
	return (pid_t)found;
}

// Takes the function for this process, as crates/platform's PciFunction::claim does: an
// exclusive flock on its config file, held until exit, so that a second driver refuses a
// device that another one runs instead of resetting it under it.
static void claim(const struct pci_function *f)
{
	if (flock(f->config_fd, LOCK_EX | LOCK_NB) == 0) {
		return;
	}
	if (errno != EWOULDBLOCK) {
		die("locking %s/config: %s", f->dir, strerror(errno));
	}
	pid_t owner = lock_owner(f->config_fd);
	if (owner <= 0) {
		die("PCI function %s is in use by another process: stop that driver first, or give another port", f->address);
	}
	char path[64], name[64] = "";
	snprintf(path, sizeof path, "/proc/%d/comm", (int)owner);
	FILE *comm = fopen(path, "r");
	if (comm) {
		if (fgets(name, sizeof name, comm)) {
			name[strcspn(name, "\n")] = '\0';
		}
		fclose(comm);
	}
	die("PCI function %s is in use by process %d (%s): stop that driver first, or give another port", f->address,
	    (int)owner, name);
}

void pci_open(struct pci_function *f, const char *root, const char *address, uint16_t vendor, uint16_t device,
              const char *expected)
{
	normalize_address(address, f->address);
	f->root = root;
	snprintf(f->dir, sizeof f->dir, "%s/%s", root, f->address);
	struct stat st;
	if (stat(f->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		die("PCI function %s not found under %s: list the functions with `ls %s` (for nicsim's devices pass "
		    "--sysfs <nicsim root>/devices or use `nicsim exec`)",
		    f->address, root, root);
	}
	f->vfio = 0;
	f->config_base = 0;
	if (vfio_bound(f->dir)) {
		// The group is the claim: the kernel lets one process open it.
		vfio_open(f);
		unsigned v = read_hex_file(f, "vendor"), d = read_hex_file(f, "device");
		if (v != vendor || d != device) {
			die("PCI function %s is %04x:%04x, not %s: pass the address of %s", f->address, v, d, expected, expected);
		}
		config_write_u16(f, 0x04, config_read_u16(f, 0x04) | (1u << 1) | (1u << 2));
		return;
	}
	char config[4200];
	snprintf(config, sizeof config, "%s/config", f->dir);
	f->config_fd = open(config, O_RDWR | O_CLOEXEC);
	if (f->config_fd < 0) {
		if (errno == EACCES || errno == EPERM) {
			not_root("writing PCI configuration space");
		}
		die("opening %s: %s", config, strerror(errno));
	}
	unsigned v = read_hex_file(f, "vendor"), d = read_hex_file(f, "device");
	if (v != vendor || d != device) {
		die("PCI function %s is %04x:%04x, not %s: pass the address of %s", f->address, v, d, expected, expected);
	}
	char link[4200], target[PATH_MAX];
	snprintf(link, sizeof link, "%s/driver", f->dir);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n > 0) {
		target[n] = '\0';
		die("PCI function %s is bound to the kernel driver `%s`: if it is yours to take, unbind it with `echo %s > "
		    "%s/%s/driver/unbind` (we never unbind automatically)",
		    f->address, basename(target), f->address, root, f->address);
	}
	claim(f);
	// COMMAND register (config 0x04): memory space (bit 1) and bus master (bit 2) [82599 DS 9.3.3.3].
	config_write_u16(f, 0x04, config_read_u16(f, 0x04) | (1u << 1) | (1u << 2));
}

volatile uint32_t *pci_map_bar0(const struct pci_function *f, size_t expected_len)
{
	if (f->vfio) {
		if (!f->bar0_mappable) {
			die("%s's BAR0 cannot be mapped whole through VFIO (no mmap, or sparse areas): this driver needs every "
			    "register of it",
			    f->address);
		}
		if (f->bar0_size != expected_len) {
			die("%s's BAR0 has %#zx bytes through VFIO, expected %#zx: BAR0 size mismatch", f->address, f->bar0_size,
			    expected_len);
		}
		void *bar = mmap(NULL, expected_len, PROT_READ | PROT_WRITE, MAP_SHARED, f->config_fd, f->bar0_offset);
		if (bar == MAP_FAILED) {
			die("mapping BAR0 of %s through VFIO: %s", f->address, strerror(errno));
		}
		return (volatile uint32_t *)bar;
	}
	char path[4200];
	snprintf(path, sizeof path, "%s/resource0", f->dir);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EACCES || errno == EPERM) {
			not_root("mapping a PCI BAR");
		}
		die("opening %s: %s", path, strerror(errno));
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		die("sizing resource0: %s", strerror(errno));
	}
	if ((size_t)st.st_size != expected_len) {
		die("%s has %#zx bytes, expected %#zx: BAR0 size mismatch", path, (size_t)st.st_size, expected_len);
	}
	void *bar = mmap(NULL, expected_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (bar == MAP_FAILED) {
		die("mapping %s: %s", path, strerror(errno));
	}
	close(fd);
	return (volatile uint32_t *)bar;
}

// The first hugetlbfs mount with 2 MiB pages, from /proc/mounts.
static int hugetlbfs_mount(char *out, size_t len)
{
	FILE *mounts = fopen("/proc/mounts", "r");
	if (!mounts) {
		return 0;
	}
	char line[4096];
	int found = 0;
	while (!found && fgets(line, sizeof line, mounts)) {
		char src[256], dir[2048], type[64], opts[1024];
		if (sscanf(line, "%255s %2047s %63s %1023s", src, dir, type, opts) == 4 && strcmp(type, "hugetlbfs") == 0) {
			const char *size = strstr(opts, "pagesize=");
			if (!size || strncmp(size, "pagesize=2M", 11) == 0) {
				snprintf(out, len, "%s", dir);
				found = 1;
			}
		}
	}
	fclose(mounts);
	return found;
}

__attribute__((noreturn)) static void hugepage_error(int err, size_t len)
{
	if (err == ENOMEM || err == ENOSPC || err == EINVAL) {
		die("not enough 2 MiB hugepages for %zu MiB of DMA memory: reserve more with `echo 1024 > "
		    "/proc/sys/vm/nr_hugepages` (scripts/setup does this)",
		    (len + (1u << 20) - 1) >> 20);
	}
	if (err == EPERM || err == EACCES) {
		not_root("allocating hugepages");
	}
	die("allocating hugepage memory: %s", strerror(err));
}

// Maps `len` bytes of hugepage file `fd` shared and faulted in, into `b`, with room for the
// bus address of each page; closes `fd`.
static void map_block(struct dma_block *b, int fd, size_t len)
{
	void *virt = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	int err = errno;
	close(fd);
	if (virt == MAP_FAILED) {
		hugepage_error(err, len);
	}
	b->virt = virt;
	b->len = len;
	b->page_phys = calloc(len / HUGEPAGE_SIZE, sizeof(uint64_t));
	if (!b->page_phys) {
		die("out of memory");
	}
}

// DMA memory under VFIO: a hugetlb memfd (no file system to write in), mapped into the
// container; its bus addresses are IOVAs.
static void dma_allocate_vfio(struct dma_block *b, size_t len)
{
	int fd = memfd_create("safenic-c-dma", MFD_CLOEXEC | MFD_HUGETLB | MFD_HUGE_2MB);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
		hugepage_error(errno, len);
	}
	map_block(b, fd, len);
	uint64_t iova = vfio_map_dma(b->virt, len);
	for (size_t page = 0; page < len / HUGEPAGE_SIZE; page++) {
		b->page_phys[page] = iova + page * HUGEPAGE_SIZE;
	}
}

void dma_allocate(struct dma_block *b, size_t len)
{
	static unsigned counter;
	len = (len + HUGEPAGE_SIZE - 1) / HUGEPAGE_SIZE * HUGEPAGE_SIZE;
	if (vfio_active()) {
		dma_allocate_vfio(b, len);
		return;
	}
	char dir[2048], path[2200];
	if (!hugetlbfs_mount(dir, sizeof dir)) {
		die("no hugetlbfs mount found: mount one with `mkdir -p /dev/hugepages && mount -t hugetlbfs nodev "
		    "/dev/hugepages` (scripts/setup does this)");
	}
	snprintf(path, sizeof path, "%s/dma-c-%d-%u", dir, getpid(), counter++);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		if (errno == EACCES || errno == EPERM) {
			not_root("creating a hugepage file");
		}
		die("creating %s: %s", path, strerror(errno));
	}
	if (ftruncate(fd, (off_t)len) != 0) {
		int err = errno;
		unlink(path);
		hugepage_error(err, len);
	}
	// The name is not needed once opened: the descriptor, then the mapping, keep the pages.
	unlink(path);
	map_block(b, fd, len);
	int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pagemap < 0) {
		die("opening /proc/self/pagemap: %s", strerror(errno));
	}
	long base_page = sysconf(_SC_PAGESIZE);
	for (size_t page = 0; page < len / HUGEPAGE_SIZE; page++) {
		volatile uint8_t *p = b->virt + page * HUGEPAGE_SIZE;
		*p = 0; // touch: present in our page tables
		uint64_t vaddr = (uint64_t)(uintptr_t)p, entry;
		if (pread(pagemap, &entry, sizeof entry, (off_t)(vaddr / (uint64_t)base_page * 8)) != (ssize_t)sizeof entry) {
			die("reading pagemap: %s", strerror(errno));
		}
		if (!(entry >> 63)) {
			die("hugepage not present after touching it: pagemap");
		}
		uint64_t pfn = entry & ((1ull << 55) - 1);
		if (pfn == 0) {
			not_root("reading physical addresses from /proc/self/pagemap");
		}
		b->page_phys[page] = pfn * (uint64_t)base_page + vaddr % (uint64_t)base_page;
	}
	close(pagemap);
}

uint64_t dma_phys(const struct dma_block *b, size_t offset)
{
	if (offset >= b->len) {
		die("offset %#zx outside DMA block of %#zx bytes", offset, b->len);
	}
	return b->page_phys[offset / HUGEPAGE_SIZE] + offset % HUGEPAGE_SIZE;
}

size_t layout_place(size_t *end, size_t size, size_t align)
{
	size_t at = (*end + align - 1) / align * align;
	if (at / HUGEPAGE_SIZE != (at + size - 1) / HUGEPAGE_SIZE) {
		at = (at + HUGEPAGE_SIZE - 1) / HUGEPAGE_SIZE * HUGEPAGE_SIZE;
	}
	*end = at + size;
	return at;
}

void pin_to_cpu(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET((size_t)cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0) {
		die("pinning to CPU %d: %s", cpu, strerror(errno));
	}
}

static void on_signal(int sig)
{
	(void)sig;
	terminate_requested = 1;
}

void install_termination_handlers(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) {
		die("installing signal handlers: %s", strerror(errno));
	}
}
