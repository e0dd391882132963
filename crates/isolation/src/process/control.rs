//! The page the trusted process and its helper share ahead of the frame: two sequence numbers
//! (request, response) on their own cache lines, and who sleeps on which. Each side polls for
//! `spin`, then sleeps on a futex; the other side wakes it only if it said it sleeps.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

#[repr(C, align(64))]
pub(crate) struct Line(pub AtomicU32);

#[repr(C)]
pub(crate) struct Control {
    pub request: Line,
    pub response: Line,
    pub helper_sleeps: Line,
    pub caller_sleeps: Line,
    /// 1 when the helper is ready; 2 when it failed (its message is in the frame's result).
    pub ready: Line,
    /// The signal that is ending the helper, with its code and address (helper.rs).
    pub fault: Fault,
}

#[repr(C, align(64))]
pub(crate) struct Fault {
    pub signal: AtomicU32,
    pub code: AtomicU32,
    pub address: std::sync::atomic::AtomicU64,
}

pub(crate) const CONTROL_BYTES: usize = 4096;
const _: () = assert!(std::mem::size_of::<Control>() <= CONTROL_BYTES);

/// What [`wait_change`] saw: the new value, and how long it had waited when it last read the
/// clock (every 64 polls, so that polling stays cheap; zero for a shorter wait).
pub(crate) struct Change {
    pub value: u32,
    pub waited: Duration,
}

/// Waits until `word` differs from `old`, polling for `spin` then sleeping in slices of
/// `slice`; `give_up` is asked after each slice. Returns the change, or None if given up.
pub(crate) fn wait_change(
    word: &AtomicU32,
    old: u32,
    sleeps: &AtomicU32,
    spin: Duration,
    slice: Option<Duration>,
    give_up: &mut dyn FnMut() -> bool,
) -> Option<Change> {
    let start = Instant::now();
    let mut waited = Duration::ZERO;
    let mut polls = 0u32;
    loop {
        let value = word.load(Ordering::Acquire);
        if value != old {
            return Some(Change { value, waited });
        }
        polls = polls.wrapping_add(1);
        if polls % 64 != 0 {
            std::hint::spin_loop();
            continue;
        }
        waited = start.elapsed();
        if waited < spin {
            std::hint::spin_loop();
            continue;
        }
        sleeps.store(1, Ordering::SeqCst);
        if word.load(Ordering::SeqCst) == old {
            futex_wait(word, old, slice);
        }
        sleeps.store(0, Ordering::SeqCst);
        waited = start.elapsed();
        if word.load(Ordering::Acquire) == old && give_up() {
            return None;
        }
    }
}

/// Publishes `value` in `word` and wakes the other side if it sleeps on it.
pub(crate) fn publish(word: &AtomicU32, value: u32, sleeps: &AtomicU32) {
    word.store(value, Ordering::SeqCst);
    if sleeps.load(Ordering::SeqCst) != 0 {
        futex_wake(word);
    }
}

fn futex_wait(word: &AtomicU32, old: u32, timeout: Option<Duration>) {
    let ts = timeout
        .map(|t| libc::timespec { tv_sec: t.as_secs() as libc::time_t, tv_nsec: t.subsec_nanos() as libc::c_long });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: a shared futex word in memory both processes map; the kernel compares it to `old`
    // before sleeping, and the timeout (if any) is a valid timespec.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, old, ts_ptr, 0usize, 0u32) };
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: wakes sleepers on a shared futex word; no memory is written.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1, 0usize, 0usize, 0u32) };
}
