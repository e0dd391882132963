//! The page the trusted process and its helper share ahead of the frame: two sequence numbers
//! (request, response) on their own cache lines, who sleeps on which, and the CPU each side
//! last ran on. Each side polls for `spin`, then sleeps on a futex; the other side wakes it
//! only if it said it sleeps. A side that finds the other one last ran on its own CPU sleeps
//! at once: polling there would only keep the other side from running.

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
    /// Each side's CPU plus one as it last waited or took an answer (0: not yet known). A
    /// hint only: a wrong one costs a side a futex wake, or polling up to its spin.
    pub caller_cpu: Line,
    pub helper_cpu: Line,
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

/// What [`wait_change`] saw: the new value, how long it had waited when it last read the
/// clock (every 64 polls, so that polling stays cheap; zero for a shorter wait), and how the
/// wait went.
pub(crate) struct Change {
    pub value: u32,
    pub waited: Duration,
    pub how: Waited,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// The change came while the side polled.
    Polling,
    /// It slept after polling for its whole spin.
    SleptAfterSpin,
    /// It slept at once: the other side had last run on its CPU.
    GaveWay,
}

/// The waiting side's CPU and the other side's, as [`Control`] keeps them.
pub(crate) struct Cpus<'a> {
    pub mine: &'a AtomicU32,
    pub theirs: &'a AtomicU32,
}

impl Cpus<'_> {
    /// Notes the CPU this side runs on; true if the other side last ran on it too.
    pub fn note(&self) -> bool {
        let cpu = current_cpu();
        self.mine.store(cpu, Ordering::Relaxed);
        cpu != 0 && self.theirs.load(Ordering::Relaxed) == cpu
    }
}

/// Waits until `word` differs from `old`, polling for `spin` (unless the other side shares
/// this CPU) then sleeping in slices of `slice`; `give_up` is asked after each slice. Returns
/// the change, or None if given up.
pub(crate) fn wait_change(
    word: &AtomicU32,
    old: u32,
    sleeps: &AtomicU32,
    cpus: Cpus<'_>,
    spin: Duration,
    slice: Option<Duration>,
    give_up: &mut dyn FnMut() -> bool,
) -> Option<Change> {
    let start = Instant::now();
    let mut waited = Duration::ZERO;
    let mut polls = 0u32;
    let mut how = Waited::Polling;
    cpus.note();
    loop {
        let value = word.load(Ordering::Acquire);
        if value != old {
            cpus.note();
            return Some(Change { value, waited, how });
        }
        polls = polls.wrapping_add(1);
        if polls % 64 != 0 {
            std::hint::spin_loop();
            continue;
        }
        waited = start.elapsed();
        let sharing = cpus.note();
        if how == Waited::Polling {
            if waited < spin && !sharing {
                std::hint::spin_loop();
                continue;
            }
            how = if sharing { Waited::GaveWay } else { Waited::SleptAfterSpin };
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

/// The CPU this thread runs on, plus one; 0 if unknown.
fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu takes no argument and touches no memory of ours (glibc reads it
    // from rseq or the vDSO; the helper's allowlist has getcpu for the fallback).
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).map_or(0, |c| c.wrapping_add(1))
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
