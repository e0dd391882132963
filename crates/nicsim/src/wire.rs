//! The wire side of a port: line-rate timing, a traffic generator, a sink that measures what
//! the driver transmitted, and a pcap writer.
//!
//! Frames on nicsim's wire are carried without their 4-byte FCS; the FCS, preamble, SFD and
//! inter-frame gap still count for timing: a frame of `n` bytes occupies `n + 4 + 20` byte
//! times. Time is in picoseconds since the engine started.

use crate::histogram::LatencyHistogram;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

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

/// Picoseconds per byte at `gbps` Gb/s.
pub fn ps_per_byte(gbps: f64) -> f64 {
    8000.0 / gbps
}

/// Frames per second of `frame_len`-byte frames (without FCS) at `gbps`: 14 880 952 for 60
/// bytes at 10 Gb/s.
pub fn line_rate_pps(frame_len: usize, gbps: f64) -> f64 {
    gbps * 1e9 / (8.0 * (frame_len as f64 + FCS_LEN as f64 + WIRE_OVERHEAD as f64))
}

/// How long a frame of `len` bytes (without FCS) occupies the wire, with FCS, preamble and
/// gap, at `ps_per_byte_x1000` thousandths of a picosecond per byte.
#[inline]
fn wire_time_ps(len: usize, ps_per_byte_x1000: u64) -> u64 {
    (len as u64 + FCS_LEN as u64 + WIRE_OVERHEAD) * ps_per_byte_x1000 / 1000
}

/// Serialisation of one direction of a link: frames go out no faster than line rate.
#[derive(Debug, Clone)]
pub struct WireClock {
    free_at_ps: u64,
    ps_per_byte_x1000: u64,
    /// The last frame length sent and how long it occupies the wire: consecutive frames
    /// mostly have one length, and this spares the multiply and divide.
    last: (usize, u64),
}

impl WireClock {
    pub fn new(gbps: f64) -> Self {
        WireClock { free_at_ps: 0, ps_per_byte_x1000: (ps_per_byte(gbps) * 1000.0).round() as u64, last: (0, 0) }
    }

    #[inline]
    fn duration_ps(&self, len: usize) -> u64 {
        wire_time_ps(len, self.ps_per_byte_x1000)
    }

    /// Whether a frame may start at `now_ps`.
    #[inline]
    pub fn ready(&self, now_ps: u64) -> bool {
        self.free_at_ps <= now_ps + LOOKAHEAD_PS
    }

    /// Occupies the wire with a frame of `len` bytes (without FCS) starting as early as
    /// possible; returns the time its last bit leaves.
    #[inline]
    pub fn send(&mut self, now_ps: u64, len: usize) -> u64 {
        let start = self.free_at_ps.max(now_ps.saturating_sub(BURST_PS));
        if self.last.0 != len {
            self.last = (len, self.duration_ps(len));
        }
        self.free_at_ps = start + self.last.1;
        self.free_at_ps
    }

    /// Frames of `len` bytes sent back to back at `now_ps`: when the first starts, how long
    /// each occupies the wire, and how many of them may start ([`Self::ready`]) at most.
    /// Sending `n` of them is [`Self::sent_back_to_back`], and equals `n` calls of
    /// [`Self::send`].
    #[inline]
    pub fn back_to_back(&self, now_ps: u64, len: usize) -> (u64, u64, u64) {
        let start = self.free_at_ps.max(now_ps.saturating_sub(BURST_PS));
        let each = if self.last.0 == len { self.last.1 } else { self.duration_ps(len) };
        let ready_until = now_ps + LOOKAHEAD_PS;
        let count = if start <= ready_until { (ready_until - start) / each.max(1) + 1 } else { 0 };
        (start, each, count)
    }

    /// Takes `n` frames of `len` bytes planned by [`Self::back_to_back`] as sent.
    #[inline]
    pub fn sent_back_to_back(&mut self, start: u64, each: u64, len: usize, n: u64) {
        if n > 0 {
            self.free_at_ps = start + n * each;
            self.last = (len, each);
        }
    }

    /// Starts a run of frames at `now_ps` whose clock is kept in a local [`WireRun`] and
    /// stored back by [`Self::end_run`]: frame by frame it does what [`Self::ready`] and
    /// [`Self::send`] do. The bound on a burst (`now − BURST_PS`) is applied once here:
    /// after a frame the clock is past it anyway, and before one it changes neither
    /// `ready` nor the next `send`.
    #[inline(always)]
    pub fn run(&self, now_ps: u64) -> WireRun {
        WireRun {
            free_at_ps: self.free_at_ps.max(now_ps.saturating_sub(BURST_PS)),
            ready_until_ps: now_ps + LOOKAHEAD_PS,
            last: self.last,
            ps_per_byte_x1000: self.ps_per_byte_x1000,
        }
    }

    /// Takes the state of a run started by [`Self::run`].
    #[inline(always)]
    pub fn end_run(&mut self, run: WireRun) {
        self.free_at_ps = run.free_at_ps;
        self.last = run.last;
    }
}

/// A [`WireClock`] during a run of frames at one instant (see [`WireClock::run`]).
#[derive(Debug, Clone, Copy)]
pub struct WireRun {
    free_at_ps: u64,
    ready_until_ps: u64,
    last: (usize, u64),
    ps_per_byte_x1000: u64,
}

impl WireRun {
    /// [`WireClock::ready`].
    #[inline(always)]
    pub fn ready(&self) -> bool {
        self.free_at_ps <= self.ready_until_ps
    }

    /// [`WireClock::send`].
    #[inline(always)]
    pub fn send(&mut self, len: usize) -> u64 {
        if self.last.0 != len {
            self.last = (len, wire_time_ps(len, self.ps_per_byte_x1000));
        }
        self.free_at_ps += self.last.1;
        self.free_at_ps
    }
}

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

/// What the generator sends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrafficSpec {
    /// Packets per second; `None` means line rate.
    pub rate_pps: Option<f64>,
    /// Frame length without FCS, 60–1514.
    pub size: usize,
    /// Number of flows (distinct source IP/UDP port pairs), ≥ 1.
    pub flows: u32,
    /// Stop after this many frames.
    pub count: Option<u64>,
    /// Stop after this many milliseconds.
    pub duration_ms: Option<u64>,
    /// Destination MAC; `None` = the receiving port's own address.
    pub dst_mac: Option<[u8; 6]>,
    /// If set, frame lengths cycle through `size..=size_max`, one byte longer each frame.
    #[serde(default)]
    pub size_max: Option<usize>,
}

impl Default for TrafficSpec {
    fn default() -> Self {
        TrafficSpec {
            rate_pps: None,
            size: MIN_FRAME,
            flows: 1,
            count: None,
            duration_ms: None,
            dst_mac: None,
            size_max: None,
        }
    }
}

impl TrafficSpec {
    /// Checks the ranges for a link of `gbps`; the message says what is allowed.
    pub fn validate(&self, gbps: f64) -> Result<(), String> {
        if !(MIN_FRAME..=MAX_FRAME).contains(&self.size) {
            return Err(format!("frame size {} is outside {MIN_FRAME}..={MAX_FRAME} bytes (without FCS)", self.size));
        }
        if let Some(max) = self.size_max {
            if !(self.size..=MAX_FRAME).contains(&max) {
                return Err(format!("largest frame size {max} is outside {}..={MAX_FRAME} bytes", self.size));
            }
        }
        if self.flows == 0 || self.flows > 1 << 20 {
            return Err(format!("flows must be between 1 and {}, not {}", 1 << 20, self.flows));
        }
        if let Some(r) = self.rate_pps {
            check_rate(r, self.size, gbps)?;
        }
        if self.count == Some(0) {
            return Err("count must be at least 1 frame (leave it out to run until stopped)".into());
        }
        if self.duration_ms == Some(0) {
            return Err("duration must be at least 1 ms (leave it out to run until stopped)".into());
        }
        Ok(())
    }
}

/// Slowest generator rate: one frame a second.
pub const MIN_RATE_PPS: f64 = 1.0;

/// Checks a generator rate for frames of `size` bytes on a link of `gbps`: at least
/// [`MIN_RATE_PPS`], at most the line rate (a rate is never clamped silently).
pub fn check_rate(rate_pps: f64, size: usize, gbps: f64) -> Result<(), String> {
    let line = line_rate_pps(size, gbps);
    if !(rate_pps.is_finite() && rate_pps >= MIN_RATE_PPS) {
        return Err(format!("rate {rate_pps} pps: give at least {MIN_RATE_PPS} packet per second"));
    }
    // A percentage of 100 computes the line rate itself, up to rounding.
    if rate_pps > line * (1.0 + 1e-9) {
        return Err(format!(
            "rate {rate_pps:.0} pps exceeds the line rate of {line:.0} pps for {size}-byte frames at {gbps} Gb/s: give at most 100%"
        ));
    }
    Ok(())
}

/// A traffic generator feeding one port's receive side.
#[derive(Debug)]
pub struct Generator {
    pub stream: u16,
    spec: TrafficSpec,
    active: bool,
    /// One template per frame size (several for a size sweep, used in turn). Frames are
    /// patched in place.
    templates: Vec<Template>,
    /// The template the next frame uses.
    at: usize,
    /// When the next frame is due, in thousandths of a picosecond after `origin_ps`: exact
    /// for any rate, and rebased every [`REBASE_PS`] so that it never overflows.
    next_x1000: u64,
    interval_ps_x1000: u64,
    origin_ps: u64,
    end_ps: Option<u64>,
    pub sent: u64,
    pub bytes: u64,
    /// Frames the rate owed when their time was forgotten: the engine (or a wire busy with
    /// other traffic) fell more than [`BURST_PS`] behind. Without a count they are never
    /// sent; with one, the count is sent later. Zero while nicsim keeps up: what a
    /// measurement loses to nicsim rather than to the driver.
    pub skipped: u64,
    /// Frames sent since the last `start` (what `count` limits; counter resets leave it).
    sent_this_start: u64,
    /// `sent % spec.flows`, kept as a counter so the per-frame path has no division.
    flow: u32,
}

impl Generator {
    pub fn new(stream: u16) -> Self {
        Generator {
            stream,
            spec: TrafficSpec::default(),
            active: false,
            templates: Vec::new(),
            at: 0,
            next_x1000: 0,
            interval_ps_x1000: 0,
            origin_ps: 0,
            end_ps: None,
            sent: 0,
            bytes: 0,
            skipped: 0,
            sent_this_start: 0,
            flow: 0,
        }
    }

    pub fn active(&self) -> bool {
        self.active
    }

    pub fn spec(&self) -> &TrafficSpec {
        &self.spec
    }

    /// Starts (or restarts) with `spec`, clamped to line rate at `gbps`. Sequence numbers
    /// continue, so a sink never sees a restart as reordering.
    pub fn start(&mut self, spec: TrafficSpec, dst_mac: [u8; 6], gbps: f64, now_ps: u64) {
        let line = line_rate_pps(spec.size, gbps);
        // Requests are checked against these bounds ([`check_rate`]); the clamp keeps the
        // interval finite for any caller.
        let rate = spec.rate_pps.unwrap_or(line).clamp(MIN_RATE_PPS, line);
        self.interval_ps_x1000 = (1e15 / rate).round() as u64;
        self.end_ps = spec.duration_ms.map(|ms| now_ps.saturating_add(ms.saturating_mul(1_000_000_000)));
        let dst = spec.dst_mac.unwrap_or(dst_mac);
        self.templates = (spec.size..=spec.size_max.unwrap_or(spec.size))
            .map(|size| {
                let frame = build_template(size, dst, self.stream);
                let ip_partial = ip_checksum_partial(&frame[14..34]);
                Template { frame, ip_partial, flow: None, pending: None }
            })
            .collect();
        self.at = 0;
        self.spec = spec;
        self.origin_ps = now_ps;
        self.next_x1000 = 0;
        // A count applies to this start; sequence numbers go on from the last run, so a sink
        // sees one gap-free stream across restarts.
        self.sent_this_start = 0;
        self.flow = (self.sent % u64::from(self.spec.flows.max(1))) as u32;
        self.active = true;
    }

    /// Zeroes the counters; sequence numbers (and with them the flow pattern) start again at 0.
    pub fn reset_counters(&mut self) {
        self.sent = 0;
        self.bytes = 0;
        self.skipped = 0;
        self.flow = 0;
    }

    /// Changes the rate of a running generator.
    pub fn set_rate(&mut self, rate_pps: Option<f64>, gbps: f64) {
        let line = line_rate_pps(self.spec.size, gbps);
        self.spec.rate_pps = rate_pps;
        self.interval_ps_x1000 = (1e15 / rate_pps.unwrap_or(line).clamp(MIN_RATE_PPS, line)).round() as u64;
    }

    pub fn stop(&mut self) {
        self.active = false;
    }

    /// How many frames the count and duration allow at `now_ps`, at most `max`: what a
    /// caller may then take with [`Self::next_frame`]. 0 once stopped or done.
    #[inline]
    pub fn allowance(&mut self, now_ps: u64, max: usize) -> usize {
        if !self.active {
            return 0;
        }
        let left = self.spec.count.map_or(u64::MAX, |c| c.saturating_sub(self.sent_this_start));
        if left == 0 || self.end_ps.is_some_and(|e| now_ps >= e) {
            self.active = false;
            return 0;
        }
        let mut since = now_ps.saturating_sub(self.origin_ps);
        if since >= REBASE_PS {
            let shift = since - since % REBASE_PS;
            self.origin_ps += shift;
            self.next_x1000 = self.next_x1000.saturating_sub(shift * 1000);
            since -= shift;
        }
        // Forget time we could not keep up with (bounded burst), as the wire clock does.
        let floor = since.saturating_sub(BURST_PS) * 1000;
        if self.next_x1000 < floor {
            // Whole frames only: the fraction of one stays owed, so that over any time the
            // frames offered and skipped add up to the rate exactly.
            let interval = self.interval_ps_x1000.max(1);
            let frames = (floor - self.next_x1000) / interval;
            self.skipped += frames;
            self.next_x1000 += frames * interval;
        }
        (max as u64).min(left) as usize
    }

    /// Frames whose time (`next_x1000`) is below this are due at `now_ps`.
    #[inline(always)]
    fn due_limit_x1000(&self, now_ps: u64) -> u64 {
        (now_ps.saturating_sub(self.origin_ps) + LOOKAHEAD_PS + 1).saturating_mul(1000)
    }

    /// The link partner holds its frames (802.3x flow control): the time until `now_ps` owes
    /// no frames, and none counts as skipped. The schedule goes on from `now_ps`.
    pub fn hold(&mut self, now_ps: u64) {
        let now_x1000 = now_ps.saturating_sub(self.origin_ps).saturating_mul(1000);
        self.next_x1000 = self.next_x1000.max(now_x1000);
    }

    /// The next frame and the time its last bit arrives, if it is due at `now_ps`: its turn
    /// at the configured rate has come (looking [`LOOKAHEAD_PS`] ahead) and `wire` is free.
    /// The frame carries its sequence number, flow and that time as its timestamp. Call it
    /// at most as often as [`Self::allowance`] allowed.
    #[inline]
    pub fn next_frame(&mut self, now_ps: u64, wire: &mut WireClock) -> Option<(&[u8], u64)> {
        let due = self.next_due(now_ps, wire)?;
        let end = due.end_ps;
        Some((due.into_frame(), end))
    }

    /// [`Self::next_frame`], with the sequence number and timestamp not yet written into the
    /// frame: a consumer may write the template and then those fields (see [`DueFrame`]).
    #[inline]
    pub fn next_due(&mut self, now_ps: u64, wire: &mut WireClock) -> Option<DueFrame<'_>> {
        // Due while next_x1000 / 1000 <= now + lookahead.
        if self.next_x1000 >= self.due_limit_x1000(now_ps) || !wire.ready(now_ps) {
            return None;
        }
        self.next_x1000 += self.interval_ps_x1000;
        let (seq, flow, at) = (self.sent, self.flow, self.at);
        self.flow = if flow + 1 >= self.spec.flows { 0 } else { flow + 1 };
        self.at = if at + 1 >= self.templates.len() { 0 } else { at + 1 };
        self.sent += 1;
        self.sent_this_start += 1;
        let t = self.templates.get_mut(at)?;
        let end = wire.send(now_ps, t.frame.len());
        self.bytes += t.frame.len() as u64;
        if self.spec.flows > 1 {
            t.pending = (t.flow != Some(flow)).then(|| (flow, FlowFields::of(t.ip_partial, self.stream, flow)));
        } else if t.flow != Some(flow) {
            // One flow: the template takes its fields once and keeps them.
            FlowFields::of(t.ip_partial, self.stream, flow).write_into(&mut t.frame);
            t.flow = Some(flow);
        }
        Some(DueFrame { template: t, seq, timestamp_ns: end / 1000, end_ps: end })
    }

    /// The frames due at `now_ps`, at most `max` (what [`Self::allowance`] allowed), as one
    /// [`GeneratedBurst`] given to `take`, which returns how many of them it took, from the
    /// first; they count as sent, exactly as that many [`Self::next_due`] calls would have
    /// made them. Only for a generator with one frame size and one flow, whose frames differ
    /// only in sequence number and timestamp; otherwise (or if nothing is due) `take` is not
    /// called. Returns how many were taken.
    #[inline]
    pub fn deliver_burst(
        &mut self,
        now_ps: u64,
        wire: &mut WireClock,
        max: usize,
        take: impl FnOnce(&GeneratedBurst) -> usize,
    ) -> usize {
        if self.spec.flows > 1 {
            return 0;
        }
        let limit_x1000 = self.due_limit_x1000(now_ps);
        let [t] = self.templates.as_mut_slice() else { return 0 };
        if self.next_x1000 >= limit_x1000 {
            return 0;
        }
        let by_rate = (limit_x1000 - self.next_x1000).div_ceil(self.interval_ps_x1000.max(1));
        let len = t.frame.len();
        let (start, each, by_wire) = wire.back_to_back(now_ps, len);
        let count = by_rate.min(by_wire).min(max as u64);
        if count == 0 {
            return 0;
        }
        // One flow: the template takes its fields once and keeps them (as in next_due).
        if t.flow != Some(self.flow) {
            FlowFields::of(t.ip_partial, self.stream, self.flow).write_into(&mut t.frame);
            t.flow = Some(self.flow);
        }
        let burst = GeneratedBurst {
            frame: &t.frame,
            first_seq: self.sent,
            start_ps: start,
            each_ps: each,
            count: count as usize,
        };
        let taken = take(&burst).min(burst.count) as u64;
        self.next_x1000 += taken * self.interval_ps_x1000;
        self.sent += taken;
        self.sent_this_start += taken;
        self.bytes += taken * len as u64;
        wire.sent_back_to_back(start, each, len, taken);
        taken as usize
    }

    /// Delivers the frames due at `now_ps`, at most `max`, calling `deliver(frame, wire_end_ps)`
    /// for each; returns how many.
    pub fn burst(
        &mut self,
        now_ps: u64,
        wire: &mut WireClock,
        max: usize,
        deliver: &mut impl FnMut(&[u8], u64),
    ) -> usize {
        let allowed = self.allowance(now_ps, max);
        let mut n = 0;
        while n < allowed {
            let Some((frame, end)) = self.next_frame(now_ps, wire) else { break };
            deliver(frame, end);
            n += 1;
        }
        n
    }
}

/// `count` generated frames due now that arrive back to back: `frame` with sequence numbers
/// from `first_seq` on, frame `k` ending at `start_ps + (k + 1) · each_ps` and carrying that
/// time in nanoseconds as its timestamp (see [`Generator::deliver_burst`]).
#[derive(Debug)]
pub struct GeneratedBurst<'a> {
    pub frame: &'a [u8],
    pub first_seq: u64,
    pub start_ps: u64,
    pub each_ps: u64,
    pub count: usize,
}

impl GeneratedBurst<'_> {
    /// The sequence number, timestamp (ns) and end (ps) of frame `k`.
    #[inline(always)]
    pub fn fields(&self, k: usize) -> (u64, u64, u64) {
        let end_ps = self.start_ps + (k as u64 + 1) * self.each_ps;
        (self.first_seq + k as u64, end_ps / 1000, end_ps)
    }
}

/// A generated frame that is due: its template, the fields in which it differs from the
/// template (sequence number, timestamp, and the flow's addresses if the template carries
/// another flow), and when its last bit arrives.
pub struct DueFrame<'a> {
    template: &'a mut Template,
    seq: u64,
    timestamp_ns: u64,
    /// When its last bit arrives.
    pub end_ps: u64,
}

impl<'a> DueFrame<'a> {
    fn patch(&mut self) {
        if let Some((flow, f)) = self.template.pending.take() {
            f.write_into(&mut self.template.frame);
            self.template.flow = Some(flow);
        }
        patch_sequence(&mut self.template.frame, self.seq, self.timestamp_ns);
    }

    /// The frame with every field written.
    #[inline]
    pub fn into_frame(mut self) -> &'a [u8] {
        self.patch();
        &self.template.frame
    }

    /// The frame with every field written, keeping the `DueFrame`.
    #[inline]
    pub fn frame(&mut self) -> &[u8] {
        self.patch();
        &self.template.frame
    }

    /// The frame as it stands in the template: [`Self::flow_fields`] and
    /// [`Self::sequence_fields`] still to be written over it.
    #[inline(always)]
    pub fn template(&self) -> &[u8] {
        &self.template.frame
    }

    /// The flow's address fields, if they differ from the template's.
    #[inline(always)]
    pub fn flow_fields(&self) -> Option<&FlowFields> {
        self.template.pending.as_ref().map(|(_, f)| f)
    }

    /// Where the sequence number and timestamp go (little-endian, one after the other), and
    /// their values.
    #[inline(always)]
    pub fn sequence_fields(&self) -> (usize, u64, u64) {
        (PAYLOAD, self.seq, self.timestamp_ns)
    }
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
    fn of(ip_partial: u32, stream: u16, flow: u32) -> FlowFields {
        let src_ip = (10u32 << 24) | ((stream as u32 & 0xFF) << 16) | (flow & 0xFFFF);
        let src_ip = src_ip.wrapping_add((flow >> 16) << 8);
        let src_port = 1024 + (flow % 60000) as u16;
        let checksum = fold_checksum(ip_partial + (src_ip >> 16) + (src_ip & 0xFFFF));
        FlowFields { checksum, src_ip, src_port }
    }

    fn write_into(&self, frame: &mut [u8]) {
        // Every template has at least MIN_FRAME bytes; one check here spares one per field.
        let Some(f) = frame.first_chunk_mut::<MIN_FRAME>() else { return };
        f[Self::CHECKSUM_AT..Self::CHECKSUM_AT + 2].copy_from_slice(&self.checksum.to_be_bytes());
        f[Self::SRC_IP_AT..Self::SRC_IP_AT + 4].copy_from_slice(&self.src_ip.to_be_bytes());
        f[Self::SRC_PORT_AT..Self::SRC_PORT_AT + 2].copy_from_slice(&self.src_port.to_be_bytes());
    }
}

/// A generator frame of one size.
#[derive(Debug)]
struct Template {
    frame: Vec<u8>,
    /// Partial IP checksum of the header fields that never change.
    ip_partial: u32,
    /// The flow whose addresses the frame carries now; with one flow (or when the flow
    /// repeats) only the sequence number and timestamp change from frame to frame.
    flow: Option<u32>,
    /// The flow of the frame now due and its fields, if the frame does not carry them yet.
    pending: Option<(u32, FlowFields)>,
}

/// Writes the sequence number and timestamp into a generated frame's payload.
#[inline(always)]
fn patch_sequence(frame: &mut [u8], seq: u64, timestamp_ns: u64) {
    let Some(f) = frame.first_chunk_mut::<MIN_FRAME>() else { return };
    f[PAYLOAD..PAYLOAD + 8].copy_from_slice(&seq.to_le_bytes());
    f[PAYLOAD + 8..PAYLOAD + 16].copy_from_slice(&timestamp_ns.to_le_bytes());
}

fn ip_checksum_partial(hdr: &[u8]) -> u32 {
    // Sum of the header's 16-bit words, leaving out the checksum (10..12) and source address (12..16).
    hdr.chunks(2)
        .enumerate()
        .filter(|(i, _)| !matches!(i, 5..=7))
        .map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum()
}

fn fold_checksum(mut sum: u32) -> u16 {
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
fn parse_min(f: &[u8; MIN_FRAME]) -> Option<(u16, u64, u64)> {
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

/// Per-stream sequence tracking at a sink.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StreamStats {
    pub received: u64,
    /// Sequence numbers skipped and not (yet) seen.
    pub lost: u64,
    /// Frames that arrived after a later sequence number.
    pub reordered: u64,
    /// One past the highest sequence number seen: frames from here to the generator's count
    /// never arrived (or have not yet), and are not among the gaps in `lost`.
    #[serde(default)]
    pub next_seq: u64,
}

/// The bytes of a frame a sink reads: headers and nicsim's payload fields.
pub const SINK_HEAD: usize = 64;

/// Maximum number of generator streams a sink tracks (one per port).
pub const MAX_STREAMS: usize = 16;

/// Counts and measures the frames a port transmits.
pub struct Sink {
    pub packets: u64,
    pub bytes: u64,
    /// Frames that were not nicsim generator frames.
    pub foreign: u64,
    pub streams: Vec<StreamStats>,
    pub latency_ns: LatencyHistogram,
}

impl Default for Sink {
    fn default() -> Self {
        Self::new()
    }
}

impl Sink {
    pub fn new() -> Self {
        Sink {
            packets: 0,
            bytes: 0,
            foreign: 0,
            streams: vec![StreamStats::default(); MAX_STREAMS],
            latency_ns: LatencyHistogram::new(),
        }
    }

    /// Accounts one frame whose last bit left the wire at `end_ps`.
    #[inline]
    pub fn consume(&mut self, frame: &[u8], end_ps: u64) {
        self.consume_head(&frame[..frame.len().min(SINK_HEAD)], frame.len(), end_ps);
    }

    /// [`Self::consume`] given only the first [`SINK_HEAD`] bytes (or all, if fewer) of a
    /// frame of `len` bytes: all a sink reads.
    #[inline]
    pub fn consume_head(&mut self, head: &[u8], len: usize, end_ps: u64) {
        match head.first_chunk::<MIN_FRAME>() {
            Some(f) => self.consume_min(f, len, end_ps),
            None => {
                self.packets += 1;
                self.bytes += len as u64;
                self.foreign += 1;
            }
        }
    }

    /// [`Self::consume_head`] given the first [`MIN_FRAME`] bytes of a frame of `len` bytes.
    #[inline(always)]
    pub fn consume_min(&mut self, head: &[u8; MIN_FRAME], len: usize, end_ps: u64) {
        self.packets += 1;
        self.bytes += len as u64;
        let Some((stream, seq, ts_ns)) = parse_min(head) else {
            self.foreign += 1;
            return;
        };
        let Some(s) = self.streams.get_mut(stream as usize) else {
            self.foreign += 1;
            return;
        };
        s.received += 1;
        // The sequence number comes from a frame the driver transmitted: any value is possible.
        if seq >= s.next_seq {
            s.lost = s.lost.saturating_add(seq - s.next_seq);
            s.next_seq = seq.saturating_add(1);
        } else {
            s.reordered += 1;
            s.lost = s.lost.saturating_sub(1);
        }
        self.latency_ns.record((end_ps / 1000).saturating_sub(ts_ns).max(1));
    }

    pub fn reset(&mut self) {
        *self = Sink::new();
    }
}

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencySummary {
    pub samples: u64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

impl LatencySummary {
    pub fn of(h: &LatencyHistogram) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            samples: h.len(),
            min: h.min(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
        }
    }
}

/// Which frames a capture records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Frames the driver transmitted.
    Tx,
    /// Frames arriving at the port from the wire (before filtering).
    Rx,
    Both,
}

/// A pcap file (nanosecond timestamps, Ethernet link type) that tcpdump reads.
pub struct PcapWriter {
    out: BufWriter<File>,
    pub direction: Direction,
    pub remaining: Option<u64>,
    pub written: u64,
    wall_offset_ns: u64,
}

impl PcapWriter {
    /// Creates `path`; `epoch_wall_ns` is the wall-clock time of engine time 0.
    pub fn create(path: &Path, direction: Direction, count: Option<u64>, epoch_wall_ns: u64) -> std::io::Result<Self> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_rate_matches_the_datasheet_figures() {
        assert_eq!(line_rate_pps(60, 10.0).round() as u64, 14_880_952);
        assert_eq!(line_rate_pps(1514, 10.0).round() as u64, 812_744);
    }

    #[test]
    fn crc32_known_vector() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn wire_clock_never_exceeds_line_rate() {
        let mut w = WireClock::new(10.0);
        let mut now = 0u64;
        let mut sent = 0u64;
        // Offer frames continuously for one simulated millisecond.
        while now < 1_000_000_000 {
            if w.ready(now) {
                w.send(now, 60);
                sent += 1;
            } else {
                now += 1000;
            }
        }
        let expected = line_rate_pps(60, 10.0) / 1000.0;
        let slack = (LOOKAHEAD_PS / 67_200) as f64 + 2.0; // frames scheduled ahead of "now"
        assert!((sent as f64) <= expected + slack, "{sent} > {expected}");
        assert!((sent as f64) >= expected - 2.0, "{sent} < {expected}");
    }

    #[test]
    fn generator_bursts_keep_to_the_rate_and_the_count() {
        // At line rate, in bursts of up to 64 polled every microsecond for one simulated
        // millisecond (a poll sees about 15 frames due, so the burst limit does not bind).
        let mut g = Generator::new(0);
        g.start(TrafficSpec::default(), [0x02, 0, 0, 0, 0, 1], 10.0, 0);
        let mut wire = WireClock::new(10.0);
        let mut sent = 0usize;
        let mut last_end = 0;
        for now in (0..1_000_000_000u64).step_by(1_000_000) {
            sent += g.burst(now, &mut wire, 64, &mut |_, end| {
                assert!(end > last_end, "frames leave one after another");
                last_end = end;
            });
        }
        let expected = line_rate_pps(60, 10.0) / 1000.0;
        let slack = (LOOKAHEAD_PS / 67_200) as f64 + 2.0;
        assert!((sent as f64) <= expected + slack, "{sent} > {expected}");
        assert!((sent as f64) >= expected - slack, "{sent} < {expected}");
        // At a lower rate with a count: the count ends it, whatever the burst size.
        let spec = TrafficSpec { rate_pps: Some(1e6), count: Some(100), ..Default::default() };
        g.start(spec, [0x02, 0, 0, 0, 0, 1], 10.0, 2_000_000_000);
        let mut wire = WireClock::new(10.0);
        let mut n = 0;
        for now in (2_000_000_000..3_000_000_000u64).step_by(10_000_000) {
            let got = g.burst(now, &mut wire, 64, &mut |_, _| {});
            assert!(got <= 11, "1 Mpps is 10 frames per 10 µs (+1 looking ahead), not {got}");
            n += got;
        }
        assert_eq!(n, 100);
        assert!(!g.active());
    }

    #[test]
    fn a_late_engine_is_counted_as_skipped_frames() {
        // Polled every microsecond for 1 ms at line rate, with two stalls: 10 µs (within
        // BURST_PS: caught up, nothing skipped) and 100 µs (80 µs of it forgotten).
        let mut g = Generator::new(0);
        g.start(TrafficSpec::default(), [0x02, 0, 0, 0, 0, 1], 10.0, 0);
        let mut wire = WireClock::new(10.0);
        let mut sent = 0;
        let mut now = 0;
        while now < 1_000_000_000u64 {
            sent += g.burst(now, &mut wire, 4096, &mut |_, _| {});
            now += match now {
                200_000_000 => 10_000_000,
                500_000_000 => 100_000_000,
                _ => 1_000_000,
            };
            if now == 210_000_000 {
                assert_eq!(g.skipped, 0, "a 10 µs stall is caught up");
            }
        }
        // The generator had scheduled up to LOOKAHEAD_PS ahead before the stall.
        let forgotten = (100_000_000 - BURST_PS - LOOKAHEAD_PS) as f64 / 67_200.0;
        assert!((g.skipped as f64 - forgotten).abs() <= 2.0, "{} skipped, {forgotten} expected", g.skipped);
        // What was sent and what was skipped add up to the line rate.
        let expected = line_rate_pps(60, 10.0) / 1000.0;
        let slack = (LOOKAHEAD_PS / 67_200) as f64 + 2.0;
        let owed = (sent + g.skipped as usize) as f64;
        assert!((owed - expected).abs() <= slack, "{sent} sent + {} skipped, {expected} owed", g.skipped);
        g.reset_counters();
        assert_eq!(g.skipped, 0);
    }

    #[test]
    fn generator_frames_are_valid_ipv4_udp_and_parse_back() {
        let mut g = Generator::new(3);
        let spec = TrafficSpec { size: 64, flows: 4, count: Some(5), ..Default::default() };
        g.start(spec, [0x02, 0, 0, 0, 0, 1], 10.0, 0);
        let mut wire = WireClock::new(10.0);
        let mut got = Vec::new();
        let mut now = 0;
        while got.len() < 6 && now < 10_000_000 {
            g.burst(now, &mut wire, 1, &mut |f: &[u8], _| got.push(f.to_vec()));
            now += 10_000;
        }
        assert_eq!(got.len(), 5, "count is honoured");
        for (i, f) in got.iter().enumerate() {
            assert_eq!(f.len(), 64);
            assert_eq!(
                fold_checksum(f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum()),
                0,
                "IP checksum"
            );
            let (stream, seq, _) = parse_payload(f).unwrap();
            assert_eq!((stream, seq), (3, i as u64));
        }
        assert_ne!(got[0][26..30], got[1][26..30], "flows vary the source address");
        assert_eq!(got[0][26..30], got[4][26..30], "4 flows repeat");
    }

    #[test]
    fn size_sweeps_cycle_every_length_and_counts_restart() {
        let mut g = Generator::new(0);
        let spec = TrafficSpec { size: 60, size_max: Some(63), count: Some(6), ..Default::default() };
        assert!(TrafficSpec { size: 100, size_max: Some(99), ..Default::default() }.validate(10.0).is_err());
        g.start(spec.clone(), [0x02, 0, 0, 0, 0, 1], 10.0, 0);
        let mut wire = WireClock::new(10.0);
        let mut got = Vec::new();
        for now in (0..10_000_000).step_by(10_000) {
            g.burst(now, &mut wire, 1, &mut |f: &[u8], _| got.push(f.to_vec()));
        }
        let lengths: Vec<usize> = got.iter().map(|f| f.len()).collect();
        assert_eq!(lengths, [60, 61, 62, 63, 60, 61]);
        for f in &got {
            let sum: u32 = f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
            assert_eq!(fold_checksum(sum), 0, "IP checksum of a {}-byte frame", f.len());
            assert_eq!(usize::from(u16::from_be_bytes([f[16], f[17]])), f.len() - 14, "IP total length");
        }
        // A new start counts afresh; sequence numbers continue.
        g.start(spec, [0x02, 0, 0, 0, 0, 1], 10.0, 20_000_000);
        let mut more = Vec::new();
        for now in (20_000_000..30_000_000).step_by(10_000) {
            g.burst(now, &mut wire, 1, &mut |f: &[u8], _| more.push(parse_payload(f).unwrap().1));
        }
        assert_eq!(more, [6, 7, 8, 9, 10, 11]);
    }

    #[test]
    fn sink_counts_loss_and_reordering() {
        let mut s = Sink::new();
        let f = |seq: u64| {
            let mut t = build_template(60, [0; 6], 1);
            t[PAYLOAD..PAYLOAD + 8].copy_from_slice(&seq.to_le_bytes());
            t
        };
        for seq in [0, 1, 3, 2, 6] {
            s.consume(&f(seq), 5_000_000);
        }
        let st = &s.streams[1];
        assert_eq!((st.received, st.reordered, st.lost), (5, 1, 2)); // 4 and 5 missing
        s.consume(&[0u8; 60], 0);
        assert_eq!(s.foreign, 1);
    }
}
