// Bringing a legacy virtio-net function up, and its queues' memory [virtio 1.2 §3.1.1, §4.1.4.8]:
// reset, ACKNOWLEDGE, DRIVER, features, each queue's page frame number, DRIVER_OK, then
// promiscuous mode through the control queue, as crates/virtio's legacy path and ixy do.
#include "virtio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Legacy registers in I/O BAR0 [virtio 1.2 §4.1.4.8].
#define HOST_FEATURES 0
#define GUEST_FEATURES 4
#define QUEUE_PFN 8
#define QUEUE_NUM 12
#define QUEUE_SEL 14
#define QUEUE_NOTIFY 16
#define STATUS 18

// Device status [virtio 1.2 §2.1] and the features this driver needs [§5.1.3]: the MAC address,
// the control queue and its receive-mode commands.
#define ACKNOWLEDGE 1u
#define DRIVER 2u
#define DRIVER_OK 4u
#define FAILED 128u
#define FEATURES ((1u << 5) | (1u << 17) | (1u << 18))

#define RX_QUEUE 0u
#define TX_QUEUE 1u
#define CTRL_QUEUE 2u
#define PAGE 4096u

static void bar_read(const struct virtio_device *d, off_t at, void *v, size_t len)
{
	if (pread(d->bar, v, len, at) != (ssize_t)len) {
		die("reading the I/O BAR of %s: %s", d->address, strerror(errno));
	}
}

static void bar_write(const struct virtio_device *d, off_t at, const void *v, size_t len)
{
	if (pwrite(d->bar, v, len, at) != (ssize_t)len) {
		die("writing the I/O BAR of %s: %s", d->address, strerror(errno));
	}
}

static uint8_t status(const struct virtio_device *d)
{
	uint8_t s;
	bar_read(d, STATUS, &s, 1);
	return s;
}

static void set_status(const struct virtio_device *d, uint8_t s)
{
	bar_write(d, STATUS, &s, 1);
}

static void sleep_us(long us)
{
	struct timespec t = {.tv_sec = 0, .tv_nsec = us * 1000};
	nanosleep(&t, NULL);
}

void virtio_reset(const struct virtio_device *d)
{
	set_status(d, 0);
	for (int i = 0; status(d) != 0; i++) {
		if (i == 10000) {
			die("%s did not finish its reset within a second", d->address);
		}
		sleep_us(100);
	}
}

void virtio_open(struct virtio_device *d, const char *sysfs, const char *address)
{
	pci_open(&d->function, sysfs, address, 0x1AF4, 0x1000, "a transitional virtio-net device (1af4:1000)");
	d->address = d->function.address;
	if (d->function.vfio) {
		// Through VFIO the I/O BAR is region 0 of the device descriptor, which starts at 0.
		d->bar = d->function.config_fd;
	} else {
		char path[4200];
		snprintf(path, sizeof path, "%s/resource0", d->function.dir);
		d->bar = open(path, O_RDWR | O_CLOEXEC);
		if (d->bar < 0) {
			die("opening %s: %s", path, strerror(errno));
		}
	}
	virtio_reset(d);
	set_status(d, ACKNOWLEDGE);
	set_status(d, ACKNOWLEDGE | DRIVER);
	uint32_t offered;
	bar_read(d, HOST_FEATURES, &offered, 4);
	if ((offered & FEATURES) != FEATURES) {
		die("%s offers virtio features %#010x without MAC, CTRL_VQ or CTRL_RX (%#010x): this driver needs them",
		    d->address, offered, FEATURES);
	}
	uint32_t wanted = FEATURES;
	bar_write(d, GUEST_FEATURES, &wanted, 4);
}

// Bytes of a legacy queue: descriptors and available ring, then the used ring on the next page.
static size_t ring_bytes(void)
{
	size_t first = (16u * VQ_SIZE + 2u * (3u + VQ_SIZE) + PAGE - 1) / PAGE * PAGE;
	return first + (6u + 8u * VQ_SIZE + PAGE - 1) / PAGE * PAGE;
}

void virtio_memory_allocate(struct virtio_memory *m, size_t pool_size)
{
	size_t end = 0, queue = ring_bytes() + VQ_SIZE * VIRTIO_HEADER_SLOT;
	m->rx = layout_place(&end, queue, PAGE);
	m->tx = layout_place(&end, queue, PAGE);
	m->ctrl = layout_place(&end, queue, PAGE);
	m->buffers = layout_place(&end, BUFFER_SIZE, BUFFER_SIZE);
	m->pool_size = pool_size;
	dma_allocate(&m->block, m->buffers + pool_size * BUFFER_SIZE);
}

void virtio_pool_init(struct pool *p, const struct virtio_memory *m)
{
	pool_init_at(p, &m->block, m->buffers, m->pool_size);
}

// The queue at `offset` of `m` (zeroed by the allocation), given to the device as queue `number`.
static void vq_init(struct virtqueue *q, const struct virtio_device *d, const struct virtio_memory *m, size_t offset,
                    uint16_t number)
{
	uint8_t *base = m->block.virt + offset;
	size_t avail = 16u * VQ_SIZE, used = (avail + 2u * (3u + VQ_SIZE) + PAGE - 1) / PAGE * PAGE;
	q->desc = (volatile struct virtq_desc *)(void *)base;
	q->avail_idx = (volatile uint16_t *)(void *)(base + avail + 2);
	q->avail_ring = (volatile uint16_t *)(void *)(base + avail + 4);
	q->used_flags = (volatile uint16_t *)(void *)(base + used);
	q->used_idx = (volatile uint16_t *)(void *)(base + used + 2);
	q->used_ring = (volatile struct virtq_used_elem *)(void *)(base + used + 4);
	*(volatile uint16_t *)(void *)(base + avail) = 1; // VIRTQ_AVAIL_F_NO_INTERRUPT: we poll
	q->next_avail = 0;
	q->last_used = 0;
	q->number = number;
	q->device = d;
	uint16_t size;
	bar_write(d, QUEUE_SEL, &number, 2);
	bar_read(d, QUEUE_NUM, &size, 2);
	if (size != VQ_SIZE) {
		die("%s: queue %u has %u entries, the driver was built for %u: use rings of %u", d->address, number, size,
		    VQ_SIZE, size);
	}
	uint32_t pfn = (uint32_t)(dma_phys(&m->block, offset) / PAGE);
	bar_write(d, QUEUE_PFN, &pfn, 4);
}

// The bus address of the header slot of the chain whose head is `head`, in the queue at `offset`.
static uint64_t header_phys(const struct virtio_memory *m, size_t offset, uint16_t head)
{
	return dma_phys(&m->block, offset + ring_bytes() + (size_t)head / 2 * VIRTIO_HEADER_SLOT);
}

void virtio_rx_init(struct virtio_rx *q, const struct virtio_device *d, const struct virtio_memory *m,
                    struct pool *pool)
{
	vq_init(&q->q, d, m, m->rx, RX_QUEUE);
	memset(q->held, 0, sizeof q->held);
	q->malformed = 0;
	for (uint16_t head = 0; head < VQ_SIZE; head += 2) {
		struct buffer b;
		if (!pool_take(pool, &b)) {
			die("a pool of at least %u buffers is needed to fill the receive queue", VQ_SIZE / 2);
		}
		vq_set_desc(&q->q, head, header_phys(m, m->rx, head),
		            desc_word(VIRTIO_HEADER_LEN, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, (uint16_t)(head + 1)));
		vq_set_desc(&q->q, (uint16_t)(head + 1), b.phys, desc_word(BUFFER_SIZE, VIRTQ_DESC_F_WRITE, 0));
		q->held[head] = b;
		vq_offer(&q->q, head);
	}
	vq_publish(&q->q);
}

void virtio_tx_init(struct virtio_tx *q, const struct virtio_device *d, const struct virtio_memory *m)
{
	vq_init(&q->q, d, m, m->tx, TX_QUEUE);
	memset(q->held, 0, sizeof q->held);
	q->next = 0;
	// Every chain's header: all zero (no offload), in a descriptor of its own.
	for (uint16_t head = 0; head < VQ_SIZE; head += 2) {
		vq_set_desc(&q->q, head, header_phys(m, m->tx, head),
		            desc_word(VIRTIO_HEADER_LEN, VIRTQ_DESC_F_NEXT, (uint16_t)(head + 1)));
	}
}

void virtio_start(const struct virtio_device *d, const struct virtio_memory *m)
{
	struct virtqueue ctrl;
	vq_init(&ctrl, d, m, m->ctrl, CTRL_QUEUE);
	set_status(d, ACKNOWLEDGE | DRIVER | DRIVER_OK);
	if (status(d) & FAILED) {
		die("%s: the device refused DRIVER_OK (FAILED)", d->address);
	}
	// VIRTIO_NET_CTRL_RX (0) / _PROMISC (0), on: class, command, data, then the device's ack
	// [virtio 1.2 §5.1.6.5.1], in three descriptors as ixy (QEMU wants them apart).
	size_t at = m->ctrl + ring_bytes();
	volatile uint8_t *command = m->block.virt + at;
	command[0] = 0;
	command[1] = 0;
	command[2] = 1;
	command[3] = 0xFF;
	uint64_t phys = dma_phys(&m->block, at);
	vq_set_desc(&ctrl, 0, phys, desc_word(2, VIRTQ_DESC_F_NEXT, 1));
	vq_set_desc(&ctrl, 1, phys + 2, desc_word(1, VIRTQ_DESC_F_NEXT, 2));
	vq_set_desc(&ctrl, 2, phys + 3, desc_word(1, VIRTQ_DESC_F_WRITE, 0));
	vq_offer(&ctrl, 0);
	vq_publish(&ctrl);
	uint16_t head;
	uint32_t len;
	for (int i = 0; !vq_peek_used(&ctrl, &head, &len); i++) {
		if (i == 10000) {
			die("%s did not answer on its control queue within a second", d->address);
		}
		sleep_us(100);
	}
	if (command[3] != 0) {
		die("%s: the device refused promiscuous mode (ack %u)", d->address, command[3]);
	}
}

__attribute__((noinline, cold)) void virtio_notify(const struct virtqueue *q)
{
	(void)!pwrite(q->device->bar, &q->number, 2, QUEUE_NOTIFY);
}
