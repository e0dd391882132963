//! Where a port's transmitted frames go: straight into a sink, or into a batch that the
//! engine hands to a cable, a loopback or a capture.

use crate::wire::{Sink, MIN_FRAME, SINK_HEAD};
use platform::MappedRegion;

/// Where [`Port::transmit`] puts the frames it sends.
pub trait TxOutput {
    /// How many more frames it takes.
    fn room(&self) -> usize;
    /// Whether a frame may be taken before its wire time comes, as the card's transmit
    /// packet buffer takes it [DS 7.2.3.5.2: completion follows the upload into the packet
    /// buffer]. A frame that goes on into another port must not arrive there early.
    fn takes_ahead_of_wire(&self) -> bool;
    /// Takes the `len` bytes at `offset` in `region`, zero-padded to `padded` bytes, as one
    /// frame whose last bit leaves the wire at `end_ps`. Returns the frame's first 6 bytes
    /// (its destination, for statistics) if it has them.
    fn take_from(
        &mut self,
        region: &MappedRegion,
        offset: usize,
        len: usize,
        padded: usize,
        end_ps: u64,
    ) -> Option<[u8; 6]>;
    /// Takes a frame gathered from several descriptors.
    fn take(&mut self, frame: &[u8], end_ps: u64);
    /// After a run of [`Self::take_from`]: it took `frames` frames of `bytes` bytes in all,
    /// for an output that counts them per run rather than per frame.
    fn took(&mut self, _frames: u64, _bytes: u64) {}
}

/// A sink takes frames straight from driver memory: it reads only the headers and payload
/// fields it measures, so a port without a cable, loopback or capture copies no whole frame.
impl TxOutput for Sink {
    fn room(&self) -> usize {
        usize::MAX
    }
    fn takes_ahead_of_wire(&self) -> bool {
        true
    }
    #[inline(always)]
    fn take_from(
        &mut self,
        region: &MappedRegion,
        offset: usize,
        len: usize,
        padded: usize,
        end_ps: u64,
    ) -> Option<[u8; 6]> {
        if let Some(span) = region.span::<MIN_FRAME>(offset, len) {
            // The common case: every field the sink reads is in the frame's first bytes.
            let head: [u8; MIN_FRAME] = span.read_head();
            // Counted in `took`, once per run.
            self.measure_min(&head, end_ps);
            return head.first_chunk::<6>().copied();
        }
        let mut head = [0u8; SINK_HEAD];
        region.read_bytes(offset, &mut head[..len.min(SINK_HEAD)]);
        // Padding bytes are the zeros already there. Counted in `took`, once per run.
        self.measure_head(&head[..padded.min(SINK_HEAD)], end_ps);
        (padded >= 6).then(|| [head[0], head[1], head[2], head[3], head[4], head[5]])
    }
    fn take(&mut self, frame: &[u8], end_ps: u64) {
        self.consume(frame, end_ps);
    }
    #[inline(always)]
    fn took(&mut self, frames: u64, bytes: u64) {
        self.packets += frames;
        self.bytes += bytes;
    }
}

/// Frames produced by one [`Port::transmit`] call, back to back in one reused buffer.
#[derive(Debug)]
pub struct TxBatch {
    data: Vec<u8>,
    /// Each frame's end in `data` and when its last bit leaves the wire; it starts where the
    /// previous one ends.
    frames: Vec<(usize, u64)>,
    capacity: usize,
    /// Frames taken at most (see [`Self::limit`]).
    limit: usize,
    /// HLREG0.LPBK when the frames were sent: they loop back into the port's own receive path.
    pub loopback: bool,
}

impl TxBatch {
    /// A batch of at most `capacity` frames.
    pub fn new(capacity: usize) -> Self {
        TxBatch {
            data: Vec::with_capacity(capacity * 2 * 1024),
            frames: Vec::with_capacity(capacity),
            capacity,
            limit: capacity,
            loopback: false,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
    pub fn clear(&mut self) {
        self.data.clear();
        self.frames.clear();
    }
    /// Takes at most `frames` frames (at least one) until the next call, within its capacity.
    pub fn limit(&mut self, frames: usize) {
        self.limit = frames.clamp(1, self.capacity);
    }
    /// The frames in order, each with the time its last bit leaves the wire.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> {
        let mut start = 0;
        self.frames.iter().map(move |&(end, t)| {
            let f = &self.data[start..end];
            start = end;
            (f, t)
        })
    }
}

impl TxOutput for TxBatch {
    fn room(&self) -> usize {
        self.limit.saturating_sub(self.frames.len())
    }
    fn takes_ahead_of_wire(&self) -> bool {
        false
    }
    #[inline(always)]
    fn take_from(
        &mut self,
        region: &MappedRegion,
        offset: usize,
        len: usize,
        padded: usize,
        end_ps: u64,
    ) -> Option<[u8; 6]> {
        let start = self.data.len();
        region.read_append(offset, len, &mut self.data);
        if padded > len {
            self.data.resize(start + padded, 0);
        }
        self.frames.push((self.data.len(), end_ps));
        self.data.get(start..start + 6).map(|d| [d[0], d[1], d[2], d[3], d[4], d[5]])
    }
    fn take(&mut self, frame: &[u8], end_ps: u64) {
        self.data.extend_from_slice(frame);
        self.frames.push((self.data.len(), end_ps));
    }
}
