//! The time-stamp counter, as DPDK's applications time their drains and statistics.

use crate::sys;

/// The time-stamp counter now (`rte_rdtsc`).
#[inline(always)]
pub fn cycles() -> u64 {
    // SAFETY: RDTSC is on every x86-64 CPU and reads a counter; it touches no memory.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Counter ticks per second, as EAL measured them at start (`rte_get_tsc_hz`).
pub fn cycles_per_second(_eal: &crate::Eal) -> u64 {
    // SAFETY: reads a value EAL set during its initialisation, which `_eal` proves.
    unsafe { sys::safenic_tsc_hz() }
}
