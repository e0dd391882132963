//! Child processes that cannot outlive their owner. A harness that starts polling drivers (each
//! keeps a core busy) must stop them however it ends: [`Reaped`] kills and reaps its child when
//! dropped, also while a failed assertion unwinds, and [`die_with_parent`] has the kernel kill
//! the child if the thread that started it dies without unwinding (SIGKILL, abort).
//!
//! # Soundness
//! Child processes, their signals and their exit, through `std` and the kernel: nothing here
//! reaches the memory of this process.

use crate::signals::{self, Signal};
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output};
use std::time::{Duration, Instant};

/// Makes the process `command` starts receive SIGKILL when the thread that starts it exits
/// (`PR_SET_PDEATHSIG` [prctl(2)]): not even a harness killed outright leaves it running.
pub fn die_with_parent(command: &mut Command) -> &mut Command {
    let parent = std::process::id();
    // SAFETY: `pre_exec` requires a closure that is async-signal-safe, since it runs in the
    // forked child of a possibly multi-threaded process: this one makes two system calls
    // (prctl, getppid) and builds its error from a raw errno without allocating.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The parent may have died between fork and prctl: then nobody would signal us.
            if rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32) != Some(parent) {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        })
    }
}

/// Makes this process the reaper of orphaned descendants (`PR_SET_CHILD_SUBREAPER`): a
/// grandchild whose parent dies is reparented here instead of to init, which on some machines
/// never reaps it. [`reap_orphans`] then collects it.
pub fn become_subreaper() -> io::Result<()> {
    // Any non-zero argument turns it on; rustix passes the pid given.
    Ok(rustix::process::set_child_subreaper(rustix::process::Pid::from_raw(std::process::id() as i32))?)
}

/// Reaps child `pid` if it has exited, without waiting; `true` once it is reaped (or is not
/// a child of this process, so nothing is left to reap here).
pub fn reap(pid: u32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else { return true };
    !matches!(rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG), Ok(None))
}

/// The children of process `pid` (its main thread's), from /proc.
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|s| s.split_whitespace().filter_map(|w| w.parse().ok()).collect())
        .unwrap_or_default()
}

/// A numeric field of `/proc/TID/status` (`Tgid:`, `PPid:` …); `None` once the thread is gone.
pub fn status_field(tid: u32, key: &str) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
}

/// The process (thread group) of thread `tid`; `tid` itself once the thread is gone.
pub fn tgid(tid: u32) -> u32 {
    status_field(tid, "Tgid:").unwrap_or(tid)
}

/// Reaps every child that has exited, without waiting; returns how many. Only for a process
/// that does not wait for any child of its own at the same time (it would take its status).
pub fn reap_orphans() -> usize {
    let mut reaped = 0;
    while let Ok(Some(_)) = rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG) {
        reaped += 1;
    }
    reaped
}

/// A child process that is killed and reaped when dropped, unless it was waited for.
#[derive(Debug)]
pub struct Reaped {
    child: Option<Child>,
}

impl Reaped {
    /// Starts `command` (see [`die_with_parent`]).
    pub fn spawn(command: &mut Command) -> io::Result<Reaped> {
        Ok(Reaped { child: Some(die_with_parent(command).spawn()?) })
    }

    fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("a Reaped holds its child until it is consumed")
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Sends it `signal` (stop and continue it, for example).
    pub fn signal(&self, signal: Signal) -> io::Result<()> {
        signals::send(self.id(), signal)
    }

    /// Its piped standard input, for a caller that writes to it (or closes it).
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child().stdin.take()
    }

    /// Its piped standard output, for a caller that reads it as it comes (or closes it).
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child().stdout.take()
    }

    /// Its piped standard error, for a caller that reads it as it comes (or closes it).
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child().stderr.take()
    }

    /// Its exit status, if it has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child().try_wait()
    }

    /// What it wrote to its piped standard output and error so far, once it has exited.
    pub fn output(&mut self) -> String {
        let child = self.child();
        let mut s = String::new();
        if let Some(o) = child.stdout.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        if let Some(e) = child.stderr.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s.trim().to_string()
    }

    /// Asks it to stop (SIGTERM) and waits up to `timeout`; kills it if it has not exited by
    /// then. Returns its status with the output of its piped streams (a killed child's status
    /// says so).
    pub fn terminate(self, timeout: Duration) -> io::Result<Output> {
        let _ = self.signal(Signal::Terminate);
        self.wait_for_exit(timeout)
    }

    /// Waits up to `timeout` for it to exit by itself and kills it if it has not by then.
    /// Returns what [`Self::terminate`] returns.
    pub fn wait_for_exit(mut self, timeout: Duration) -> io::Result<Output> {
        let mut child = self.child.take().expect("a Reaped holds its child until it is consumed");
        let deadline = Instant::now() + timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() <= deadline => std::thread::sleep(Duration::from_millis(10)),
                // Too late, or it cannot be waited for: kill it, and wait for that.
                _ => {
                    let _ = child.kill();
                    break child.wait()?;
                }
            }
        };
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        if let Some(mut o) = child.stdout.take() {
            let _ = o.read_to_end(&mut stdout);
        }
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_end(&mut stderr);
        }
        Ok(Output { status, stdout, stderr })
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A stopped child must be continued to die of anything but SIGKILL; SIGKILL works
            // on it anyway. Reaping it leaves no zombie.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    fn alive(pid: u32) -> bool {
        // A zombie has a /proc entry too; a reaped process has none.
        std::fs::metadata(format!("/proc/{pid}")).is_ok()
    }

    #[test]
    fn a_dropped_child_is_killed_and_reaped() {
        let child = Reaped::spawn(Command::new("sleep").arg("60")).unwrap();
        let pid = child.id();
        assert!(alive(pid));
        drop(child);
        assert!(!alive(pid), "killed and reaped");
    }

    #[test]
    fn a_child_is_killed_when_a_panic_unwinds_past_it() {
        let pid = std::thread::spawn(|| {
            let child = Reaped::spawn(Command::new("sleep").arg("60")).unwrap();
            let pid = child.id();
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _keep = child;
                panic!("a failed assertion");
            }));
            pid
        })
        .join()
        .unwrap();
        assert!(!alive(pid));
    }

    #[test]
    fn terminate_returns_the_output_or_kills_after_the_timeout() {
        let child =
            Reaped::spawn(Command::new("sh").args(["-c", "echo hi; exec sleep 60"]).stdout(Stdio::piped())).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let out = child.terminate(Duration::from_secs(5)).unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
        // `exec`: a `sleep` forked by the shell would outlive it by a minute (an ignored signal
        // stays ignored across exec, so the sleep itself is the stubborn one).
        let stubborn = Reaped::spawn(Command::new("sh").args(["-c", "trap '' TERM; exec sleep 60"])).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let pid = stubborn.id();
        let out = stubborn.terminate(Duration::from_millis(200)).unwrap();
        assert!(!out.status.success(), "killed");
        assert!(!alive(pid));
    }

    #[test]
    fn a_child_dies_with_the_thread_that_started_it() {
        let pid = std::thread::spawn(|| {
            let child = Reaped::spawn(Command::new("sleep").arg("60")).unwrap();
            let pid = child.id();
            // Leaked: nothing kills it but the kernel, when this thread ends.
            std::mem::forget(child);
            pid
        })
        .join()
        .unwrap();
        // It is still our child, so the kernel keeps it as a zombie until the test ends.
        let zombie = || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "));
        let deadline = Instant::now() + Duration::from_secs(5);
        while !zombie() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(zombie(), "the kernel killed the child when its thread ended");
    }
}
