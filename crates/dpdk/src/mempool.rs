//! A pool of packet buffers, owned: freed on drop only when no mbuf or port still uses it.

use crate::eal::{Eal, USERS};
use crate::error::{rte_errno, Error};
use crate::mbuf::Mbuf;
use crate::sys;
use std::ffi::CString;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// An `rte_mempool` of mbufs (`rte_pktmbuf_pool_create`). Allocation and free are safe from
/// any thread (DPDK's pools are multi-producer, multi-consumer), so it is `Sync`.
pub struct Mempool<'e> {
    raw: NonNull<sys::rte_mempool>,
    /// Ports whose receive queues refill from this pool: while any is alive (or was leaked),
    /// the device may still write into its buffers.
    pub(crate) ports: AtomicUsize,
    _eal: PhantomData<&'e ()>,
}

// SAFETY: an rte_mempool created with default flags is safe to use from several threads at
// once (multi-producer/multi-consumer ring, per-lcore caches indexed by the caller's lcore).
unsafe impl Send for Mempool<'_> {}
// SAFETY: as above; `&Mempool` offers only allocation and counts.
unsafe impl Sync for Mempool<'_> {}

impl std::fmt::Debug for Mempool<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mempool").field("available", &self.available()).field("in_use", &self.in_use()).finish()
    }
}

impl<'e> Mempool<'e> {
    /// `count` mbufs with `data_room` bytes each (headroom included: use
    /// [`Mempool::DEFAULT_DATA_ROOM`] for 2 KiB of data), `cache` of them kept per lcore, on the
    /// caller's NUMA socket. `name` must be unique in the process.
    pub fn new(_eal: &'e Eal, name: &str, count: u32, cache: u32, data_room: u16) -> Result<Self, Error> {
        let c_name = CString::new(name).map_err(|_| Error::NulInArgument(name.to_string()))?;
        // SAFETY: c_name is a valid NUL-terminated string for the call's duration; EAL is up
        // (`_eal`); DPDK copies the name.
        let raw = unsafe {
            sys::rte_pktmbuf_pool_create(c_name.as_ptr(), count, cache, 0, data_room, sys::rte_socket_id() as i32)
        };
        let raw = NonNull::new(raw).ok_or(Error::Call { call: "rte_pktmbuf_pool_create", errno: rte_errno() })?;
        USERS.fetch_add(1, Ordering::SeqCst);
        Ok(Mempool { raw, ports: AtomicUsize::new(0), _eal: PhantomData })
    }

    /// 2 KiB of data and DPDK's headroom (`RTE_MBUF_DEFAULT_BUF_SIZE`).
    pub const DEFAULT_DATA_ROOM: u16 = sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16;

    /// An mbuf with no data, headroom reserved.
    pub fn alloc(&self) -> Result<Mbuf<'_>, Error> {
        // SAFETY: self.raw is a live pool (freed only in Drop, which `&self` excludes).
        let m = unsafe { sys::safenic_pktmbuf_alloc(self.raw.as_ptr()) };
        NonNull::new(m).map(Mbuf::from_raw).ok_or(Error::PoolEmpty)
    }

    /// Mbufs free in the pool (its per-lcore caches included).
    pub fn available(&self) -> u32 {
        // SAFETY: self.raw is a live pool.
        unsafe { sys::rte_mempool_avail_count(self.raw.as_ptr()) }
    }

    /// Mbufs taken from the pool and not yet returned.
    pub fn in_use(&self) -> u32 {
        // SAFETY: self.raw is a live pool.
        unsafe { sys::rte_mempool_in_use_count(self.raw.as_ptr()) }
    }

    pub(crate) fn raw(&self) -> *mut sys::rte_mempool {
        self.raw.as_ptr()
    }
}

impl Drop for Mempool<'_> {
    /// Frees the pool only if no port refills from it and every mbuf is back: a leaked port or
    /// mbuf (`mem::forget`) leaks the pool instead, so no device or ring is left pointing into
    /// freed memory.
    fn drop(&mut self) {
        if self.ports.load(Ordering::SeqCst) == 0 && self.in_use() == 0 {
            // SAFETY: no port refills from the pool and no mbuf of it is out, so nothing
            // references its memory; `&mut self` is the last use.
            unsafe { sys::rte_mempool_free(self.raw.as_ptr()) };
            USERS.fetch_sub(1, Ordering::SeqCst);
        }
    }
}
