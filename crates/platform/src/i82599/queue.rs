//! Giving a queue memory, and taking it back: the registers that make the 82599 reach memory,
//! written only here [DS 4.6.7, 4.6.8].

use super::writable::QUEUE_ENABLE;
use super::{reg, Doorbell, LegacyRing, Reg, Registers, RxQueueIndex, TxQueueIndex};
use crate::dma::{DeviceHold, HeadSlot, BUFFER_SIZE};
use crate::error::PlatformError;
use crate::keeper::{Keeper, StopPlan};
use std::marker::PhantomData;
use std::time::{Duration, Instant};

/// Receive queue `q`'s registers [DS 8.2.3.8.1-8.2.3.8.7].
fn rx(offset: usize, q: RxQueueIndex) -> Reg {
    reg(offset + 0x40 * q.get())
}
const RDBAL: usize = 0x01000;
const RDBAH: usize = 0x01004;
const RDLEN: usize = 0x01008;
const RDH: usize = 0x01010;
const SRRCTL: usize = 0x01014;
const RDT: usize = 0x01018;
const RXDCTL: usize = 0x01028;
/// SRRCTL.DROP_EN: drop frames when no descriptor is free [DS 8.2.3.8.7].
const SRRCTL_DROP_EN: u32 = 1 << 28;

/// Transmit queue `q`'s registers [DS 8.2.3.9.5-8.2.3.9.11].
fn tx(offset: usize, q: TxQueueIndex) -> Reg {
    reg(offset + 0x40 * q.get())
}
const TDBAL: usize = 0x06000;
const TDBAH: usize = 0x06004;
const TDLEN: usize = 0x06008;
const TDH: usize = 0x06010;
const TDT: usize = 0x06018;
const TXDCTL: usize = 0x06028;
const TDWBAL: usize = 0x06038;
const TDWBAH: usize = 0x0603C;
/// TDWBAL.Head_WB_En [DS 8.2.3.9.11].
const HEAD_WB_ENABLE: u32 = 1;

const CTRL: Reg = reg(0x00000);
const CTRL_MASTER_DISABLE: u32 = 1 << 2;
const STATUS: Reg = reg(0x00008);
const STATUS_MASTER_ENABLE: u32 = 1 << 19;
const DMATXCTL: Reg = reg(0x04A80);
const DMATXCTL_TE: u32 = 1;

/// How long the device has to confirm a queue's enable or stop.
const CONFIRM: Duration = Duration::from_secs(1);

impl<'f> Registers<'f> {
    /// Gives receive queue `queue` the ring `ring` of `N` descriptors, buffers of
    /// [`BUFFER_SIZE`] bytes in legacy format, dropping frames when no descriptor is free if
    /// `drop_when_full` (else they wait in the packet buffer, for flow control), and enables
    /// it [DS 4.6.7.1]; the device owns no descriptor until the returned queue's doorbell
    /// rings. The first queue of the process confines it (`crate::confine`).
    pub fn enable_rx<const N: usize>(
        self,
        queue: RxQueueIndex,
        ring: LegacyRing<'_, N>,
        drop_when_full: bool,
    ) -> Result<EnabledQueue<'f, N>, PlatformError> {
        crate::confine::confine_process()?;
        let control = rx(RXDCTL, queue);
        self.expect_disabled(control, "receive", queue.get())?;
        let phys = ring.phys();
        self.program(rx(RDBAL, queue), phys as u32);
        self.program(rx(RDBAH, queue), (phys >> 32) as u32);
        self.program(rx(RDLEN, queue), (N * 16) as u32);
        // The head and tail start at the ring's start, also when the queue ran before.
        self.program(rx(RDH, queue), 0);
        self.program(rx(RDT, queue), 0);
        // BSIZEPACKET in KiB, DESCTYPE 000 (legacy), no header buffer [DS 8.2.3.8.7].
        let drop_en = if drop_when_full { SRRCTL_DROP_EN } else { 0 };
        self.program(rx(SRRCTL, queue), (BUFFER_SIZE / 1024) as u32 | drop_en);
        self.enable(control, rx(RDT, queue), rx(RDH, queue))
    }

    /// Gives transmit queue `queue` the ring `ring` of `N` descriptors, with its head written
    /// back to `head`, and enables it [DS 4.6.8, 7.2.3.5.2]. Thresholds (TXDCTL's PTHRESH and
    /// HTHRESH) are the caller's to set before.
    pub fn enable_tx<const N: usize>(
        self,
        queue: TxQueueIndex,
        ring: LegacyRing<'_, N>,
        head: HeadSlot<'_>,
    ) -> Result<EnabledQueue<'f, N>, PlatformError> {
        crate::confine::confine_process()?;
        let control = tx(TXDCTL, queue);
        self.expect_disabled(control, "transmit", queue.get())?;
        let phys = ring.phys();
        self.program(tx(TDBAL, queue), phys as u32);
        self.program(tx(TDBAH, queue), (phys >> 32) as u32);
        self.program(tx(TDLEN, queue), (N * 16) as u32);
        self.program(tx(TDH, queue), 0);
        self.program(tx(TDT, queue), 0);
        self.program(tx(TDWBAH, queue), (head.phys() >> 32) as u32);
        self.program(tx(TDWBAL, queue), head.phys() as u32 | HEAD_WB_ENABLE);
        self.program(DMATXCTL, self.read(DMATXCTL) | DMATXCTL_TE);
        self.enable(control, tx(TDT, queue), tx(TDH, queue))
    }

    fn expect_disabled(self, control: Reg, kind: &str, q: usize) -> Result<(), PlatformError> {
        if self.read(control) & QUEUE_ENABLE == 0 {
            return Ok(());
        }
        Err(PlatformError::Refused(format!(
            "{}: {kind} queue {q} is enabled already: use another queue, or drop the one that uses it",
            self.address()
        )))
    }

    /// Sets the enable bit of `control` once the queue's stop is assured (a keeper where the
    /// process has one, a hold on DMA memory), and waits for the device to confirm.
    fn enable<const N: usize>(self, control: Reg, tail: Reg, head: Reg) -> Result<EnabledQueue<'f, N>, PlatformError> {
        let keeper = if crate::keeper::keeps_queues() {
            if !crate::dma::retention::all_with_keeper() {
                return Err(PlatformError::Refused(
                    "DMA memory was allocated before this process's queues got a keeper: call \
                     platform::keeper::keep_every_queue() before allocating it"
                        .to_string(),
                ));
            }
            let plan = StopPlan {
                control: control.get() * 4,
                enable: QUEUE_ENABLE,
                ctrl: CTRL.get() * 4,
                master_disable: CTRL_MASTER_DISABLE,
                status: STATUS.get() * 4,
                master_enable: STATUS_MASTER_ENABLE,
            };
            Some(Keeper::start(self.bar(), plan)?)
        } else {
            None
        };
        let hold = DeviceHold::new();
        self.program(control, self.read(control) | QUEUE_ENABLE);
        // From here on the queue is disabled again on every way out, errors included.
        let queue = EnabledQueue { registers: self, control, tail, head, hold: Some(hold), keeper, _ring: PhantomData };
        self.wait(control, QUEUE_ENABLE, QUEUE_ENABLE, "the queue's enable")?;
        Ok(queue)
    }

    /// Waits until `r & mask == want`, polling, for at most [`CONFIRM`].
    fn wait(self, r: Reg, mask: u32, want: u32, what: &'static str) -> Result<(), PlatformError> {
        let deadline = Instant::now() + CONFIRM;
        loop {
            let value = self.read(r);
            if value & mask == want {
                return Ok(());
            }
            // A removed device reads all-ones everywhere; its STATUS never does while present.
            if value == u32::MAX && self.read(STATUS) == u32::MAX {
                return Err(PlatformError::DeviceGone { address: self.address().to_string() });
            }
            if Instant::now() > deadline {
                return Err(PlatformError::DeviceTimeout { address: self.address().to_string(), what });
            }
            std::thread::sleep(Duration::from_micros(10));
        }
    }
}

/// A queue of the device, enabled on a ring of `N` descriptors while this value lives.
/// Dropping it disables the queue and waits until the device confirms that its DMA stopped
/// (RXDCTL/TXDCTL.ENABLE reads back 0) [DS 4.6.7.1.2, 4.6.8]; if it does not within a second,
/// it stops every DMA of the function (master disable [DS 5.2.5.3.2]). Only then does it give
/// back its [`DeviceHold`], and with it the memory of every region dropped meanwhile; a queue
/// that is leaked, or whose device confirms neither, keeps the hold for ever. On a real device
/// the process's keeper (`crate::keeper`) does the same stop if the process ends without
/// running `Drop`.
pub struct EnabledQueue<'f, const N: usize> {
    registers: Registers<'f>,
    control: Reg,
    tail: Reg,
    head: Reg,
    hold: Option<DeviceHold>,
    keeper: Option<Keeper>,
    _ring: PhantomData<[(); N]>,
}

impl<'f, const N: usize> EnabledQueue<'f, N> {
    /// The queue's tail register (RDT or TDT), which takes indices of its ring.
    pub fn doorbell(&self) -> Doorbell<'f, N> {
        Doorbell { register: self.registers.regs.at(self.tail), _ring: PhantomData }
    }

    /// The device's head (RDH or TDH), as it reads now: a PCIe round trip, for slow paths.
    pub fn device_head(&self) -> u32 {
        self.registers.read(self.head)
    }

    /// Whether the device still has the queue enabled (a reset the driver did not ask for
    /// disables it).
    pub fn still_enabled(&self) -> bool {
        self.registers.read(self.control) & QUEUE_ENABLE != 0
    }
}

impl<const N: usize> Drop for EnabledQueue<'_, N> {
    fn drop(&mut self) {
        let r = self.registers;
        r.program(self.control, r.read(self.control) & !QUEUE_ENABLE);
        // A device that is gone DMAs nothing more: there is nothing left to stop.
        let stopped = match r.wait(self.control, QUEUE_ENABLE, 0, "a queue to stop") {
            Err(PlatformError::DeviceTimeout { .. }) => {
                r.program(CTRL, r.read(CTRL) | CTRL_MASTER_DISABLE);
                let stopped = r.wait(STATUS, STATUS_MASTER_ENABLE, 0, "master disable");
                eprintln!(
                    "{}: a queue did not stop within 1 s; master disable {}",
                    r.address(),
                    if stopped.is_ok() {
                        "stopped the device's DMA"
                    } else {
                        "did not confirm either: its memory is kept"
                    }
                );
                stopped.is_ok()
            }
            _ => true,
        };
        let (hold, keeper) = (self.hold.take(), self.keeper.take());
        if stopped {
            if let Some(keeper) = keeper {
                keeper.stopped();
            }
            drop(hold);
        } else {
            // The device may still use the memory: it stays mapped, and the keeper tries
            // again, and holds it, once this process ends.
            std::mem::forget((hold, keeper));
        }
    }
}
