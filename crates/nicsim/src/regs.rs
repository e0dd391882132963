//! 82599 BAR0 register map: offsets, reset values, read-only and reserved bits.
//!
//! Section numbers are those of the Intel 82599 10 GbE Controller Datasheet rev. 3.3 ("DS").
//! Where the datasheet and what drivers observed on real parts disagree, nicsim follows the
//! parts, and docs/nicsim.md says where.

/// BAR0 size: 128 KiB [DS 8.1].
pub const BAR0_LEN: usize = 0x20000;
/// Number of 32-bit registers in BAR0.
pub const BAR0_DWORDS: usize = BAR0_LEN / 4;
/// Queues per direction on the 82599 [DS 1.3].
pub const QUEUES: usize = 128;

pub const CTRL: u32 = 0x00000;
pub const CTRL_GIO_DIS: u32 = 1 << 2; // PCIe master disable [DS 8.2.3.1.1]
pub const CTRL_LNK_RST: u32 = 1 << 3;
pub const CTRL_RST: u32 = 1 << 26;
pub const STATUS: u32 = 0x00008;
pub const STATUS_LINK_UP: u32 = 1 << 7;
pub const STATUS_GIO: u32 = 1 << 19; // PCIe master enable status [DS 5.2.5.3.2]
pub const CTRL_EXT: u32 = 0x00018;
pub const ESDP: u32 = 0x00020;
pub const I2CCTL: u32 = 0x00028;
/// I2CCTL bits [DS 8.2.3.1.5]: clock and data, each an input and an output.
pub const I2CCTL_SCL_IN: u32 = 1 << 0;
pub const I2CCTL_SCL_OUT: u32 = 1 << 1;
pub const I2CCTL_SDA_IN: u32 = 1 << 2;
pub const I2CCTL_SDA_OUT: u32 = 1 << 3;
pub const LEDCTL: u32 = 0x00200;
pub const EICR: u32 = 0x00800;
pub const EICS: u32 = 0x00808;
pub const EIMS: u32 = 0x00880;
pub const EIMC: u32 = 0x00888;
pub const EEC: u32 = 0x10010;
/// EEC bits [DS 8.2.3.2.1]: the serial pins, then the software request and its grant.
pub const EEC_SK: u32 = 1 << 0;
pub const EEC_CS: u32 = 1 << 1;
pub const EEC_DI: u32 = 1 << 2;
pub const EEC_DO: u32 = 1 << 3;
pub const EEC_REQ: u32 = 1 << 6;
pub const EEC_GNT: u32 = 1 << 7;
pub const EERD: u32 = 0x10014;
pub const SWSM: u32 = 0x10140;
pub const FWSM: u32 = 0x10148;
pub const FACTPS: u32 = 0x10150;
pub const SW_FW_SYNC: u32 = 0x10160;
pub const HLREG0: u32 = 0x04240;
pub const HLREG0_TXCRCEN: u32 = 1 << 0;
pub const HLREG0_RXCRCSTRP: u32 = 1 << 1;
pub const HLREG0_JUMBOEN: u32 = 1 << 2;
pub const HLREG0_TXPADEN: u32 = 1 << 10;
pub const HLREG0_LPBK: u32 = 1 << 15;
pub const MSCA: u32 = 0x0425C;
pub const MSRWD: u32 = 0x04260;
pub const MAXFRS: u32 = 0x04268;
pub const AUTOC: u32 = 0x042A0;
pub const AUTOC_AN_RESTART: u32 = 1 << 12;
/// Link partner's AN word and the AN arbitration state (bits 19:16, 0 until AN is restarted),
/// which Linux and DPDK wait on after restarting AN [DS 8.2.3.22.23].
pub const ANLP1: u32 = 0x042B0;
pub const ANLP1_AN_STATE_MASK: u32 = 0xF << 16;
pub const LINKS: u32 = 0x042A4;
pub const PCS1GLCTL: u32 = 0x04208;
pub const PCS1GANA: u32 = 0x04218;
pub const RXCTRL: u32 = 0x03000;
pub const RXCTRL_RXEN: u32 = 1 << 0;
pub const RDRXCTL: u32 = 0x02F00;
pub const RDRXCTL_CRCSTRIP: u32 = 1 << 1;
pub const RDRXCTL_DMAIDONE: u32 = 1 << 3;
pub const FCTRL: u32 = 0x05080;
/// RSS: receive checksum control, multiple receive queues command, redirection table and key
/// [DS 8.2.3.7.5, 8.2.3.7.12, 8.2.3.7.15, 8.2.3.7.14]; RETA, RSSRK and MRQC also answer at
/// their 82598 addresses (see [`alias_of`]).
pub const RXCSUM: u32 = 0x05000;
pub const MRQC: u32 = 0x05818;
pub const fn reta(n: u32) -> u32 {
    0x05C00 + 4 * n
}
pub const fn rssrk(n: u32) -> u32 {
    0x05C80 + 4 * n
}
/// The registers whose writes change where frames go.
pub fn is_rss_register(offset: u32) -> bool {
    matches!(offset, RXCSUM | MRQC) || (reta(0)..=reta(31)).contains(&offset) || (rssrk(0)..=rssrk(9)).contains(&offset)
}
pub const FCTRL_MPE: u32 = 1 << 8;
pub const FCTRL_UPE: u32 = 1 << 9;
pub const FCTRL_BAM: u32 = 1 << 10;
pub const VLNCTRL: u32 = 0x05088;
pub const SECRXCTRL: u32 = 0x08D00;
pub const SECRXCTRL_RX_DIS: u32 = 1 << 1;
pub const SECRXSTAT: u32 = 0x08D04;
pub const DMATXCTL: u32 = 0x04A80;
pub const DMATXCTL_TE: u32 = 1 << 0;
pub const DTXMXSZRQ: u32 = 0x08100;
pub const RTTDCS: u32 = 0x04900;
pub const MMNGC: u32 = 0x042D0;

// Link flow control [DS 8.2.3.3, 8.2.3.22.34].
/// FCTTV(n): pause times in XOFF frames; TTV0 in bits 15:0 is the 802.3x one [DS 8.2.3.3.2].
pub const fn fcttv(n: u32) -> u32 {
    0x03200 + 4 * n
}
/// FCRTL(n): low water mark of packet buffer n, bits 18:5 (bytes), XONE bit 31 [DS 8.2.3.3.3].
pub const fn fcrtl(n: u32) -> u32 {
    0x03220 + 4 * n
}
/// FCRTH(n): high water mark of packet buffer n, bits 18:5 (bytes), FCEN bit 31 [DS 8.2.3.3.4].
pub const fn fcrth(n: u32) -> u32 {
    0x03260 + 4 * n
}
/// The water marks' field: a byte count with 32-byte granularity.
pub const FC_THRESHOLD_MASK: u32 = 0x0007_FFE0;
pub const FCRTL_XONE: u32 = 1 << 31;
pub const FCRTH_FCEN: u32 = 1 << 31;
/// FCRTV: XOFF refresh period, bits 15:0, in pause quanta [DS 8.2.3.3.5].
pub const FCRTV: u32 = 0x032A0;
/// FCCFG: bits 4:3 TFCE, 01b = link (802.3x) flow control transmit enable [DS 8.2.3.3.7].
pub const FCCFG: u32 = 0x03D00;
pub const FCCFG_TFCE_MASK: u32 = 0x3 << 3;
pub const FCCFG_TFCE_802_3X: u32 = 1 << 3;
/// MFLCN: bit 3 RFCE, honour received PAUSE frames [DS 8.2.3.22.34].
pub const MFLCN: u32 = 0x04294;
pub const MFLCN_RFCE: u32 = 1 << 3;
/// RXPBSIZE(n): receive packet buffer size, KB in bits 19:10 [DS 8.2.3.8.9].
pub const fn rxpbsize(n: u32) -> u32 {
    0x03C00 + 4 * n
}

// Statistics [DS 8.2.3.23]; all read-only to software here (see docs/nicsim.md on RC).
/// Link XON/XOFF frames transmitted and received [DS 8.2.3.23.x].
pub const LXONTXC: u32 = 0x03F60;
pub const LXOFFTXC: u32 = 0x03F68;
pub const LXONRXCNT: u32 = 0x041A4;
pub const LXOFFRXCNT: u32 = 0x041A8;
pub const CRCERRS: u32 = 0x04000;
pub const RLEC: u32 = 0x04040;
pub const GPRC: u32 = 0x04074;
pub const BPRC: u32 = 0x04078;
pub const MPRC: u32 = 0x0407C;
pub const GPTC: u32 = 0x04080;
pub const GORCL: u32 = 0x04088;
pub const GORCH: u32 = 0x0408C;
pub const GOTCL: u32 = 0x04090;
pub const GOTCH: u32 = 0x04094;
pub const RUC: u32 = 0x040A4;
pub const ROC: u32 = 0x040AC;
pub const TORL: u32 = 0x040C0;
pub const TORH: u32 = 0x040C4;
pub const TPR: u32 = 0x040D0;
pub const TPT: u32 = 0x040D4;
pub const MPTC: u32 = 0x040F0;
pub const BPTC: u32 = 0x040F4;

/// MPC(n), n = packet buffer 0–7.
pub const fn mpc(n: u32) -> u32 {
    0x03FA0 + 4 * n
}
/// Per-statistics-counter RX packets, n = 0–15.
pub const fn qprc(n: u32) -> u32 {
    0x01030 + 0x40 * n
}
pub const fn qbrc_l(n: u32) -> u32 {
    0x01034 + 0x40 * n
}
pub const fn qbrc_h(n: u32) -> u32 {
    0x01038 + 0x40 * n
}
pub const fn qprdc(n: u32) -> u32 {
    0x01430 + 0x40 * n
}
pub const fn qptc(n: u32) -> u32 {
    0x06030 + 0x40 * n
}
pub const fn qbtc_l(n: u32) -> u32 {
    0x08700 + 8 * n
}
pub const fn qbtc_h(n: u32) -> u32 {
    0x08704 + 8 * n
}
pub const fn rqsmr(n: u32) -> u32 {
    0x02300 + 4 * n
}
pub const fn tqsm(n: u32) -> u32 {
    0x08600 + 4 * n
}

/// Receive queue register block base: queues 0–63 at 0x01000, 64–127 at 0x0D000 [DS 8.2.3.8].
pub const fn rx_block(q: u32) -> u32 {
    if q < 64 {
        0x01000 + 0x40 * q
    } else {
        0x0D000 + 0x40 * (q - 64)
    }
}
pub const fn rdbal(q: u32) -> u32 {
    rx_block(q)
}
pub const fn rdbah(q: u32) -> u32 {
    rx_block(q) + 0x04
}
pub const fn rdlen(q: u32) -> u32 {
    rx_block(q) + 0x08
}
pub const fn dca_rxctrl(q: u32) -> u32 {
    rx_block(q) + 0x0C
}
pub const fn rdh(q: u32) -> u32 {
    rx_block(q) + 0x10
}
pub const fn srrctl(q: u32) -> u32 {
    rx_block(q) + 0x14
}
pub const fn rdt(q: u32) -> u32 {
    rx_block(q) + 0x18
}
pub const fn rxdctl(q: u32) -> u32 {
    rx_block(q) + 0x28
}
pub const RXDCTL_ENABLE: u32 = 1 << 25;
pub const SRRCTL_BSIZEPACKET_MASK: u32 = 0x1F;
pub const SRRCTL_DESCTYPE_SHIFT: u32 = 25;
pub const SRRCTL_DESCTYPE_MASK: u32 = 0x7 << 25;
pub const SRRCTL_DROP_EN: u32 = 1 << 28;

/// Transmit queue register block, queues 0–127 at 0x06000 [DS 8.2.3.9].
pub const fn tx_block(q: u32) -> u32 {
    0x06000 + 0x40 * q
}
pub const fn tdbal(q: u32) -> u32 {
    tx_block(q)
}
pub const fn tdbah(q: u32) -> u32 {
    tx_block(q) + 0x04
}
pub const fn tdlen(q: u32) -> u32 {
    tx_block(q) + 0x08
}
pub const fn dca_txctrl(q: u32) -> u32 {
    tx_block(q) + 0x0C
}
pub const fn tdh(q: u32) -> u32 {
    tx_block(q) + 0x10
}
pub const fn tdt(q: u32) -> u32 {
    tx_block(q) + 0x18
}
pub const fn txdctl(q: u32) -> u32 {
    tx_block(q) + 0x28
}
pub const fn tdwbal(q: u32) -> u32 {
    tx_block(q) + 0x38
}
pub const fn tdwbah(q: u32) -> u32 {
    tx_block(q) + 0x3C
}
/// Which side of a port a queue or an access belongs to.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Rx,
    Tx,
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Direction::Rx => "rx",
            Direction::Tx => "tx",
        })
    }
}

/// A register of one queue's block, named by its offset in the block: the same layout for
/// receive [DS 8.2.3.8] and transmit [DS 8.2.3.9] queues except where noted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueRegister {
    /// RDBAL / TDBAL (+0x00).
    BaseLow,
    /// RDBAH / TDBAH (+0x04).
    BaseHigh,
    /// RDLEN / TDLEN (+0x08).
    Length,
    /// RDH / TDH (+0x10).
    Head,
    /// SRRCTL (+0x14), receive only.
    SplitReceiveControl,
    /// RDT / TDT (+0x18).
    Tail,
    /// RXDCTL / TXDCTL (+0x28).
    Control,
    /// TDWBAL (+0x38), transmit only.
    HeadWriteBackLow,
    /// TDWBAH (+0x3C), transmit only.
    HeadWriteBackHigh,
    /// Any other dword of the block (DCA control, statistics).
    Other,
}

/// The queue register at `offset`, if it is in a queue block: its direction, queue and name.
pub fn queue_register(offset: u32) -> Option<(Direction, u32, QueueRegister)> {
    let (direction, q) = match offset {
        0x01000..=0x01FFF => (Direction::Rx, (offset - 0x01000) / 0x40),
        0x0D000..=0x0DFFF => (Direction::Rx, 64 + (offset - 0x0D000) / 0x40),
        0x06000..=0x07FFF => (Direction::Tx, (offset - 0x06000) / 0x40),
        _ => return None,
    };
    let block = match direction {
        Direction::Rx => rx_block(q),
        Direction::Tx => tx_block(q),
    };
    let name = match (direction, offset - block) {
        (_, 0x00) => QueueRegister::BaseLow,
        (_, 0x04) => QueueRegister::BaseHigh,
        (_, 0x08) => QueueRegister::Length,
        (_, 0x10) => QueueRegister::Head,
        (Direction::Rx, 0x14) => QueueRegister::SplitReceiveControl,
        (_, 0x18) => QueueRegister::Tail,
        (_, 0x28) => QueueRegister::Control,
        (Direction::Tx, 0x38) => QueueRegister::HeadWriteBackLow,
        (Direction::Tx, 0x3C) => QueueRegister::HeadWriteBackHigh,
        _ => QueueRegister::Other,
    };
    Some((direction, q, name))
}

/// The queue statistic mapping registers RQSMR(0–31) and TQSM(0–31) [DS 8.2.3.8.9, 8.2.3.9.14].
pub const QUEUE_STATISTICS_MAPS: [std::ops::RangeInclusive<u32>; 2] = [rqsmr(0)..=rqsmr(31), tqsm(0)..=tqsm(31)];

/// The receive address registers RAL(0)–RAH(127) [DS 8.2.3.7.8, 8.2.3.7.9].
pub const RAR_RANGE: std::ops::RangeInclusive<u32> = ral(0)..=rah(127);

pub const TXDCTL_WTHRESH_SHIFT: u32 = 16;
pub const TXDCTL_ENABLE: u32 = 1 << 25;
pub const TXDCTL_SWFLSH: u32 = 1 << 26;
pub const TDWBAL_HEAD_WB_EN: u32 = 1 << 0;

pub const fn ral(n: u32) -> u32 {
    0x0A200 + 8 * n
}
pub const fn rah(n: u32) -> u32 {
    0x0A204 + 8 * n
}
pub const RAH_AV: u32 = 1 << 31;

// Registers only drivers write here (the reference peer's TinyNF-style init), named for them;
// offsets from the register summary [DS 8.2.2] unless noted.
/// EIMC_EX(n), n = 0–1: extended interrupt mask clear.
pub const fn eimc_ex(n: u32) -> u32 {
    0x00AB0 + 4 * n
}
/// MTA(n), n = 0–127: multicast table array.
pub const fn mta(n: u32) -> u32 {
    0x05200 + 4 * n
}
/// MPSAR(n), n = 0–255: MAC pool select [DS 8.2.3.7.10].
pub const fn mpsar(n: u32) -> u32 {
    0x0A600 + 4 * n
}
/// FTQF(n), n = 0–127: five-tuple queue filter [DS 8.2.3.7.19]; bit 31 enables it.
pub const fn ftqf(n: u32) -> u32 {
    0x0E600 + 4 * n
}
/// PFVLVF(n), n = 0–63: VLAN filter; PFVLVFB(n), n = 0–127: its pool bitmap.
pub const fn pfvlvf(n: u32) -> u32 {
    0x0F100 + 4 * n
}
pub const fn pfvlvfb(n: u32) -> u32 {
    0x0F200 + 4 * n
}
/// PFUTA(n), n = 0–127: unicast table array [DS 8.2.3.27.12].
pub const fn pfuta(n: u32) -> u32 {
    0x0F400 + 4 * n
}
/// TXPBSIZE(n), n = 0–7: transmit packet buffer size, KB in bits 19:10 [DS 8.2.3.9.13].
pub const fn txpbsize(n: u32) -> u32 {
    0x0CC00 + 4 * n
}
/// RTTDQSEL: the queue that RTTDT1C refers to; RTTDT1C: its transmit rate-scheduler credits.
pub const RTTDQSEL: u32 = 0x04904;
pub const RTTDT1C: u32 = 0x04908;
/// TXPBTHRESH(0): transmit packet buffer threshold, KB in bits 9:0 [DS 8.2.3.9.16].
pub const TXPBTHRESH0: u32 = 0x04950;

/// What a register (or one bit field of it) is, for reset, write masks and lint.
#[derive(Debug, Clone, Copy)]
pub struct RegSpec {
    pub name: &'static str,
    pub reset: u32,
    /// Bits software cannot change: a write is undone and the stored value kept.
    pub read_only: u32,
    /// Reserved bits: software should write them as read (their reset value). A change is
    /// stored (hardware ignores them) and reported by lint.
    pub reserved: u32,
    /// Datasheet section for messages.
    pub section: &'static str,
}

const fn spec(name: &'static str, reset: u32, read_only: u32, reserved: u32, section: &'static str) -> RegSpec {
    RegSpec { name, reset, read_only, reserved, section }
}

/// Canonical offset for an 82598-compatible alias: SRRCTL(0–15) at 0x02100,
/// DCA_RXCTRL(0–15) at 0x02200, RAL/RAH(0–15) at 0x05400, QPTC(0–15) at 0x08680. Aliases share
/// storage with the canonical register; nicsim mirrors writes between the two addresses.
pub fn alias_of(offset: u32) -> Option<u32> {
    match offset {
        0x02100..=0x0213C => Some(srrctl((offset - 0x02100) / 4)),
        0x02200..=0x0223C => Some(dca_rxctrl((offset - 0x02200) / 4)),
        0x05400..=0x0547C => Some(0x0A200 + (offset - 0x05400)),
        0x08680..=0x086BC => Some(qptc((offset - 0x08680) / 4)),
        0x0EC80 => Some(MRQC),
        0x0EB00..=0x0EB7C => Some(reta((offset - 0x0EB00) / 4)),
        0x0EB80..=0x0EBA4 => Some(rssrk((offset - 0x0EB80) / 4)),
        _ => None,
    }
}

/// The alias address of a canonical register, if it has one (inverse of [`alias_of`]).
pub fn alias_for(offset: u32) -> Option<u32> {
    for q in 0..16 {
        if offset == srrctl(q) {
            return Some(0x02100 + 4 * q);
        }
        if offset == dca_rxctrl(q) {
            return Some(0x02200 + 4 * q);
        }
        if offset == qptc(q) {
            return Some(0x08680 + 4 * q);
        }
    }
    match offset {
        MRQC => return Some(0x0EC80),
        o if (reta(0)..=reta(31)).contains(&o) => return Some(0x0EB00 + (o - reta(0))),
        o if (rssrk(0)..=rssrk(9)).contains(&o) => return Some(0x0EB80 + (o - rssrk(0))),
        _ => {}
    }
    (0x0A200..=0x0A27C).contains(&offset).then(|| 0x05400 + (offset - 0x0A200))
}

/// Statistics registers, read-only to software.
pub fn is_statistic(offset: u32) -> bool {
    matches!(offset, 0x04000..=0x040FC | 0x03FA0..=0x03FBC | LXONTXC | LXOFFTXC | LXONRXCNT | LXOFFRXCNT)
        || (0x08700..=0x0877C).contains(&offset)
        || ((0x01030..0x01400).contains(&offset) && matches!((offset - 0x01000) % 0x40, 0x30 | 0x34 | 0x38))
        || ((0x01430..0x01430 + 0x40 * 16).contains(&offset) && (offset - 0x01430) % 0x40 == 0)
        || ((0x06030..0x06030 + 0x40 * 16).contains(&offset) && (offset - 0x06030) % 0x40 == 0)
}

/// The specification of the register at `offset`, if nicsim models it beyond plain storage.
pub fn spec_of(offset: u32) -> Option<RegSpec> {
    let s = match offset {
        CTRL => spec("CTRL", 0, 0, 0, "8.2.3.1.1"),
        STATUS => spec("STATUS", 0, u32::MAX, 0, "8.2.3.1.2"),
        ESDP => spec("ESDP", 0x0000_0004, 0, 0, "8.2.3.1.4"),
        I2CCTL => spec("I2CCTL", 0x0000_000F, 0b0101, 0, "8.2.3.1.5"),
        LEDCTL => spec("LEDCTL", 0x0504_0100, 0, 0, "8.2.3.1.6"),
        // Bit 31 is what Linux and DPDK call OTHER and write with the rest (IXGBE_EIMS_ENABLE_MASK).
        EIMS => spec("EIMS", 0, 0, 0, "8.2.3.5.3"),
        // Write-only: drivers write all ones ("clear every cause"), bit 31 included, and a
        // write-only register's reserved bits hold nothing to preserve.
        EIMC => spec("EIMC", 0, 0, 0, "8.2.3.5.4"),
        // DO (3), GNT (7), EE_PRES (8), AUTO_RD (9) and EE_SIZE (14:11) are read-only [DS 8.2.3.2.1].
        EEC => spec("EEC", 0x0000_1730, 0x0000_7B88, 0, "8.2.3.2.1"),
        FWSM => spec("FWSM", 0x0000_8040, u32::MAX, 0, "8.2.3.5.x (FWSM)"),
        FACTPS => spec("FACTPS", 0x0000_0004, u32::MAX, 0, "8.2.3.26.x (FACTPS)"),
        SW_FW_SYNC => spec("SW_FW_SYNC", 0, 0x3E0, 0, "10.5.4"),
        HLREG0 => spec("HLREG0", 0x0801_2C0B, 0, (0x7F << 3) | (0xF << 11), "8.2.3.22.8"),
        MSRWD => spec("MSRWD", 0, 0xFFFF_0000, 0, "8.2.3.22.12"),
        MAXFRS => spec("MAXFRS", 0x05EE_0000, 0, 0, "8.2.3.22.13"),
        AUTOC => spec("AUTOC", 0xC19D_8284, 0, 0, "8.2.3.22.19"),
        LINKS => spec("LINKS", 0xFC47_FF83, u32::MAX, 0, "8.2.3.22.20"),
        ANLP1 => spec("ANLP1", 0, u32::MAX, 0, "8.2.3.22.23"),
        PCS1GLCTL => spec("PCS1GLCTL", 0x0204_0000, 0, 0, "8.2.3.22.1"),
        PCS1GANA => spec("PCS1GANA", 0x0000_01A0, 0, 0, "8.2.3.22.2"),
        RXCTRL => spec("RXCTRL", 0, 0, !0b11, "8.2.3.8.10"),
        // DMAIDONE (bit 3) is read-only; bits 16:4 are reserved and read as 0x0880 [DS 8.2.3.8.8].
        RDRXCTL => spec("RDRXCTL", 0x0010_8808, RDRXCTL_DMAIDONE, 0x1FFF << 4, "8.2.3.8.8"),
        // SBP, MPE, UPE, BAM, PMCF (12) and DPF (13) are defined [DS 8.2.3.7.1]; Linux and DPDK
        // set PMCF and DPF.
        FCTRL => {
            spec("FCTRL", 0, 0, !((1 << 1) | FCTRL_MPE | FCTRL_UPE | FCTRL_BAM | (1 << 12) | (1 << 13)), "8.2.3.7.1")
        }
        VLNCTRL => spec("VLNCTRL", 0x0000_8100, 0, 0, "8.2.3.7.2"),
        SECRXCTRL => spec("SECRXCTRL", 0x0000_0001, 0, 0, "8.2.3.12.x (SECRXCTRL)"),
        SECRXSTAT => spec("SECRXSTAT", 0x0000_0001, u32::MAX, 0, "8.2.3.12.x (SECRXSTAT)"),
        // Bits 2:1 are reserved with reset value 10b; 15:4 reserved [DS 8.2.3.9.2].
        DMATXCTL => spec("DMATXCTL", 0x8100_0004, 0, 0xFFF6, "8.2.3.9.2"),
        DTXMXSZRQ => spec("DTXMXSZRQ", 0x0000_0010, 0, !0xFFF, "8.2.3.9.1"),
        RTTDCS => spec("RTTDCS", 0x00C0_0000, 0, 0, "8.2.3.10.2"),
        MMNGC => spec("MMNGC", 0, u32::MAX, 0, "8.2.3.x (MMNGC)"),
        EICR => spec("EICR", 0, 0, 0, "8.2.3.5.1"),
        _ => return table_spec(offset),
    };
    Some(s)
}

fn table_spec(offset: u32) -> Option<RegSpec> {
    if is_statistic(offset) {
        return Some(spec("statistics counter", 0, u32::MAX, 0, "8.2.3.23"));
    }
    let in_rx_block = (0x01000..0x02000).contains(&offset) || (0x0D000..0x0E000).contains(&offset);
    if in_rx_block {
        return Some(match offset & 0x3F {
            0x0C => spec("DCA_RXCTRL", 0x0000_B200, 0, 0, "8.2.3.11.1"), // bit 12 resets to 1, drivers clear it
            0x14 => spec("SRRCTL", 0x0000_0402, 0, (0x7 << 5) | (0xFF << 14) | (0x7 << 29), "8.2.3.8.7"),
            _ => return None,
        });
    }
    if (0x06000..0x08000).contains(&offset) {
        return Some(match offset & 0x3F {
            0x0C => spec("DCA_TXCTRL", 0x0000_2A00, 0, 0, "8.2.3.11.2"),
            // Reserved: 7, 15, 24:23, 31:27 [DS 8.2.3.9.10].
            0x28 => spec("TXDCTL", 0, 0, (1 << 7) | (1 << 15) | (0x3 << 23) | (0x1F << 27), "8.2.3.9.10"),
            0x38 => spec("TDWBAL", 0, 0, 1 << 1, "8.2.3.9.11"),
            _ => return None,
        });
    }
    match offset {
        0x03C00..=0x03C1C => Some(spec("RXPBSIZE", 0x0008_0000, 0, 0, "8.2.3.8.9")),
        0x0CC00..=0x0CC1C => Some(spec("TXPBSIZE", 0x0002_8000, 0, 0, "8.2.3.9.13")),
        0x04950 => Some(spec("TXPBTHRESH", 0x96, 0, 0, "8.2.3.9.16")),
        // Water marks: bits 4:0 and 30:19 reserved [DS 8.2.3.3.3, 8.2.3.3.4].
        0x03220..=0x0323C => Some(spec("FCRTL", 0, 0, 0x1F | 0xFFF << 19, "8.2.3.3.3")),
        0x03260..=0x0327C => Some(spec("FCRTH", 0, 0, 0x1F | 0xFFF << 19, "8.2.3.3.4")),
        FCRTV => Some(spec("FCRTV", 0, 0, 0xFFFF_0000, "8.2.3.3.5")),
        FCCFG => Some(spec("FCCFG", 0, 0, !FCCFG_TFCE_MASK, "8.2.3.3.7")),
        MFLCN => Some(spec("MFLCN", 0, 0, 0xFFFF_F000, "8.2.3.22.34")),
        _ => None,
    }
}

/// Every register whose reset value is not zero, with that value (used to build the reset image).
pub fn nonzero_reset_values() -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    let mut offset = 0;
    while (offset as usize) < BAR0_LEN {
        if let Some(s) = spec_of(offset) {
            if s.reset != 0 {
                v.push((offset, s.reset));
            }
        }
        offset += 4;
    }
    // The 82598-compatible aliases read the same storage.
    let aliased: Vec<(u32, u32)> = v.iter().filter_map(|&(o, r)| alias_for(o).map(|a| (a, r))).collect();
    v.extend(aliased);
    v
}

/// A human name for an offset, for lint and fault messages: queue registers with their queue.
pub fn name_of(offset: u32) -> String {
    let canon = alias_of(offset).unwrap_or(offset);
    if let Some((direction, q, register)) = queue_register(canon) {
        let name = match (direction, register) {
            (Direction::Rx, QueueRegister::BaseLow) => Some("RDBAL"),
            (Direction::Rx, QueueRegister::BaseHigh) => Some("RDBAH"),
            (Direction::Rx, QueueRegister::Length) => Some("RDLEN"),
            (Direction::Rx, QueueRegister::Head) => Some("RDH"),
            (Direction::Rx, QueueRegister::SplitReceiveControl) => Some("SRRCTL"),
            (Direction::Rx, QueueRegister::Tail) => Some("RDT"),
            (Direction::Rx, QueueRegister::Control) => Some("RXDCTL"),
            (Direction::Tx, QueueRegister::BaseLow) => Some("TDBAL"),
            (Direction::Tx, QueueRegister::BaseHigh) => Some("TDBAH"),
            (Direction::Tx, QueueRegister::Length) => Some("TDLEN"),
            (Direction::Tx, QueueRegister::Head) => Some("TDH"),
            (Direction::Tx, QueueRegister::Tail) => Some("TDT"),
            (Direction::Tx, QueueRegister::Control) => Some("TXDCTL"),
            (Direction::Tx, QueueRegister::HeadWriteBackLow) => Some("TDWBAL"),
            (Direction::Tx, QueueRegister::HeadWriteBackHigh) => Some("TDWBAH"),
            _ => None,
        };
        if let Some(n) = name {
            return format!("{n}({q})");
        }
    }
    match spec_of(canon) {
        Some(s) => s.name.to_string(),
        None => format!("register {canon:#07x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_formulas_match_the_datasheet_table() {
        assert_eq!(rdt(0), 0x01018);
        assert_eq!(rdt(63), 0x01018 + 0x40 * 63);
        assert_eq!(rdt(64), 0x0D018);
        assert_eq!(rxdctl(127), 0x0D028 + 0x40 * 63);
        assert_eq!(tdt(127), 0x06018 + 0x40 * 127);
        assert_eq!(tdwbal(1), 0x06078);
        assert_eq!(srrctl(3), 0x010D4);
    }

    #[test]
    fn queue_registers_are_named_by_their_place_in_the_block() {
        assert_eq!(queue_register(rdt(0)), Some((Direction::Rx, 0, QueueRegister::Tail)));
        assert_eq!(queue_register(rxdctl(70)), Some((Direction::Rx, 70, QueueRegister::Control)));
        assert_eq!(queue_register(srrctl(3)), Some((Direction::Rx, 3, QueueRegister::SplitReceiveControl)));
        assert_eq!(queue_register(tdh(127)), Some((Direction::Tx, 127, QueueRegister::Head)));
        assert_eq!(queue_register(tdwbah(5)), Some((Direction::Tx, 5, QueueRegister::HeadWriteBackHigh)));
        assert_eq!(queue_register(tx_block(2) + 0x14), Some((Direction::Tx, 2, QueueRegister::Other)));
        assert_eq!(queue_register(qprc(0)), Some((Direction::Rx, 0, QueueRegister::Other)));
        assert_eq!(queue_register(FCTRL), None);
    }

    #[test]
    fn aliases_are_inverse() {
        assert_eq!(alias_of(0x02100), Some(srrctl(0)));
        assert_eq!(alias_for(srrctl(0)), Some(0x02100));
        assert_eq!(alias_of(0x05404), Some(rah(0)));
        assert_eq!(alias_for(rah(0)), Some(0x05404));
        assert_eq!(alias_for(srrctl(16)), None);
        assert_eq!(alias_of(0x08680), Some(qptc(0)));
    }

    #[test]
    fn names_are_readable() {
        assert_eq!(name_of(rdt(5)), "RDT(5)");
        assert_eq!(name_of(rxdctl(70)), "RXDCTL(70)");
        assert_eq!(name_of(tdbal(2)), "TDBAL(2)");
        assert_eq!(name_of(FCTRL), "FCTRL");
        assert_eq!(name_of(0x02100), "SRRCTL(0)", "the 82598 alias, by its queue");
        assert_eq!(name_of(srrctl(3)), "SRRCTL(3)");
        assert_eq!(name_of(tdwbah(1)), "TDWBAH(1)");
    }

    #[test]
    fn statistics_are_recognised() {
        for off in [GPRC, GORCH, mpc(7), qprc(15), qbrc_h(0), qprdc(3), qptc(15), qbtc_l(2)] {
            assert!(is_statistic(off), "{off:#x}");
        }
        for off in [rdt(0), srrctl(0), rxdctl(0), tdt(0), HLREG0] {
            assert!(!is_statistic(off), "{off:#x}");
        }
    }
}
