//! The programs the JIT audit runs (nicsim's server, the driver), as child processes: the
//! audit links neither. Each runs under `setpriv --pdeathsig`, so it does not outlive the
//! audit however the audit ends, is stopped and reaped when its [`Running`] is dropped, and
//! writes its output to a file of the run's [`Scratch`] directory (a pipe nobody reads while
//! it runs could fill and stop it).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Where a run's files live: under `/dev/shm` (nicsim's devices are shared memory), named by
/// this process, removed when dropped; one left by an audit that was killed is removed by the
/// next ([`Scratch::new`]).
pub struct Scratch(PathBuf);

const SCRATCH_PREFIX: &str = "safenic-audit-jit-";

impl Scratch {
    pub fn new() -> Result<Self, String> {
        let shm = Path::new("/dev/shm");
        if let Ok(entries) = std::fs::read_dir(shm) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let owner = name.strip_prefix(SCRATCH_PREFIX).and_then(|pid| pid.parse::<u32>().ok());
                if owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = shm.join(format!("{SCRATCH_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process that is stopped and reaped when dropped, with its output in `log`.
pub struct Running {
    child: Child,
    log: PathBuf,
}

impl Running {
    /// Starts `program` with `args` under `setpriv --pdeathsig TERM` (so that it ends with the
    /// audit; nicsim then removes its devices), `cpu` pinning it with `taskset` when given.
    pub fn spawn(
        program: &Path,
        args: &[String],
        cpu: Option<usize>,
        env: &[(&str, &Path)],
        log: PathBuf,
    ) -> Result<Running, String> {
        let out = File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
        let mut command = Command::new("setpriv");
        command.args(["--pdeathsig", "TERM", "--"]);
        if let Some(cpu) = cpu {
            command.args(["taskset", "-c", &cpu.to_string()]);
        }
        command.arg(program).args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command
            .spawn()
            .map_err(|e| format!("starting {}: {e} (setpriv and taskset are util-linux's)", program.display()))?;
        Ok(Running { child, log })
    }

    /// Its process id (the program's own: setpriv and taskset each replace themselves with it).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// `Err` with its output if it has exited.
    pub fn alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!("it exited with {status}: {}", self.output())),
            _ => Ok(()),
        }
    }

    /// What it has written so far, its last lines.
    pub fn output(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" / ")
    }

    /// Sends SIGTERM and waits up to `timeout` for it to exit (killed if it has not by then):
    /// its status and last lines.
    pub fn terminate(mut self, timeout: Duration) -> Result<(ExitStatus, String), String> {
        // std has no SIGTERM, and the audit no unsafe code: kill(1) sends it.
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok((status, self.output())),
                Ok(None) if Instant::now() <= deadline => std::thread::sleep(Duration::from_millis(10)),
                Ok(None) => return Err(format!("it did not exit within {} s of SIGTERM", timeout.as_secs())),
                Err(e) => return Err(format!("waiting for it: {e}")),
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper(scratch: &Scratch) -> Running {
        Running::spawn(Path::new("sleep"), &["30".into()], None, &[], scratch.path().join("sleep.log")).unwrap()
    }

    #[test]
    fn a_dropped_child_is_gone_and_a_terminated_one_says_how_it_ended() {
        let scratch = Scratch::new().unwrap();
        let running = sleeper(&scratch);
        let pid = running.id();
        assert!(Path::new(&format!("/proc/{pid}")).exists());
        drop(running);
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "killed and reaped");

        let mut running = sleeper(&scratch);
        running.alive().unwrap();
        let (status, _) = running.terminate(Duration::from_secs(10)).unwrap();
        assert!(!status.success(), "sleep ends by SIGTERM: {status}");
        let dir = scratch.path().to_path_buf();
        drop(scratch);
        assert!(!dir.exists());
    }

    #[test]
    fn a_scratch_directory_of_an_audit_that_died_is_removed_by_the_next() {
        // No process has this id: pids stay below 2^22.
        let stale = Path::new("/dev/shm").join(format!("{SCRATCH_PREFIX}{}", 1u32 << 30));
        std::fs::create_dir_all(stale.join("nicsim")).unwrap();
        let scratch = Scratch::new().unwrap();
        assert!(!stale.exists());
        assert!(scratch.path().exists());
    }
}
