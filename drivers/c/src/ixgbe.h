// The 82599 driver of the C baseline: registers, device init, the TinyNF agent (restricted and
// const models) and flexible queues over a buffer pool. Same algorithms, periods and ring sizes
// as crates/ixgbe; see ../README.md for the differences that remain.
#ifndef SAFENIC_C_IXGBE_H
#define SAFENIC_C_IXGBE_H

#include "platform.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BAR0_LEN 0x20000u
#define BUFFER_SIZE 2048u
#define MAX_OUTPUTS 64u
#define MAX_QUEUES 64u
// Descriptors per ring, a compile-time constant as in the Rust driver (RING = 512).
#ifndef RING_SIZE
#define RING_SIZE 512u
#endif
#define RING_MASK (RING_SIZE - 1u)
_Static_assert((RING_SIZE & RING_MASK) == 0 && RING_SIZE >= 2 * 64u, "RING_SIZE: a power of two, at least 128");

// Legacy descriptor bits [DS 7.1.5, 7.2.3.2.2].
#define RX_DD (1ull << 32)
#define RX_EOP (1ull << 33)
#define TX_EOP (1ull << 24)
#define TX_IFCS (1ull << 25)
#define TX_RS (1ull << 27)

// Agent periods, as in crates/ixgbe/src/agent.rs.
#define FLUSH_PERIOD 8u
#define RECYCLE_PERIOD 64u
// Flexible TX: RS once per this many descriptors (twice per ring if the ring is smaller);
// recycled from the head then.
#define TX_RECYCLE_PERIOD 32u
#define TX_RS_PERIOD (RING_SIZE >= 2 * TX_RECYCLE_PERIOD ? TX_RECYCLE_PERIOD : RING_SIZE / 2)

struct device {
	volatile uint32_t *regs;
	const char *address;
};

struct port {
	struct pci_function function;
	struct device device;
};

void port_open(struct port *p, const char *sysfs, const char *address);
void device_init(const struct device *d);
// Flow control, as crates/ixgbe: bytes kept free above the XOFF mark, and the pause time.
#define FLOW_CONTROL_HEADROOM 0x6000u
#define FLOW_CONTROL_PAUSE 0x680u
void device_enable_flow_control(const struct device *d);
void device_wait_for_link(const struct device *d, unsigned seconds);
// What every register of a removed device reads.
#define ALL_ONES 0xFFFFFFFFu
// Whether the device still answers (one register read: for slow paths), and the one-line
// message for one that does not.
bool device_present(const struct device *d);
const char *device_gone_message(const struct device *d);
// Disables every enabled RX and TX queue and waits until the device confirms (at most a second
// per queue, without exiting): call it before the memory of the rings and buffers goes.
void device_stop_queues(const struct device *d);
// RX queue `queue` on a ring of `len` legacy descriptors; returns RDT.
volatile uint32_t *device_set_input(const struct device *d, unsigned queue, uint64_t ring_phys, uint32_t len,
                                    uint32_t tail);
// RSS over RX queues 0..queues-1, as crates/ixgbe's enable_rss: the verification key, entry i of
// the redirection table naming queue i % queues, queue q counted in QPRC(q) [DS 7.1.2.8].
#define RSS_QUEUES 16u
void device_enable_rss(const struct device *d, unsigned queues);
// The first disabled TX queue; returns its TDT.
volatile uint32_t *device_add_output(const struct device *d, uint64_t ring_phys, uint32_t len, uint64_t head_phys);

struct descriptor {
	uint64_t addr;
	uint64_t meta;
};

struct agent_output {
	volatile struct descriptor *ring;
	volatile uint32_t *head;
	volatile uint32_t *tail;
};

// A TinyNF agent: one ring per output, the first shared with the input's RX queue 0.
struct agent {
	uint8_t *buffers;
	volatile struct descriptor *shared_ring;
	struct agent_output outputs[MAX_OUTPUTS];
	uint16_t lengths[MAX_OUTPUTS];
	unsigned output_count;
	volatile uint32_t *receive_tail;
	uint32_t receive_tail_value;
	uint32_t processed;
	uint64_t malformed;
	struct dma_block mem;
};

// An agent whose input is RX queue `queue` of `input`.
void agent_init(struct agent *a, const struct device *input, unsigned queue, const struct device *const *outputs,
                unsigned output_count);

struct buffer {
	uint8_t *data;
	uint64_t phys;
	uint16_t length;
};

struct pool {
	struct buffer *free;
	size_t available;
	size_t total;
};

struct rx_queue {
	volatile struct descriptor *ring;
	struct buffer held[RING_SIZE]; // the buffer each descriptor points to
	volatile uint32_t *tail;
	uint32_t next;
	uint64_t malformed;
};

struct tx_queue {
	volatile struct descriptor *ring;
	struct buffer held[RING_SIZE]; // valid from `recycled` up to `next`
	volatile uint32_t *head;
	volatile uint32_t *tail;
	uint32_t next;
	uint32_t recycled;
};

struct queue_memory {
	struct dma_block block;
	size_t rx_ring, tx_ring, head, buffers, pool_size;
};

void queue_memory_allocate(struct queue_memory *m, size_t pool_size);
void pool_init(struct pool *p, const struct queue_memory *m);
// A pool of `pool_size` buffers of BUFFER_SIZE from offset `buffers` of `block`.
void pool_init_at(struct pool *p, const struct dma_block *block, size_t buffers, size_t pool_size);
void rx_queue_init(struct rx_queue *q, const struct device *d, unsigned queue, const struct queue_memory *m,
                   struct pool *pool);
void tx_queue_init(struct tx_queue *q, const struct device *d, const struct queue_memory *m);


// ---------------------------------------------------------------- hot path (inlined)

static inline uint64_t le64(uint64_t v)
{
	return v; // x86: little-endian, as the device
}

// Gives the receive side every slot that all outputs have sent: RDT = the head of the output
// furthest behind, minus one [DS 7.1.9]. Device-written heads are reduced modulo the ring.
static inline void agent_recycle(struct agent *restrict a, unsigned outputs)
{
	uint32_t earliest = a->processed, behind = 0;
	for (unsigned o = 0; o < outputs; o++) {
		uint32_t head = *a->outputs[o].head & RING_MASK;
		uint32_t pending = (a->processed - head) & RING_MASK;
		if (pending > behind) {
			behind = pending;
			earliest = head;
		}
	}
	uint32_t tail = (earliest - 1) & RING_MASK;
	if (tail != a->receive_tail_value) {
		*a->receive_tail = tail;
		a->receive_tail_value = tail;
	}
}

// Processes up to FLUSH_PERIOD received packets; `handler(ctx, packet, length, lengths)` sets
// lengths[o] for each output o (0: not sent there). Returns how many were processed.
typedef void (*packet_handler)(void *ctx, uint8_t *packet, uint16_t length, uint16_t *lengths);

static inline __attribute__((always_inline)) unsigned agent_run(struct agent *restrict a, unsigned outputs,
                                                                packet_handler handler, void *ctx)
{
	unsigned n = 0;
	while (n < FLUSH_PERIOD) {
		uint32_t i = a->processed;
		uint64_t status = le64(a->shared_ring[i].meta);
		if (!(status & RX_DD)) {
			if (n == 0) {
				agent_recycle(a, outputs);
			}
			break;
		}
		// The written-back length is untrusted: a frame that does not fit its buffer (or spans
		// several) is sent nowhere [DS 7.1.5].
		uint16_t len = (uint16_t)(status & 0xFFFF);
		if (len <= BUFFER_SIZE && (status & RX_EOP)) {
			handler(ctx, a->buffers + (size_t)i * BUFFER_SIZE, len, a->lengths);
		} else {
			a->malformed++;
		}
		uint64_t rs = (i % RECYCLE_PERIOD == RECYCLE_PERIOD - 1) ? TX_RS : 0;
		for (unsigned o = 0; o < outputs; o++) {
			// Length 0 is a null descriptor; bit 32 = 0 also clears RX DD [DS 7.2.3.2.2].
			a->outputs[o].ring[i].meta = le64(a->lengths[o] | rs | TX_IFCS | TX_EOP);
			a->lengths[o] = 0;
		}
		a->processed = (i + 1) & RING_MASK;
		if (rs) {
			agent_recycle(a, outputs);
		}
		n++;
	}
	if (n > 0) {
		for (unsigned o = 0; o < outputs; o++) {
			*a->outputs[o].tail = a->processed;
		}
	}
	return n;
}

static inline bool pool_take(struct pool *restrict p, struct buffer *out)
{
	if (p->available == 0) {
		return false;
	}
	*out = p->free[--p->available];
	return true;
}

static inline void pool_give(struct pool *restrict p, struct buffer b)
{
	if (p->available < p->total) {
		p->free[p->available++] = b;
	}
}

// Appends up to `room` received packets to `batch`, refilling the ring from `pool`.
static inline __attribute__((always_inline)) unsigned rx_batch(struct rx_queue *restrict q, struct pool *restrict pool,
                                                               struct buffer *restrict batch, unsigned room)
{
	unsigned got = 0;
	uint32_t start = q->next;
	while (got < room) {
		uint32_t i = q->next;
		uint64_t status = le64(q->ring[i].meta);
		if (!(status & RX_DD)) {
			break;
		}
		struct buffer fresh;
		if (!pool_take(pool, &fresh)) {
			break;
		}
		q->ring[i].addr = le64(fresh.phys);
		q->ring[i].meta = 0;
		q->next = (i + 1) & RING_MASK;
		struct buffer old = q->held[i];
		q->held[i] = fresh;
		uint16_t len = (uint16_t)(status & 0xFFFF);
		if (len <= BUFFER_SIZE && (status & RX_EOP)) {
			old.length = len;
			batch[got++] = old;
		} else {
			q->malformed++;
			pool_give(pool, old);
		}
	}
	if (q->next != start) {
		*q->tail = (q->next - 1) & RING_MASK; // RDT = last descriptor handed back [DS 7.1.9]
	}
	return got;
}

// Gives back to `pool` every buffer the device has sent, per the written-back head.
static inline void tx_recycle(struct tx_queue *restrict q, struct pool *restrict pool)
{
	uint32_t head = *q->head & RING_MASK;
	if (((head - q->recycled) & RING_MASK) > ((q->next - q->recycled) & RING_MASK)) {
		return; // never past what was queued
	}
	while (q->recycled != head) {
		pool_give(pool, q->held[q->recycled]);
		q->recycled = (q->recycled + 1) & RING_MASK;
	}
}

// Queues packets from the front of `batch` until the ring is full; returns how many. The
// caller owns batch[returned..count) (DPDK's burst contract).
static inline __attribute__((always_inline)) unsigned tx_batch(struct tx_queue *restrict q, struct pool *restrict pool,
                                                               const struct buffer *restrict batch, unsigned count)
{
	uint32_t room = RING_SIZE - 1 - ((q->next - q->recycled) & RING_MASK);
	if (RING_SIZE - 1 - room >= 2 * TX_RS_PERIOD || room < count) {
		tx_recycle(q, pool);
		room = RING_SIZE - 1 - ((q->next - q->recycled) & RING_MASK);
	}
	unsigned sent = count < room ? count : room;
	for (unsigned k = 0; k < sent; k++) {
		uint32_t i = q->next;
		uint64_t rs = (i % TX_RS_PERIOD == TX_RS_PERIOD - 1) ? TX_RS : 0;
		q->ring[i].addr = le64(batch[k].phys);
		q->ring[i].meta = le64(batch[k].length | TX_EOP | TX_IFCS | rs);
		q->held[i] = batch[k];
		q->next = (i + 1) & RING_MASK;
	}
	if (sent > 0) {
		*q->tail = q->next;
	}
	return sent;
}

#endif
