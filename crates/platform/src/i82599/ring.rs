//! A ring of the 82599's legacy descriptors [DS 7.1.5, 7.2.3.2.2], whose buffer addresses only
//! this type writes.
//!
//! Quadword 0 of a descriptor is its buffer's address; quadword 1 is the length and command
//! of a transmit, or the length and status the device writes back after a receive (which
//! leaves quadword 0 as it was). The ring fills every slot with a buffer's [`BufAddr`] when it
//! is made, and afterwards writes only such addresses, and transmit lengths of at most a
//! buffer: whatever part of it the device is handed, it finds only buffers of live memory.

use crate::dma::{BufAddr, DescriptorArea, DmaRegion, PacketLength};
use crate::error::PlatformError;
use invariants::{RingIndex, VolatileArray};
use std::marker::PhantomData;

/// The commands a transmit descriptor may carry [DS 7.2.3.2.2]: end of packet and insert FCS
/// always, report status on request. Nothing that turns the descriptor into another format
/// (DEXT) or makes the device read more than the length says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxCommand(u64);

/// CMD.EOP, CMD.IFCS and CMD.RS, at bits 24, 25 and 27 of quadword 1.
const EOP: u64 = 1 << 24;
const IFCS: u64 = 1 << 25;
const RS: u64 = 1 << 27;

impl TxCommand {
    /// Send the frame.
    pub const SEND: TxCommand = TxCommand(EOP | IFCS);
    /// Send the frame, and write the head back once it is sent.
    pub const SEND_AND_REPORT: TxCommand = TxCommand(EOP | IFCS | RS);
}

/// `N` legacy descriptors in a region's [`DescriptorArea`], every one of which names a buffer
/// whose memory lives at least as long as `'r`. Copying it is free: it is a view, and every
/// view of the area keeps that promise.
///
/// `'r` is invariant: a view cannot be shortened to take the address of a buffer that dies
/// before the ring's other views, which could then hand the device a freed buffer:
///
/// ```compile_fail
/// use platform::dma::BufAddr;
/// use platform::i82599::LegacyRing;
/// fn shorten<'long: 'short, 'short>(ring: LegacyRing<'long, 8>, b: BufAddr<'short>) {
///     let short: LegacyRing<'short, 8> = ring;
///     short.receive_into(invariants::RingIndex::ZERO, b);
/// }
/// ```
#[derive(Clone, Copy)]
pub struct LegacyRing<'r, const N: usize> {
    descriptors: VolatileArray<'r, [u64; 2], N>,
    phys: u64,
    _invariant: PhantomData<fn(&'r ()) -> &'r ()>,
}

impl<'r, const N: usize> LegacyRing<'r, N> {
    /// The ring in `area` of `region`, slot `i` given `buffer(i)` with quadword 1 cleared.
    pub fn new(
        region: &'r DmaRegion,
        area: DescriptorArea,
        mut buffer: impl FnMut(RingIndex<N>) -> BufAddr<'r>,
    ) -> Result<Self, PlatformError> {
        let (descriptors, phys) = region.descriptors::<N>(area)?;
        let ring = LegacyRing { descriptors, phys, _invariant: PhantomData };
        let mut i = RingIndex::<N>::ZERO;
        for _ in 0..N {
            ring.receive_into(i, buffer(i));
            i = i.next();
        }
        Ok(ring)
    }

    /// The bus address of the first descriptor.
    pub(super) fn phys(&self) -> u64 {
        self.phys
    }

    /// Quadword 1 of slot `i`: the length and status the device wrote back (untrusted).
    #[inline(always)]
    pub fn status(self, i: RingIndex<N>) -> u64 {
        u64::from_le(self.descriptors.ring(i).at::<1>().read())
    }

    /// Slot `i` sends `length` bytes of the buffer it holds (zero: a null descriptor, which
    /// also clears a receive's DD).
    #[inline(always)]
    pub fn transmit(self, i: RingIndex<N>, length: PacketLength, command: TxCommand) {
        self.descriptors.ring(i).at::<1>().write((length.get() as u64 | command.0).to_le());
    }

    /// Slot `i` receives into `buffer`.
    #[inline(always)]
    pub fn receive_into(self, i: RingIndex<N>, buffer: BufAddr<'r>) {
        let d = self.descriptors.ring(i);
        d.at::<0>().write(buffer.get().to_le());
        d.at::<1>().write(0);
    }

    /// Slot `i` sends `length` bytes of `buffer`.
    #[inline(always)]
    pub fn transmit_from(self, i: RingIndex<N>, buffer: BufAddr<'r>, length: PacketLength, command: TxCommand) {
        let d = self.descriptors.ring(i);
        d.at::<0>().write(buffer.get().to_le());
        d.at::<1>().write((length.get() as u64 | command.0).to_le());
    }
}
