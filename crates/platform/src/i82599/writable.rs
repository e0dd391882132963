//! The 82599 registers any code may write: an allowlist, so a register this table does not
//! name (an address, a length, a buffer size or descriptor format, a head, an FCoE DMA
//! context, a receive-coalescing control, every register of the datasheet not read here) is
//! written only by the device model's enables ([`super::Registers::enable_rx`],
//! [`super::Registers::enable_tx`]), or not at all.
//!
//! # Soundness
//! Every register listed holds no memory address, no length or size the device applies to
//! memory, and no enable of a queue (RXDCTL and TXDCTL only with their enable bit clear:
//! stopping a queue is always safe). Resets and master disable only stop DMA. What an entry
//! allows is checked in [`check`], before the store.

use super::Reg;
use crate::error::PlatformError;

/// What may be written to a listed register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Any value.
    Any,
    /// A value whose queue-enable bit (25, RXDCTL.ENABLE and TXDCTL.ENABLE) is clear.
    EnableClear,
}

/// `count` registers from byte offset `first`, `stride` bytes apart.
#[derive(Debug, Clone, Copy)]
pub struct Writable {
    pub first: usize,
    pub count: usize,
    pub stride: usize,
    pub rule: Rule,
    pub name: &'static str,
}

const fn one(first: usize, name: &'static str) -> Writable {
    Writable { first, count: 1, stride: 4, rule: Rule::Any, name }
}

const fn table(first: usize, count: usize, name: &'static str) -> Writable {
    Writable { first, count, stride: 4, rule: Rule::Any, name }
}

const fn per_queue(first: usize, count: usize, rule: Rule, name: &'static str) -> Writable {
    Writable { first, count, stride: 0x40, rule, name }
}

/// The queue-enable bit of RXDCTL and TXDCTL [DS 8.2.3.8.6, 8.2.3.9.10].
pub const QUEUE_ENABLE: u32 = 1 << 25;

/// Every register safe code may write, by byte offset.
pub const WRITABLE: &[Writable] = &[
    one(0x00000, "CTRL: master disable, link and device reset [DS 8.2.3.1.1]"),
    one(0x00018, "CTRL_EXT: no-snoop disable, driver loaded [DS 8.2.3.1.3]"),
    one(0x00200, "LEDCTL [DS 8.2.3.1.6]"),
    one(0x00880, "EIMS [DS 8.2.3.5.3]"),
    one(0x00888, "EIMC [DS 8.2.3.5.4]"),
    table(0x00AA0, 2, "EIMS_EX [DS 8.2.3.5]"),
    table(0x00AB0, 2, "EIMC_EX [DS 8.2.3.5]"),
    per_queue(0x0100C, 64, Rule::Any, "DCA_RXCTRL: cache hints and relaxed ordering [DS 8.2.3.11.1]"),
    per_queue(0x01028, 64, Rule::EnableClear, "RXDCTL: thresholds, or disabling the queue [DS 8.2.3.8.6]"),
    table(0x02300, 32, "RQSMR: queue statistics mapping [DS 8.2.3.8]"),
    one(0x02F00, "RDRXCTL: CRC strip, RSC acknowledgements [DS 8.2.3.8.8]"),
    one(0x03000, "RXCTRL: receive enable [DS 8.2.3.8.10]"),
    table(0x03200, 4, "FCTTV: pause time [DS 8.2.3.3.2]"),
    table(0x03220, 8, "FCRTL: XON threshold [DS 8.2.3.3.3]"),
    table(0x03260, 8, "FCRTH: XOFF threshold [DS 8.2.3.3.4]"),
    one(0x032A0, "FCRTV: pause refresh [DS 8.2.3.3.5]"),
    table(0x03C00, 8, "RXPBSIZE: packet buffer sizes [DS 8.2.3.8.9]"),
    one(0x03D00, "FCCFG: flow control [DS 8.2.3.3.7]"),
    one(0x04240, "HLREG0: CRC, padding, jumbo frames, loopback [DS 8.2.3.22.8]"),
    one(0x04294, "MFLCN: flow control [DS 8.2.3.22.34]"),
    one(0x04900, "RTTDCS: transmit arbiter [DS 8.2.3.10.2]"),
    one(0x04904, "RTTDQSEL: transmit queue select [DS 8.2.3.10]"),
    one(0x04908, "RTTDT1C: transmit credit [DS 8.2.3.10]"),
    table(0x04950, 8, "TXPBTHRESH: packet buffer thresholds [DS 8.2.3.9.16]"),
    one(0x04A80, "DMATXCTL: transmit enable [DS 8.2.3.9.2]"),
    one(0x05000, "RXCSUM: checksum offload, RSS hash in the write-back [DS 8.2.3.7.5]"),
    one(0x05080, "FCTRL: receive filter [DS 8.2.3.7.1]"),
    one(0x05090, "MCSTCTRL: multicast filter [DS 8.2.3.7.2]"),
    table(0x05200, 128, "MTA: multicast table [DS 8.2.3.7.7]"),
    one(0x05818, "MRQC: RSS, which queue a frame goes to [DS 8.2.3.7.12]"),
    table(0x05C00, 32, "RETA: RSS redirection table [DS 8.2.3.7.15]"),
    table(0x05C80, 10, "RSSRK: RSS key [DS 8.2.3.7.14]"),
    per_queue(0x0600C, 128, Rule::Any, "DCA_TXCTRL: cache hints and relaxed ordering [DS 8.2.3.11.2]"),
    per_queue(0x06028, 128, Rule::EnableClear, "TXDCTL: thresholds, or disabling the queue [DS 8.2.3.9.10]"),
    one(0x08100, "DTXMXSZRQ: largest transmit read request [DS 8.2.3.9.1]"),
    table(0x08600, 32, "TQSM: queue statistics mapping [DS 8.2.3.9]"),
    one(0x08D00, "SECRXCTRL: receive security block [DS 8.2.3.12]"),
    table(0x0A000, 128, "VFTA: VLAN filter [DS 8.2.3.7.15]"),
    table(0x0A200, 256, "RAL/RAH: receive addresses [DS 8.2.3.7]"),
    table(0x0A600, 256, "MPSAR: pool select [DS 8.2.3.7.10]"),
    table(0x0CC00, 8, "TXPBSIZE: packet buffer sizes [DS 8.2.3.9.13]"),
    table(0x0E600, 128, "FTQF: five-tuple filters [DS 8.2.3.7.19]"),
    table(0x0F100, 64, "PFVLVF: VLAN pool filter [DS 8.2.3.27]"),
    table(0x0F200, 128, "PFVLVFB: VLAN pool filter bitmap [DS 8.2.3.27]"),
    table(0x0F400, 128, "PFUTA: unicast table [DS 8.2.3.27.12]"),
];

/// The entry that lists the register at byte `offset`, if any.
pub fn entry(offset: usize) -> Option<&'static Writable> {
    WRITABLE
        .iter()
        .find(|w| offset >= w.first && (offset - w.first) % w.stride == 0 && (offset - w.first) / w.stride < w.count)
}

/// Whether `value` may be written to `r`; the refusal names the register and the way to do
/// what it would do.
pub fn check(r: Reg, value: u32) -> Result<(), PlatformError> {
    let offset = r.get() * 4;
    match entry(offset) {
        Some(w) if w.rule == Rule::Any || value & QUEUE_ENABLE == 0 => Ok(()),
        Some(w) => Err(PlatformError::Refused(format!(
            "{} at {offset:#07x} with the queue-enable bit set: a queue is enabled only with memory of its own \
             (platform::i82599::Registers::enable_rx, enable_tx)",
            w.name.split(':').next().unwrap_or(w.name)
        ))),
        None => Err(PlatformError::Refused(format!(
            "82599 register {offset:#07x} is not one any code may write (it can make the device reach memory, or is \
             not modelled): give the device memory through platform::i82599::Registers::enable_rx and enable_tx; \
             the writable registers are platform::i82599::writable::WRITABLE"
        ))),
    }
}
