//! The Intel 82599's registers as the trusted base hands them out: the one way any code of a
//! process reaches an 82599, simulated or real.
//!
//! A driver gets a [`Function`] (the claimed PCI function and its BAR0, never the mapping
//! itself) and, through it, [`Registers`]: any register may be read, a register may be written
//! only if [`writable`] lists it (interrupt masks, filters, flow control, statistics mapping,
//! resets, thresholds: nothing that holds an address or a length the device would use, or
//! enables a queue), and a queue is given memory only by [`Registers::enable_rx`] and
//! [`Registers::enable_tx`], which take a [`LegacyRing`] and a [`crate::dma::HeadSlot`] of a
//! [`crate::dma::DmaRegion`] and program every register that makes the device reach memory
//! themselves [DS 4.6.7, 4.6.8]. Tails are written through a [`Doorbell`], which takes only
//! indices of the ring. Section numbers are those of the Intel 82599 10 GbE Controller
//! Datasheet rev. 3.3 ("DS").
//!
//! # Soundness
//! Given a device that follows the datasheet, no call here, in any order, makes it read or
//! write memory other than a live (or retained, `crate::dma::retention`) region's buffers,
//! rings and head slots: every address register is written only by the enables, from a ring's
//! or slot's own address; every descriptor holds a buffer's address from the moment its ring
//! exists (`ring`); the buffer size and descriptor format are fixed by the enables (2 KiB,
//! legacy); a transmit length is at most a buffer; and a queue is enabled only with a hold on
//! DMA memory (`crate::dma::DeviceHold`) that is given back once the device confirmed it
//! stopped.

mod queue;
mod ring;
pub mod writable;

use crate::error::PlatformError;
use crate::mem::MappedRegion;
use crate::pci::PciFunction;
use invariants::{ConstIndex, RingIndex, VolatileArray, VolatilePtr};
use std::marker::PhantomData;
use std::path::Path;

pub use queue::EnabledQueue;
pub use ring::{LegacyRing, TxCommand};

/// PCI vendor and device of the 82599ES SFI/SFP+ function [DS 9.3.3.1].
pub const VENDOR_ID: u16 = 0x8086;
pub const DEVICE_ID: u16 = 0x10FB;

/// BAR0 size [DS 8.1].
pub const BAR0_LEN: usize = 0x20000;
/// Number of 32-bit registers in BAR0.
pub const BAR0_DWORDS: usize = BAR0_LEN / 4;
/// A register: a dword index below [`BAR0_DWORDS`].
pub type Reg = ConstIndex<BAR0_DWORDS>;

/// The register at byte `offset`; out-of-range or misaligned offsets fail to compile when
/// used in a `const` item.
pub const fn reg(offset: usize) -> Reg {
    assert!(offset % 4 == 0, "registers are dword-aligned");
    ConstIndex::new(offset / 4)
}

/// Receive queues a driver may enable (queues 64..127 need VT/DCB modes left off).
pub const RX_QUEUES: usize = 64;
/// A receive queue below [`RX_QUEUES`].
pub type RxQueueIndex = ConstIndex<RX_QUEUES>;
/// Transmit queues of a port [DS 7.2.1].
pub const TX_QUEUES: usize = 128;
/// A transmit queue below [`TX_QUEUES`].
pub type TxQueueIndex = ConstIndex<TX_QUEUES>;

/// An open 82599 function: the claim on it and its BAR0, neither reachable from outside.
///
/// ```compile_fail,E0616
/// fn map_it(f: &platform::i82599::Function) {
///     let _ = f.bar;
/// }
/// ```
pub struct Function {
    // The mapping first: it goes before the claim that keeps others from mapping it.
    bar: MappedRegion,
    _claim: PciFunction,
    address: String,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function").field("address", &self.address).finish()
    }
}

impl Function {
    /// Opens `address` under the sysfs root `sysfs`: checks it is an 82599ES (8086:10fb) and
    /// is not bound to a kernel driver (never unbinds it), claims it (refused while another
    /// process owns it), enables memory space and bus mastering, and maps BAR0 with its size
    /// checked. A real device opens only if the program was started with its address on the
    /// command line: `platform` opened it then, before `main` (`crate::before_main`).
    pub fn open(sysfs: &Path, address: &str) -> Result<Function, PlatformError> {
        let function = PciFunction::open(sysfs, address)?;
        function.expect_ids(VENDOR_ID, DEVICE_ID, "an Intel 82599ES (8086:10fb)")?;
        function.expect_unbound()?;
        function.claim()?;
        function.enable_memory_and_bus_master()?;
        let bar = function.map_bar0(BAR0_LEN)?;
        Ok(Function { address: function.address().to_string(), bar, _claim: function })
    }

    /// The PCI address, normalised (`0000:5e:00.0`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The registers, for as long as the function is borrowed.
    pub fn registers(&self) -> Registers<'_> {
        let regs = self.bar.device_memory().array::<u32, BAR0_DWORDS>(0).expect("map_bar0 checked BAR0's size");
        Registers { regs, function: self }
    }
}

/// Register access to one 82599, valid while its [`Function`] is borrowed.
#[derive(Clone, Copy)]
pub struct Registers<'f> {
    regs: VolatileArray<'f, u32, BAR0_DWORDS>,
    function: &'f Function,
}

// SAFETY: a register access is one volatile load or store of BAR0 (`regs` is the function's
// mapping of it, outside any Rust allocation), I/O whose effect the device defines, also when
// two threads make accesses at once; the rest is the function's address, which never changes.
// Threads that serve queues of one device share its registers, as a kernel driver's do.
unsafe impl Send for Registers<'_> {}
// SAFETY: as for `Send`: every method takes the registers by value and is one I/O access.
unsafe impl Sync for Registers<'_> {}

impl<'f> Registers<'f> {
    /// The function's PCI address.
    pub fn address(self) -> &'f str {
        &self.function.address
    }

    /// Reads a register (a PCIe round trip on a real device: for slow paths).
    pub fn read(self, r: Reg) -> u32 {
        self.regs.at(r).read()
    }

    /// Writes a register that [`writable`] lists, with the value it allows there; refuses every
    /// other write, naming the register.
    pub fn write(self, r: Reg, value: u32) -> Result<(), PlatformError> {
        writable::check(r, value)?;
        self.regs.at(r).write(value);
        Ok(())
    }

    /// Writes a register the device model itself programs (an address, a length, an enable).
    fn program(self, r: Reg, value: u32) {
        self.regs.at(r).write(value)
    }

    fn bar(self) -> &'f MappedRegion {
        &self.function.bar
    }
}

/// A queue's tail register (RDT or TDT): only indices of its ring of `N` descriptors go in,
/// every slot of which holds a buffer's address, so no value written here can send the device
/// past the ring or to an address it was not given [DS 8.2.3.8.5, 8.2.3.9.9].
#[derive(Clone, Copy)]
pub struct Doorbell<'f, const N: usize> {
    register: VolatilePtr<'f, u32>,
    _ring: PhantomData<[(); N]>,
}

impl<const N: usize> Doorbell<'_, N> {
    /// Hands the device every descriptor up to `tail` (receive: the last one given back;
    /// transmit: one past the last one queued).
    #[inline(always)]
    pub fn ring(self, tail: RingIndex<N>) {
        self.register.write(tail.get() as u32)
    }
}

#[cfg(test)]
mod tests;
