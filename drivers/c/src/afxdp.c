// AF_XDP ports of the C baseline: opening a socket through libxdp and what is not per packet.
#include "afxdp.h"

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <errno.h>
#include <linux/if_link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

bool xdp_names_port(const char *arg)
{
	return strncmp(arg, "xdp:", 4) == 0;
}

void xdp_area_allocate(struct xdp_area *a, size_t frames)
{
	size_t len = (frames * XDP_FRAME_SIZE + HUGEPAGE_SIZE - 1) / HUGEPAGE_SIZE * HUGEPAGE_SIZE;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
	if (m == MAP_FAILED) {
		die("not enough 2 MiB hugepages for %zu MiB of UMEM: reserve more with `echo 1024 > "
		    "/proc/sys/vm/nr_hugepages` (scripts/setup does this)",
		    len >> 20);
	}
	a->base = m;
	a->len = len;
}

void xdp_pool_init(struct pool *p, const struct xdp_area *a, size_t first, size_t count)
{
	p->free = calloc(count, sizeof *p->free);
	if (p->free == NULL) {
		die("out of memory for a pool of %zu buffers", count);
	}
	for (size_t i = 0; i < count; i++) {
		uint64_t at = (first + i) * XDP_FRAME_SIZE + XDP_FRAME_HEADROOM;
		p->free[i] = (struct buffer){.data = a->base + at, .phys = at, .length = 0};
	}
	p->available = p->total = count;
}

// Parses xdp:IFNAME[@QUEUE] into `p`.
static void parse_spec(struct xdp_port *p, const char *spec)
{
	const char *rest = spec + 4, *at = strchr(rest, '@');
	size_t name_len = at ? (size_t)(at - rest) : strlen(rest);
	if (name_len == 0 || name_len >= IF_NAMESIZE || memchr(rest, '/', name_len) != NULL) {
		die("%s: \"%.*s\" is no interface name: see `ip link` for this machine's", spec, (int)name_len, rest);
	}
	memcpy(p->name, rest, name_len);
	p->name[name_len] = '\0';
	p->queue = 0;
	if (at != NULL) {
		char *end;
		long q = strtol(at + 1, &end, 10);
		if (at[1] == '\0' || *end != '\0' || q < 0 || q > 0xFFFF) {
			die("%s: the queue after @ is a number (a receive queue of the interface), e.g. xdp:%s@0", spec, p->name);
		}
		p->queue = (unsigned)q;
	}
}

// IFF_UP of interface `name`, or -1 if there is no such interface.
static int interface_up(const char *name)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		return 1;
	}
	struct ifreq req;
	memset(&req, 0, sizeof req);
	strncpy(req.ifr_name, name, IF_NAMESIZE - 1);
	int r = ioctl(s, SIOCGIFFLAGS, &req);
	close(s);
	return r != 0 ? -1 : (req.ifr_flags & IFF_UP) != 0;
}

void xdp_port_open(struct xdp_port *p, const char *spec, const struct xdp_area *a, enum xdp_bind bind,
                   struct pool *pool)
{
	memset(p, 0, sizeof *p);
	parse_spec(p, spec);
	// Their notes (no bpffs, so no dispatcher: one program, as crates/afxdp loads) are not
	// errors; what fails is said below in one line.
	libbpf_set_print(NULL);
	libxdp_set_print(NULL);
	p->ifindex = if_nametoindex(p->name);
	if (p->ifindex == 0) {
		die("no interface named %s in this network namespace: see `ip link`", p->name);
	}
	if (interface_up(p->name) == 0) {
		die("%s is down: bring it up with `ip link set %s up`", p->name, p->name);
	}
	char queue_dir[128];
	snprintf(queue_dir, sizeof queue_dir, "/sys/class/net/%s/queues/rx-%u", p->name, p->queue);
	char queues[128];
	snprintf(queues, sizeof queues, "/sys/class/net/%s/queues", p->name);
	if (access(queues, F_OK) == 0 && access(queue_dir, F_OK) != 0) {
		die("%s has no receive queue %u: give one below its count (ethtool -l %s), e.g. xdp:%s@0", p->name, p->queue,
		    p->name, p->name);
	}
	struct xsk_umem_config ucfg = {.fill_size = XDP_RING,
	                               .comp_size = XDP_RING,
	                               .frame_size = XDP_FRAME_SIZE,
	                               .frame_headroom = XDP_FRAME_HEADROOM - XDP_PACKET_HEADROOM,
	                               .flags = 0};
	int r = xsk_umem__create(&p->umem, a->base, a->len, &p->fill, &p->comp, &ucfg);
	if (r != 0) {
		if (r == -EAFNOSUPPORT) {
			die("this kernel has no AF_XDP sockets: use one built with CONFIG_XDP_SOCKETS=y (Linux 5.4 or later)");
		}
		if (r == -EPERM || r == -EACCES) {
			die("opening an AF_XDP socket needs root (CAP_SYS_ADMIN): run the command as root, e.g. with sudo");
		}
		die("registering the UMEM of %s: %s", p->name, strerror(-r));
	}
	struct xsk_socket_config scfg = {.rx_size = XDP_RING, .tx_size = XDP_RING, .libxdp_flags = 0, .xdp_flags = 0,
	                                 .bind_flags = XDP_USE_NEED_WAKEUP};
	if (bind == XDP_BIND_COPY) {
		scfg.bind_flags |= XDP_COPY;
	} else if (bind == XDP_BIND_ZERO_COPY) {
		scfg.bind_flags |= XDP_ZEROCOPY;
	}
	r = xsk_socket__create(&p->xsk, p->name, p->queue, p->umem, &p->rx, &p->tx, &scfg);
	if (r != 0) {
		if (r == -EOPNOTSUPP && bind == XDP_BIND_ZERO_COPY) {
			die("%s's driver has no zero-copy AF_XDP: bind in copy mode (--xdp-bind copy)", p->name);
		}
		if (r == -EBUSY) {
			die("queue %u of %s has an AF_XDP socket or another XDP program already: stop its owner", p->queue,
			    p->name);
		}
		if (r == -EPERM || r == -EACCES) {
			die("loading the XDP program for %s needs root (CAP_BPF and CAP_NET_ADMIN): run as root", p->name);
		}
		die("opening an AF_XDP socket on queue %u of %s: %s", p->queue, p->name, strerror(-r));
	}
	p->fd = xsk_socket__fd(p->xsk);
	struct xdp_options opts;
	socklen_t len = sizeof opts;
	p->zero_copy = getsockopt(p->fd, SOL_XDP, XDP_OPTIONS, &opts, &len) == 0 && (opts.flags & XDP_OPTIONS_ZEROCOPY);
	struct bpf_xdp_query_opts q;
	memset(&q, 0, sizeof q);
	q.sz = sizeof q;
	p->native = bpf_xdp_query((int)p->ifindex, 0, &q) == 0 &&
	            (q.attach_mode == XDP_ATTACHED_DRV || q.attach_mode == XDP_ATTACHED_MULTI) && q.drv_prog_id != 0;
	xdp_refill(p, pool);
}

static bool interface_gone(const struct xdp_port *p)
{
	return if_nametoindex(p->name) != p->ifindex || interface_up(p->name) < 0;
}

const char *xdp_port_broken(const struct xdp_port *p)
{
	static char why[160];
	if (if_nametoindex(p->name) == p->ifindex && interface_up(p->name) == 1) {
		return NULL;
	}
	// A deleted interface goes down first: one seen down is looked at again a moment later,
	// so that a deletion under way is most often named as one.
	if (!interface_gone(p)) {
		usleep(100000);
	}
	if (interface_gone(p)) {
		snprintf(why, sizeof why, "%s was deleted (or left this network namespace)", p->name);
	} else {
		snprintf(why, sizeof why, "%s went down: bring it up with `ip link set %s up` and start again", p->name,
		         p->name);
	}
	return why;
}

void xdp_port_describe(const struct xdp_port *p, char *out, size_t size)
{
	struct xdp_statistics s;
	memset(&s, 0, sizeof s);
	socklen_t len = sizeof s;
	(void)getsockopt(p->fd, SOL_XDP, XDP_STATISTICS, &s, &len);
	snprintf(out, size,
	         "xdp:%s@%u: %s mode, %s XDP; kernel: %llu dropped, %llu receive ring full, %llu fill ring empty, %llu "
	         "invalid receive and %llu invalid transmit descriptors",
	         p->name, p->queue, p->zero_copy ? "zero-copy" : "copy", p->native ? "native" : "generic",
	         (unsigned long long)s.rx_dropped, (unsigned long long)s.rx_ring_full,
	         (unsigned long long)s.rx_fill_ring_empty_descs, (unsigned long long)s.rx_invalid_descs,
	         (unsigned long long)s.tx_invalid_descs);
}

void xdp_port_close(struct xdp_port *p)
{
	if (p->xsk != NULL) {
		xsk_socket__delete(p->xsk);
		p->xsk = NULL;
	}
	if (p->umem != NULL) {
		xsk_umem__delete(p->umem);
		p->umem = NULL;
	}
}

__attribute__((noinline)) void xdp_wake_rx(const struct xdp_port *p)
{
	(void)!recvfrom(p->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

__attribute__((noinline)) void xdp_wake_tx(const struct xdp_port *p)
{
	(void)!sendto(p->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
}
