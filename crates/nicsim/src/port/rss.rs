//! Receive-side scaling [DS 7.1.2.8]: the Toeplitz hash over a frame's addresses and ports,
//! the redirection table that turns it into a queue, and what the advanced receive
//! descriptor reports of it [DS 7.1.6.2].

use crate::regs::*;

/// Bytes of the RSS key (RSSRK(0..9)) [DS 8.2.3.7.14].
pub const KEY_LEN: usize = 40;
/// Entries of the redirection table (RETA(0..31), four per register) [DS 8.2.3.7.15].
pub const RETA_ENTRIES: usize = 128;
/// Queues RSS spreads over without VT or DCB: a RETA entry holds 4 bits [DS 7.1.2.8.1].
pub const RSS_QUEUES: usize = 16;
/// The datasheet's RSS verification key [DS 7.1.2.8.3] (Microsoft's, and DPDK's default):
/// the key of the verification suite, and the one our drivers program.
pub const VERIFICATION_KEY: [u8; KEY_LEN] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];
/// Longest hash input: two IPv6 addresses and two ports.
const MAX_INPUT: usize = 36;

/// MRQC.MRQE = 0001b: RSS only, no VT or DCB [DS 8.2.3.7.12].
const MRQE_MASK: u32 = 0xF;
const MRQE_RSS: u32 = 0x1;
/// MRQC's hash-field enables [DS 8.2.3.7.12].
pub const FIELD_IPV4_TCP: u32 = 1 << 16;
pub const FIELD_IPV4: u32 = 1 << 17;
pub const FIELD_IPV6: u32 = 1 << 20;
pub const FIELD_IPV6_TCP: u32 = 1 << 21;
pub const FIELD_IPV4_UDP: u32 = 1 << 22;
pub const FIELD_IPV6_UDP: u32 = 1 << 23;
/// RXCSUM.PCSD: the descriptor's dword 1 holds the RSS hash, not the fragment checksum
/// [DS 8.2.3.7.5].
pub const RXCSUM_PCSD: u32 = 1 << 13;

/// The RSS type of the advanced write-back, bits 3:0 [DS 7.1.6.2].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum RssType {
    None = 0,
    Ipv4Tcp = 1,
    Ipv4 = 2,
    Ipv6Tcp = 3,
    Ipv6 = 5,
    Ipv4Udp = 7,
    Ipv6Udp = 8,
}

/// Packet-type bits of the advanced write-back's dword 0 (the field at 16:4) [DS 7.1.6.2].
const PKT_IPV4: u32 = 0x1 << 4;
const PKT_IPV6: u32 = 0x4 << 4;
const PKT_TCP: u32 = 0x10 << 4;
const PKT_UDP: u32 = 0x20 << 4;

/// The Toeplitz hash of a key, as per-byte tables: the hash of an input is the XOR of one
/// entry per input byte, so a frame costs one load per byte hashed, not a loop per bit.
pub struct Toeplitz {
    tables: Box<[[u32; 256]; MAX_INPUT]>,
}

impl Toeplitz {
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        let mut tables = Box::new([[0u32; 256]; MAX_INPUT]);
        for (i, table) in tables.iter_mut().enumerate() {
            // The 32 key bits that input bit 8i + j selects start at key bit 8i + j.
            let windows: [u32; 8] = std::array::from_fn(|j| key_window(key, 8 * i + j));
            for (b, entry) in table.iter_mut().enumerate() {
                *entry = (0..8).filter(|j| b & (0x80 >> j) != 0).fold(0, |h, j| h ^ windows[j]);
            }
        }
        Toeplitz { tables }
    }

    /// The hash of `input` (at most 36 bytes; longer inputs are cut there).
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        input.iter().zip(self.tables.iter()).fold(0, |h, (&b, table)| h ^ table[b as usize])
    }
}

/// The Toeplitz hash as its definition reads, bit by bit: for every set bit of the input, the
/// 32 key bits from that position on [DS 7.1.2.8.2]. A reference for what the tables compute,
/// and for tests and the bench to predict queues with, apart from them.
pub fn toeplitz_by_bits(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |i: usize| i < key.len() * 8 && key[i / 8] & (0x80 >> (i % 8)) != 0;
    let mut hash = 0u32;
    for i in 0..input.len() * 8 {
        if input[i / 8] & (0x80 >> (i % 8)) != 0 {
            hash ^= (0..32).fold(0u32, |w, k| (w << 1) | u32::from(key_bit(i + k)));
        }
    }
    hash
}

/// Key bits `bit .. bit + 32`, most significant first; bits past the key read 0.
fn key_window(key: &[u8; KEY_LEN], bit: usize) -> u32 {
    (0..32).fold(0u32, |w, k| {
        let at = bit + k;
        let set = at < KEY_LEN * 8 && key[at / 8] & (0x80 >> (at % 8)) != 0;
        (w << 1) | u32::from(set)
    })
}

/// Where a frame goes and what its descriptor reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Classified {
    pub queue: u32,
    /// Dword 0 and 1 of the advanced write-back's first qword: RSS type, packet type, hash.
    pub info: u64,
}

/// The RSS state the registers describe, derived whenever one of them changes.
pub struct Rss {
    enabled: bool,
    fields: u32,
    report_hash: bool,
    reta: [u8; RETA_ENTRIES],
    /// The queues RETA names while RSS is on (1 while it is off): how many rings an engine
    /// iteration's frames spread over.
    spread: u32,
    toeplitz: Toeplitz,
    key: [u8; KEY_LEN],
}

impl Default for Rss {
    fn default() -> Self {
        Rss {
            enabled: false,
            fields: 0,
            report_hash: false,
            reta: [0; RETA_ENTRIES],
            spread: 1,
            toeplitz: Toeplitz::new(&[0; KEY_LEN]),
            key: [0; KEY_LEN],
        }
    }
}

impl Rss {
    /// Reads MRQC, RXCSUM, RETA and RSSRK through `reg`; rebuilds the hash tables only if the
    /// key changed.
    pub fn update(&mut self, reg: impl Fn(u32) -> u32) {
        let mrqc = reg(MRQC);
        self.enabled = mrqc & MRQE_MASK == MRQE_RSS;
        self.fields = mrqc & 0xFFFF_0000;
        self.report_hash = reg(RXCSUM) & RXCSUM_PCSD != 0;
        for n in 0..RETA_ENTRIES / 4 {
            let bytes = reg(reta(n as u32)).to_le_bytes();
            for (k, b) in bytes.iter().enumerate() {
                self.reta[4 * n + k] = b & 0xF;
            }
        }
        let named = self.reta.iter().fold(0u16, |set, &q| set | 1 << q);
        self.spread = if self.enabled { named.count_ones() } else { 1 };
        let mut key = [0u8; KEY_LEN];
        for n in 0..KEY_LEN / 4 {
            key[4 * n..4 * n + 4].copy_from_slice(&reg(rssrk(n as u32)).to_le_bytes());
        }
        if key != self.key {
            self.key = key;
            self.toeplitz = Toeplitz::new(&key);
        }
    }

    /// Whether MRQC enables RSS.
    #[inline(always)]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The number of receive queues frames go to: those RETA names while RSS is on, else 1.
    #[inline(always)]
    pub fn spread(&self) -> u32 {
        self.spread
    }

    /// The queue of `frame` and its descriptor fields [DS 7.1.2.8.1]. A frame with no header
    /// of an enabled hash type (not IP, or its type not enabled) gets no hash, RSS type 0
    /// and queue 0, whatever RETA(0) says.
    #[inline]
    pub fn classify(&self, frame: &[u8]) -> Classified {
        let mut input = [0u8; MAX_INPUT];
        let Some((len, rss_type, packet_type)) = self.hash_input(frame, &mut input) else {
            return Classified::default();
        };
        let hash = self.toeplitz.hash(&input[..len]);
        let queue = u32::from(self.reta[(hash & 0x7F) as usize]);
        let reported = if self.report_hash { u64::from(hash) << 32 } else { 0 };
        Classified { queue, info: reported | u64::from(packet_type | rss_type as u32) }
    }

    /// Writes the hash input of `frame` into `input`: source and destination address, then
    /// source and destination port where the frame's L4 type is enabled [DS 7.1.2.8.2].
    /// Returns its length, the RSS type and the packet type, or `None` if nothing is hashed.
    fn hash_input(&self, frame: &[u8], input: &mut [u8; MAX_INPUT]) -> Option<(usize, RssType, u32)> {
        let (ethertype, l3) = match frame.get(12..14)? {
            [0x81, 0x00] => (frame.get(16..18)?, 18),
            t => (t, 14),
        };
        match ethertype {
            [0x08, 0x00] => self.ipv4_input(frame.get(l3..)?, input),
            [0x86, 0xDD] => self.ipv6_input(frame.get(l3..)?, input),
            _ => None,
        }
    }

    fn ipv4_input(&self, ip: &[u8], input: &mut [u8; MAX_INPUT]) -> Option<(usize, RssType, u32)> {
        let ihl = usize::from(ip.first()? & 0xF) * 4;
        if ip[0] >> 4 != 4 || ihl < 20 {
            return None;
        }
        input[..8].copy_from_slice(ip.get(12..20)?);
        // A fragment (MF set or an offset) carries no ports to hash [DS 7.1.2.8.1].
        let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3FFF != 0;
        let l4 = match ip[9] {
            6 if !fragment && self.fields & FIELD_IPV4_TCP != 0 => Some((RssType::Ipv4Tcp, PKT_TCP)),
            17 if !fragment && self.fields & FIELD_IPV4_UDP != 0 => Some((RssType::Ipv4Udp, PKT_UDP)),
            _ => None,
        };
        if let (Some((t, p)), Some(ports)) = (l4, ip.get(ihl..ihl + 4)) {
            input[8..12].copy_from_slice(ports);
            return Some((12, t, PKT_IPV4 | p));
        }
        (self.fields & FIELD_IPV4 != 0).then_some((8, RssType::Ipv4, PKT_IPV4))
    }

    fn ipv6_input(&self, ip: &[u8], input: &mut [u8; MAX_INPUT]) -> Option<(usize, RssType, u32)> {
        if ip.first()? >> 4 != 6 {
            return None;
        }
        input[..32].copy_from_slice(ip.get(8..40)?);
        // Extension headers are not followed: only a TCP or UDP header right after the fixed
        // header is hashed with its ports (docs/nicsim.md).
        let l4 = match ip[6] {
            6 if self.fields & FIELD_IPV6_TCP != 0 => Some((RssType::Ipv6Tcp, PKT_TCP)),
            17 if self.fields & FIELD_IPV6_UDP != 0 => Some((RssType::Ipv6Udp, PKT_UDP)),
            _ => None,
        };
        if let (Some((t, p)), Some(ports)) = (l4, ip.get(40..44)) {
            input[32..36].copy_from_slice(ports);
            return Some((36, t, PKT_IPV6 | p));
        }
        (self.fields & FIELD_IPV6 != 0).then_some((32, RssType::Ipv6, PKT_IPV6))
    }
}

#[cfg(test)]
mod tests;
