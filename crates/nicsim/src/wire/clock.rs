//! Line-rate timing: when each frame's last bit leaves the wire.

use super::{BURST_PS, FCS_LEN, LOOKAHEAD_PS, WIRE_OVERHEAD};

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
    /// How far ahead of real time a frame may be scheduled: [`LOOKAHEAD_PS`], or the time a
    /// packet buffer in front of the wire takes to drain (see [`Self::set_ahead`]).
    ahead_ps: u64,
}

impl WireClock {
    pub fn new(gbps: f64) -> Self {
        WireClock {
            free_at_ps: 0,
            ps_per_byte_x1000: (ps_per_byte(gbps) * 1000.0).round() as u64,
            last: (0, 0),
            ahead_ps: LOOKAHEAD_PS,
        }
    }

    /// Lets frames be scheduled up to `bytes` of wire time ahead of real time (at least
    /// [`LOOKAHEAD_PS`]): a sender whose frames wait in a packet buffer of that size before
    /// the wire is done with each one as it enters the buffer.
    pub fn set_ahead(&mut self, bytes: u64) {
        self.ahead_ps = (bytes * self.ps_per_byte_x1000 / 1000).max(LOOKAHEAD_PS);
    }

    #[inline]
    fn duration_ps(&self, len: usize) -> u64 {
        wire_time_ps(len, self.ps_per_byte_x1000)
    }

    /// Whether a frame may start at `now_ps`.
    #[inline]
    pub fn ready(&self, now_ps: u64) -> bool {
        self.free_at_ps <= now_ps + self.ahead_ps
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
        let ready_until = now_ps + self.ahead_ps;
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
            ready_until_ps: now_ps + self.ahead_ps,
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
