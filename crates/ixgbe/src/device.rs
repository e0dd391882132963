//! Opening an 82599 function and bringing it up [DS 4.6.3].

use crate::regs::*;
use invariants::{ConstIndex, RingIndex};
use platform::dma::HeadSlot;
use platform::i82599::{EnabledQueue, Function, LegacyRing, Registers, RxQueueIndex, TxQueueIndex};
use platform::PlatformError;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

/// What can go wrong while opening or initialising a device. `Display` is one line that says
/// what to do.
#[derive(Debug)]
pub enum DriverError {
    /// The OS boundary (not root, no hugepages, device not found, wrong device, bound driver).
    Platform(PlatformError),
    /// The device did not reach a state in time.
    Timeout { address: String, what: &'static str },
    /// The EEPROM is absent or reports an error [DS 4.6.3].
    Eeprom { address: String },
    /// A resource of the device is exhausted (e.g. every TX queue in use).
    Exhausted { address: String, what: &'static str },
    /// A request the driver cannot honour.
    Invalid(String),
    /// Registers read all-ones: the device was removed, reset by someone else, or (under
    /// nicsim) the simulator stopped.
    Gone { address: String },
    /// The device was reset under the running driver: its receive queue is disabled.
    Reset { address: String },
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::Platform(e) => e.fmt(f),
            DriverError::Timeout { address, what } => write!(
                f,
                "{address}: timed out waiting for {what}: check the cable and that no other program drives this port"
            ),
            DriverError::Eeprom { address } => {
                write!(
                    f,
                    "{address}: the EEPROM is missing or invalid: this port cannot be used without firmware repair"
                )
            }
            DriverError::Exhausted { address, what } => write!(f, "{address}: no {what} left: use fewer outputs"),
            DriverError::Invalid(what) => f.write_str(what),
            DriverError::Gone { address } => write!(
                f,
                "{address}: the device is gone (its registers read all-ones): it was removed, or nicsim stopped; start the driver again once it is back"
            ),
            DriverError::Reset { address } => write!(
                f,
                "{address}: the device was reset under the driver (its receive queue is no longer enabled): its rings are lost; start the driver again"
            ),
        }
    }
}

impl std::error::Error for DriverError {}

impl From<PlatformError> for DriverError {
    fn from(e: PlatformError) -> Self {
        DriverError::Platform(e)
    }
}

/// An opened 82599 function: the trusted base's [`Function`], which owns the claim and the BAR0
/// mapping and hands out neither. Registers are written only through [`Device`], whose public
/// writes are the allowlist of [`Device::write_register`].
///
/// ```compile_fail,E0616
/// fn reach_the_bar(port: &ixgbe::Port) {
///     let _ = &port.function;
/// }
/// ```
pub struct Port {
    function: Function,
}

impl Port {
    /// Opens `address` under the sysfs root `sysfs` ([`Function::open`]): an 82599ES
    /// (8086:10fb) no kernel driver holds (never unbinds it), claimed (refused while another
    /// process owns it), with memory space and bus mastering enabled and BAR0 mapped. A real
    /// device opens only if the program was started with its address on the command line:
    /// `platform` opened it then, before `main` (`platform::before_main`).
    pub fn open(sysfs: &Path, address: &str) -> Result<Port, DriverError> {
        Ok(Port { function: Function::open(sysfs, address)? })
    }

    /// The PCI address, normalised (`0000:5e:00.0`).
    pub fn address(&self) -> &str {
        self.function.address()
    }

    /// The device's registers, for as long as the port is borrowed.
    pub fn device(&self) -> Device<'_> {
        Device { regs: self.function.registers() }
    }
}

/// Register access to one 82599, valid while its [`Port`] is borrowed.
#[derive(Clone, Copy)]
pub struct Device<'a> {
    regs: Registers<'a>,
}

/// RX queues RSS spreads frames over without VT or DCB: a redirection-table entry has 4 bits
/// [DS 7.1.2.8.1].
pub const RSS_QUEUES: usize = 16;
/// An RX queue RSS can choose.
pub type RssQueue = ConstIndex<RSS_QUEUES>;

/// How many RX queues RSS spreads over: 1 to [`RSS_QUEUES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RssQueues(usize);

impl RssQueues {
    /// `n` queues, if 1 ≤ n ≤ [`RSS_QUEUES`].
    pub fn new(n: usize) -> Option<Self> {
        (1..=RSS_QUEUES).contains(&n).then_some(RssQueues(n))
    }
    pub fn get(self) -> usize {
        self.0
    }
    /// The queues `0..n`.
    pub fn all(self) -> impl Iterator<Item = RssQueue> {
        RssQueue::all().take(self.0)
    }
}

/// The RSS key [`Device::enable_rss`] programs: the datasheet's and Microsoft's verification
/// key [DS 7.1.2.8.3], DPDK's default too, so that a test can predict every queue.
pub const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

/// Bytes of packet buffer 0 kept free above the XOFF mark: what arrives before the partner
/// stops (TinyNF's and the datasheet's 0x6000 [DS 4.6.11.3.4]).
pub const FLOW_CONTROL_HEADROOM: u32 = 0x6000;
/// What every register of a removed device reads.
const ALL_ONES: u32 = u32::MAX;
/// Pause time sent in XOFF frames, in quanta of 512 bit times (85 µs at 10 Gb/s; DPDK's default).
pub const FLOW_CONTROL_PAUSE: u16 = 0x680;

/// Counters read from the device [DS 8.2.3.23].
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_missed: u64,
}

impl<'a> Device<'a> {
    /// The PCI address.
    pub fn address(&self) -> &'a str {
        self.regs.address()
    }

    pub fn read(&self, r: Reg) -> u32 {
        self.regs.read(r)
    }

    /// Writes a register for safe code outside this crate: only those of
    /// [`APPLICATION_WRITABLE`] (interrupt masks, receive filters, flow control, LEDs,
    /// statistics mapping), none of which can make the device read or write memory, nor undo
    /// this crate's set-up. Ring addresses, lengths, buffer sizes, heads, tails and enables
    /// only the trusted base writes (`platform::i82599`), from memory given to a queue.
    ///
    /// The crate's own writes do not compile elsewhere:
    ///
    /// ```compile_fail,E0624
    /// fn point_the_device_anywhere(d: &ixgbe::Device<'_>) {
    ///     d.write(ixgbe::regs::rdbal(ixgbe::regs::QueueIndex::new(0)), 0x1000);
    /// }
    /// ```
    pub fn write_register(&self, r: Reg, v: u32) -> Result<(), DriverError> {
        if !is_application_writable(r) {
            return Err(DriverError::Invalid(format!(
                "register {:#07x} is not one an application may write (it can make the device reach memory, or \
                 reset it): give the device memory through the queue API (RxQueue, TxQueue, Agent); the registers \
                 open to applications are ixgbe::regs::APPLICATION_WRITABLE",
                r.get() * 4
            )));
        }
        self.write(r, v)
    }

    pub(crate) fn write(&self, r: Reg, v: u32) -> Result<(), DriverError> {
        Ok(self.regs.write(r, v)?)
    }
    pub(crate) fn set(&self, r: Reg, bits: u32) -> Result<(), DriverError> {
        self.write(r, self.read(r) | bits)
    }
    pub(crate) fn clear(&self, r: Reg, bits: u32) -> Result<(), DriverError> {
        self.write(r, self.read(r) & !bits)
    }

    /// Waits until `r & mask == want`, polling, for at most `timeout`.
    pub fn wait(&self, r: Reg, mask: u32, want: u32, what: &'static str, timeout: Duration) -> Result<(), DriverError> {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.read(r);
            if value == ALL_ONES && !self.present() {
                return Err(self.gone());
            }
            if value & mask == want {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(DriverError::Timeout { address: self.address().to_string(), what });
            }
            std::thread::sleep(Duration::from_micros(10));
        }
    }

    /// Whether the device still answers: STATUS never reads all-ones from a present 82599
    /// (its reserved bits read 0 [DS 8.2.3.1.2]); a removed device returns all-ones for
    /// every read, as Linux's `ixgbe_check_remove` tests. One register read: for slow paths.
    pub fn present(&self) -> bool {
        self.read(STATUS) != ALL_ONES
    }

    /// The error of a device that is no longer [`present`](Self::present).
    pub fn gone(&self) -> DriverError {
        DriverError::Gone { address: self.address().to_string() }
    }

    /// While a driver runs: [`DriverError::Gone`] if the device no longer answers, and
    /// [`DriverError::Reset`] if its receive queue is disabled, which only a reset the driver
    /// did not ask for does (a function-level reset, another process). Two register reads:
    /// for slow paths.
    pub fn check_running(&self) -> Result<(), DriverError> {
        if !self.present() {
            return Err(self.gone());
        }
        if self.read(rxdctl(QueueIndex::new(0))) & RXDCTL_ENABLE == 0 {
            return Err(DriverError::Reset { address: self.address().to_string() });
        }
        Ok(())
    }

    /// The datasheet initialisation [DS 4.6.3], as TinyNF does it: disable queues, master
    /// disable, reset, wait for EEPROM and DMA init, clear filters, DCB and VT off, TX global
    /// settings; then promiscuous mode [DS 8.2.3.7.1].
    pub fn init(&self) -> Result<(), DriverError> {
        let second = Duration::from_secs(1);
        // Stop receive queues before master disable [DS 4.6.7.1.2].
        for q in QueueIndex::all() {
            self.clear(rxdctl(q), RXDCTL_ENABLE)?;
            self.wait(rxdctl(q), RXDCTL_ENABLE, 0, "RXDCTL.ENABLE to clear", second)?;
        }
        std::thread::sleep(Duration::from_micros(100));
        // Master disable, then wait for outstanding requests [DS 5.2.5.3.2].
        self.set(CTRL, CTRL_MASTER_DISABLE)?;
        self.wait(STATUS, STATUS_MASTER_ENABLE, 0, "STATUS.PCIe master enable to clear", second)?;
        // Software reset [DS 4.2.1.6.1]; wait at least 1 ms, then 10 ms more [DS 4.6.3.2].
        self.set(CTRL, CTRL_RST)?;
        self.wait(CTRL, CTRL_RST, 0, "CTRL.RST to clear", second)?;
        std::thread::sleep(Duration::from_millis(10));
        // Interrupts off [DS 4.6.3.1].
        self.write(EIMC, 0x7FFF_FFFF)?;
        self.write(eimc_ex(0), 0xFFFF_FFFF)?;
        self.write(eimc_ex(1), 0xFFFF_FFFF)?;
        // Flow-control high water mark so it can be enabled [DS 4.6.11.3.4].
        self.write(FCRTH0, ((512 * 1024 - 0x6000) / 32) << 5)?;
        // EEPROM auto-read done and valid [DS 4.6.3].
        self.wait(EEC, EEC_AUTO_RD, EEC_AUTO_RD, "EEC.AUTO_RD (EEPROM read done)", second)?;
        if self.read(EEC) & EEC_PRES == 0 || self.read(FWSM) & FWSM_EXT_ERR_IND != 0 {
            return Err(DriverError::Eeprom { address: self.address().to_string() });
        }
        // DMA init done [DS 4.6.3].
        self.wait(RDRXCTL, RDRXCTL_DMAIDONE, RDRXCTL_DMAIDONE, "RDRXCTL.DMAIDONE", second)?;
        // Receive filters and tables to a known state [DS 4.6.10].
        for n in 0..128 {
            self.write(pfuta(n), 0)?;
            self.write(pfvlvfb(n), 0)?;
            self.write(mta(n), 0)?;
            self.clear(ftqf(n), 1 << 31)?;
        }
        for n in 0..64 {
            self.write(pfvlvf(n), 0)?;
        }
        for n in 0..256 {
            self.write(mpsar(n), u32::from(n == 0))?;
        }
        // CRC strip in both places, RSC off, FCoE write fix [DS 4.6.7, 8.2.3.8.8].
        self.write(
            RDRXCTL,
            (self.read(RDRXCTL) | RDRXCTL_CRCSTRIP | RDRXCTL_RSCACKC | RDRXCTL_FCOE_WRFIX) & !RDRXCTL_RSCFRSTSIZE,
        )?;
        self.set(HLREG0, HLREG0_RXCRCSTRP | HLREG0_TXCRCEN | HLREG0_TXPADEN)?;
        // DCB and VT off: one packet buffer [DS 4.6.11.3.4].
        for n in 1..8 {
            self.write(rxpbsize(n), 0)?;
            self.write(txpbsize(n), 0)?;
        }
        self.set(MFLCN, MFLCN_RFCE)?;
        self.write(FCCFG, (self.read(FCCFG) & !(0x3 << 3)) | (1 << 3))?;
        for q in 0..128 {
            self.write(RTTDQSEL, q)?;
            self.write(RTTDT1C, 0)?;
        }
        // TX global settings [DS 4.6.11.3.4, 8.2.3.9.16].
        self.write(TXPBTHRESH0, (self.read(TXPBTHRESH0) & !0x3FF) | (0xA0 - 2))?;
        self.write(DTXMXSZRQ, 0xFFF)?;
        self.clear(RTTDCS, RTTDCS_ARBDIS)?;
        self.set(CTRL_EXT, CTRL_EXT_NS_DIS)?;
        // Promiscuous: change filters only with receive off [DS 8.2.3.7.1].
        let rxen = self.read(RXCTRL) & RXCTRL_RXEN;
        self.clear(RXCTRL, RXCTRL_RXEN)?;
        self.set(FCTRL, FCTRL_UPE | FCTRL_MPE | FCTRL_BAM)?;
        self.set(RXCTRL, rxen)?;
        Ok(())
    }

    /// Turns on IEEE 802.3x flow control [DS 3.7.7, 8.2.3.3]: when packet buffer 0 is within
    /// [`FLOW_CONTROL_HEADROOM`] bytes of full, the port sends XOFF and its link partner stops
    /// sending; below half of that mark it sends XON. Receive queues set up afterwards wait
    /// in the packet buffer when no descriptor is free instead of dropping (no
    /// SRRCTL.DROP_EN), so nothing is lost to a slow or descheduled driver. Call it after
    /// [`Self::init`] and before the queues are set up.
    pub fn enable_flow_control(&self) -> Result<(), DriverError> {
        let buffer = ((self.read(rxpbsize(0)) >> 10) & 0x3FF) * 1024;
        let high = buffer.saturating_sub(FLOW_CONTROL_HEADROOM) & !0x1F;
        self.write(FCRTL0, (high / 2) & !0x1F | FCRTL_XONE)?;
        self.write(FCRTH0, high | FCRTH_FCEN)?;
        // Pause time in quanta of 512 bit times, refreshed at half of it, as DPDK and Linux do.
        self.write(FCTTV0, u32::from(FLOW_CONTROL_PAUSE))?;
        self.write(FCRTV, u32::from(FLOW_CONTROL_PAUSE / 2))?;
        self.set(MFLCN, MFLCN_RFCE)?;
        self.write(FCCFG, (self.read(FCCFG) & !FCCFG_TFCE_MASK) | FCCFG_TFCE_802_3X)
    }

    /// Whether [`Self::enable_flow_control`] is in effect (FCRTH(0).FCEN).
    pub fn flow_control(&self) -> bool {
        self.read(FCRTH0) & FCRTH_FCEN != 0
    }

    /// Waits for link up [DS 8.2.3.22.20].
    pub fn wait_for_link(&self, timeout: Duration) -> Result<(), DriverError> {
        self.wait(LINKS, LINKS_UP, LINKS_UP, "link up", timeout)
    }

    /// The MAC address in RAL0/RAH0 [DS 8.2.3.7.9].
    pub fn mac(&self) -> [u8; 6] {
        let l = self.read(RAL0).to_le_bytes();
        let h = self.read(RAH0).to_le_bytes();
        [l[0], l[1], l[2], l[3], h[0], h[1]]
    }

    /// Enables the receive path once a queue is ready [DS 4.6.7, 8.2.3.12.1].
    pub fn start_receive(&self) -> Result<(), DriverError> {
        if self.read(RXCTRL) & RXCTRL_RXEN != 0 {
            return Ok(());
        }
        self.set(SECRXCTRL, SECRXCTRL_RX_DIS)?;
        self.wait(SECRXSTAT, SECRXSTAT_RDY, SECRXSTAT_RDY, "SECRXSTAT.SECRX_RDY", Duration::from_secs(1))?;
        self.set(RXCTRL, RXCTRL_RXEN)?;
        self.clear(SECRXCTRL, SECRXCTRL_RX_DIS)?;
        Ok(())
    }

    /// Spreads received frames over RX queues `0..queues` by RSS [DS 7.1.2.8]: the Toeplitz
    /// hash of their IPv4 or IPv6 addresses and TCP or UDP ports with [`RSS_KEY`], its low 7
    /// bits choosing a redirection-table entry, entry `i` naming queue `i % queues`; the hash
    /// is written back in each descriptor (RXCSUM.PCSD), and queue `q` counts in QPRC(q).
    /// Frames of one flow always reach one
    /// queue; frames with no such header reach queue 0. Call it after [`Self::init`], before
    /// receive is enabled [DS 4.6.7].
    pub fn enable_rss(&self, queues: RssQueues) -> Result<(), DriverError> {
        for n in ConstIndex::<10>::all() {
            let k = n.get() * 4;
            self.write(rssrk(n), u32::from_le_bytes([RSS_KEY[k], RSS_KEY[k + 1], RSS_KEY[k + 2], RSS_KEY[k + 3]]))?;
        }
        for n in ConstIndex::<32>::all() {
            let entry = |k: usize| ((4 * n.get() + k) % queues.get()) as u8;
            self.write(reta(n), u32::from_le_bytes([entry(0), entry(1), entry(2), entry(3)]))?;
        }
        // Each RSS queue counts in a statistics register of its own (QPRC(q)) [DS 8.2.3.8.9].
        for n in ConstIndex::<32>::all().take(RSS_QUEUES / 4) {
            let q = |k: usize| (4 * n.get() + k) as u8;
            self.write(rqsmr(n), u32::from_le_bytes([q(0), q(1), q(2), q(3)]))?;
        }
        self.set(RXCSUM, RXCSUM_PCSD)?;
        self.write(MRQC, MRQC_RSS | MRQC_FIELDS)
    }

    /// Gives RX queue `q` the ring `ring` (buffers of [`crate::BUFFER_SIZE`], dropping when no
    /// descriptor is free unless flow control is on: frames then wait in the packet buffer),
    /// enables it and hands the device every descriptor but one [DS 4.6.7.1, 7.1.9]. The queue
    /// is enabled until it is dropped. The first queue of the process confines it
    /// (`platform::confine`, docs/safety.md).
    pub(crate) fn set_input<const N: usize>(
        &self,
        queue: RssQueue,
        ring: LegacyRing<'_, N>,
    ) -> Result<EnabledQueue<'a, N>, DriverError> {
        let q = QueueIndex::new(queue.get());
        if self.read(rxdctl(q)) & RXDCTL_ENABLE != 0 {
            return Err(DriverError::Invalid(format!(
                "{}: RX queue {} is in use already: stop the program that drives it, or give this one another queue",
                self.address(),
                queue.get()
            )));
        }
        let queue = self.regs.enable_rx(RxQueueIndex::new(queue.get()), ring, !self.flow_control())?;
        queue.doorbell().ring(RingIndex::wrapping(N - 1));
        self.start_receive()?;
        // No relaxed ordering of descriptor write-back [DS 8.2.3.11.1].
        self.clear(dca_rxctrl(q), DCA_RXCTRL_RELAXED_WRITE)?;
        Ok(queue)
    }

    /// Gives the first disabled TX queue the ring `ring`, with head write-back to `head`, and
    /// enables it [DS 4.6.8, 7.2.3.5.2].
    pub(crate) fn add_output<const N: usize>(
        &self,
        ring: LegacyRing<'_, N>,
        head: HeadSlot<'_>,
    ) -> Result<EnabledQueue<'a, N>, DriverError> {
        let q = QueueIndex::all()
            .find(|&q| self.read(txdctl(q)) & TXDCTL_ENABLE == 0)
            .ok_or(DriverError::Exhausted { address: self.address().to_string(), what: "free TX queue" })?;
        // PTHRESH 60, HTHRESH 4 as TinyNF [DS 8.2.3.9.10].
        self.write(txdctl(q), (self.read(txdctl(q)) & !0x7F7F & !TXDCTL_ENABLE) | 60 | (4 << 8))?;
        self.clear(dca_txctrl(q), DCA_TXCTRL_RELAXED_WRITE)?;
        Ok(self.regs.enable_tx(TxQueueIndex::new(q.get()), ring, head)?)
    }

    /// Totals since reset (or since the last read on hardware, where they clear on read).
    pub fn stats(&self) -> DeviceStats {
        DeviceStats {
            rx_packets: u64::from(self.read(GPRC)),
            tx_packets: u64::from(self.read(GPTC)),
            rx_missed: u64::from(self.read(MPC0)),
        }
    }
}

/// Watches whether devices are still there from a driver's loop, looking at most every
/// [`PresenceCheck::PERIOD`]: a register read costs a PCIe round trip, too much per packet.
#[derive(Debug)]
pub struct PresenceCheck {
    last: Instant,
}

impl PresenceCheck {
    /// How long a removed or reset device can go unnoticed.
    pub const PERIOD: Duration = Duration::from_millis(100);

    pub fn new() -> Self {
        PresenceCheck { last: Instant::now() }
    }

    /// Whether a look is due at `now` (then the next one is a period later).
    pub fn due(&mut self, now: Instant) -> bool {
        let due = now.duration_since(self.last) >= Self::PERIOD;
        if due {
            self.last = now;
        }
        due
    }

    /// If a look is due at `now`: [`DriverError::Gone`] for the first of `devices` that is
    /// no longer [present](Device::present), else `Ok(true)`; `Ok(false)` if no look is due.
    pub fn check(&mut self, now: Instant, devices: &[&Device<'_>]) -> Result<bool, DriverError> {
        if !self.due(now) {
            return Ok(false);
        }
        match devices.iter().find(|d| !d.present()) {
            Some(d) => Err(d.gone()),
            None => Ok(true),
        }
    }
}

impl Default for PresenceCheck {
    fn default() -> Self {
        Self::new()
    }
}
