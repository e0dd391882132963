//! A small reference driver for nicsim's own tests, benchmark and demo (not the product driver).
//!
//! It brings a port up the way the two driver families we follow do, each ordering the
//! datasheet's initialisation [DS 4.6.3] its own way:
//! - [`IxyQueue`]: ixy style — global reset, link setup, advanced descriptors, DD write-back,
//!   RDT = last processed descriptor; a copying driver with one buffer per descriptor.
//! - [`TinyAgent`]: TinyNF style — master disable before reset, legacy descriptors, one ring
//!   shared as RX queue of the input and TX queue of the output, TX head write-back, null
//!   descriptors for dropped packets, RDT = the transmit head.
//!
//! Every access is bounds-checked through `platform`; speed matters less than obviousness.

use crate::regs::*;
use platform::{DmaBacking, DmaMemory, MappedRegion, PciFunction, PlatformError};
use std::path::Path;
use std::time::{Duration, Instant};

/// An opened 82599 function: config space and BAR0.
pub struct Device {
    pub func: PciFunction,
    pub bar: MappedRegion,
}

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    Ok(())
}

impl Device {
    /// Opens `address` under `sysfs`, checks it is an 82599ES, enables memory and bus mastering,
    /// and maps BAR0 without claiming the function, as drivers written elsewhere may (the
    /// shared-function lint is tested with it). nicsim's `resource0` is a plain file.
    pub fn open(sysfs: &Path, address: &str) -> Result<Device, PlatformError> {
        let func = PciFunction::open(sysfs, address)?;
        func.expect_ids(0x8086, 0x10FB, "an Intel 82599ES (8086:10fb)")?;
        func.enable_memory_and_bus_master()?;
        let path = func.dir().join("resource0");
        let mapped = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .and_then(|f| MappedRegion::map_file(&f, 0, BAR0_LEN, false))
            .map_err(|e| PlatformError::Io { context: format!("mapping {}", path.display()), source: e })?;
        Ok(Device { func, bar: mapped })
    }

    pub fn read(&self, reg: u32) -> u32 {
        self.bar.read_u32(reg as usize)
    }
    pub fn write(&self, reg: u32, v: u32) {
        self.bar.write_u32(reg as usize, v)
    }
    pub fn set(&self, reg: u32, bits: u32) {
        self.write(reg, self.read(reg) | bits)
    }
    pub fn clear(&self, reg: u32, bits: u32) {
        self.write(reg, self.read(reg) & !bits)
    }
    fn wait(&self, reg: u32, mask: u32, want: u32) -> Result<(), String> {
        wait_until(&format!("{} & {mask:#x} == {want:#x}", name_of(reg)), Duration::from_secs(2), || {
            self.read(reg) & mask == want
        })
    }

    /// Global reset and general configuration, ixy style [DS 4.6.3].
    pub fn init_ixy(&self) -> Result<(), String> {
        self.write(EIMC, 0x7FFF_FFFF); // [DS 4.6.3.1]
        self.write(CTRL, CTRL_RST | CTRL_LNK_RST); // [DS 4.6.3.2]
        self.wait(CTRL, CTRL_RST | CTRL_LNK_RST, 0)?;
        std::thread::sleep(Duration::from_millis(10));
        self.write(EIMC, 0x7FFF_FFFF);
        self.wait(EEC, 1 << 9, 1 << 9)?; // EEPROM auto-read done [DS 4.6.3]
        self.wait(RDRXCTL, RDRXCTL_DMAIDONE, RDRXCTL_DMAIDONE)?;
        // Link: 10G serial, restart autonegotiation [DS 4.6.4].
        self.write(AUTOC, (self.read(AUTOC) & !(0x7 << 13)) | (0x3 << 13));
        self.write(AUTOC, self.read(AUTOC) & !(0x3 << 7));
        self.set(AUTOC, AUTOC_AN_RESTART);
        for r in [GPRC, GPTC, GORCL, GORCH, GOTCL, GOTCH] {
            self.read(r); // [DS 4.6.5]
        }
        self.clear(RXCTRL, RXCTRL_RXEN); // [DS 4.6.7]
        self.write(rxpbsize(0), 0x20000); // 128 KB
        for n in 1..8 {
            self.write(rxpbsize(n), 0);
        }
        self.set(HLREG0, HLREG0_RXCRCSTRP);
        self.set(RDRXCTL, RDRXCTL_CRCSTRIP);
        self.set(FCTRL, FCTRL_BAM | FCTRL_MPE | FCTRL_UPE);
        self.set(HLREG0, HLREG0_TXCRCEN | HLREG0_TXPADEN); // [DS 4.6.8]
        self.write(txpbsize(0), 0xA000); // 40 KB
        for n in 1..8 {
            self.write(txpbsize(n), 0);
        }
        self.write(DTXMXSZRQ, 0xFFF);
        self.clear(RTTDCS, 1 << 6);
        self.set(CTRL_EXT, 1 << 16); // NS_DIS
        self.set(DMATXCTL, DMATXCTL_TE);
        wait_until("link up", Duration::from_secs(10), || self.read(LINKS) & (1 << 30) != 0)
    }

    /// Disables every enabled RX and TX queue and waits until the device confirms.
    pub fn stop_queues(&self) -> Result<(), String> {
        for q in 0..QUEUES as u32 {
            for control in [rxdctl(q), txdctl(q)] {
                if self.read(control) & RXDCTL_ENABLE != 0 {
                    self.clear(control, RXDCTL_ENABLE); // the same bit as TXDCTL.ENABLE
                    self.wait(control, RXDCTL_ENABLE, 0)?;
                }
            }
        }
        Ok(())
    }

    /// Master disable, reset and global configuration, TinyNF style [DS 4.6.3].
    pub fn init_tinynf(&self) -> Result<(), String> {
        for q in 0..QUEUES as u32 {
            self.clear(rxdctl(q), RXDCTL_ENABLE);
            self.wait(rxdctl(q), RXDCTL_ENABLE, 0)?;
        }
        std::thread::sleep(Duration::from_micros(100));
        self.set(CTRL, CTRL_GIO_DIS); // [DS 5.2.5.3.2]
        self.wait(STATUS, STATUS_GIO, 0)?;
        self.set(CTRL, CTRL_RST); // [DS 4.2.1.6.1]
        std::thread::sleep(Duration::from_millis(11));
        self.write(EIMC, 0x7FFF_FFFF);
        self.write(eimc_ex(0), 0xFFFF_FFFF);
        self.write(eimc_ex(1), 0xFFFF_FFFF);
        self.write(fcrth(0), ((512 * 1024 - 0x6000) / 32) << 5); // RTH
        self.wait(EEC, 1 << 9, 1 << 9)?;
        if self.read(EEC) & (1 << 8) == 0 || self.read(FWSM) & (0x3F << 19) != 0 {
            return Err("EEPROM absent or invalid".into());
        }
        self.wait(RDRXCTL, RDRXCTL_DMAIDONE, RDRXCTL_DMAIDONE)?;
        for n in 0..128 {
            self.write(pfuta(n), 0);
            self.write(pfvlvfb(n), 0);
            self.write(mta(n), 0);
            self.clear(ftqf(n), 1 << 31);
        }
        for n in 0..64 {
            self.write(pfvlvf(n), 0);
        }
        for n in 0..256 {
            self.write(mpsar(n), u32::from(n == 0));
        }
        self.write(RDRXCTL, (self.read(RDRXCTL) | RDRXCTL_CRCSTRIP | (1 << 25) | (1 << 26)) & !(0x1F << 17));
        for n in 1..8 {
            self.write(rxpbsize(n), 0); // [DS 4.6.11.3.4]
        }
        self.set(MFLCN, MFLCN_RFCE);
        self.write(FCCFG, (self.read(FCCFG) & !FCCFG_TFCE_MASK) | FCCFG_TFCE_802_3X);
        for q in 0..128 {
            self.write(RTTDQSEL, q);
            self.write(RTTDT1C, 0);
        }
        self.set(RTTDCS, 1 << 6);
        for n in 1..8 {
            self.write(txpbsize(n), 0);
        }
        self.write(TXPBTHRESH0, (self.read(TXPBTHRESH0) & !0x3FF) | (0xA0 - 2));
        self.write(DTXMXSZRQ, 0xFFF);
        self.clear(RTTDCS, 1 << 6);
        // Promiscuous, with receive disabled around the change [DS 8.2.3.7.1].
        let rxen = self.read(RXCTRL) & RXCTRL_RXEN;
        self.clear(RXCTRL, RXCTRL_RXEN);
        self.set(FCTRL, FCTRL_UPE | FCTRL_MPE);
        self.set(RXCTRL, rxen);
        Ok(())
    }

    /// Turns on 802.3x flow control [DS 3.7.7, 8.2.3.3]: XOFF when packet buffer 0 is within
    /// 24 KiB of full, XON below half of it, a pause of 0x680 quanta refreshed at half that.
    /// Call it before setting up queues: with it, receive queues hold frames in the packet
    /// buffer (no SRRCTL.DROP_EN) instead of dropping them.
    pub fn enable_flow_control(&self) {
        let buffer = (self.read(rxpbsize(0)) >> 10 & 0x3FF) * 1024;
        let high = buffer - 0x6000;
        self.write(fcrtl(0), (high / 2) & FC_THRESHOLD_MASK | FCRTL_XONE);
        self.write(fcrth(0), high & FC_THRESHOLD_MASK | FCRTH_FCEN);
        self.write(fcttv(0), 0x680);
        self.write(FCRTV, 0x680 / 2);
        self.set(MFLCN, MFLCN_RFCE);
        self.write(FCCFG, (self.read(FCCFG) & !FCCFG_TFCE_MASK) | FCCFG_TFCE_802_3X);
    }

    /// Whether [`Self::enable_flow_control`] is in effect: frames then wait rather than drop.
    fn flow_control(&self) -> bool {
        self.read(fcrth(0)) & FCRTH_FCEN != 0
    }

    /// Enables the receive path once queue 0 is set up [DS 4.6.7].
    fn start_receive(&self) -> Result<(), String> {
        self.set(SECRXCTRL, SECRXCTRL_RX_DIS);
        self.wait(SECRXSTAT, 1, 1)?;
        self.set(RXCTRL, RXCTRL_RXEN);
        self.clear(SECRXCTRL, SECRXCTRL_RX_DIS);
        Ok(())
    }
}

/// Buffer size per descriptor.
pub const BUF: usize = 2048;

/// An ixy-style RX + TX queue pair (queue 0) with one 2 KiB buffer per descriptor.
pub struct IxyQueue {
    pub mem: DmaMemory,
    pub n: u32,
    rx_ring: usize,
    tx_ring: usize,
    rx_bufs: usize,
    tx_bufs: usize,
    rx_next: u32,
    tx_next: u32,
    tx_clean: u32,
}

impl IxyQueue {
    /// Sets up RX and TX queue 0 of `dev` (already through [`Device::init_ixy`]) with `n`
    /// descriptors each, and enables them [DS 4.6.7, 4.6.8].
    pub fn new(dev: &Device, n: u32, backing: DmaBacking) -> Result<IxyQueue, String> {
        let ring = n as usize * 16;
        let (rx_ring, tx_ring) = (0, ring.next_multiple_of(4096));
        let rx_bufs = (tx_ring + ring).next_multiple_of(4096);
        let tx_bufs = rx_bufs + n as usize * BUF;
        let mem = DmaMemory::allocate(tx_bufs + n as usize * BUF, backing).map_err(|e| e.to_string())?;
        let m = mem.region();
        m.fill(0, tx_bufs, 0xFF); // premature DMA would see invalid addresses [ixy, Snabb]
        let phys = |o| mem.phys(o);
        // RX queue 0.
        dev.write(
            srrctl(0),
            (dev.read(srrctl(0)) & !SRRCTL_DESCTYPE_MASK) | (1 << SRRCTL_DESCTYPE_SHIFT) | SRRCTL_DROP_EN,
        );
        dev.write(rdbal(0), phys(rx_ring) as u32);
        dev.write(rdbah(0), (phys(rx_ring) >> 32) as u32);
        dev.write(rdlen(0), ring as u32);
        dev.write(rdh(0), 0);
        dev.write(rdt(0), 0);
        dev.clear(dca_rxctrl(0), 1 << 12);
        for i in 0..n as usize {
            m.write_u64(rx_ring + i * 16, phys(rx_bufs + i * BUF));
            m.write_u64(rx_ring + i * 16 + 8, 0);
        }
        // TX queue 0: thresholds as ixy (PTHRESH 36, HTHRESH 8, WTHRESH 4).
        dev.write(tdbal(0), phys(tx_ring) as u32);
        dev.write(tdbah(0), (phys(tx_ring) >> 32) as u32);
        dev.write(tdlen(0), ring as u32);
        dev.write(txdctl(0), (dev.read(txdctl(0)) & !0x7F7F7F) | 36 | (8 << 8) | (4 << 16));
        dev.set(rxdctl(0), RXDCTL_ENABLE);
        dev.wait(rxdctl(0), RXDCTL_ENABLE, RXDCTL_ENABLE)?;
        dev.write(rdh(0), 0);
        dev.write(rdt(0), n - 1);
        dev.start_receive()?;
        dev.write(tdh(0), 0);
        dev.write(tdt(0), 0);
        dev.set(txdctl(0), TXDCTL_ENABLE);
        dev.wait(txdctl(0), TXDCTL_ENABLE, TXDCTL_ENABLE)?;
        Ok(IxyQueue { mem, n, rx_ring, tx_ring, rx_bufs, tx_bufs, rx_next: 0, tx_next: 0, tx_clean: 0 })
    }

    /// Receives up to `max` frames, calling `f(frame, qword0_after_writeback)`; re-arms each
    /// descriptor and hands them back (RDT = last processed).
    pub fn rx(&mut self, dev: &Device, max: usize, mut f: impl FnMut(&[u8], u64)) -> Result<usize, String> {
        let m = self.mem.region();
        let mut got = 0;
        let mut buf = [0u8; BUF];
        while got < max {
            let d = self.rx_ring + self.rx_next as usize * 16;
            let status = m.read_u64(d + 8);
            if status & 1 == 0 {
                break;
            }
            if status & 2 == 0 {
                return Err(format!("descriptor {} without EOP: frame larger than one buffer", self.rx_next));
            }
            let len = (status >> 32) as usize & 0xFFFF;
            if len > BUF {
                return Err(format!("write-back length {len} exceeds the buffer"));
            }
            let qword0 = m.read_u64(d);
            m.read_bytes(self.rx_bufs + self.rx_next as usize * BUF, &mut buf[..len]);
            f(&buf[..len], qword0);
            m.write_u64(d, self.mem.phys(self.rx_bufs + self.rx_next as usize * BUF));
            m.write_u64(d + 8, 0);
            let last = self.rx_next;
            self.rx_next = (self.rx_next + 1) % self.n;
            got += 1;
            if got == max || m.read_u64(self.rx_ring + self.rx_next as usize * 16 + 8) & 1 == 0 {
                dev.write(rdt(0), last);
            }
        }
        Ok(got)
    }

    /// Reclaims transmitted descriptors (DD write-back) and returns how many are free.
    pub fn tx_clean(&mut self) -> u32 {
        let m = self.mem.region();
        while self.tx_clean != self.tx_next {
            let d = self.tx_ring + self.tx_clean as usize * 16;
            if m.read_u32(d + 12) & 1 == 0 {
                break;
            }
            self.tx_clean = (self.tx_clean + 1) % self.n;
        }
        self.n - 1 - (self.tx_next + self.n - self.tx_clean) % self.n
    }

    /// Queues one frame (advanced data descriptor, EOP|IFCS|RS); false if the ring is full.
    pub fn tx(&mut self, dev: &Device, frame: &[u8]) -> bool {
        if frame.len() > BUF || self.tx_clean() == 0 {
            return false;
        }
        let m = self.mem.region();
        let i = self.tx_next as usize;
        m.write_bytes(self.tx_bufs + i * BUF, frame);
        let d = self.tx_ring + i * 16;
        m.write_u64(d, self.mem.phys(self.tx_bufs + i * BUF));
        // cmd_type_len: EOP | IFCS | RS | DEXT | DTYP data | length; olinfo: PAYLEN [DS 7.2.3.2.4].
        let cmd_type_len = 0x2B30_0000u64 | frame.len() as u64;
        m.write_u64(d + 8, cmd_type_len | ((frame.len() as u64) << 46));
        self.tx_next = (self.tx_next + 1) % self.n;
        dev.write(tdt(0), self.tx_next);
        true
    }

    /// Physical address of the RX ring (for tests that corrupt descriptors).
    pub fn rx_descriptor(&self, i: u32) -> usize {
        self.rx_ring + i as usize * 16
    }

    /// Offset of TX descriptor `i` in [`IxyQueue::mem`].
    pub fn tx_descriptor(&self, i: u32) -> usize {
        self.tx_ring + i as usize * 16
    }

    pub fn tx_next(&self) -> u32 {
        self.tx_next
    }
}

/// Ring size of the TinyNF agent (a power of two; TinyNF uses 256).
pub const TINY_RING: u32 = 256;
const FLUSH_PERIOD: u32 = 8;
/// Idle polls after which a [`TinyAgent`] recycles transmitted slots although it reached no
/// RS point.
const IDLE_POLLS_BEFORE_RECYCLE: u32 = 64;
const RECYCLE_PERIOD: u32 = 64;

/// How a [`TinyAgent`] lays out its ring and gives transmitted slots back to the receive side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TinyStyle {
    /// Ring base 128-byte aligned; RDT = written-back head − 1 at RS points and after idle
    /// polls, which also copes with a device that writes back a late head.
    Guarded,
    /// What a driver written from the datasheet alone may do: a ring base only 64-byte
    /// aligned, RDT = the written-back head, read only at RS points. It stalls unless the
    /// head written back is the index after the RS descriptor [DS 7.2.3.5.2] and every tail
    /// write is seen before the driver laps the ring.
    Strict,
}

/// A TinyNF-style agent: the input's RX queue 0 and a TX queue of the output share one ring.
pub struct TinyAgent {
    style: TinyStyle,
    pub mem: DmaMemory,
    ring: usize,
    bufs: usize,
    head: usize,
    processed: u32,
    output_queue: u32,
    /// The last value written to RDT.
    rdt: u32,
    /// Idle polls since the last recycle.
    idle_polls: u32,
}

impl TinyAgent {
    /// Sets up the shared ring: TX queue on `output` (the first disabled one), RX queue 0 on
    /// `input` [DS 4.6.7, 4.6.8]. Both devices must be through [`Device::init_tinynf`].
    pub fn new(input: &Device, output: &Device) -> Result<TinyAgent, String> {
        Self::with_style(input, output, TinyStyle::Guarded)
    }

    /// [`Self::new`] in the given style.
    pub fn with_style(input: &Device, output: &Device, style: TinyStyle) -> Result<TinyAgent, String> {
        let ring_bytes = TINY_RING as usize * 16;
        let mem = DmaMemory::allocate(ring_bytes + 128 + TINY_RING as usize * BUF, DmaBacking::AnonymousHugetlb)
            .map_err(|e| e.to_string())?;
        let ring = if style == TinyStyle::Strict { 64 } else { 0 };
        let (head, bufs) = (ring + ring_bytes, ring + ring_bytes + 64);
        let m = mem.region();
        for i in 0..TINY_RING as usize {
            m.write_u64(ring + i * 16, mem.phys(bufs + i * BUF)); // written once, never again
            m.write_u64(ring + i * 16 + 8, 0);
        }
        m.write_u32(head, 0);
        // add_output: first TX queue whose ENABLE reads 0.
        let q = (0..QUEUES as u32).find(|&q| output.read(txdctl(q)) & TXDCTL_ENABLE == 0).ok_or("no free TX queue")?;
        output.write(tdbah(q), (mem.phys(ring) >> 32) as u32);
        output.write(tdbal(q), mem.phys(ring) as u32);
        output.write(tdlen(q), ring_bytes as u32);
        output.write(txdctl(q), (output.read(txdctl(q)) & !0x7F7F) | 60 | (4 << 8));
        output.write(tdwbah(q), (mem.phys(head) >> 32) as u32);
        output.write(tdwbal(q), mem.phys(head) as u32 | TDWBAL_HEAD_WB_EN);
        output.clear(dca_txctrl(q), 1 << 11);
        output.set(DMATXCTL, DMATXCTL_TE);
        output.set(txdctl(q), TXDCTL_ENABLE);
        output.wait(txdctl(q), TXDCTL_ENABLE, TXDCTL_ENABLE)?;
        // set_input: RX queue 0.
        if input.read(rxdctl(0)) & RXDCTL_ENABLE != 0 {
            return Err("RX queue 0 is already in use".into());
        }
        input.write(rdbah(0), (mem.phys(ring) >> 32) as u32);
        input.write(rdbal(0), mem.phys(ring) as u32);
        input.write(rdlen(0), ring_bytes as u32);
        // Drop when no descriptor is free, unless flow control makes frames wait instead.
        let drop_en = if input.flow_control() { 0 } else { SRRCTL_DROP_EN };
        input.write(srrctl(0), (input.read(srrctl(0)) & !SRRCTL_BSIZEPACKET_MASK) | (BUF / 1024) as u32 | drop_en);
        input.set(rxdctl(0), RXDCTL_ENABLE);
        input.wait(rxdctl(0), RXDCTL_ENABLE, RXDCTL_ENABLE)?;
        input.write(rdt(0), TINY_RING - 1);
        if input.read(RXCTRL) & RXCTRL_RXEN == 0 {
            input.start_receive()?;
            input.set(CTRL_EXT, 1 << 16);
        }
        input.clear(dca_rxctrl(0), 1 << 12);
        Ok(TinyAgent { style, mem, ring, bufs, head, processed: 0, output_queue: q, rdt: TINY_RING - 1, idle_polls: 0 })
    }

    /// The TX head last written back by the device.
    pub fn head(&self) -> u32 {
        self.mem.region().read_u32(self.head)
    }

    /// Gives the receive side the slots the device has sent: RDT = the TX head written back
    /// at `head` in `m` (guarded: minus one, so that RDT never equals RDH [DS 7.1.9]), written
    /// only when it changes (`last` is the last value written).
    fn recycle(m: &MappedRegion, head: usize, last: &mut u32, input: &Device, style: TinyStyle) {
        let behind = if style == TinyStyle::Strict { 0 } else { 1 };
        let tail = (m.read_u32(head) % TINY_RING + TINY_RING - behind) % TINY_RING;
        if tail != *last {
            input.write(rdt(0), tail);
            *last = tail;
        }
    }

    /// Processes up to [`FLUSH_PERIOD`] packets: `handler(header, len)` may rewrite the first
    /// bytes of the frame (up to 64) and returns the length to send (0 = drop, sent as a null
    /// descriptor). Returns how many packets were processed.
    pub fn run_once(
        &mut self,
        input: &Device,
        output: &Device,
        mut handler: impl FnMut(&mut [u8], usize) -> usize,
    ) -> u32 {
        let m = self.mem.region();
        let mut n = 0;
        let mut header = [0u8; 64];
        while n < FLUSH_PERIOD {
            let d = self.ring + self.processed as usize * 16;
            let meta = m.read_u64(d + 8);
            if meta & (1 << 32) == 0 {
                if n == 0 && self.style == TinyStyle::Guarded {
                    // Idle: the receive side may be waiting for slots the device sent after
                    // the last RS point. Recycling only at RS points would never give them
                    // back once the transmit head lagged by more than a recycle period, and
                    // both sides would wait forever (the product agent guards the same way).
                    // Not at every idle poll: reading the head the device keeps writing
                    // would move its line between the cores for nothing.
                    self.idle_polls += 1;
                    if self.idle_polls >= IDLE_POLLS_BEFORE_RECYCLE {
                        self.idle_polls = 0;
                        Self::recycle(m, self.head, &mut self.rdt, input, self.style);
                    }
                }
                break;
            }
            // Device-written length: bounded by the buffer before any use.
            let len = ((meta & 0xFFFF) as usize).min(BUF);
            let b = self.bufs + self.processed as usize * BUF;
            let h = len.min(header.len());
            m.read_bytes(b, &mut header[..h]);
            let out = handler(&mut header[..h], len).min(BUF);
            m.write_bytes(b, &header[..h]);
            let rs = if self.processed % RECYCLE_PERIOD == RECYCLE_PERIOD - 1 { 1u64 << 27 } else { 0 };
            // len | EOP | IFCS (| RS); DD (bit 32) cleared, which also clears the RX DD.
            m.write_u64(d + 8, out as u64 | (1 << 24) | (1 << 25) | rs);
            if rs != 0 {
                Self::recycle(m, self.head, &mut self.rdt, input, self.style);
            }
            self.processed = (self.processed + 1) % TINY_RING;
            n += 1;
        }
        if n > 0 {
            output.write(tdt(self.output_queue), self.processed);
        }
        n
    }
}

/// Rewrites MAC addresses as the paper's forwarder does: destination 00:00:00:00:00:01,
/// source 00:00:00:00:00:00.
pub fn rewrite_macs(frame: &mut [u8]) {
    if frame.len() >= 12 {
        frame[0..12].copy_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    }
}

/// Forwards in both directions between two ports with two TinyNF agents until `stop` returns
/// true; returns the number of packets forwarded.
pub fn reflect(sysfs: &Path, a: &str, b: &str, mut stop: impl FnMut(u64) -> bool) -> Result<u64, String> {
    let da = Device::open(sysfs, a).map_err(|e| e.to_string())?;
    let db = Device::open(sysfs, b).map_err(|e| e.to_string())?;
    da.init_tinynf()?;
    db.init_tinynf()?;
    let mut ab = TinyAgent::new(&da, &db)?;
    let mut ba = TinyAgent::new(&db, &da)?;
    let mut total = 0u64;
    let mut iterations = 0u64;
    loop {
        let n = ab.run_once(&da, &db, |f, l| {
            rewrite_macs(f);
            l
        }) + ba.run_once(&db, &da, |f, l| {
            rewrite_macs(f);
            l
        });
        total += u64::from(n);
        iterations += 1;
        if iterations % 4096 == 0 && stop(total) {
            // The queues stop before the agents' memory goes [DS 4.6.7.1.2, 4.6.8].
            for d in [&da, &db] {
                d.stop_queues()?;
            }
            return Ok(total);
        }
    }
}
