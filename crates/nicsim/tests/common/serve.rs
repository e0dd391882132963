//! `nicsim serve` as a child process, for the tests that run drivers against it end to end.

use nicsim::control::Stats;
use nicsim::peer::Device;
use nicsim::session::Session;
use platform::fs::ScratchDir;
use platform::Reaped;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_nicsim");
pub const A: &str = "0000:5e:00.0";
pub const B: &str = "0000:5e:00.1";

/// `nicsim serve` as a child process in its own scratch directory: both go when it is dropped.
pub struct Nicsim {
    pub session: Session,
    pub child: Reaped,
    pub root: PathBuf,
    pub scratch: ScratchDir,
}

impl std::ops::Deref for Nicsim {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

impl Nicsim {
    pub fn start(name: &str, extra: &[&str]) -> Nicsim {
        let scratch = ScratchDir::new("nicsim-test", name).expect("a scratch directory under /dev/shm");
        let root = scratch.path().join("root");
        let child = Reaped::spawn(
            Command::new(BIN)
                .args(["--root", root.to_str().unwrap(), "serve", "--ports", "2"])
                .args(extra)
                .stdout(std::process::Stdio::null()),
        )
        .expect("spawning nicsim serve");
        let session = Session::connect(&root);
        session.wait_answering(Duration::from_secs(10)).expect("nicsim serve did not come up");
        Nicsim { session, child, root, scratch }
    }
    pub fn devices(&self) -> PathBuf {
        self.root.join("devices")
    }
    pub fn stats(&self) -> Stats {
        self.session.stats().unwrap()
    }
    pub fn open(&self, addr: &str) -> Device {
        Device::open(&self.devices(), addr).unwrap()
    }
    /// A file beside the root, removed with it.
    pub fn scratch_file(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }
}

impl Drop for Nicsim {
    fn drop(&mut self) {
        let _ = self.session.shutdown();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                if !std::thread::panicking() {
                    assert!(!self.root.exists(), "serve removes everything it created");
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Not stopped in time: the Reaped child is killed when it is dropped.
    }
}

/// Starts a DPDK application: `start()`, whose `Err` carries the log of a run in which DPDK
/// gave up on a port because a register answered later than the card's would (its 10 µs
/// CTRL.RST poll, an I2C clock phase). `nicsim exec` serves those registers access by access,
/// whatever the host does (tests/exec_trap.rs), so that fails the test.
pub fn start_dpdk<T>(name: &str, start: impl FnOnce() -> Result<T, String>) -> T {
    start().unwrap_or_else(|log| panic!("{name}: DPDK gave up on a port that nicsim answered too late:\n{log}"))
}
