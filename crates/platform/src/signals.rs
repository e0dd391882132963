//! SIGINT/SIGTERM as a flag that a polling loop checks, and signals a harness sends.
//!
//! # Soundness
//! The handler installed stores one atomic flag (async-signal-safe); sending a signal is the
//! kernel's `kill`, which the confinement limits where a keeper must be shielded.

use std::sync::atomic::{AtomicBool, Ordering};

static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    TERMINATE.store(true, Ordering::Relaxed);
}

/// Installs handlers so that SIGINT and SIGTERM set the flag read by [`terminate_requested`].
pub fn install_termination_flag() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is a plain C struct valid when zeroed.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        // SAFETY: `sa` is initialised; the handler only stores to an atomic, which is
        // async-signal-safe; passing NULL for the old action is allowed.
        if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived since [`install_termination_flag`].
pub fn terminate_requested() -> bool {
    TERMINATE.load(Ordering::Relaxed)
}

/// Sets the flag as a signal would (for a shutdown requested another way).
pub fn request_termination() {
    TERMINATE.store(true, Ordering::Relaxed);
}

/// Signals a harness sends to the drivers it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: stop, print the summary line, exit 0.
    Terminate,
    /// SIGSTOP: freeze (a driver descheduled for as long as the harness wants).
    Stop,
    /// SIGCONT: go on after [`Signal::Stop`].
    Continue,
    /// SIGKILL: gone at once.
    Kill,
}

/// Sends `signal` to process `pid`.
pub fn send(pid: u32, signal: Signal) -> std::io::Result<()> {
    // A positive pid names one process, never a process group or every process.
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("bad process id {pid}")))?;
    let sig = match signal {
        Signal::Terminate => rustix::process::Signal::TERM,
        Signal::Stop => rustix::process::Signal::STOP,
        Signal::Continue => rustix::process::Signal::CONT,
        Signal::Kill => rustix::process::Signal::KILL,
    };
    Ok(rustix::process::kill_process(pid, sig)?)
}
