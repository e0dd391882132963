//! What the device tests share: nicsim in this process, and the driver's ports on it.
#![allow(dead_code)] // each test binary uses a different part

use ixgbe::device::Port;
use nicsim::session::{Session, SessionOptions};
use std::path::Path;
use std::time::Duration;

/// An in-process nicsim with two ports, in a scratch directory named after `test`.
pub fn nicsim(test: &str) -> Session {
    Session::start("ixgbe-test", test, &SessionOptions::default()).expect("starting nicsim")
}

/// Port `n` of `sim`, opened, initialised and with its link up.
pub fn port(sim: &Session, n: usize) -> Port {
    port_at(&sim.devices(), n)
}

/// Port `n` of the nicsim whose functions are under `sysfs`, opened, initialised and with its
/// link up (in a child, whose nicsim is its parent's).
pub fn port_at(sysfs: &Path, n: usize) -> Port {
    let port = Port::open(sysfs, &nicsim::sysfs::port_address(n)).unwrap();
    let d = port.device();
    d.init().unwrap();
    d.wait_for_link(Duration::from_secs(10)).unwrap();
    port
}

/// How many RX and TX queues of each port nicsim sees enabled.
pub fn enabled_queues(sim: &Session) -> Vec<(usize, usize)> {
    sim.stats().unwrap().ports.iter().map(|p| (p.rx_queues_enabled, p.tx_queues_enabled)).collect()
}

/// Whether `done` holds within a minute, asked every 5 ms. nicsim applies register writes and
/// lets memory go on its own looks, which a busy host can delay; a minute is far beyond any
/// look, so only a wrong state fails, never a slow one.
pub fn within_a_minute(mut done: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(60) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Runs `helper` of this binary in a child with `env`, and calls `look` with its output so far
/// when it stops at its [`checkpoint`]: the test looks while the child's queues live. Returns
/// all it printed, once it ended successfully.
pub fn run_helper_with_checkpoint(helper: &str, env: &[(&str, &Path)], look: impl FnOnce(&str)) -> String {
    use std::io::{BufRead, Read, Write};
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", helper, "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    while !text.ends_with("checkpoint\n") {
        if out.read_line(&mut text).unwrap() == 0 {
            let _ = child.wait();
            panic!("{helper} ended before its checkpoint:\n{text}");
        }
    }
    look(&text);
    child.stdin.take().unwrap().write_all(b"go on\n").unwrap();
    out.read_to_string(&mut text).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{helper} failed:\n{text}");
    text
}

/// Where a helper waits for its test to look ([`run_helper_with_checkpoint`]).
pub fn checkpoint() {
    println!("checkpoint");
    std::io::stdin().read_line(&mut String::new()).unwrap();
}

/// The number after `word ` in a helper's output.
pub fn reported(text: &str, word: &str) -> u64 {
    text.lines().find_map(|l| l.rsplit_once(&format!("{word} "))?.1.trim().parse().ok()).unwrap()
}
