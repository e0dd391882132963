//! The wire side of a port: line-rate timing, a traffic generator, a sink that measures what
//! the driver transmitted, and a pcap writer.
//!
//! Frames on nicsim's wire are carried without their 4-byte FCS; the FCS, preamble, SFD and
//! inter-frame gap still count for timing: a frame of `n` bytes occupies `n + 4 + 20` byte
//! times. Time is in picoseconds since the engine started.
//!
//! [`clock`] times the wire, [`frame`] builds and parses generated frames, [`generator`] sends
//! them on a schedule, [`sink`] measures what arrives, [`pcap`] records and replays captures.

mod clock;
mod frame;
mod generator;
mod pcap;
mod sink;
#[cfg(test)]
mod tests;

pub use clock::{line_rate_pps, ps_per_byte, WireClock, WireRun};
pub use frame::{build_template, crc32, parse_payload, FlowFields};
pub use generator::{check_rate, DueFrame, GeneratedBurst, Generator, TrafficSpec, MIN_RATE_PPS};
pub use pcap::{read_pcap, Captured, PcapWriter};
pub use sink::{
    LatencySummary, Sink, SlowFrames, StreamStats, MAX_STREAMS, SINK_HEAD, SLOW_FRAMES_KEPT, SLOW_FRAME_NS,
};

/// Preamble + SFD + minimum inter-frame gap, in bytes.
pub const WIRE_OVERHEAD: u64 = 20;
/// Ethernet FCS length.
pub const FCS_LEN: usize = 4;
/// Smallest frame without FCS.
pub const MIN_FRAME: usize = 60;
/// Largest standard frame without FCS.
pub const MAX_FRAME: usize = 1514;
/// How far a wire clock may lag behind real time before lost time is forgotten: bounds the
/// burst a late engine iteration may send at once.
pub const BURST_PS: u64 = 20_000_000; // 20 µs
/// A generator's schedule is kept relative to an origin that moves on by this much at a time:
/// one hour, so that times in thousandths of a picosecond stay far below 2^64.
pub const REBASE_PS: u64 = 3_600 * 1_000_000_000_000;
/// How far ahead of real time one engine iteration may schedule frames, so that an iteration
/// handles a batch rather than one frame. The long-run rate is still exactly the line rate.
pub const LOOKAHEAD_PS: u64 = 2_000_000; // 2 µs

/// UDP destination port that marks nicsim generator frames.
pub const NICSIM_UDP_PORT: u16 = 20051;
/// Offset of the generator payload (sequence, timestamp, stream) in a frame.
const PAYLOAD: usize = 42;
/// Where a generated frame carries its sequence number and timestamp (little-endian u64s).
pub const SEQUENCE_AT: usize = PAYLOAD;
pub const TIMESTAMP_AT: usize = PAYLOAD + 8;
