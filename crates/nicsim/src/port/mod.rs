//! One 82599ES port: register semantics, receive and transmit queue engines, statistics.
//!
//! The driver reads and writes BAR0 as plain shared memory. nicsim keeps a shadow copy of the
//! register file and [`Port::scan`] compares the two: every difference is a driver write, to
//! which the device reacts (self-clearing bits, resets, queue enables, read-only bits restored).
//! Doorbells (RDT, TDT) of enabled queues are read on every engine iteration instead
//! ([`Port::poll_doorbells`]). What nicsim itself changes (heads, status, counters) it writes to
//! both the BAR and the shadow.
//!
//! Each file holds one `impl Port` block: [`registers`] (driver writes and their effects),
//! [`order`] (the order in which they take effect), [`rx`] (receive, packet buffer),
//! [`rx_run`] (the receive fast path), [`tx`] (both transmit paths) with [`tx_output`] (where
//! sent frames go), [`faults`] (DMA faults), [`hostile`] (faults injected on purpose), [`link`]
//! and [`stats`].

mod eeprom;
mod faults;
mod hostile;
mod link;
mod order;
mod registers;
mod rss;
mod rx;
mod rx_run;
mod sfp;
mod stats;
mod tail_watch;
mod tx;
mod tx_output;
mod virtio_net;

pub use crate::regs::Direction;
pub use faults::{Access, DmaFault};
pub use hostile::HostileWrite;
pub use link::{Link, DEFAULT_LINK_UP, EICR_LSC};
pub use registers::{PRIORITY_REGISTERS, SWEEP_DWORDS};
pub use rss::{toeplitz_by_bits, Classified, Rss, RssType, Toeplitz, RSS_QUEUES, VERIFICATION_KEY};
pub use rx_run::{RxRun, RxRuns, QUEUE_BURST, RX_WRITE_BACK_CHUNK};
pub use stats::{DeviceCounters, Drops, InFlight, QueueSetup, QueueState};
pub use tail_watch::{TailStall, TailStalls, TailStallsDraft, TAIL_STALL_NS};
pub use tx_output::{TxBatch, TxOutput};
pub use virtio_net::VirtioNet;

use crate::dma;
use crate::flow_control::{FlowConfig, FlowControl};
use crate::lint::Lints;
use crate::ownership::{self, ClaimFile};
use crate::pciconfig::PciConfig;
use crate::regs::*;
use crate::wire::WireClock;
use platform::MappedRegion;
use std::collections::VecDeque;

/// See [`Port::first_look_hook`].
pub type FirstLookHook = Box<dyn FnMut(&MappedRegion, usize) + Send>;
use tx::TX_DESCRIPTORS_PER_CALL;

/// Receive descriptor status bits (legacy byte 12 / advanced status_error) [DS 7.1.5, 7.1.6].
const RX_DD: u64 = 1 << 0;
const RX_EOP: u64 = 1 << 1;
/// Transmit command bits in descriptor byte 11 [DS 7.2.3.2.2, 7.2.3.2.4].
const TX_EOP: u8 = 1 << 0;
const TX_IFCS: u8 = 1 << 1;
const TX_RS: u8 = 1 << 3;
const TX_DEXT: u8 = 1 << 5;

/// Where a frame goes without RSS, VT or filters, and under RSS a frame with nothing to hash:
/// queue 0 [DS 7.1.2, 7.1.2.8.1].
const DEFAULT_RX_QUEUE: u32 = 0;

/// One receive queue's state as the device keeps it (its registers are in the BAR).
#[derive(Debug, Clone, Copy, Default)]
struct RxQueue {
    enabled: bool,
    faulted: bool,
    base: u64,
    size: u32,
    head: u32,
    tail: u32,
    advanced: bool,
    buf_size: usize,
    drop_en: bool,
    stat: usize,
    /// Frames dropped for want of a descriptor since start (QPRDC counts per statistics
    /// register, which queues may share).
    dropped: u64,
    /// The ring, resolved at its first use (see [`dma::Ring`]).
    ring: Option<dma::Ring>,
}

/// One transmit queue's state, with the frame it is gathering from several descriptors.
#[derive(Debug, Default)]
struct TxQueue {
    enabled: bool,
    faulted: bool,
    base: u64,
    size: u32,
    head: u32,
    tail: u32,
    head_wb: Option<u64>,
    wthresh: u32,
    frame: Vec<u8>,
    frame_bad: bool,
    stat: usize,
    /// The ring resolved to driver memory at least once since the queue was enabled.
    ring_seen: bool,
    /// The ring, resolved at its first use (see [`dma::Ring`]).
    ring: Option<dma::Ring>,
}

/// The bus address of descriptor `index` of a ring at `base`. Both come from the driver: an
/// address that wraps past 2^64 resolves nowhere and is reported as a DMA fault.
#[inline(always)]
fn descriptor_address(base: u64, index: u32) -> u64 {
    base.wrapping_add(u64::from(index) * 16)
}

/// Descriptors from `head` up to (not including) `tail` in a ring of `size`: what the device
/// owns [DS 7.1.9 receive, 7.2.3.3 transmit].
#[inline(always)]
fn owned_between(head: u32, tail: u32, size: u32) -> u32 {
    if tail >= head {
        tail - head
    } else {
        tail + size - head
    }
}

/// What the per-frame receive and transmit paths need from the registers. Registers change
/// only when [`Port::scan`] applies driver writes (or on reset), so it is derived there, and
/// the per-frame paths read no register.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathConfig {
    /// RXCTRL.RXEN, SECRXCTRL.RX_DIS clear, bus mastering, no master disable.
    pub rx_open: bool,
    /// DMATXCTL.TE, bus mastering, no master disable.
    pub tx_open: bool,
    /// HLREG0.RXCRCSTRP [DS 8.2.3.22.8].
    pub strip_crc: bool,
    /// Longest accepted frame on the wire, FCS included, untagged and VLAN-tagged: MAXFRS.MFS
    /// with HLREG0.JUMBOEN, otherwise 1518 / 1522 [DS 8.2.3.22.13].
    pub max_untagged: usize,
    pub max_tagged: usize,
    /// FCTRL [DS 8.2.3.7.1].
    pub fctrl: u32,
    /// HLREG0.TXCRCEN, TXPADEN, LPBK.
    pub tx_crc: bool,
    pub tx_pad: bool,
    pub loopback: bool,
    /// TXPBSIZE(0) in bytes: how far ahead of the wire frames may be taken [DS 8.2.3.9.13].
    pub tx_packet_buffer: u64,
}

/// A port of the simulated card.
pub struct Port {
    pub index: usize,
    mac: [u8; 6],
    lan_id: u32,
    bar: MappedRegion,
    shadow: Vec<u32>,
    pub config: PciConfig,
    /// The `config` file whose lock claims this function, when it is a file drivers open.
    pub claim_file: Option<ClaimFile>,
    rx: Vec<RxQueue>,
    tx: Vec<TxQueue>,
    /// Per receive queue, when its tail stood still while frames were dropped.
    tail_watch: Vec<tail_watch::TailWatch>,
    /// Enabled queues, in the order they were enabled: the ones the engine polls.
    active_rx: Vec<u32>,
    active_tx: Vec<u32>,
    tx_rr: usize,
    /// The pieces of driver memory the last transmit and receive runs found buffers in.
    tx_windows: dma::KeptWindows,
    rx_windows: dma::KeptWindows,
    /// The arrays of the receive runs, one set per queue RSS can choose (see
    /// [`rx_run::RunRecords`]); boxed, because their kilobytes inline would push the port's
    /// other hot fields apart (docs/nicsim.md).
    rx_records: Box<[rx_run::RunRecords; RSS_QUEUES]>,
    /// RSS as MRQC, RXCSUM, RETA and RSSRK describe it [DS 7.1.2.8].
    rss: Rss,
    /// Where the transmit fast path fetches descriptors: kept between calls, because a fresh
    /// array would be zeroed whole on every call, most of it unused.
    tx_fetched: Box<[u8]>,
    /// The link partner asks us to stop sending (802.3x XOFF), held until released: with
    /// MFLCN.RFCE the transmitter sends nothing and TX rings fill, as behind a paused link.
    pub tx_paused: bool,
    /// 802.3x flow control: XOFF/XON to the link partner, PAUSE frames from it.
    pub flow: FlowControl,
    /// Valid receive addresses (RAL/RAH with AV), as [`mac_key`]s.
    rar: Vec<u64>,
    paths: PathConfig,
    pub counters: DeviceCounters,
    pub drops: Drops,
    pub lint: Lints,
    pub faults: Vec<DmaFault>,
    pub fault_count: u64,
    /// The faults of [`Self::fault_count`] an IOMMU domain reported.
    pub iommu_faults: u64,
    /// `nicsim fault dma`'s accesses so far.
    pub hostile_dma: crate::control::HostileDma,
    fifo: VecDeque<Vec<u8>>,
    fifo_bytes: usize,
    spare: Vec<Vec<u8>>,
    eeprom: [u16; eeprom::WORDS],
    /// EEC's bit-banged interface to the same image, and the SFP+ module on I2CCTL.
    spi: eeprom::SpiEeprom,
    sfp: sfp::Sfp,
    pub tx_wire: WireClock,
    pub resets: u64,
    /// RX and TX queue enables since start.
    pub queue_enables: u64,
    sweep: usize,
    /// Dwords of the BAR each scan looks at besides the priority registers.
    sweep_window: usize,
    /// [`Port::apply_pending_writes`] is under way: writes found are applied, not deferred.
    applying_pending: bool,
    /// The dwords the second look of that pass found changed (kept to reuse its allocation).
    pending: Vec<usize>,
    /// The writes the first of its two looks found, with the values it saw.
    first_look: Vec<(usize, u32)>,
    /// Called with the BAR and each dword the first look finds, before it looks further: tests
    /// write registers there, as a driver on another core would while nicsim looks (a race the
    /// engine's timing makes rare, made certain).
    pub first_look_hook: Option<FirstLookHook>,
    /// Surprise-removed ([`Port::remove`]): BAR0 and configuration space read all-ones and
    /// the port does nothing more.
    pub removed: bool,
    pub link: Link,
    /// Every ring stops until this engine time ([`crate::chaos::Fault::Stall`]).
    stall_until_ps: u64,
    /// The rings are stalled now (see [`Port::update_stall`]).
    stalled: bool,
    /// Register scans since the driver last wrote anything: while a driver programs the
    /// device, and bit-bangs EEC or I2CCTL a bit per microsecond, the engine polls instead of idling.
    scans_since_write: u32,
    /// This port is a virtio-net function: its registers and queues are these, and the
    /// 82599's stay unused ([`virtio_net`]).
    virtio: Option<Box<VirtioNet>>,
}

/// Scans without a driver write (100 µs each) after which a port with nothing enabled is idle.
const QUIET_SCANS: u32 = 500;

/// The MAC address nicsim gives port `n`: locally administered 02:00:00:00:00:0n.
pub fn default_mac(n: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, n as u8]
}

/// A MAC address (the first 6 bytes of `bytes`) as one integer, so that filtering compares
/// words instead of byte slices.
#[inline(always)]
fn mac_key(bytes: &[u8]) -> u64 {
    let mut k = [0u8; 8];
    k[..6].copy_from_slice(&bytes[..6]);
    u64::from_le_bytes(k)
}

const BROADCAST_KEY: u64 = 0xFFFF_FFFF_FFFF;

impl Port {
    /// A port whose registers live in `bar` (BAR0, [`BAR0_LEN`] bytes) and whose PCI
    /// configuration space is `config`. `lan_id` is the PCI function number.
    pub fn new(index: usize, bar: MappedRegion, config: PciConfig, lan_id: u32, gbps: f64) -> Self {
        assert_eq!(bar.len(), BAR0_LEN, "BAR0 must be {BAR0_LEN:#x} bytes");
        let mut p = Port {
            index,
            mac: default_mac(index),
            lan_id,
            bar,
            shadow: vec![0; BAR0_DWORDS],
            config,
            claim_file: None,
            rx: vec![RxQueue::default(); QUEUES],
            tail_watch: vec![tail_watch::TailWatch::default(); QUEUES],
            tx: (0..QUEUES).map(|_| TxQueue::default()).collect(),
            active_rx: Vec::new(),
            active_tx: Vec::new(),
            tx_rr: 0,
            tx_windows: dma::KeptWindows::EMPTY,
            rx_windows: dma::KeptWindows::EMPTY,
            rx_records: Box::new(std::array::from_fn(|_| Default::default())),
            rss: Rss::default(),
            tx_fetched: vec![0; 16 * TX_DESCRIPTORS_PER_CALL].into_boxed_slice(),
            tx_paused: false,
            flow: FlowControl::new(gbps),
            rar: Vec::new(),
            paths: PathConfig::default(),
            counters: DeviceCounters::default(),
            drops: Drops::default(),
            lint: Lints::new(index),
            faults: Vec::new(),
            fault_count: 0,
            iommu_faults: 0,
            hostile_dma: Default::default(),
            fifo: VecDeque::new(),
            fifo_bytes: 0,
            spare: Vec::new(),
            eeprom: eeprom::image(),
            spi: eeprom::SpiEeprom::default(),
            sfp: sfp::Sfp::default(),
            tx_wire: WireClock::new(gbps),
            resets: 0,
            queue_enables: 0,
            sweep: 0,
            sweep_window: SWEEP_DWORDS,
            applying_pending: false,
            pending: Vec::new(),
            first_look: Vec::new(),
            first_look_hook: None,
            removed: false,
            link: Link::new(DEFAULT_LINK_UP),
            stall_until_ps: 0,
            stalled: false,
            scans_since_write: QUIET_SCANS,
            virtio: None,
        };
        p.reset_with_link();
        p.resets = 0;
        p
    }

    /// HLREG0.LPBK: transmitted frames loop back into this port's receive path.
    pub fn loops_back(&self) -> bool {
        self.paths.loopback
    }

    /// The device's mapping of BAR0. A driver in the same process (examples, tests) may
    /// write registers through it as through its own mapping of the file.
    pub fn bar(&self) -> &MappedRegion {
        &self.bar
    }

    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The current value of a register as the device sees it.
    pub fn reg(&self, offset: u32) -> u32 {
        self.shadow[offset as usize / 4]
    }

    /// Device-side write of `answer` over `seen`, which the driver wrote: only if the BAR still
    /// holds `seen`, so that a newer driver write is never lost (it is handled at the next look).
    fn publish_inputs(&mut self, offset: u32, seen: u32, answer: u32) {
        self.shadow[offset as usize / 4] = answer;
        let _ = self.bar.compare_exchange_u32(offset as usize, seen, answer);
    }

    /// Device-side register write (BAR and shadow, and the 82598 alias address if any).
    fn set_reg(&mut self, offset: u32, value: u32) {
        let i = offset as usize / 4;
        self.shadow[i] = value;
        self.bar.write_u32(offset as usize, value);
        if let Some(a) = alias_for(offset) {
            let j = a as usize / 4;
            self.shadow[j] = value;
            self.bar.write_u32(a as usize, value);
        }
    }

    /// Power-on / software reset [DS 4.6.3.2]: every register to its reset
    /// value, queues disabled, statistics zero, MAC reloaded into RAR0, EEPROM auto-read and
    /// DMA init done. Done synchronously, so the reset bits read 0 at once.
    pub fn reset(&mut self) {
        self.resets += 1;
        self.shadow.iter_mut().for_each(|v| *v = 0);
        self.bar.fill(0, BAR0_LEN, 0);
        for (offset, value) in nonzero_reset_values() {
            self.set_reg(offset, value);
        }
        let m = self.mac;
        self.set_reg(ral(0), u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        self.set_reg(rah(0), u32::from(u16::from_le_bytes([m[4], m[5]])) | RAH_AV);
        self.stop_every_queue();
        self.counters = DeviceCounters::default();
        self.rebuild_rar();
        self.update_rss();
        // A software reset leaves the link as it is (Linux and DPDK reset with CTRL.RST while
        // the link is up precisely not to renegotiate it); LINKS and STATUS say so again.
        self.show_link();
        self.refresh_paths();
        if self.virtio.is_some() {
            self.virtio_reset();
        }
    }

    /// Every queue disabled, held frames and flow-control state gone (a reset, a removal).
    fn stop_every_queue(&mut self) {
        self.rx.iter_mut().for_each(|q| *q = RxQueue::default());
        self.tx.iter_mut().for_each(|q| *q = TxQueue::default());
        self.active_rx.clear();
        self.active_tx.clear();
        self.flow.reset();
        self.fifo_clear();
    }

    /// CTRL.LNK_RST: a reset that restarts the link too [DS 8.2.3.1.1]; and power-on.
    pub(super) fn reset_with_link(&mut self) {
        self.reset();
        // Down without an LSC interrupt: EICR has just been reset with everything else.
        self.link.up = false;
        self.restart_link();
    }

    /// Plugs the SFP+ module in (`true`) or leaves the cage empty.
    pub fn set_sfp_module(&mut self, present: bool) {
        self.sfp = if present { sfp::Sfp::default() } else { sfp::Sfp::empty() };
    }

    /// How long link setup takes from now on; restarts it.
    pub fn set_link_setup(&mut self, setup: std::time::Duration) {
        self.link.setup = setup;
        self.restart_link();
    }

    fn update_status(&mut self) {
        let mut s = (self.lan_id & 3) << 2;
        if self.link.up {
            s |= STATUS_LINK_UP;
        }
        if self.config.bus_master() && self.reg(CTRL) & CTRL_GIO_DIS == 0 {
            s |= STATUS_GIO;
        }
        if self.reg(STATUS) != s {
            self.set_reg(STATUS, s);
        }
    }

    fn rebuild_rar(&mut self) {
        self.rar.clear();
        for n in 0..128 {
            let h = self.reg(rah(n));
            if h & RAH_AV != 0 {
                let l = self.reg(ral(n)).to_le_bytes();
                let h = h.to_le_bytes();
                self.rar.push(mac_key(&[l[0], l[1], l[2], l[3], h[0], h[1]]));
            }
        }
    }

    /// Derives [`Rss`] from the registers.
    fn update_rss(&mut self) {
        let shadow = &self.shadow;
        self.rss.update(|offset| shadow[offset as usize / 4]);
    }

    /// Derives [`PathConfig`] from the registers.
    fn refresh_paths(&mut self) {
        let dma_allowed = self.config.bus_master() && self.reg(CTRL) & CTRL_GIO_DIS == 0;
        let hl = self.reg(HLREG0);
        let (max_untagged, max_tagged) = if hl & HLREG0_JUMBOEN != 0 {
            let mfs = (self.reg(MAXFRS) >> 16) as usize;
            (mfs, mfs)
        } else {
            (1518, 1522)
        };
        self.paths = PathConfig {
            rx_open: self.reg(RXCTRL) & RXCTRL_RXEN != 0 && self.reg(SECRXCTRL) & SECRXCTRL_RX_DIS == 0 && dma_allowed,
            tx_open: self.reg(DMATXCTL) & DMATXCTL_TE != 0 && dma_allowed,
            strip_crc: hl & HLREG0_RXCRCSTRP != 0,
            max_untagged,
            max_tagged,
            fctrl: self.reg(FCTRL),
            tx_crc: hl & HLREG0_TXCRCEN != 0,
            tx_pad: hl & HLREG0_TXPADEN != 0,
            loopback: hl & HLREG0_LPBK != 0,
            tx_packet_buffer: u64::from((self.reg(txpbsize(0)) >> 10) & 0x3FF) * 1024,
        };
        let (high, low) = (self.reg(fcrth(0)), self.reg(fcrtl(0)));
        self.flow.config = FlowConfig {
            transmit: self.reg(FCCFG) & FCCFG_TFCE_MASK == FCCFG_TFCE_802_3X && high & FCRTH_FCEN != 0,
            high: (high & FC_THRESHOLD_MASK) as usize,
            low: (low & FC_THRESHOLD_MASK) as usize,
            xon: low & FCRTL_XONE != 0,
            pause_quanta: self.reg(fcttv(0)) as u16,
            refresh_quanta: self.reg(FCRTV) as u16,
            receive: self.reg(MFLCN) & MFLCN_RFCE != 0,
        };
    }

    /// Surprise removal, or the device model going away: as on a card pulled from its slot,
    /// every read of BAR0 and of the configuration space returns all-ones (drivers test for
    /// that, e.g. Linux ixgbe's `ixgbe_check_remove`), and the port receives, transmits and
    /// DMAs nothing more. A driver's write to the shared BAR reads back until the slow path's
    /// sweep restores all-ones ([`Port::scan`], within 2 ms).
    pub fn remove(&mut self) {
        self.virtio_remove();
        self.removed = true;
        self.stop_every_queue();
        self.paths = PathConfig::default();
        self.link.up = false;
        self.link.cable_in = false;
        self.shadow.iter_mut().for_each(|v| *v = u32::MAX);
        self.bar.fill(0, BAR0_LEN, 0xFF);
        self.config.remove();
    }

    /// Lint when more than one owner maps this function's BAR0 (`pids`, nicsim excluded): on
    /// the card one driver owns a function (VFIO device, DPDK lock); two reset and program it
    /// under each other. The processes that share the claim are one owner ([`ownership`]).
    pub fn warn_if_shared(&mut self, pids: &[u32]) {
        let owners = ownership::owners(pids, self.claim_file.as_ref());
        if owners.len() > 1 {
            let list: Vec<String> = owners
                .iter()
                .map(|o| {
                    let pids: Vec<String> = o.iter().map(|p| p.to_string()).collect();
                    if o.len() > 1 {
                        format!("{} (one claim)", pids.join(" and "))
                    } else {
                        pids.concat()
                    }
                })
                .collect();
            let message = format!(
                "BAR0 is mapped by processes {} at once, and one of them just reset the device: two drivers own one function",
                list.join(", ")
            );
            self.lint.warn(CTRL, self.reg(CTRL), crate::lint::Rule::SharedFunction, message);
        }
    }

    /// Whether the engine must poll: a queue enabled, frames buffered, or a driver that wrote a
    /// register in the last [`QUIET_SCANS`] scans. Otherwise it may idle.
    pub fn busy(&self) -> bool {
        if self.virtio.is_some() {
            return self.virtio_busy();
        }
        !self.active_rx.is_empty()
            || !self.active_tx.is_empty()
            || !self.fifo.is_empty()
            || self.scans_since_write < QUIET_SCANS
    }
}
