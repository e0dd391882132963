//! CPU placement: a polling engine or driver keeps one core busy, so it should own it.
//!
//! # Soundness
//! CPU affinity and the clock: no memory or device is reached.

use std::io;

/// Number of CPUs this process may run on.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// CPUs of the machine that are online, by number (`/sys/devices/system/cpu/online`, e.g.
/// `0-3,6`), whatever this process's affinity; if that cannot be read, those it may run on.
pub fn online_cpus() -> Vec<usize> {
    let listed = std::fs::read_to_string("/sys/devices/system/cpu/online").ok().and_then(|l| parse_cpu_list(l.trim()));
    listed.unwrap_or_else(|| (0..available_cpus()).collect())
}

/// A kernel CPU list (`0-3,6`), or `None` if it is not one.
fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for range in list.split(',') {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
        cpus.extend(first..=last);
    }
    Some(cpus)
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    pin(None, cpu)
}

/// Lets the calling thread run on every CPU again (undoes [`pin_current_thread`]).
pub fn unpin_current_thread() -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    (0..rustix::thread::CpuSet::MAX_CPU).for_each(|cpu| set.set(cpu));
    Ok(rustix::thread::sched_setaffinity(None, &set)?)
}

/// Keeps the calling thread, and the threads it creates from now on, off `cpu`: on every other
/// CPU it may use. Nothing changes if `cpu` is the only one.
pub fn avoid_cpu(cpu: usize) -> io::Result<()> {
    let mut set = rustix::thread::sched_getaffinity(None)?;
    if cpu < rustix::thread::CpuSet::MAX_CPU {
        set.unset(cpu);
    }
    if set.count() == 0 {
        return Ok(());
    }
    Ok(rustix::thread::sched_setaffinity(None, &set)?)
}

/// Pins the main thread of process `pid` to `cpu` (threads it creates later inherit this).
pub fn pin_process(pid: u32, cpu: usize) -> io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("bad process id {pid}")))?;
    pin(Some(pid), cpu)
}

#[cfg(test)]
#[test]
fn cpu_lists_read_as_the_kernel_writes_them() {
    assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
    assert_eq!(parse_cpu_list("0"), Some(vec![0]));
    assert_eq!(parse_cpu_list("zero"), None);
}

/// `None` is the calling thread.
fn pin(pid: Option<rustix::process::Pid>, cpu: usize) -> io::Result<()> {
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu} out of range")));
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    Ok(rustix::thread::sched_setaffinity(pid, &set)?)
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine, so that two
/// processes can line up what each saw (`Instant` hides its value). Through the C library:
/// rustix finds the vDSO by parsing the auxiliary vector itself, which crashes under valgrind,
/// and nicsim's instructions are counted there.
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a writable timespec that outlives the call, which only writes it.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    debug_assert_eq!(r, 0, "CLOCK_MONOTONIC is always there");
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}
