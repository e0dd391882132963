//! 82599 BAR0 registers used by the driver, as indices into the register file whose range is
//! checked at compile time. Section numbers are those of the Intel 82599 10 GbE Controller
//! Datasheet rev. 3.3 ("DS"). Which of them any code may write, and the registers that give
//! the device memory, are the trusted base's (`platform::i82599`).

use invariants::ConstIndex;
pub use platform::i82599::{reg, Reg, BAR0_DWORDS, BAR0_LEN};

/// Queues the driver may use per direction (queues 64..127 need VT/DCB modes we leave off).
pub const MAX_QUEUES: usize = 64;
/// A queue number below [`MAX_QUEUES`].
pub type QueueIndex = ConstIndex<MAX_QUEUES>;

/// The register `base + stride * q` for a queue: in range for every `q < 64` (checked when
/// the table below is compiled: the largest offset is asserted there).
const fn queue_reg(base: usize, stride: usize, q: QueueIndex) -> Reg {
    reg(base + stride * q.get())
}

/// Registers that applications may write with [`crate::Device::write_register`], as byte-offset
/// ranges `[start, end)`: a part of what the trusted base lets any code write
/// (`platform::i82599::writable`), without the resets, enables and thresholds this crate's
/// own set-up writes, so that an application cannot undo it.
pub const APPLICATION_WRITABLE: &[(usize, usize, &str)] = &[
    (0x00200, 0x00204, "LEDCTL [DS 8.2.3.1.6]"),
    (0x00880, 0x00884, "EIMS [DS 8.2.3.5.3]"),
    (0x00888, 0x0088C, "EIMC [DS 8.2.3.5.4]"),
    (0x00AA0, 0x00AA8, "EIMS_EX [DS 8.2.3.5.7]"),
    (0x00AB0, 0x00AB8, "EIMC_EX [DS 8.2.3.5.8]"),
    (0x02300, 0x02380, "RQSMR, queue statistics mapping [DS 8.2.3.8.9]"),
    (0x03200, 0x03210, "FCTTV, pause time [DS 8.2.3.3.2]"),
    (0x03220, 0x03240, "FCRTL, XON threshold [DS 8.2.3.3.3]"),
    (0x03260, 0x03280, "FCRTH, XOFF threshold [DS 8.2.3.3.4]"),
    (0x032A0, 0x032A4, "FCRTV, pause refresh [DS 8.2.3.3.5]"),
    (0x03D00, 0x03D04, "FCCFG, flow control [DS 8.2.3.3.7]"),
    (0x04294, 0x04298, "MFLCN, flow control [DS 8.2.3.22.34]"),
    (0x05080, 0x05084, "FCTRL, receive filter [DS 8.2.3.7.1]"),
    (0x05090, 0x05094, "MCSTCTRL, multicast filter [DS 8.2.3.7.2]"),
    (0x05200, 0x05400, "MTA, multicast table [DS 8.2.3.7.7]"),
    (0x08600, 0x08680, "TQSM, queue statistics mapping [DS 8.2.3.9.13]"),
    (0x0A000, 0x0A200, "VFTA, VLAN filter [DS 8.2.3.7.15]"),
    (0x0A200, 0x0AA00, "RAL/RAH, receive addresses [DS 8.2.3.7.9, 8.2.3.7.10]"),
];

/// Whether safe code outside this crate may write `r` ([`APPLICATION_WRITABLE`]).
pub fn is_application_writable(r: Reg) -> bool {
    let offset = r.get() * 4;
    APPLICATION_WRITABLE.iter().any(|&(start, end, _)| (start..end).contains(&offset))
}

// Largest queue-register offset used, checked at compile time.
const _: Reg = reg(0x06028 + 0x40 * (MAX_QUEUES - 1));

pub const CTRL: Reg = reg(0x00000); // [DS 8.2.3.1.1]
pub const CTRL_MASTER_DISABLE: u32 = 1 << 2;
pub const CTRL_RST: u32 = 1 << 26;
pub const STATUS: Reg = reg(0x00008); // [DS 8.2.3.1.2]
pub const STATUS_MASTER_ENABLE: u32 = 1 << 19;
pub const CTRL_EXT: Reg = reg(0x00018); // [DS 8.2.3.1.3]
pub const CTRL_EXT_NS_DIS: u32 = 1 << 16;
pub const EIMC: Reg = reg(0x00888); // [DS 8.2.3.5.4]
pub const EEC: Reg = reg(0x10010); // [DS 8.2.3.2.1]
pub const EEC_PRES: u32 = 1 << 8;
pub const EEC_AUTO_RD: u32 = 1 << 9;
pub const FWSM: Reg = reg(0x10148);
pub const FWSM_EXT_ERR_IND: u32 = 0x3F << 19;
pub const RDRXCTL: Reg = reg(0x02F00); // [DS 8.2.3.8.8]
pub const RDRXCTL_CRCSTRIP: u32 = 1 << 1;
pub const RDRXCTL_DMAIDONE: u32 = 1 << 3;
pub const RDRXCTL_RSCFRSTSIZE: u32 = 0x1F << 17;
pub const RDRXCTL_RSCACKC: u32 = 1 << 25;
pub const RDRXCTL_FCOE_WRFIX: u32 = 1 << 26;
pub const RXCTRL: Reg = reg(0x03000); // [DS 8.2.3.8.10]
pub const RXCTRL_RXEN: u32 = 1;
pub const FCTRL: Reg = reg(0x05080); // [DS 8.2.3.7.1]
/// RSS [DS 7.1.2.8]: the hash in the write-back (RXCSUM.PCSD), the hash fields and enable
/// (MRQC), the redirection table (RETA, four 4-bit entries per register) and the key (RSSRK).
pub const RXCSUM: Reg = reg(0x05000); // [DS 8.2.3.7.5]
pub const RXCSUM_PCSD: u32 = 1 << 13;
pub const MRQC: Reg = reg(0x05818); // [DS 8.2.3.7.12]
pub const MRQC_RSS: u32 = 0x1;
pub const MRQC_FIELDS: u32 = (1 << 16) | (1 << 17) | (1 << 20) | (1 << 21) | (1 << 22) | (1 << 23);
pub const fn reta(n: ConstIndex<32>) -> Reg {
    reg(0x05C00 + 4 * n.get())
}
pub const fn rssrk(n: ConstIndex<10>) -> Reg {
    reg(0x05C80 + 4 * n.get())
}
/// Receive queue statistics mapping: queues 4n..4n+3 to the counters in its four bytes
/// [DS 8.2.3.8.9 (RQSMR)].
pub const fn rqsmr(n: ConstIndex<32>) -> Reg {
    reg(0x02300 + 4 * n.get())
}
pub const FCTRL_MPE: u32 = 1 << 8;
pub const FCTRL_UPE: u32 = 1 << 9;
pub const FCTRL_BAM: u32 = 1 << 10;
pub const HLREG0: Reg = reg(0x04240); // [DS 8.2.3.22.8]
pub const HLREG0_TXCRCEN: u32 = 1 << 0;
pub const HLREG0_RXCRCSTRP: u32 = 1 << 1;
pub const HLREG0_TXPADEN: u32 = 1 << 10;
pub const LINKS: Reg = reg(0x042A4); // [DS 8.2.3.22.20]
pub const LINKS_UP: u32 = 1 << 30;
pub const SECRXCTRL: Reg = reg(0x08D00); // [DS 8.2.3.12.1]
pub const SECRXCTRL_RX_DIS: u32 = 1 << 1;
pub const SECRXSTAT: Reg = reg(0x08D04);
pub const SECRXSTAT_RDY: u32 = 1;
pub const DMATXCTL: Reg = reg(0x04A80); // [DS 8.2.3.9.2]
pub const DMATXCTL_TE: u32 = 1;
pub const DTXMXSZRQ: Reg = reg(0x08100);
pub const RTTDCS: Reg = reg(0x04900); // [DS 8.2.3.10.2]
pub const RTTDCS_ARBDIS: u32 = 1 << 6;
pub const RTTDQSEL: Reg = reg(0x04904);
pub const RTTDT1C: Reg = reg(0x04908);
pub const MFLCN: Reg = reg(0x04294); // [DS 8.2.3.22.34]
pub const MFLCN_RFCE: u32 = 1 << 3;
pub const FCCFG: Reg = reg(0x03D00); // [DS 8.2.3.3.7]
pub const FCCFG_TFCE_MASK: u32 = 0x3 << 3;
pub const FCCFG_TFCE_802_3X: u32 = 1 << 3;
pub const TXPBTHRESH0: Reg = reg(0x04950);
pub const FCTTV0: Reg = reg(0x03200); // [DS 8.2.3.3.2]
pub const FCRTL0: Reg = reg(0x03220); // [DS 8.2.3.3.3]
pub const FCRTL_XONE: u32 = 1 << 31;
pub const FCRTH0: Reg = reg(0x03260); // [DS 8.2.3.3.4]
pub const FCRTH_FCEN: u32 = 1 << 31;
pub const FCRTV: Reg = reg(0x032A0); // [DS 8.2.3.3.5]
pub const RAL0: Reg = reg(0x0A200); // [DS 8.2.3.7.9]
pub const RAH0: Reg = reg(0x0A204);
pub const GPRC: Reg = reg(0x04074); // [DS 8.2.3.23]
pub const GPTC: Reg = reg(0x04080);
pub const MPC0: Reg = reg(0x03FA0);

/// Registers of tables cleared at init [DS 4.6.3, 4.6.10].
pub const fn rxpbsize(n: usize) -> Reg {
    reg(0x03C00 + 4 * n)
}
pub const fn txpbsize(n: usize) -> Reg {
    reg(0x0CC00 + 4 * n)
}
pub const fn pfuta(n: usize) -> Reg {
    reg(0x0F400 + 4 * n)
}
pub const fn pfvlvfb(n: usize) -> Reg {
    reg(0x0F200 + 4 * n)
}
pub const fn mta(n: usize) -> Reg {
    reg(0x05200 + 4 * n)
}
pub const fn ftqf(n: usize) -> Reg {
    reg(0x0E600 + 4 * n)
}
pub const fn pfvlvf(n: usize) -> Reg {
    reg(0x0F100 + 4 * n)
}
pub const fn mpsar(n: usize) -> Reg {
    reg(0x0A600 + 4 * n)
}
pub const fn eimc_ex(n: usize) -> Reg {
    reg(0x00AB0 + 4 * n)
}

// Queue registers [DS 8.2.3.8, 8.2.3.9].
pub const fn rdbal(q: QueueIndex) -> Reg {
    queue_reg(0x01000, 0x40, q)
}
pub const fn rdbah(q: QueueIndex) -> Reg {
    queue_reg(0x01004, 0x40, q)
}
pub const fn rdlen(q: QueueIndex) -> Reg {
    queue_reg(0x01008, 0x40, q)
}
pub const fn rdh(q: QueueIndex) -> Reg {
    queue_reg(0x01010, 0x40, q)
}
pub const fn rdt(q: QueueIndex) -> Reg {
    queue_reg(0x01018, 0x40, q)
}
pub const fn srrctl(q: QueueIndex) -> Reg {
    queue_reg(0x01014, 0x40, q)
}
pub const SRRCTL_BSIZEPACKET_MASK: u32 = 0x1F;
pub const SRRCTL_DROP_EN: u32 = 1 << 28;
pub const fn rxdctl(q: QueueIndex) -> Reg {
    queue_reg(0x01028, 0x40, q)
}
pub const RXDCTL_ENABLE: u32 = 1 << 25;
pub const fn dca_rxctrl(q: QueueIndex) -> Reg {
    queue_reg(0x0100C, 0x40, q)
}
pub const DCA_RXCTRL_RELAXED_WRITE: u32 = 1 << 12;
pub const fn tdbal(q: QueueIndex) -> Reg {
    queue_reg(0x06000, 0x40, q)
}
pub const fn tdbah(q: QueueIndex) -> Reg {
    queue_reg(0x06004, 0x40, q)
}
pub const fn tdlen(q: QueueIndex) -> Reg {
    queue_reg(0x06008, 0x40, q)
}
pub const fn tdh(q: QueueIndex) -> Reg {
    queue_reg(0x06010, 0x40, q)
}
pub const fn tdt(q: QueueIndex) -> Reg {
    queue_reg(0x06018, 0x40, q)
}
pub const fn txdctl(q: QueueIndex) -> Reg {
    queue_reg(0x06028, 0x40, q)
}
pub const TXDCTL_ENABLE: u32 = 1 << 25;
pub const fn tdwbal(q: QueueIndex) -> Reg {
    queue_reg(0x06038, 0x40, q)
}
pub const fn tdwbah(q: QueueIndex) -> Reg {
    queue_reg(0x0603C, 0x40, q)
}
pub const TDWBAL_HEAD_WB_EN: u32 = 1;
pub const fn dca_txctrl(q: QueueIndex) -> Reg {
    queue_reg(0x0600C, 0x40, q)
}
pub const DCA_TXCTRL_RELAXED_WRITE: u32 = 1 << 11;

// Legacy descriptors [DS 7.1.5, 7.2.3.2.2]: qword 1 fields.
/// RX write-back: Descriptor Done (status bit 0 at bit 32).
pub const RX_DD: u64 = 1 << 32;
/// RX write-back: End Of Packet (status bit 1 at bit 33).
pub const RX_EOP: u64 = 1 << 33;
/// TX command: End Of Packet (CMD bit 0 at bit 24).
pub const TX_EOP: u64 = 1 << 24;
/// TX command: Insert FCS (CMD bit 1).
pub const TX_IFCS: u64 = 1 << 25;
/// TX command: Report Status (CMD bit 3).
pub const TX_RS: u64 = 1 << 27;
