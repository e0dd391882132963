// Device bring-up and queue set-up of the C baseline, in the order of crates/ixgbe/src/device.rs
// (the datasheet's, as TinyNF does it). Register offsets and bits cite the 82599 datasheet.
#include "ixgbe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Registers [DS 8.2.3], as byte offsets.
#define CTRL 0x00000u // [DS 8.2.3.1.1]
#define CTRL_MASTER_DISABLE (1u << 2)
#define CTRL_RST (1u << 26)
#define STATUS 0x00008u // [DS 8.2.3.1.2]
#define STATUS_MASTER_ENABLE (1u << 19)
#define CTRL_EXT 0x00018u // [DS 8.2.3.1.3]
#define CTRL_EXT_NS_DIS (1u << 16)
#define EIMC 0x00888u // [DS 8.2.3.5.4]
#define EIMC_EX(n) (0x00AB0u + 4u * (n))
#define EEC 0x10010u // [DS 8.2.3.2.1]
#define EEC_PRES (1u << 8)
#define EEC_AUTO_RD (1u << 9)
#define FWSM 0x10148u
#define FWSM_EXT_ERR_IND (0x3Fu << 19)
#define RDRXCTL 0x02F00u // [DS 8.2.3.8.8]
#define RDRXCTL_CRCSTRIP (1u << 1)
#define RDRXCTL_DMAIDONE (1u << 3)
#define RDRXCTL_RSCFRSTSIZE (0x1Fu << 17)
#define RDRXCTL_RSCACKC (1u << 25)
#define RDRXCTL_FCOE_WRFIX (1u << 26)
#define RXCTRL 0x03000u // [DS 8.2.3.8.10]
#define RXCTRL_RXEN 1u
#define FCTRL 0x05080u // [DS 8.2.3.7.1]
#define FCTRL_MPE (1u << 8)
#define FCTRL_UPE (1u << 9)
#define FCTRL_BAM (1u << 10)
#define HLREG0 0x04240u // [DS 8.2.3.22.8]
#define HLREG0_TXCRCEN (1u << 0)
#define HLREG0_RXCRCSTRP (1u << 1)
#define HLREG0_TXPADEN (1u << 10)
#define LINKS 0x042A4u // [DS 8.2.3.22.20]
#define LINKS_UP (1u << 30)
#define SECRXCTRL 0x08D00u // [DS 8.2.3.12.1]
#define SECRXCTRL_RX_DIS (1u << 1)
#define SECRXSTAT 0x08D04u
#define SECRXSTAT_RDY 1u
#define DMATXCTL 0x04A80u // [DS 8.2.3.9.2]
#define DMATXCTL_TE 1u
#define DTXMXSZRQ 0x08100u
#define RTTDCS 0x04900u // [DS 8.2.3.10.2]
#define RTTDCS_ARBDIS (1u << 6)
#define RTTDQSEL 0x04904u
#define RTTDT1C 0x04908u
#define MFLCN 0x04294u // [DS 8.2.3.22.34]
#define MFLCN_RFCE (1u << 3)
#define FCCFG 0x03D00u // [DS 8.2.3.3.7]
#define FCCFG_TFCE_MASK (0x3u << 3)
#define FCCFG_TFCE_802_3X (1u << 3)
#define TXPBTHRESH0 0x04950u
#define FCTTV0 0x03200u // [DS 8.2.3.3.2]
#define FCRTL0 0x03220u // [DS 8.2.3.3.3]
#define FCRTL_XONE (1u << 31)
#define FCRTH0 0x03260u // [DS 8.2.3.3.4]
#define FCRTH_FCEN (1u << 31)
#define FCRTV 0x032A0u // [DS 8.2.3.3.5]
#define RXPBSIZE(n) (0x03C00u + 4u * (n))
#define TXPBSIZE(n) (0x0CC00u + 4u * (n))
#define PFUTA(n) (0x0F400u + 4u * (n))
#define PFVLVFB(n) (0x0F200u + 4u * (n))
#define MTA(n) (0x05200u + 4u * (n))
#define FTQF(n) (0x0E600u + 4u * (n))
#define PFVLVF(n) (0x0F100u + 4u * (n))
#define MPSAR(n) (0x0A600u + 4u * (n))
// Queue registers for queues 0-63 [DS 8.2.3.8, 8.2.3.9].
#define RDBAL(q) (0x01000u + 0x40u * (q))
#define RDBAH(q) (0x01004u + 0x40u * (q))
#define RDLEN(q) (0x01008u + 0x40u * (q))
#define DCA_RXCTRL(q) (0x0100Cu + 0x40u * (q))
#define DCA_RXCTRL_RELAXED_WRITE (1u << 12)
#define SRRCTL(q) (0x01014u + 0x40u * (q))
#define SRRCTL_BSIZEPACKET_MASK 0x1Fu
#define SRRCTL_DROP_EN (1u << 28)
#define RDT(q) (0x01018u + 0x40u * (q))
#define RXDCTL(q) (0x01028u + 0x40u * (q))
#define RXDCTL_ENABLE (1u << 25)
#define TDBAL(q) (0x06000u + 0x40u * (q))
#define TDBAH(q) (0x06004u + 0x40u * (q))
#define TDLEN(q) (0x06008u + 0x40u * (q))
#define DCA_TXCTRL(q) (0x0600Cu + 0x40u * (q))
#define DCA_TXCTRL_RELAXED_WRITE (1u << 11)
#define TDT(q) (0x06018u + 0x40u * (q))
#define TXDCTL(q) (0x06028u + 0x40u * (q))
#define TXDCTL_ENABLE (1u << 25)
#define TDWBAL(q) (0x06038u + 0x40u * (q))
#define TDWBAH(q) (0x0603Cu + 0x40u * (q))
#define TDWBAL_HEAD_WB_EN 1u

static uint32_t reg_read(const struct device *d, uint32_t offset)
{
	return d->regs[offset / 4];
}

static void reg_write(const struct device *d, uint32_t offset, uint32_t value)
{
	d->regs[offset / 4] = value;
}

static void reg_set(const struct device *d, uint32_t offset, uint32_t bits)
{
	reg_write(d, offset, reg_read(d, offset) | bits);
}

static void reg_clear(const struct device *d, uint32_t offset, uint32_t bits)
{
	reg_write(d, offset, reg_read(d, offset) & ~bits);
}

static uint64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

// Waits until (reg & mask) == want, polling every 10 µs, for at most `timeout_us`.
bool device_present(const struct device *d)
{
	// STATUS never reads all-ones from a present 82599 (its reserved bits read 0
	// [DS 8.2.3.1.2]); a removed device returns all-ones for every read.
	return reg_read(d, STATUS) != ALL_ONES;
}

const char *device_gone_message(const struct device *d)
{
	static char message[256];
	snprintf(message, sizeof message,
	         "%s: the device is gone (its registers read all-ones): it was removed, or nicsim stopped; start the "
	         "driver again once it is back",
	         d->address);
	return message;
}

static void reg_wait(const struct device *d, uint32_t offset, uint32_t mask, uint32_t want, const char *what,
                     uint64_t timeout_us)
{
	uint64_t deadline = now_us() + timeout_us;
	uint32_t value;
	while (((value = reg_read(d, offset)) & mask) != want) {
		if (value == ALL_ONES && !device_present(d)) {
			die("%s", device_gone_message(d));
		}
		if (now_us() > deadline) {
			die("%s: timed out waiting for %s: check the cable and that no other program drives this port",
			    d->address, what);
		}
		usleep(10);
	}
}

void port_open(struct port *p, const char *sysfs, const char *address)
{
	pci_open(&p->function, sysfs, address, 0x8086, 0x10FB, "an Intel 82599ES (8086:10fb)");
	p->device.regs = pci_map_bar0(&p->function, BAR0_LEN);
	p->device.address = p->function.address;
}

// Clears ENABLE in `control` and polls until it reads 0, for at most a second; never exits
// (it runs while the program exits).
static void queue_stop(const struct device *d, uint32_t control)
{
	reg_clear(d, control, RXDCTL_ENABLE); // the same bit as TXDCTL.ENABLE
	uint64_t deadline = now_us() + 1000000u;
	while (reg_read(d, control) & RXDCTL_ENABLE) {
		if (now_us() > deadline) {
			fprintf(stderr, "%s: a queue did not stop within 1 s\n", d->address);
			return;
		}
		usleep(10);
	}
}

void device_stop_queues(const struct device *d)
{
	// Disable every enabled queue and wait until the device confirms, before the memory its
	// rings and buffers are in can go [DS 4.6.7.1.2, 4.6.8]. A device that is gone DMAs nothing.
	if (!device_present(d)) {
		return;
	}
	for (uint32_t q = 0; q < MAX_QUEUES; q++) {
		if (reg_read(d, RXDCTL(q)) & RXDCTL_ENABLE) {
			queue_stop(d, RXDCTL(q));
		}
		if (reg_read(d, TXDCTL(q)) & TXDCTL_ENABLE) {
			queue_stop(d, TXDCTL(q));
		}
	}
}

void device_init(const struct device *d)
{
	const uint64_t second = 1000000;
	// Stop receive queues before master disable [DS 4.6.7.1.2].
	for (uint32_t q = 0; q < MAX_QUEUES; q++) {
		reg_clear(d, RXDCTL(q), RXDCTL_ENABLE);
		reg_wait(d, RXDCTL(q), RXDCTL_ENABLE, 0, "RXDCTL.ENABLE to clear", second);
	}
	usleep(100);
	// Master disable, then wait for outstanding requests [DS 5.2.5.3.2].
	reg_set(d, CTRL, CTRL_MASTER_DISABLE);
	reg_wait(d, STATUS, STATUS_MASTER_ENABLE, 0, "STATUS.PCIe master enable to clear", second);
	// Software reset [DS 4.2.1.6.1]; wait at least 1 ms, then 10 ms more [DS 4.6.3.2].
	reg_set(d, CTRL, CTRL_RST);
	reg_wait(d, CTRL, CTRL_RST, 0, "CTRL.RST to clear", second);
	usleep(10000);
	// Interrupts off [DS 4.6.3.1].
	reg_write(d, EIMC, 0x7FFFFFFFu);
	reg_write(d, EIMC_EX(0), 0xFFFFFFFFu);
	reg_write(d, EIMC_EX(1), 0xFFFFFFFFu);
	// Flow-control high water mark so it can be enabled [DS 4.6.11.3.4].
	reg_write(d, FCRTH0, ((512u * 1024u - 0x6000u) / 32u) << 5);
	// EEPROM auto-read done and valid [DS 4.6.3].
	reg_wait(d, EEC, EEC_AUTO_RD, EEC_AUTO_RD, "EEC.AUTO_RD (EEPROM read done)", second);
	if (!(reg_read(d, EEC) & EEC_PRES) || (reg_read(d, FWSM) & FWSM_EXT_ERR_IND)) {
		die("%s: the EEPROM is missing or invalid: this port cannot be used without firmware repair", d->address);
	}
	// DMA init done [DS 4.6.3].
	reg_wait(d, RDRXCTL, RDRXCTL_DMAIDONE, RDRXCTL_DMAIDONE, "RDRXCTL.DMAIDONE", second);
	// Receive filters and tables to a known state [DS 4.6.10].
	for (uint32_t n = 0; n < 128; n++) {
		reg_write(d, PFUTA(n), 0);
		reg_write(d, PFVLVFB(n), 0);
		reg_write(d, MTA(n), 0);
		reg_clear(d, FTQF(n), 1u << 31);
	}
	for (uint32_t n = 0; n < 64; n++) {
		reg_write(d, PFVLVF(n), 0);
	}
	for (uint32_t n = 0; n < 256; n++) {
		reg_write(d, MPSAR(n), n == 0);
	}
	// CRC strip in both places, RSC off, FCoE write fix [DS 4.6.7, 8.2.3.8.8].
	reg_write(d, RDRXCTL,
	          (reg_read(d, RDRXCTL) | RDRXCTL_CRCSTRIP | RDRXCTL_RSCACKC | RDRXCTL_FCOE_WRFIX) & ~RDRXCTL_RSCFRSTSIZE);
	reg_set(d, HLREG0, HLREG0_RXCRCSTRP | HLREG0_TXCRCEN | HLREG0_TXPADEN);
	// DCB and VT off: one packet buffer [DS 4.6.11.3.4].
	for (uint32_t n = 1; n < 8; n++) {
		reg_write(d, RXPBSIZE(n), 0);
		reg_write(d, TXPBSIZE(n), 0);
	}
	reg_set(d, MFLCN, MFLCN_RFCE);
	reg_write(d, FCCFG, (reg_read(d, FCCFG) & ~FCCFG_TFCE_MASK) | FCCFG_TFCE_802_3X);
	for (uint32_t q = 0; q < 128; q++) {
		reg_write(d, RTTDQSEL, q);
		reg_write(d, RTTDT1C, 0);
	}
	// TX global settings [DS 4.6.11.3.4, 8.2.3.9.16].
	reg_write(d, TXPBTHRESH0, (reg_read(d, TXPBTHRESH0) & ~0x3FFu) | (0xA0u - 2));
	reg_write(d, DTXMXSZRQ, 0xFFF);
	reg_clear(d, RTTDCS, RTTDCS_ARBDIS);
	reg_set(d, CTRL_EXT, CTRL_EXT_NS_DIS);
	// Promiscuous: change filters only with receive off [DS 8.2.3.7.1].
	uint32_t rxen = reg_read(d, RXCTRL) & RXCTRL_RXEN;
	reg_clear(d, RXCTRL, RXCTRL_RXEN);
	reg_set(d, FCTRL, FCTRL_UPE | FCTRL_MPE | FCTRL_BAM);
	reg_set(d, RXCTRL, rxen);
}

// IEEE 802.3x flow control [DS 3.7.7, 8.2.3.3], as the Rust driver's enable_flow_control: XOFF
// when packet buffer 0 is within FLOW_CONTROL_HEADROOM bytes of full, XON below half of that
// mark; receive queues set up afterwards wait instead of dropping (no SRRCTL.DROP_EN).
void device_enable_flow_control(const struct device *d)
{
	uint32_t buffer = ((reg_read(d, RXPBSIZE(0)) >> 10) & 0x3FFu) * 1024u;
	uint32_t high = (buffer > FLOW_CONTROL_HEADROOM ? buffer - FLOW_CONTROL_HEADROOM : 0) & ~0x1Fu;
	reg_write(d, FCRTL0, ((high / 2) & ~0x1Fu) | FCRTL_XONE);
	reg_write(d, FCRTH0, high | FCRTH_FCEN);
	// Pause time in quanta of 512 bit times, refreshed at half of it, as DPDK and Linux do.
	reg_write(d, FCTTV0, FLOW_CONTROL_PAUSE);
	reg_write(d, FCRTV, FLOW_CONTROL_PAUSE / 2);
	reg_set(d, MFLCN, MFLCN_RFCE);
	reg_write(d, FCCFG, (reg_read(d, FCCFG) & ~FCCFG_TFCE_MASK) | FCCFG_TFCE_802_3X);
}

void device_wait_for_link(const struct device *d, unsigned seconds)
{
	reg_wait(d, LINKS, LINKS_UP, LINKS_UP, "link up", (uint64_t)seconds * 1000000u);
}

// Enables the receive path once a queue is ready [DS 4.6.7, 8.2.3.12.1].
static void start_receive(const struct device *d)
{
	if (reg_read(d, RXCTRL) & RXCTRL_RXEN) {
		return;
	}
	reg_set(d, SECRXCTRL, SECRXCTRL_RX_DIS);
	reg_wait(d, SECRXSTAT, SECRXSTAT_RDY, SECRXSTAT_RDY, "SECRXSTAT.SECRX_RDY", 1000000);
	reg_set(d, RXCTRL, RXCTRL_RXEN);
	reg_clear(d, SECRXCTRL, SECRXCTRL_RX_DIS);
}

volatile uint32_t *device_set_input(const struct device *d, unsigned queue, uint64_t ring_phys, uint32_t len,
                                    uint32_t tail)
{
	uint32_t q = queue;
	if (q >= RSS_QUEUES || reg_read(d, RXDCTL(q)) & RXDCTL_ENABLE) {
		die("%s: RX queue %u is in use already: stop the program that drives it", d->address, q);
	}
	reg_write(d, RDBAH(q), (uint32_t)(ring_phys >> 32));
	reg_write(d, RDBAL(q), (uint32_t)ring_phys);
	reg_write(d, RDLEN(q), len * 16);
	// Drop when no descriptor is free, unless flow control makes frames wait instead.
	uint32_t drop_en = (reg_read(d, FCRTH0) & FCRTH_FCEN) ? 0 : SRRCTL_DROP_EN;
	reg_write(d, SRRCTL(q),
	          (reg_read(d, SRRCTL(q)) & ~(SRRCTL_BSIZEPACKET_MASK | SRRCTL_DROP_EN)) | (BUFFER_SIZE / 1024) | drop_en);
	reg_set(d, RXDCTL(q), RXDCTL_ENABLE);
	reg_wait(d, RXDCTL(q), RXDCTL_ENABLE, RXDCTL_ENABLE, "RXDCTL.ENABLE", 1000000);
	reg_write(d, RDT(q), tail);
	start_receive(d);
	// No relaxed ordering of descriptor write-back [DS 8.2.3.11.1].
	reg_clear(d, DCA_RXCTRL(q), DCA_RXCTRL_RELAXED_WRITE);
	return &d->regs[RDT(q) / 4];
}

// The RSS registers [DS 8.2.3.7.5, 8.2.3.7.12, 8.2.3.7.14, 8.2.3.7.15, 8.2.3.8.9 (RQSMR)].
#define RXCSUM 0x05000u
#define RXCSUM_PCSD (1u << 13)
#define MRQC 0x05818u
#define MRQC_RSS 0x1u
#define MRQC_FIELDS ((1u << 16) | (1u << 17) | (1u << 20) | (1u << 21) | (1u << 22) | (1u << 23))
#define RETA(n) (0x05C00u + 4u * (n))
#define RSSRK(n) (0x05C80u + 4u * (n))
#define RQSMR(n) (0x02300u + 4u * (n))

// The datasheet's RSS verification key [DS 7.1.2.8.3], as crates/ixgbe's RSS_KEY.
static const uint8_t rss_key[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
                                    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
                                    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

void device_enable_rss(const struct device *d, unsigned queues)
{
	for (uint32_t n = 0; n < 10; n++) {
		const uint8_t *k = rss_key + 4 * n;
		reg_write(d, RSSRK(n), (uint32_t)k[0] | (uint32_t)k[1] << 8 | (uint32_t)k[2] << 16 | (uint32_t)k[3] << 24);
	}
	for (uint32_t n = 0; n < 32; n++) {
		uint32_t v = 0;
		for (uint32_t k = 0; k < 4; k++) {
			v |= ((4 * n + k) % queues) << (8 * k);
		}
		reg_write(d, RETA(n), v);
	}
	for (uint32_t n = 0; n < RSS_QUEUES / 4; n++) {
		uint32_t q = 4 * n;
		reg_write(d, RQSMR(n), q | (q + 1) << 8 | (q + 2) << 16 | (q + 3) << 24);
	}
	reg_set(d, RXCSUM, RXCSUM_PCSD);
	reg_write(d, MRQC, MRQC_RSS | MRQC_FIELDS);
}

volatile uint32_t *device_add_output(const struct device *d, uint64_t ring_phys, uint32_t len, uint64_t head_phys)
{
	uint32_t q = 0;
	while (q < MAX_QUEUES && (reg_read(d, TXDCTL(q)) & TXDCTL_ENABLE)) {
		q++;
	}
	if (q == MAX_QUEUES) {
		die("%s: no free TX queue left: use fewer outputs", d->address);
	}
	reg_write(d, TDBAH(q), (uint32_t)(ring_phys >> 32));
	reg_write(d, TDBAL(q), (uint32_t)ring_phys);
	reg_write(d, TDLEN(q), len * 16);
	// PTHRESH 60, HTHRESH 4 as TinyNF [DS 8.2.3.9.10].
	reg_write(d, TXDCTL(q), (reg_read(d, TXDCTL(q)) & ~0x7F7Fu) | 60u | (4u << 8));
	reg_write(d, TDWBAH(q), (uint32_t)(head_phys >> 32));
	reg_write(d, TDWBAL(q), (uint32_t)head_phys | TDWBAL_HEAD_WB_EN);
	reg_clear(d, DCA_TXCTRL(q), DCA_TXCTRL_RELAXED_WRITE);
	reg_set(d, DMATXCTL, DMATXCTL_TE);
	reg_set(d, TXDCTL(q), TXDCTL_ENABLE);
	reg_wait(d, TXDCTL(q), TXDCTL_ENABLE, TXDCTL_ENABLE, "TXDCTL.ENABLE", 1000000);
	return &d->regs[TDT(q) / 4];
}

void agent_init(struct agent *a, const struct device *input, unsigned queue, const struct device *const *outputs,
                unsigned output_count)
{
	if (output_count < 1 || output_count > MAX_OUTPUTS) {
		die("%u outputs: an agent has 1 to 64 outputs", output_count);
	}
	memset(a, 0, sizeof *a);
	size_t end = 0, rings[MAX_OUTPUTS], heads[MAX_OUTPUTS];
	size_t buffers = layout_place(&end, (size_t)RING_SIZE * BUFFER_SIZE, BUFFER_SIZE);
	// Rings 128-byte aligned [DS 8.2.3.8.1]; heads in their own cache line [DS 7.2.3.5.2].
	for (unsigned o = 0; o < output_count; o++) {
		rings[o] = layout_place(&end, RING_SIZE * sizeof(struct descriptor), 128);
	}
	for (unsigned o = 0; o < output_count; o++) {
		heads[o] = layout_place(&end, 64, 64);
	}
	dma_allocate(&a->mem, end);
	a->buffers = a->mem.virt + buffers;
	a->output_count = output_count;
	for (unsigned o = 0; o < output_count; o++) {
		volatile struct descriptor *ring = (volatile struct descriptor *)(void *)(a->mem.virt + rings[o]);
		for (uint32_t i = 0; i < RING_SIZE; i++) {
			ring[i].addr = le64(dma_phys(&a->mem, buffers + (size_t)i * BUFFER_SIZE));
			ring[i].meta = 0;
		}
		a->outputs[o].ring = ring;
		a->outputs[o].head = (volatile uint32_t *)(void *)(a->mem.virt + heads[o]);
		*a->outputs[o].head = 0;
		a->outputs[o].tail =
		    device_add_output(outputs[o], dma_phys(&a->mem, rings[o]), RING_SIZE, dma_phys(&a->mem, heads[o]));
	}
	a->shared_ring = a->outputs[0].ring;
	// The device may fill every slot but one: RDT = N - 1 [DS 7.1.9].
	a->receive_tail = device_set_input(input, queue, dma_phys(&a->mem, rings[0]), RING_SIZE, RING_SIZE - 1);
	a->receive_tail_value = RING_SIZE - 1;
	a->processed = 0;
}

void queue_memory_allocate(struct queue_memory *m, size_t pool_size)
{
	size_t end = 0;
	m->rx_ring = layout_place(&end, RING_SIZE * sizeof(struct descriptor), 128);
	m->tx_ring = layout_place(&end, RING_SIZE * sizeof(struct descriptor), 128);
	m->head = layout_place(&end, 64, 64);
	m->buffers = layout_place(&end, BUFFER_SIZE, BUFFER_SIZE);
	m->pool_size = pool_size;
	dma_allocate(&m->block, m->buffers + pool_size * BUFFER_SIZE);
}

void pool_init_at(struct pool *p, const struct dma_block *block, size_t buffers, size_t pool_size)
{
	p->free = calloc(pool_size, sizeof *p->free);
	if (!p->free) {
		die("out of memory");
	}
	for (size_t i = 0; i < pool_size; i++) {
		size_t at = buffers + i * BUFFER_SIZE;
		p->free[i] = (struct buffer){.data = block->virt + at, .phys = dma_phys(block, at), .length = 0};
	}
	p->available = pool_size;
	p->total = pool_size;
}

void pool_init(struct pool *p, const struct queue_memory *m)
{
	pool_init_at(p, &m->block, m->buffers, m->pool_size);
}

void rx_queue_init(struct rx_queue *q, const struct device *d, unsigned queue, const struct queue_memory *m,
                   struct pool *pool)
{
	q->ring = (volatile struct descriptor *)(void *)(m->block.virt + m->rx_ring);
	for (uint32_t i = 0; i < RING_SIZE; i++) {
		if (!pool_take(pool, &q->held[i])) {
			die("a pool of at least %u buffers is needed to fill the RX ring", RING_SIZE);
		}
		q->ring[i].addr = le64(q->held[i].phys);
		q->ring[i].meta = 0;
	}
	q->next = 0;
	q->malformed = 0;
	q->tail = device_set_input(d, queue, dma_phys(&m->block, m->rx_ring), RING_SIZE, RING_SIZE - 1);
}

void tx_queue_init(struct tx_queue *q, const struct device *d, const struct queue_memory *m)
{
	q->ring = (volatile struct descriptor *)(void *)(m->block.virt + m->tx_ring);
	q->head = (volatile uint32_t *)(void *)(m->block.virt + m->head);
	*q->head = 0;
	q->next = 0;
	q->recycled = 0;
	q->tail = device_add_output(d, dma_phys(&m->block, m->tx_ring), RING_SIZE, dma_phys(&m->block, m->head));
}
