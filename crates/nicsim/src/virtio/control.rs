//! The control virtqueue's commands [virtio 1.2 §5.1.6.5] and the receive filter they set.
//!
//! A command is a chain: the class and command bytes, the command's data, then one
//! device-writable byte for the ack, over any number of descriptors. Its bytes are read where
//! they lie in the driver's memory ([`ChainReader`]), so a MAC table of any length costs
//! nothing to skip. A command that breaks its class's rules, or belongs to a feature the driver
//! did not negotiate, is answered `VIRTIO_NET_ERR` and changes nothing; the reason goes to lint.
//! The table and the filter follow QEMU's device, which drivers are written against.

use super::feature;
use super::queue::{QueueError, Segment};
use crate::dma::{self, DmaSpace};

/// Classes and commands [virtio 1.2 §5.1.6.5.1, §5.1.6.5.2, §5.1.6.5.3].
pub const CLASS_RX: u8 = 0;
pub const RX_PROMISC: u8 = 0;
pub const RX_ALLMULTI: u8 = 1;
pub const RX_ALLUNI: u8 = 2;
pub const RX_NOMULTI: u8 = 3;
pub const RX_NOUNI: u8 = 4;
pub const RX_NOBCAST: u8 = 5;
pub const CLASS_MAC: u8 = 1;
pub const MAC_TABLE_SET: u8 = 0;
pub const MAC_ADDR_SET: u8 = 1;
pub const CLASS_VLAN: u8 = 2;
pub const VLAN_ADD: u8 = 0;
pub const VLAN_DEL: u8 = 1;
/// Acks [virtio 1.2 §5.1.6.5].
pub const OK: u8 = 0;
pub const ERR: u8 = 1;

/// Addresses each list of the MAC table holds; a longer list is accepted and the device then
/// takes every address of its kind (QEMU's MAC_TABLE_ENTRIES and overflow flags).
pub const MAC_TABLE_ENTRIES: usize = 64;
/// VLAN IDs are 12 bits [IEEE 802.1Q].
const VLANS: usize = 4096;

/// One list of the MAC table: up to [`MAC_TABLE_ENTRIES`] addresses, or all of its kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MacList {
    pub addresses: Vec<[u8; 6]>,
    pub overflow: bool,
}

impl MacList {
    fn matches(&self, dst: &[u8; 6]) -> bool {
        self.overflow || self.addresses.contains(dst)
    }
}

/// What the device lets through to the receive queue [virtio 1.2 §5.1.6.5.1, §5.1.6.5.2].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiveFilter {
    pub promiscuous: bool,
    pub allmulti: bool,
    pub alluni: bool,
    pub nomulti: bool,
    pub nouni: bool,
    pub nobcast: bool,
    pub unicast: MacList,
    pub multicast: MacList,
    /// VLAN IDs let through, one bit each; used only once `VIRTIO_NET_F_CTRL_VLAN` is
    /// negotiated (without it every tag passes).
    vlans: Box<[u64; VLANS / 64]>,
}

impl Default for ReceiveFilter {
    /// After a reset: promiscuous, as QEMU's device, with an empty MAC table and no VLAN
    /// [virtio 1.2 §5.1.6.5.2: "an empty MAC filtering table on reset"].
    fn default() -> Self {
        ReceiveFilter {
            promiscuous: true,
            allmulti: false,
            alluni: false,
            nomulti: false,
            nouni: false,
            nobcast: false,
            unicast: MacList::default(),
            multicast: MacList::default(),
            vlans: Box::new([0; VLANS / 64]),
        }
    }
}

impl ReceiveFilter {
    /// Whether a frame goes to the driver of a device with address `mac`, which negotiated
    /// `negotiated`.
    pub fn accepts(&self, frame: &[u8], mac: &[u8; 6], negotiated: u64) -> bool {
        if self.promiscuous {
            return true;
        }
        let Some(dst) = frame.first_chunk::<6>() else { return false };
        if negotiated & feature::CTRL_VLAN != 0 && frame.len() >= 16 && frame[12..14] == [0x81, 0x00] {
            let vid = usize::from(u16::from_be_bytes([frame[14], frame[15]]) & 0x0FFF);
            if self.vlans[vid / 64] & 1 << (vid % 64) == 0 {
                return false;
            }
        }
        if dst[0] & 1 != 0 {
            if *dst == [0xFF; 6] {
                return !self.nobcast;
            }
            !self.nomulti && (self.allmulti || self.multicast.matches(dst))
        } else {
            !self.nouni && (self.alluni || dst == mac || self.unicast.matches(dst))
        }
    }
}

/// The device-readable bytes of a chain, read in order from the driver's memory.
pub struct ChainReader<'a> {
    segments: &'a [Segment],
    /// The segment being read and the bytes of it already read.
    at: usize,
    offset: u64,
    remaining: u64,
}

impl<'a> ChainReader<'a> {
    pub fn new(segments: &'a [Segment]) -> Self {
        let readable: Vec<_> = segments.iter().take_while(|s| !s.writable).collect();
        let remaining = readable.iter().map(|s| u64::from(s.len)).sum();
        ChainReader { segments: &segments[..readable.len()], at: 0, offset: 0, remaining }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Fills `out` with the next bytes; `Ok(false)` if the chain has fewer.
    pub fn read(&mut self, dma: &mut impl DmaSpace, out: &mut [u8]) -> Result<bool, QueueError> {
        if (out.len() as u64) > self.remaining {
            return Ok(false);
        }
        let mut done = 0;
        while done < out.len() {
            let s = self.segments[self.at];
            let n = (u64::from(s.len) - self.offset).min((out.len() - done) as u64) as usize;
            let addr = s.addr + self.offset;
            if n > 0 && !dma::read(dma, addr, &mut out[done..done + n]) {
                return Err(QueueError::Fault(addr));
            }
            done += n;
            self.advance(n as u64);
        }
        Ok(true)
    }

    /// Passes over the next `n` bytes without reading them; `false` if the chain has fewer.
    pub fn skip(&mut self, n: u64) -> bool {
        if n > self.remaining {
            return false;
        }
        let mut left = n;
        while left > 0 {
            let step = (u64::from(self.segments[self.at].len) - self.offset).min(left);
            self.advance(step);
            left -= step;
        }
        true
    }

    fn advance(&mut self, n: u64) {
        self.offset += n;
        self.remaining -= n;
        while self.at < self.segments.len() && self.offset == u64::from(self.segments[self.at].len) {
            (self.at, self.offset) = (self.at + 1, 0);
        }
    }
}

/// A command's outcome: its ack, and what was wrong with it if it was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Refused(&'static str),
}

impl Outcome {
    pub fn ack(self) -> u8 {
        match self {
            Outcome::Done => OK,
            Outcome::Refused(_) => ERR,
        }
    }
}

/// A command's class and command bytes as one number (class in the high byte), for naming it;
/// `None` for a chain too short to have them.
pub fn command_code(dma: &mut impl DmaSpace, segments: &[Segment]) -> Option<u16> {
    let mut head = [0u8; 2];
    ChainReader::new(segments).read(dma, &mut head).ok().filter(|&read| read).map(|_| u16::from_be_bytes(head))
}

/// Executes the command in `chain` on `filter` and the device address `mac`, for a driver that
/// negotiated `negotiated`. Only a DMA fault is an error (the queue stops); every malformed
/// command is refused and changes nothing.
pub fn execute(
    dma: &mut impl DmaSpace,
    chain: &mut ChainReader,
    filter: &mut ReceiveFilter,
    mac: &mut [u8; 6],
    negotiated: u64,
) -> Result<Outcome, QueueError> {
    let mut head = [0u8; 2];
    if !chain.read(dma, &mut head)? {
        return Ok(Outcome::Refused("a control command shorter than its class and command bytes"));
    }
    let needs = |bit: u64, what: &'static str| if negotiated & bit != 0 { None } else { Some(what) };
    let refused = match (head[0], head[1]) {
        (CLASS_RX, RX_PROMISC | RX_ALLMULTI) => {
            needs(feature::CTRL_RX, "an RX mode command without VIRTIO_NET_F_CTRL_RX")
        }
        (CLASS_RX, RX_ALLUNI..=RX_NOBCAST) => {
            needs(feature::CTRL_RX_EXTRA, "an extra RX mode command without VIRTIO_NET_F_CTRL_RX_EXTRA")
        }
        (CLASS_MAC, MAC_TABLE_SET) => needs(feature::CTRL_RX, "MAC_TABLE_SET without VIRTIO_NET_F_CTRL_RX"),
        (CLASS_MAC, MAC_ADDR_SET) => needs(feature::CTRL_MAC_ADDR, "MAC_ADDR_SET without VIRTIO_NET_F_CTRL_MAC_ADDR"),
        (CLASS_VLAN, VLAN_ADD | VLAN_DEL) => needs(feature::CTRL_VLAN, "a VLAN command without VIRTIO_NET_F_CTRL_VLAN"),
        _ => Some("a class or command the device does not know"),
    };
    if let Some(why) = refused {
        return Ok(Outcome::Refused(why));
    }
    match (head[0], head[1]) {
        (CLASS_RX, command) => {
            let mut on = [0u8];
            if !chain.read(dma, &mut on)? || chain.remaining() != 0 {
                return Ok(Outcome::Refused("an RX mode command whose data is not exactly one byte"));
            }
            let on = on[0] != 0;
            match command {
                RX_PROMISC => filter.promiscuous = on,
                RX_ALLMULTI => filter.allmulti = on,
                RX_ALLUNI => filter.alluni = on,
                RX_NOMULTI => filter.nomulti = on,
                RX_NOUNI => filter.nouni = on,
                _ => filter.nobcast = on,
            }
        }
        (CLASS_MAC, MAC_TABLE_SET) => {
            let unicast = match read_mac_list(dma, chain)? {
                Ok(list) => list,
                Err(why) => return Ok(Outcome::Refused(why)),
            };
            let multicast = match read_mac_list(dma, chain)? {
                Ok(list) => list,
                Err(why) => return Ok(Outcome::Refused(why)),
            };
            if chain.remaining() != 0 {
                return Ok(Outcome::Refused("MAC_TABLE_SET with bytes after its multicast list"));
            }
            (filter.unicast, filter.multicast) = (unicast, multicast);
        }
        (CLASS_MAC, _) => {
            let mut address = [0u8; 6];
            if !chain.read(dma, &mut address)? || chain.remaining() != 0 {
                return Ok(Outcome::Refused("MAC_ADDR_SET whose data is not exactly one address"));
            }
            *mac = address;
        }
        (_, command) => {
            let mut vid = [0u8; 2];
            if !chain.read(dma, &mut vid)? || chain.remaining() != 0 {
                return Ok(Outcome::Refused("a VLAN command whose data is not exactly one le16 ID"));
            }
            let vid = usize::from(u16::from_le_bytes(vid));
            if vid >= VLANS {
                return Ok(Outcome::Refused("a VLAN ID of more than 12 bits"));
            }
            let bit = 1u64 << (vid % 64);
            if command == VLAN_ADD {
                filter.vlans[vid / 64] |= bit;
            } else {
                filter.vlans[vid / 64] &= !bit;
            }
        }
    }
    Ok(Outcome::Done)
}

/// One `virtio_net_ctrl_mac`: a le32 count, then that many addresses.
fn read_mac_list(
    dma: &mut impl DmaSpace,
    chain: &mut ChainReader,
) -> Result<Result<MacList, &'static str>, QueueError> {
    let mut count = [0u8; 4];
    if !chain.read(dma, &mut count)? {
        return Ok(Err("MAC_TABLE_SET without the entry count of each list"));
    }
    let entries = u64::from(u32::from_le_bytes(count));
    if entries * 6 > chain.remaining() {
        return Ok(Err("MAC_TABLE_SET with fewer addresses than its entry count"));
    }
    if entries as usize > MAC_TABLE_ENTRIES {
        chain.skip(entries * 6);
        return Ok(Ok(MacList { addresses: Vec::new(), overflow: true }));
    }
    let mut addresses = vec![[0u8; 6]; entries as usize];
    for a in &mut addresses {
        chain.read(dma, a)?;
    }
    Ok(Ok(MacList { addresses, overflow: false }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::FlatDmaSpace;

    const BASE: u64 = 0x10_0000;
    const ALL: u64 = feature::CTRL_RX | feature::CTRL_RX_EXTRA | feature::CTRL_MAC_ADDR | feature::CTRL_VLAN;
    const OWN: [u8; 6] = [2, 0, 0, 0, 0, 1];

    /// `bytes` laid out in the driver's memory as readable buffers of `piece` bytes each,
    /// then a writable ack byte.
    fn chain(dma: &mut FlatDmaSpace, bytes: &[u8], piece: usize) -> Vec<Segment> {
        let (mut segments, mut addr) = (Vec::new(), BASE);
        for part in bytes.chunks(piece.max(1)) {
            assert!(dma::write(dma, addr, part));
            segments.push(Segment { addr, len: part.len() as u32, writable: false });
            // Apart, so that reading across a buffer's end would show.
            addr += part.len() as u64 + 8;
        }
        segments.push(Segment { addr: BASE + 0xF000, len: 1, writable: true });
        segments
    }

    fn run(bytes: &[u8], piece: usize, negotiated: u64, filter: &mut ReceiveFilter) -> Outcome {
        let mut dma = FlatDmaSpace { region: platform::MappedRegion::anonymous(0x10000).unwrap(), base: BASE };
        let segments = chain(&mut dma, bytes, piece);
        let mut mac = OWN;
        execute(&mut dma, &mut ChainReader::new(&segments), filter, &mut mac, negotiated).unwrap()
    }

    fn table(unicast: &[[u8; 6]], multicast: &[[u8; 6]]) -> Vec<u8> {
        let mut b = vec![CLASS_MAC, MAC_TABLE_SET];
        for list in [unicast, multicast] {
            b.extend((list.len() as u32).to_le_bytes());
            list.iter().for_each(|a| b.extend(a));
        }
        b
    }

    fn frame(dst: [u8; 6]) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&dst);
        f
    }

    #[test]
    fn a_mac_table_of_any_length_over_any_descriptors_sets_the_filter() {
        let uni = [[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11], [2, 0, 0, 0, 0, 0x12]];
        let multi: Vec<[u8; 6]> = (0..12).map(|k| [0x01, 0, 0x5E, 0, 0, k]).collect();
        let bytes = table(&uni, &multi);
        assert_eq!(bytes.len(), 2 + 4 + 18 + 4 + 72, "82 bytes, as the twelve-address case");
        for piece in [1, 2, 7, 64, bytes.len()] {
            let mut f = ReceiveFilter { promiscuous: false, ..Default::default() };
            assert_eq!(run(&bytes, piece, ALL, &mut f), Outcome::Done, "in pieces of {piece}");
            assert_eq!((f.unicast.addresses.len(), f.multicast.addresses.len()), (3, 12));
            assert!(f.accepts(&frame(uni[2]), &OWN, ALL) && f.accepts(&frame(OWN), &OWN, ALL));
            assert!(f.accepts(&frame(multi[11]), &OWN, ALL) && f.accepts(&frame([0xFF; 6]), &OWN, ALL));
            assert!(!f.accepts(&frame([2, 0, 0, 0, 0, 0x13]), &OWN, ALL));
            assert!(!f.accepts(&frame([0x01, 0, 0x5E, 0, 0, 99]), &OWN, ALL));
        }
        // More than the table holds: every address of that kind passes, the other list still filters.
        let many: Vec<[u8; 6]> = (0..1000u16).map(|k| [0x01, 0, 0x5E, 1, (k >> 8) as u8, k as u8]).collect();
        let mut f = ReceiveFilter { promiscuous: false, ..Default::default() };
        assert_eq!(run(&table(&uni, &many), 4096, ALL, &mut f), Outcome::Done);
        assert!(f.multicast.overflow && f.accepts(&frame([0x01, 9, 9, 9, 9, 9]), &OWN, ALL));
        assert!(!f.accepts(&frame([2, 0, 0, 0, 0, 0x13]), &OWN, ALL));
        assert_eq!(run(&table(&[], &[]), 3, ALL, &mut f), Outcome::Done, "both lists may be empty");
        assert!(!f.accepts(&frame(uni[0]), &OWN, ALL) && f.accepts(&frame(OWN), &OWN, ALL));
    }

    #[test]
    fn a_malformed_command_is_refused_and_changes_nothing() {
        let uni = [[2, 0, 0, 0, 0, 0x10]];
        let mut good = ReceiveFilter { promiscuous: false, ..Default::default() };
        assert_eq!(run(&table(&uni, &[]), 5, ALL, &mut good), Outcome::Done);
        let cases: Vec<(Vec<u8>, u64, &str)> = vec![
            (vec![CLASS_MAC], ALL, "shorter than its class and command"),
            (table(&uni, &[])[..10].to_vec(), ALL, "fewer addresses"),
            (table(&uni, &[])[..14].to_vec(), ALL, "entry count"),
            ([table(&uni, &[]), vec![0]].concat(), ALL, "bytes after"),
            (vec![CLASS_RX, RX_PROMISC, 1, 1], ALL, "exactly one byte"),
            (vec![CLASS_RX, RX_NOBCAST, 1], feature::CTRL_RX, "CTRL_RX_EXTRA"),
            (vec![CLASS_MAC, MAC_ADDR_SET, 2, 0, 0, 0, 0], ALL, "exactly one address"),
            (vec![CLASS_MAC, MAC_ADDR_SET, 2, 0, 0, 0, 0, 9], feature::CTRL_RX, "CTRL_MAC_ADDR"),
            (vec![CLASS_VLAN, VLAN_ADD, 0x00, 0x10], ALL, "12 bits"),
            (vec![CLASS_VLAN, VLAN_ADD, 5, 0], feature::CTRL_RX, "CTRL_VLAN"),
            (vec![9, 9, 1], ALL, "does not know"),
        ];
        for (bytes, negotiated, expect) in cases {
            let mut f = good.clone();
            let out = run(&bytes, 3, negotiated, &mut f);
            assert!(matches!(out, Outcome::Refused(why) if why.contains(expect)), "{bytes:?}: {out:?}");
            assert_eq!(out.ack(), ERR);
            assert_eq!(f, good, "{bytes:?} changed the filter");
        }
    }

    #[test]
    fn rx_modes_and_vlans_filter_as_the_spec_says() {
        let mut f = ReceiveFilter::default();
        assert!(f.accepts(&frame([2, 9, 9, 9, 9, 9]), &OWN, ALL), "promiscuous after reset");
        for (command, on) in [(RX_PROMISC, 0), (RX_NOBCAST, 1), (RX_ALLMULTI, 1)] {
            assert_eq!(run(&[CLASS_RX, command, on], 1, ALL, &mut f), Outcome::Done);
        }
        assert!(!f.accepts(&frame([0xFF; 6]), &OWN, ALL), "NOBCAST");
        assert!(f.accepts(&frame([0x33, 0x33, 0, 0, 0, 1]), &OWN, ALL), "ALLMULTI");
        assert_eq!(run(&[CLASS_RX, RX_NOMULTI, 1], 1, ALL, &mut f), Outcome::Done);
        assert!(!f.accepts(&frame([0x33, 0x33, 0, 0, 0, 1]), &OWN, ALL), "NOMULTI wins over ALLMULTI");
        assert_eq!(run(&[CLASS_RX, RX_ALLUNI, 1], 1, ALL, &mut f), Outcome::Done);
        assert!(f.accepts(&frame([2, 9, 9, 9, 9, 9]), &OWN, ALL), "ALLUNI");
        assert_eq!(run(&[CLASS_RX, RX_NOUNI, 1], 1, ALL, &mut f), Outcome::Done);
        assert!(!f.accepts(&frame(OWN), &OWN, ALL), "NOUNI drops even our own address");

        let mut f = ReceiveFilter { promiscuous: false, ..Default::default() };
        let mut tagged = frame(OWN);
        tagged[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        assert!(f.accepts(&tagged, &OWN, feature::CTRL_RX), "no VLAN filtering unless negotiated");
        assert!(!f.accepts(&tagged, &OWN, ALL), "VLAN 5 is not in the table");
        assert_eq!(run(&[CLASS_VLAN, VLAN_ADD, 5, 0], 2, ALL, &mut f), Outcome::Done);
        assert!(f.accepts(&tagged, &OWN, ALL));
        assert_eq!(run(&[CLASS_VLAN, VLAN_DEL, 5, 0], 4, ALL, &mut f), Outcome::Done);
        assert!(!f.accepts(&tagged, &OWN, ALL));
    }

    #[test]
    fn mac_addr_set_changes_the_address_the_filter_keeps() {
        let mut dma = FlatDmaSpace { region: platform::MappedRegion::anonymous(0x10000).unwrap(), base: BASE };
        let segments = chain(&mut dma, &[CLASS_MAC, MAC_ADDR_SET, 2, 0, 0, 0, 0, 0x42], 3);
        let (mut f, mut mac) = (ReceiveFilter::default(), OWN);
        let out = execute(&mut dma, &mut ChainReader::new(&segments), &mut f, &mut mac, ALL).unwrap();
        assert_eq!((out, mac), (Outcome::Done, [2, 0, 0, 0, 0, 0x42]));
        let far = [Segment { addr: 0xDEAD_0000, len: 2, writable: false }];
        let fault = execute(&mut dma, &mut ChainReader::new(&far), &mut f, &mut mac, ALL);
        assert_eq!(fault, Err(QueueError::Fault(0xDEAD_0000)), "a command outside the driver's memory");
    }
}
