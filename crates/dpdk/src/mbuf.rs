//! An owned packet buffer: one handle per mbuf, freed on drop, its data as byte slices.

use crate::error::Error;
use crate::sys;
use std::marker::PhantomData;
use std::ptr::NonNull;

/// An `rte_mbuf` this handle owns: not `Copy` or `Clone` (there is one owner, and `Drop`
/// returns it to its pool), borrowing the pool (`'p`) so it cannot outlive it. Layout: one
/// pointer, so a batch of them is the `struct rte_mbuf *` array DPDK's bursts take.
#[repr(transparent)]
pub struct Mbuf<'p> {
    raw: NonNull<sys::rte_mbuf>,
    _pool: PhantomData<&'p ()>,
}

// SAFETY: the handle is the only reference to the mbuf (refcount 1: this API never shares one),
// so it may move to another thread, and `&Mbuf` only reads.
unsafe impl Send for Mbuf<'_> {}
// SAFETY: as above.
unsafe impl Sync for Mbuf<'_> {}

impl std::fmt::Debug for Mbuf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mbuf").field("len", &self.len()).field("pkt_len", &self.pkt_len()).finish()
    }
}

impl<'p> Mbuf<'p> {
    pub(crate) fn from_raw(raw: NonNull<sys::rte_mbuf>) -> Self {
        Mbuf { raw, _pool: PhantomData }
    }

    fn header(&self) -> &sys::rte_mbuf {
        // SAFETY: raw points to a live mbuf this handle owns; no `&mut` to it exists while
        // `&self` does.
        unsafe { self.raw.as_ref() }
    }

    /// The bytes of the first segment. Its length is `data_len`, capped at the room the buffer
    /// has after `data_off`: a device writes `data_len` (a poll-mode driver copies it from the
    /// descriptor), and a wrong one must not reach past the buffer.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        let (start, len) = self.extent();
        // SAFETY: [start, start + len) lies inside the mbuf's buffer (`extent`), which this
        // handle owns for as long as the borrow of `self`.
        unsafe { std::slice::from_raw_parts(start, len) }
    }

    /// The bytes of the first segment, writable.
    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let (start, len) = self.extent();
        // SAFETY: as in `data`, and `&mut self` makes this the only reference to the bytes.
        unsafe { std::slice::from_raw_parts_mut(start, len) }
    }

    #[inline(always)]
    fn extent(&self) -> (*mut u8, usize) {
        let h = self.header();
        let room = h.buf_len.saturating_sub(h.data_off);
        let start = h.buf_addr.cast::<u8>().wrapping_add(h.data_off as usize);
        (start, h.data_len.min(room) as usize)
    }

    /// Bytes in the first segment.
    pub fn len(&self) -> usize {
        self.extent().1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes in the whole packet (every segment).
    pub fn pkt_len(&self) -> u32 {
        self.header().pkt_len
    }

    /// The port it was received on.
    pub fn port(&self) -> u16 {
        self.header().port
    }

    /// Adds `n` bytes at the end (`rte_pktmbuf_append`) and returns them.
    pub fn append(&mut self, n: u16) -> Result<&mut [u8], Error> {
        // SAFETY: raw is a live mbuf this handle owns.
        let p = unsafe { sys::safenic_pktmbuf_append(self.raw.as_ptr(), n) };
        let p = NonNull::new(p.cast::<u8>()).ok_or(Error::NoRoom { operation: "append", bytes: n })?;
        // SAFETY: DPDK returned n bytes of the last segment's tailroom, now data, owned with `self`.
        Ok(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), n as usize) })
    }

    /// Adds `n` bytes at the front from the headroom (`rte_pktmbuf_prepend`) and returns them.
    pub fn prepend(&mut self, n: u16) -> Result<&mut [u8], Error> {
        // SAFETY: raw is a live mbuf this handle owns.
        let p = unsafe { sys::safenic_pktmbuf_prepend(self.raw.as_ptr(), n) };
        let p = NonNull::new(p.cast::<u8>()).ok_or(Error::NoRoom { operation: "prepend", bytes: n })?;
        // SAFETY: DPDK moved the data start back by n bytes inside the buffer and returned it.
        Ok(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), n as usize) })
    }

    /// Removes `n` bytes from the front (`rte_pktmbuf_adj`).
    pub fn adj(&mut self, n: u16) -> Result<(), Error> {
        // SAFETY: raw is a live mbuf this handle owns.
        let p = unsafe { sys::safenic_pktmbuf_adj(self.raw.as_ptr(), n) };
        if p.is_null() {
            return Err(Error::NoRoom { operation: "adj", bytes: n });
        }
        Ok(())
    }

    /// Removes `n` bytes from the end (`rte_pktmbuf_trim`).
    pub fn trim(&mut self, n: u16) -> Result<(), Error> {
        // SAFETY: raw is a live mbuf this handle owns.
        if unsafe { sys::safenic_pktmbuf_trim(self.raw.as_ptr(), n) } != 0 {
            return Err(Error::NoRoom { operation: "trim", bytes: n });
        }
        Ok(())
    }
}

impl Drop for Mbuf<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle owns the mbuf and this is its last use; its pool outlives it ('p).
        unsafe { sys::safenic_pktmbuf_free(self.raw.as_ptr()) }
    }
}
