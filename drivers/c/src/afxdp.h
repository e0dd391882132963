// AF_XDP ports of the C baseline, on libxdp's xsk.h (Debian's libxdp-dev): the flexible model's
// queues over an AF_XDP socket, with crates/afxdp's algorithm. The UMEM is hugepage memory of
// 4 KiB frames, each buffer the second half of its frame, and the kernel is told the headroom
// that puts a received frame at the buffer's first byte. Both sockets register the same memory
// as their UMEM, so one pool per direction serves both ports. libxdp loads its own program
// (xsk_def_xdp_prog) where crates/afxdp loads six instructions of its own.
//
// As the 82599 queues of ixgbe.h hold the buffer of each descriptor, a port holds the buffers
// it lent the kernel: to receive into by UMEM chunk (a received offset is taken only if its
// chunk holds a lent buffer, so no buffer is ever in two places), and to send in order (the
// completion count says how many of the oldest are done; its offsets are not read).
#ifndef SAFENIC_C_AFXDP_H
#define SAFENIC_C_AFXDP_H

#include "ixgbe.h"

#include <net/if.h>
#include <xdp/xsk.h>

#define XDP_FRAME_SIZE 4096u
#define XDP_FRAME_HEADROOM (XDP_FRAME_SIZE - BUFFER_SIZE)
// Entries of each ring, and buffers per direction's pool: as crates/safenic's fwd_xdp.rs.
#define XDP_RING 1024u
#define XDP_POOL 2048u
// The fill ring is topped up once this many entries are free.
#define XDP_REFILL_AT 32u
// UMEM chunks a port holds buffers of: both pools' frames.
#define XDP_CHUNKS (2 * XDP_POOL)

// How the socket is bound: the kernel's choice (zero-copy where the driver has it), or forced.
enum xdp_bind { XDP_BIND_AUTO, XDP_BIND_COPY, XDP_BIND_ZERO_COPY };

// The UMEM's memory: every buffer of both pools.
struct xdp_area {
	uint8_t *base;
	size_t len;
};

struct xdp_port {
	char name[IF_NAMESIZE];
	unsigned queue, ifindex;
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons rx, comp;
	struct buffer held[XDP_CHUNKS]; // the buffer lent to receive into, by chunk (data NULL: none)
	struct buffer sent[XDP_RING];   // valid from `sent_front` up to `sent_back`, oldest first
	uint32_t sent_front, sent_back; // free-running; the slot is the value modulo XDP_RING
	int fd;
	uint64_t malformed;     // frames the kernel named by an offset or length refused here
	bool zero_copy, native;
};

// Whether `arg` names an AF_XDP port (xdp:IFNAME[@QUEUE]).
bool xdp_names_port(const char *arg);
// Hugepage memory for `frames` frames.
void xdp_area_allocate(struct xdp_area *a, size_t frames);
// A pool of the `count` buffers from frame `first` of `a`.
void xdp_pool_init(struct pool *p, const struct xdp_area *a, size_t first, size_t count);
// Opens `spec` over `a`, its fill ring filled from `pool`; dies with a one-line message naming
// the fix on any failure.
void xdp_port_open(struct xdp_port *p, const char *spec, const struct xdp_area *a, enum xdp_bind bind,
                   struct pool *pool);
// Why the port can no longer forward (its interface went down or is gone), or NULL.
const char *xdp_port_broken(const struct xdp_port *p);
// The port's line: bind mode, where the program runs, and the kernel's counters.
void xdp_port_describe(const struct xdp_port *p, char *out, size_t size);
void xdp_port_close(struct xdp_port *p);

// The kernel asked for a system call (need-wakeup): receive and send.
void xdp_wake_rx(const struct xdp_port *p);
void xdp_wake_tx(const struct xdp_port *p);

static inline __attribute__((always_inline)) void xdp_refill(struct xdp_port *restrict p, struct pool *restrict pool)
{
	uint32_t room = xsk_prod_nb_free(&p->fill, XDP_RING);
	if (room > pool->available) {
		room = (uint32_t)pool->available;
	}
	uint32_t idx;
	if (room == 0 || xsk_ring_prod__reserve(&p->fill, room, &idx) != room) {
		return;
	}
	for (uint32_t k = 0; k < room; k++) {
		// `room` is at most what the pool holds; `phys` is the buffer's UMEM offset.
		struct buffer b = pool->free[--pool->available];
		p->held[(b.phys / XDP_FRAME_SIZE) % XDP_CHUNKS] = b;
		*xsk_ring_prod__fill_addr(&p->fill, idx + k) = b.phys;
	}
	xsk_ring_prod__submit(&p->fill, room);
}

// Appends up to `room` received frames to `batch`, refilling the fill ring from `pool`.
static inline __attribute__((always_inline)) unsigned xdp_rx_batch(struct xdp_port *restrict p,
                                                                   struct pool *restrict pool,
                                                                   struct buffer *restrict batch, unsigned room)
{
	if (xsk_prod_nb_free(&p->fill, XDP_REFILL_AT) >= XDP_REFILL_AT) {
		xdp_refill(p, pool);
	}
	uint32_t idx;
	unsigned n = xsk_ring_cons__peek(&p->rx, room, &idx);
	if (n == 0) {
		if (xsk_ring_prod__needs_wakeup(&p->fill)) {
			xdp_wake_rx(p);
		}
		return 0;
	}
	unsigned got = 0;
	for (unsigned k = 0; k < n; k++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&p->rx, idx + k);
		uint64_t addr = d->addr;
		uint32_t len = d->len;
		// The buffer lent in the offset's chunk, taken once: an offset whose chunk holds none,
		// or that is not where the buffer starts, or a length over a buffer, is refused, as
		// crates/afxdp does.
		struct buffer *slot = &p->held[(addr / XDP_FRAME_SIZE) % XDP_CHUNKS];
		struct buffer b = *slot;
		slot->data = NULL;
		if (b.data != NULL && addr % XDP_FRAME_SIZE == XDP_FRAME_HEADROOM && len <= BUFFER_SIZE) {
			b.length = (uint16_t)len;
			batch[got++] = b;
		} else {
			p->malformed++;
			if (b.data != NULL) {
				pool_give(pool, b);
			}
		}
	}
	xsk_ring_cons__release(&p->rx, n);
	return got;
}

// Buffers of frames the kernel has sent, back to `pool`: as many of the oldest as the completion
// ring counts, never more than are queued, in (at most two) block copies.
static inline __attribute__((always_inline)) void xdp_reclaim(struct xdp_port *restrict p,
                                                              struct pool *restrict pool)
{
	uint32_t idx;
	unsigned done = xsk_ring_cons__peek(&p->comp, XDP_RING, &idx);
	uint32_t queued = p->sent_back - p->sent_front;
	if (done > queued) {
		done = queued;
	}
	if (done == 0) {
		return;
	}
	uint32_t front = p->sent_front % XDP_RING;
	size_t room = pool->total - pool->available;
	size_t k = done < room ? done : room;
	size_t first = k < XDP_RING - front ? k : XDP_RING - front;
	memcpy(pool->free + pool->available, p->sent + front, first * sizeof *p->sent);
	memcpy(pool->free + pool->available + first, p->sent, (k - first) * sizeof *p->sent);
	pool->available += k;
	p->sent_front += done;
	xsk_ring_cons__release(&p->comp, done);
}

// Wakes the kernel if frames wait on the transmit ring (not yet taken: those it took and has not
// completed need no call) and it asks to be woken.
static inline __attribute__((always_inline)) void xdp_kick(struct xdp_port *restrict p)
{
	if (__atomic_load_n(p->tx.consumer, __ATOMIC_ACQUIRE) != p->tx.cached_prod &&
	    xsk_ring_prod__needs_wakeup(&p->tx)) {
		xdp_wake_tx(p);
	}
}

// Queues frames from the front of `batch` until the ring is full; returns how many.
static inline __attribute__((always_inline)) unsigned xdp_tx_batch(struct xdp_port *restrict p,
                                                                   struct pool *restrict pool,
                                                                   const struct buffer *restrict batch, unsigned count)
{
	xdp_reclaim(p, pool);
	// The ring has room for what the queue of sent buffers does not hold.
	uint32_t room = XDP_RING - 1 - (p->sent_back - p->sent_front);
	unsigned sent = count < room ? count : room;
	uint32_t idx;
	if (sent > 0 && xsk_ring_prod__reserve(&p->tx, sent, &idx) == sent) {
		for (unsigned k = 0; k < sent; k++) {
			struct xdp_desc *d = xsk_ring_prod__tx_desc(&p->tx, idx + k);
			d->addr = batch[k].phys;
			d->len = batch[k].length;
			d->options = 0;
			p->sent[(p->sent_back + k) % XDP_RING] = batch[k];
		}
		p->sent_back += sent;
		xsk_ring_prod__submit(&p->tx, sent);
	} else {
		sent = 0;
	}
	xdp_kick(p);
	return sent;
}

// A burst with nothing to send: the kernel is woken for what the ring still holds. With nothing
// in flight there is nothing to reclaim or wake it for.
static inline __attribute__((always_inline)) void xdp_tx_idle(struct xdp_port *restrict p, struct pool *restrict pool)
{
	if (p->sent_back == p->sent_front) {
		return;
	}
	xdp_reclaim(p, pool);
	xdp_kick(p);
}

#endif
