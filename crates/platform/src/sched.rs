//! CPU placement: a polling engine or driver keeps one core busy, so it should own it.

use std::io;

/// Number of CPUs this process may run on.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    pin(None, cpu)
}

/// Pins the main thread of process `pid` to `cpu` (threads it creates later inherit this).
pub fn pin_process(pid: u32, cpu: usize) -> io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("bad process id {pid}")))?;
    pin(Some(pid), cpu)
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
