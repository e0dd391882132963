//! An l2fwd on nicsim's two ports through DPDK's ixgbe driver (`nicsim exec --uio`), nicsim's
//! engine on [`NICSIM_CPU`], the l2fwd's lcore on the other.

use super::{Options, APP, LCORE};
use crate::NICSIM_CPU;
use nicsim::session::{Session, SessionOptions};
use platform::fs::ScratchDir;
use platform::Reaped;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A started l2fwd whose ports are up, and its nicsim; both go when it is dropped.
pub struct Running {
    // Field order: the l2fwd is killed before its nicsim goes.
    pub child: Reaped,
    pub sim: Session,
    log: PathBuf,
}

impl Running {
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// What l2fwd (and `nicsim exec`) printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Starts `prefix… binary <EAL options for nicsim's ports> eal… <APP> app…` under `nicsim exec
/// --uio` and waits for both ports to come up, in a fresh nicsim; `prefix` is e.g. `env VAR=…`
/// or a valgrind command line.
pub fn start(
    o: &Options,
    prefix: &[String],
    binary: &Path,
    (eal, app): (&[&str], &[&str]),
    scratch: &ScratchDir,
) -> Result<Running, String> {
    let opts = SessionOptions { cpu: Some(NICSIM_CPU), ..SessionOptions::default() };
    let sim = Session::start("l2fwd-bench", "nicsim", &opts)?;
    let log = scratch.path().join("l2fwd.log");
    let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let (a, b) = (nicsim::sysfs::port_address(0), nicsim::sysfs::port_address(1));
    let child = Reaped::spawn(
        Command::new(&o.nicsim)
            .arg("--root")
            .arg(sim.root())
            .args(["exec", "--uio", "--"])
            .args(prefix)
            .arg(binary)
            .args(["-l", LCORE, "-n", "1", "--in-memory", "-a", &a, "-a", &b])
            .args(eal)
            .args(APP)
            .args(app)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err),
    )
    .map_err(|e| format!("starting nicsim exec: {e}"))?;
    let mut run = Running { child, sim, log };
    let Running { child, sim, .. } = &mut run;
    let up = sim.wait_ports_up(Duration::from_secs(300), || match child.try_wait() {
        Ok(Some(status)) => Err(format!("exited with {status}")),
        _ => Ok(()),
    });
    match up {
        Ok(_) => Ok(run),
        Err(e) => {
            let log = run.log();
            // Under `nicsim exec` the registers DPDK polls are served access by access, so a
            // missed deadline is nicsim's fault to be found, not a start to try again.
            let why = if nicsim::exec::dpdk_missed_a_deadline(&log) {
                " (DPDK found a register not answered in time: a nicsim bug, docs/dpdk.md)"
            } else {
                ""
            };
            Err(format!("{} on nicsim: {e}{why}\n{log}", binary.display()))
        }
    }
}
