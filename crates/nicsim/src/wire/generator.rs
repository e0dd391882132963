//! The traffic generator: frames at a rate (up to line rate), with flows, a count or a
//! duration, sequence numbers and timestamps for the sink.

use super::clock::{line_rate_pps, WireClock};
use super::frame::{build_template, ip_checksum_partial, patch_sequence, FlowFields, Template};
use super::{BURST_PS, LOOKAHEAD_PS, MAX_FRAME, MIN_FRAME, PAYLOAD, REBASE_PS};
use serde::{Deserialize, Serialize};

/// Fields that are `Option`s may be left out (they mean "none"); any other missing or unknown
/// field is an error.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
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
        if left == 0 {
            self.active = false;
            return 0;
        }
        if let Some(end) = self.end_ps.filter(|e| now_ps >= *e) {
            // The frames the rate owed before the end and that were never due in time (the
            // engine fell behind) count as skipped, so that a timed run's frames offered and
            // skipped add up to the rate times the duration.
            let end_x1000 = end.saturating_sub(self.origin_ps).saturating_mul(1000);
            if self.next_x1000 < end_x1000 {
                self.skipped += (end_x1000 - self.next_x1000).div_ceil(self.interval_ps_x1000.max(1));
            }
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
        // Looking ahead never reaches past the end of a timed run.
        let before_end = self.end_ps.map_or(u64::MAX, |end| {
            let end_x1000 = end.saturating_sub(self.origin_ps).saturating_mul(1000);
            end_x1000.saturating_sub(self.next_x1000).div_ceil(self.interval_ps_x1000.max(1))
        });
        (max as u64).min(left).min(before_end) as usize
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

    /// The frame's first [`MIN_FRAME`] bytes with its flow's fields written (the sequence
    /// fields left as the template has them): its headers, for what chooses its queue.
    #[inline]
    pub fn header(&self) -> [u8; MIN_FRAME] {
        let mut head = [0u8; MIN_FRAME];
        if let Some(t) = self.template.frame.first_chunk::<MIN_FRAME>() {
            head = *t;
        }
        if let Some(f) = self.flow_fields() {
            f.write_into(&mut head);
        }
        head
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
