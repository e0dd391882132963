//! Captures: a pcap writer (nanosecond timestamps, Ethernet) and a reader for replays.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Which frames a capture records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Captured {
    /// Frames the driver transmitted.
    Tx,
    /// Frames arriving at the port from the wire (before filtering).
    Rx,
    Both,
}

/// A pcap file (nanosecond timestamps, Ethernet link type) that tcpdump reads.
pub struct PcapWriter {
    out: BufWriter<File>,
    pub direction: Captured,
    pub remaining: Option<u64>,
    pub written: u64,
    wall_offset_ns: u64,
}

impl PcapWriter {
    /// Creates `path`; `epoch_wall_ns` is the wall-clock time of engine time 0.
    pub fn create(path: &Path, direction: Captured, count: Option<u64>, epoch_wall_ns: u64) -> std::io::Result<Self> {
        let mut out = BufWriter::with_capacity(1 << 16, File::create(path)?);
        out.write_all(&0xa1b2_3c4du32.to_le_bytes())?; // nanosecond-resolution magic
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&0i32.to_le_bytes())?;
        out.write_all(&0u32.to_le_bytes())?;
        out.write_all(&65535u32.to_le_bytes())?;
        out.write_all(&1u32.to_le_bytes())?; // LINKTYPE_ETHERNET
        Ok(PcapWriter { out, direction, remaining: count, written: 0, wall_offset_ns: epoch_wall_ns })
    }

    /// Whether the capture still wants frames.
    pub fn open(&self) -> bool {
        self.remaining != Some(0)
    }

    /// Records a frame seen at engine time `t_ps`.
    pub fn record(&mut self, frame: &[u8], t_ps: u64) -> std::io::Result<()> {
        if !self.open() {
            return Ok(());
        }
        let t = self.wall_offset_ns + t_ps / 1000;
        self.out.write_all(&((t / 1_000_000_000) as u32).to_le_bytes())?;
        self.out.write_all(&((t % 1_000_000_000) as u32).to_le_bytes())?;
        self.out.write_all(&(frame.len() as u32).to_le_bytes())?;
        self.out.write_all(&(frame.len() as u32).to_le_bytes())?;
        self.out.write_all(frame)?;
        self.written += 1;
        if let Some(r) = self.remaining.as_mut() {
            *r -= 1;
            if *r == 0 {
                self.out.flush()?;
            }
        }
        Ok(())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Reads a pcap file written by [`PcapWriter`] (or any little-endian Ethernet pcap).
pub fn read_pcap(path: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    let data = std::fs::read(path)?;
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    if data.len() < 24 || !matches!(&data[0..4], [0x4d, 0x3c, 0xb2, 0xa1] | [0xd4, 0xc3, 0xb2, 0xa1]) {
        return Err(bad("not a little-endian pcap file"));
    }
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= data.len() {
        let incl = u32::from_le_bytes(data[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        let start = at + 16;
        let frame = data.get(start..start + incl).ok_or_else(|| bad("truncated record"))?;
        frames.push(frame.to_vec());
        at = start + incl;
    }
    Ok(frames)
}
