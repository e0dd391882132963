//! The helper-process backend: per domain, a helper process started ahead of the first call,
//! sharing one memfd with the trusted process (the control page, then the I/O area), confined
//! by a seccomp allowlist (seccomp.rs) and started again after a fault. A call costs two
//! stores and two polls while both sides are awake (control.rs); a helper that dies, or does
//! not answer in time, is a violation.

mod control;
mod helper;
mod seccomp;

use crate::config::Config;
use crate::executor::{Executor, Waits};
use crate::frame::Entry;
use crate::library::memfd_with;
use crate::region::{io_bytes, IoArea, Mapping};
use crate::violation::{SetupError, ViolationKind};
use control::{publish, wait_change, Control, Cpus, Waited, CONTROL_BYTES};
use helper::{Spec, ENVIRONMENT};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a helper may take to start (load its library) before the domain gives up.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How often a waiting caller checks that its helper is alive.
const LIVENESS: Duration = Duration::from_millis(1);

pub(crate) struct ProcessDomain {
    shared: Mapping,
    memfd: i32,
    area: IoArea,
    spec: String,
    helper: Option<Child>,
    sequence: u32,
    spin: Duration,
    caller_spin_limit: Duration,
    /// How long the caller waited for the previous answer (control.rs's `Change::waited`).
    last_wait: Duration,
    waits: Waits,
    timeout: Option<Duration>,
}

impl ProcessDomain {
    pub fn new(config: &Config) -> Result<ProcessDomain, SetupError> {
        let len = CONTROL_BYTES + io_bytes(config.input_bytes, config.output_bytes);
        let memfd = memfd_with("safenic-domain", &[])?;
        // SAFETY: sizes our own new memfd.
        if unsafe { libc::ftruncate(memfd, len as libc::off_t) } != 0 {
            return Err(SetupError::os("sizing the domain's shared memory"));
        }
        let shared = Mapping::new(len, libc::PROT_READ | libc::PROT_WRITE, Some(memfd))?;
        let area = IoArea {
            base: shared.base.wrapping_add(CONTROL_BYTES),
            input_cap: config.input_bytes,
            output_cap: config.output_bytes,
        };
        let spec = Spec {
            fd: memfd,
            input_bytes: config.input_bytes,
            output_bytes: config.output_bytes,
            // SAFETY: getpid takes no arguments.
            parent: unsafe { libc::getpid() } as u32,
            anchor: helper::anchor(),
            spin: config.spin,
            cpu: config.helper_cpu,
            c_library: config.c_library,
            symbols: config.symbols.clone(),
        }
        .encode();
        let mut domain = ProcessDomain {
            shared,
            memfd,
            area,
            spec,
            helper: None,
            sequence: 0,
            spin: config.spin,
            caller_spin_limit: config.caller_spin_limit,
            last_wait: Duration::ZERO,
            waits: Waits::default(),
            timeout: config.timeout,
        };
        domain.start()?;
        Ok(domain)
    }

    fn control(&self) -> &'static Control {
        control_at(self.shared.base)
    }

    /// Starts a helper and waits until it has loaded the library.
    fn start(&mut self) -> Result<(), SetupError> {
        let control = self.control();
        for word in [&control.request.0, &control.response.0, &control.ready.0, &control.fault.signal] {
            word.store(0, Ordering::SeqCst);
        }
        self.sequence = 0;
        let program = std::env::current_exe()
            .map_err(|e| SetupError(format!("finding this program to start its helper: {e}")))?;
        let memfd = self.memfd;
        let mut command = Command::new(program);
        command.env(ENVIRONMENT, &self.spec).stdin(Stdio::null());
        // SAFETY: the closure runs between fork and exec and calls only fcntl, which is
        // async-signal-safe: the helper inherits the memfd (and no other descriptor of ours).
        unsafe {
            command.pre_exec(move || {
                if libc::fcntl(memfd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|e| SetupError(format!("starting the helper process: {e}")))?;
        let deadline = Instant::now() + START_TIMEOUT;
        let control = self.control();
        let ready = wait_change(
            &control.ready.0,
            0,
            &control.caller_sleeps.0,
            caller_cpus(control),
            Duration::ZERO,
            Some(LIVENESS),
            &mut || Instant::now() > deadline || matches!(child.try_wait(), Ok(Some(_))),
        );
        match ready.map(|c| c.value) {
            Some(1) => {
                self.helper = Some(child);
                Ok(())
            }
            Some(_) => {
                stop(&mut child);
                // SAFETY: the helper wrote its message into the frame before it said 2.
                let frame = unsafe { &*self.area.frame() };
                let n = (frame.output_len as usize).min(frame.result.len());
                Err(SetupError(String::from_utf8_lossy(&frame.result[..n]).into_owned()))
            }
            None => {
                stop(&mut child);
                Err(SetupError(format!("the helper process did not start within {START_TIMEOUT:?}")))
            }
        }
    }
}

/// How long the caller polls for an answer before it sleeps: twice as long as it waited for the
/// previous one, at least `spin` and at most `limit`. Calls of a steady length are then answered
/// while it polls, without a futex wake-up, which on a VM can cost 7–130 µs (docs/isolation.md).
fn caller_spin(last_wait: Duration, spin: Duration, limit: Duration) -> Duration {
    (last_wait * 2).clamp(spin, limit.max(spin))
}

fn caller_cpus(control: &Control) -> Cpus<'_> {
    Cpus { mine: &control.caller_cpu.0, theirs: &control.helper_cpu.0 }
}

/// The control page at the start of a shared mapping. 'static because the mapping outlives
/// every use: it is unmapped only when the domain is dropped.
fn control_at<'a>(base: *mut u8) -> &'a Control {
    // SAFETY: the control page starts the shared mapping; its fields are atomics.
    unsafe { &*(base as *const Control) }
}

/// What a helper's end means: the fault it recorded if it died of that signal, else how it
/// ended.
fn died(control: &Control, signal: Option<i32>, status: Option<i32>) -> ViolationKind {
    let recorded = control.fault.signal.load(Ordering::SeqCst) as i32;
    match signal {
        Some(s) if s == recorded => ViolationKind::Fault {
            signal: s,
            code: control.fault.code.load(Ordering::SeqCst) as i32,
            address: control.fault.address.load(Ordering::SeqCst) as usize,
            pkey: None,
        },
        _ => ViolationKind::Died { signal, status },
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

impl Executor for ProcessDomain {
    fn area(&self) -> IoArea {
        self.area
    }

    fn waits(&self) -> Waits {
        self.waits
    }

    fn execute(&mut self, _entry: Entry) -> Result<(), ViolationKind> {
        if self.helper.is_none() && self.start().is_err() {
            return Err(ViolationKind::Died { signal: None, status: None });
        }
        let previous = self.sequence;
        self.sequence = self.sequence.wrapping_add(1).max(1);
        let sequence = self.sequence;
        let control = self.control();
        publish(&control.request.0, sequence, &control.helper_sleeps.0);
        let deadline = self.timeout.map(|t| Instant::now() + t);
        let mut ended: Option<ViolationKind> = None;
        let helper = self.helper.as_mut().expect("started above");
        let answer = wait_change(
            &control.response.0,
            previous,
            &control.caller_sleeps.0,
            caller_cpus(control),
            caller_spin(self.last_wait, self.spin, self.caller_spin_limit),
            Some(LIVENESS),
            &mut || {
                if let Ok(Some(status)) = helper.try_wait() {
                    ended = Some(died(control, status.signal(), status.code()));
                    return true;
                }
                if deadline.is_some_and(|d| Instant::now() > d) {
                    ended = Some(ViolationKind::Timeout { after: self.timeout.unwrap_or_default() });
                    return true;
                }
                false
            },
        );
        if let Some(change) = &answer {
            self.last_wait = change.waited;
            match change.how {
                Waited::Polling => self.waits.polling += 1,
                Waited::SleptAfterSpin => self.waits.slept_after_spin += 1,
                Waited::GaveWay => self.waits.gave_way += 1,
            }
        }
        match answer.map(|c| c.value) {
            Some(s) if s == sequence => Ok(()),
            Some(_) => Err(ViolationKind::BadReply { what: "response sequence" }),
            None => Err(ended.unwrap_or(ViolationKind::Died { signal: None, status: None })),
        }
    }

    fn discard(&mut self) {
        if let Some(mut child) = self.helper.take() {
            stop(&mut child);
        }
        // Started again now, so the next call does not pay for it; if that fails, the next
        // call tries again.
        let _ = self.start();
    }
}

impl Drop for ProcessDomain {
    fn drop(&mut self) {
        if let Some(mut child) = self.helper.take() {
            stop(&mut child);
        }
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.memfd) };
    }
}

#[cfg(test)]
mod tests {
    use super::caller_spin;
    use std::time::Duration;

    const SPIN: Duration = Duration::from_micros(100);
    const LIMIT: Duration = Duration::from_millis(2);

    #[test]
    fn the_caller_polls_twice_the_last_wait_between_spin_and_its_limit() {
        assert_eq!(caller_spin(Duration::ZERO, SPIN, LIMIT), SPIN);
        assert_eq!(caller_spin(Duration::from_micros(30), SPIN, LIMIT), SPIN);
        assert_eq!(caller_spin(Duration::from_micros(600), SPIN, LIMIT), Duration::from_micros(1200));
        assert_eq!(caller_spin(Duration::from_millis(50), SPIN, LIMIT), LIMIT);
        // A limit below `spin` does not shorten the polling `spin` promises.
        assert_eq!(caller_spin(Duration::from_millis(50), SPIN, Duration::from_micros(10)), SPIN);
    }
}
