//! Generated frames: a UDP/IPv4 template per size and stream, the fields a flow changes,
//! the sequence number and timestamp in the payload, and the parser the sink uses.

use super::{MIN_FRAME, NICSIM_UDP_PORT, PAYLOAD};

/// CRC-32 (IEEE 802.3) for FCS generation when a driver disables CRC stripping.
pub fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            }
            *e = c;
        }
        t
    });
    !data.iter().fold(!0u32, |c, &b| table[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8))
}

/// The fields a flow changes in a generated frame, as values whose big-endian bytes go into
/// the frame: IP header checksum, source IP address, source UDP port.
#[derive(Debug, Clone, Copy)]
pub struct FlowFields {
    pub checksum: u16,
    pub src_ip: u32,
    pub src_port: u16,
}

impl FlowFields {
    pub const CHECKSUM_AT: usize = 24;
    pub const SRC_IP_AT: usize = 26;
    pub const SRC_PORT_AT: usize = 34;

    /// Source IP 10.<stream>.x.y and source UDP port vary with the flow.
    pub(super) fn of(ip_partial: u32, stream: u16, flow: u32) -> FlowFields {
        let src_ip = (10u32 << 24) | ((stream as u32 & 0xFF) << 16) | (flow & 0xFFFF);
        let src_ip = src_ip.wrapping_add((flow >> 16) << 8);
        let src_port = 1024 + (flow % 60000) as u16;
        let checksum = fold_checksum(ip_partial + (src_ip >> 16) + (src_ip & 0xFFFF));
        FlowFields { checksum, src_ip, src_port }
    }

    pub(super) fn write_into(&self, frame: &mut [u8]) {
        // Every template has at least MIN_FRAME bytes; one check here spares one per field.
        let Some(f) = frame.first_chunk_mut::<MIN_FRAME>() else { return };
        f[Self::CHECKSUM_AT..Self::CHECKSUM_AT + 2].copy_from_slice(&self.checksum.to_be_bytes());
        f[Self::SRC_IP_AT..Self::SRC_IP_AT + 4].copy_from_slice(&self.src_ip.to_be_bytes());
        f[Self::SRC_PORT_AT..Self::SRC_PORT_AT + 2].copy_from_slice(&self.src_port.to_be_bytes());
    }
}

/// A generator frame of one size.
#[derive(Debug)]
pub(super) struct Template {
    pub(super) frame: Vec<u8>,
    /// Partial IP checksum of the header fields that never change.
    pub(super) ip_partial: u32,
    /// The flow whose addresses the frame carries now; with one flow (or when the flow
    /// repeats) only the sequence number and timestamp change from frame to frame.
    pub(super) flow: Option<u32>,
    /// The flow of the frame now due and its fields, if the frame does not carry them yet.
    pub(super) pending: Option<(u32, FlowFields)>,
}

/// Writes the sequence number and timestamp into a generated frame's payload.
#[inline(always)]
pub(super) fn patch_sequence(frame: &mut [u8], seq: u64, timestamp_ns: u64) {
    let Some(f) = frame.first_chunk_mut::<MIN_FRAME>() else { return };
    f[PAYLOAD..PAYLOAD + 8].copy_from_slice(&seq.to_le_bytes());
    f[PAYLOAD + 8..PAYLOAD + 16].copy_from_slice(&timestamp_ns.to_le_bytes());
}

pub(super) fn ip_checksum_partial(hdr: &[u8]) -> u32 {
    // Sum of the header's 16-bit words, leaving out the checksum (10..12) and source address (12..16).
    hdr.chunks(2)
        .enumerate()
        .filter(|(i, _)| !matches!(i, 5..=7))
        .map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum()
}

pub(super) fn fold_checksum(mut sum: u32) -> u16 {
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet/IPv4/UDP frame of `size` bytes carrying nicsim's payload for `stream`.
pub fn build_template(size: usize, dst: [u8; 6], stream: u16) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&[0x02, 0x00, 0x00, 0x00, 0x10, stream as u8]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (size - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[20] = 0x40; // don't fragment
    f[22] = 64; // TTL
    f[23] = 17; // UDP
    f[26..30].copy_from_slice(&[10, stream as u8, 0, 0]);
    f[30..34].copy_from_slice(&[10, 255, stream as u8, 1]);
    f[34..36].copy_from_slice(&1024u16.to_be_bytes());
    f[36..38].copy_from_slice(&NICSIM_UDP_PORT.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f[PAYLOAD + 16..PAYLOAD + 18].copy_from_slice(&stream.to_le_bytes());
    let sum = ip_checksum_partial(&f[14..34])
        + u32::from(u16::from_be_bytes([f[26], f[27]]))
        + u32::from(u16::from_be_bytes([f[28], f[29]]));
    let csum = fold_checksum(sum);
    f[24..26].copy_from_slice(&csum.to_be_bytes());
    f
}

/// `(stream, sequence, timestamp_ns)` if `frame` is a nicsim generator frame.
#[inline]
pub fn parse_payload(frame: &[u8]) -> Option<(u16, u64, u64)> {
    parse_min(frame.first_chunk::<MIN_FRAME>()?)
}

/// [`parse_payload`] of a frame's first [`MIN_FRAME`] bytes, which hold every field it reads.
#[inline(always)]
pub(super) fn parse_min(f: &[u8; MIN_FRAME]) -> Option<(u16, u64, u64)> {
    let [.., e0, e1] = *f.first_chunk::<14>()?;
    let port: [u8; 2] = *f[36..].first_chunk()?;
    if [e0, e1] != [0x08, 0x00] || f[23] != 17 || port != NICSIM_UDP_PORT.to_be_bytes() {
        return None;
    }
    let seq = u64::from_le_bytes(*f[PAYLOAD..].first_chunk()?);
    let ts = u64::from_le_bytes(*f[PAYLOAD + 8..].first_chunk()?);
    let stream = u16::from_le_bytes(*f[PAYLOAD + 16..].first_chunk()?);
    Some((stream, seq, ts))
}
