// The virtio-net driver of the C baseline: the legacy interface, as ixy's C driver uses it
// [virtio 1.2 §4.1.4.8], with the same algorithm as crates/virtio's flexible queues: a packet is
// a two-descriptor chain (the net header in a slot of the queue's memory, then the buffer),
// chain k uses descriptors 2k and 2k + 1, and chains are sent in turn.
#ifndef SAFENIC_C_VIRTIO_H
#define SAFENIC_C_VIRTIO_H

#include "ixgbe.h"

// Entries per virtqueue: legacy queues have the device's size, 256 on nicsim and QEMU.
#define VQ_SIZE 256u
#define VQ_MASK (VQ_SIZE - 1u)
// The legacy net header without mergeable buffers [virtio 1.2 §5.1.6], and its slot.
#define VIRTIO_HEADER_LEN 10u
#define VIRTIO_HEADER_SLOT 16u
// Descriptor flags [virtio 1.2 §2.7.5] and the device's "do not notify me" [§2.7.10].
#define VIRTQ_DESC_F_NEXT 1u
#define VIRTQ_DESC_F_WRITE 2u
#define VIRTQ_USED_F_NO_NOTIFY 1u

// A descriptor as two words, as crates/virtio writes it: the address, then length, flags and
// next (little-endian: len | flags << 32 | next << 48).
struct virtq_desc {
	uint64_t addr;
	uint64_t word;
};

static inline uint64_t desc_word(uint32_t len, uint16_t flags, uint16_t next)
{
	return (uint64_t)len | (uint64_t)flags << 32 | (uint64_t)next << 48;
}

struct virtq_used_elem {
	uint32_t id;
	uint32_t len;
};

struct virtio_device {
	struct pci_function function;
	int bar; // resource0 (or the VFIO device descriptor), read and written with pread/pwrite
	const char *address;
};

// The driver's side of one split virtqueue, in the legacy layout [virtio 1.2 §2.7.2].
struct virtqueue {
	volatile struct virtq_desc *desc;
	volatile uint16_t *avail_idx;
	volatile uint16_t *avail_ring;
	volatile uint16_t *used_flags;
	volatile uint16_t *used_idx;
	volatile struct virtq_used_elem *used_ring;
	uint16_t next_avail, last_used;
	uint16_t number; // the queue's number on the device, for notifications
	const struct virtio_device *device;
};

struct virtio_rx {
	struct virtqueue q;
	struct buffer held[VQ_SIZE]; // by chain head (even indices)
	uint64_t malformed;
};

struct virtio_tx {
	struct virtqueue q;
	struct buffer held[VQ_SIZE]; // data == NULL: the chain is free
	uint16_t next;               // the next chain to use (chains are used in turn)
};

// The memory of one direction: a receive, a transmit and a control queue (each with its header
// slots), then the pool's buffers.
struct virtio_memory {
	struct dma_block block;
	size_t rx, tx, ctrl, buffers, pool_size;
};

void virtio_open(struct virtio_device *d, const char *sysfs, const char *address);
// Sets DRIVER_OK and switches promiscuous mode on through the control queue in `m`.
void virtio_start(const struct virtio_device *d, const struct virtio_memory *m);
// Writes 0 to the status: the device stops using every queue before the write returns.
void virtio_reset(const struct virtio_device *d);
void virtio_memory_allocate(struct virtio_memory *m, size_t pool_size);
void virtio_pool_init(struct pool *p, const struct virtio_memory *m);
void virtio_rx_init(struct virtio_rx *q, const struct virtio_device *d, const struct virtio_memory *m,
                    struct pool *pool);
void virtio_tx_init(struct virtio_tx *q, const struct virtio_device *d, const struct virtio_memory *m);
// Writes QUEUE_NOTIFY: a system call, made only for a device that asks for it.
void virtio_notify(const struct virtqueue *q);

// ---------------------------------------------------------------- hot path (inlined)

static inline void vq_set_desc(const struct virtqueue *q, uint16_t i, uint64_t addr, uint64_t word)
{
	q->desc[i].addr = addr;
	q->desc[i].word = word;
}

static inline void vq_offer(struct virtqueue *q, uint16_t head)
{
	q->avail_ring[q->next_avail & VQ_MASK] = head;
	q->next_avail++;
}

// Makes the offered entries visible; notifies the device if it wants that.
static inline void vq_publish(const struct virtqueue *q)
{
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*q->avail_idx = q->next_avail;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!(*q->used_flags & VIRTQ_USED_F_NO_NOTIFY)) {
		virtio_notify(q);
	}
}

// The next used element, if the device returned one; its head reduced modulo the queue size.
static inline bool vq_peek_used(const struct virtqueue *q, uint16_t *head, uint32_t *len)
{
	if (*q->used_idx == q->last_used) {
		return false;
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	struct virtq_used_elem e = q->used_ring[q->last_used & VQ_MASK];
	*head = (uint16_t)(e.id & VQ_MASK);
	*len = e.len;
	return true;
}

// Appends up to `room` received frames to `batch`, giving each chain a fresh buffer from `pool`.
static inline __attribute__((always_inline)) unsigned virtio_rx_batch(struct virtio_rx *restrict q,
                                                                      struct pool *restrict pool,
                                                                      struct buffer *restrict batch, unsigned room)
{
	unsigned got = 0;
	bool offered = false;
	uint16_t head;
	uint32_t len;
	while (got < room && vq_peek_used(&q->q, &head, &len)) {
		struct buffer fresh;
		if (!pool_take(pool, &fresh)) {
			break;
		}
		q->q.last_used++;
		struct buffer old = q->held[head];
		if (old.data == NULL) {
			q->malformed++; // a head the driver never gave
			pool_give(pool, fresh);
			continue;
		}
		q->q.desc[(head + 1) & VQ_MASK].addr = fresh.phys;
		q->held[head] = fresh;
		vq_offer(&q->q, head);
		offered = true;
		uint32_t frame = len - VIRTIO_HEADER_LEN; // the device's length: header and frame
		if (frame <= BUFFER_SIZE) {
			old.length = (uint16_t)frame;
			batch[got++] = old;
		} else {
			q->malformed++;
			pool_give(pool, old);
		}
	}
	if (offered) {
		vq_publish(&q->q);
	}
	return got;
}

// Queues frames from the front of `batch` on free chains, in turn; returns how many. The caller
// keeps batch[returned..count).
static inline __attribute__((always_inline)) unsigned virtio_tx_batch(struct virtio_tx *restrict q,
                                                                      struct pool *restrict pool,
                                                                      const struct buffer *restrict batch,
                                                                      unsigned count)
{
	uint16_t head;
	uint32_t len;
	while (vq_peek_used(&q->q, &head, &len)) {
		q->q.last_used++;
		if (q->held[head].data != NULL) {
			pool_give(pool, q->held[head]);
			q->held[head].data = NULL;
		}
	}
	unsigned sent = 0;
	uint16_t next = q->next;
	while (sent < count && q->held[next].data == NULL) {
		vq_set_desc(&q->q, (next + 1) & VQ_MASK, batch[sent].phys, desc_word(batch[sent].length, 0, 0));
		q->held[next] = batch[sent];
		vq_offer(&q->q, next);
		next = (next + 2) & VQ_MASK;
		sent++;
	}
	q->next = next;
	if (sent > 0) {
		vq_publish(&q->q);
	}
	return sent;
}

#endif
