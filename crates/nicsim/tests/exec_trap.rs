//! `nicsim exec` serves the first page of an 82599's BAR0 (CTRL, STATUS, EEC, EERD, I2CCTL, the
//! interrupt registers) access by access, as a hypervisor serves MMIO: a store there is done by
//! the device before the store returns, also while nicsim's engine is off its core, as a card
//! completes a reset within a microsecond [DS 4.6.3.2]. DPDK reads CTRL.RST back 10 times a
//! microsecond apart and gives the port up if it is still set. Needs root (`make test`).

use crate::common;

use common::serve::{Nicsim, A, BIN};
use nicsim::peer::Device;
use nicsim::regs::*;
use platform::signals::{send, Signal};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const DEVICES: &str = "NICSIM_EXEC_TRAP_DEVICES";

#[test]
fn a_reset_is_done_before_the_store_returns_while_the_engine_is_off_its_core() {
    let sim = Nicsim::start("exec-trap", &[]);
    let resets = sim.stats().ports[0].resets;
    let pid = sim.child.id();
    // The whole server stopped, as a host that took its core: it goes on after 300 ms.
    send(pid, Signal::Stop).unwrap();
    let waker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        send(pid, Signal::Continue).unwrap();
    });
    let out = Command::new(BIN)
        .args(["--root", sim.root.to_str().unwrap(), "exec", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "exec_trap::reset_and_read_back", "--nocapture", "--test-threads=1"])
        .env(DEVICES, sim.devices())
        .output()
        .unwrap();
    waker.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("CTRL read back: reset done"), "{stdout}");
    assert_eq!(sim.stats().ports[0].resets, resets + 1, "the driver's reset, once");
}

/// The driver of the test above, run by it under `nicsim exec`: a reset, and CTRL read back at
/// once, as DPDK's first poll does.
#[test]
#[ignore = "run under nicsim exec by a_reset_is_done_before_the_store_returns_while_the_engine_is_off_its_core"]
fn reset_and_read_back() {
    let devices = std::env::var(DEVICES).expect("run by the test above");
    let d = Device::open(Path::new(&devices), A).unwrap();
    d.write(CTRL, CTRL_RST);
    let ctrl = d.read(CTRL);
    println!("CTRL read back: {}", if ctrl & CTRL_RST == 0 { "reset done" } else { "reset still under way" });
}

/// SIGTERM to `nicsim exec` reaches the command however busy the tracer is when it comes. A
/// command that maps memory without pause keeps the tracer serving stops most of the time;
/// a signal that came during one used to leave the tracer waiting in `waitpid` for good.
#[test]
fn sigterm_reaches_a_command_that_keeps_the_tracer_busy() {
    let sim = Nicsim::start("exec-sigterm", &[]);
    for round in 0..10 {
        let child = platform::Reaped::spawn(
            Command::new(BIN)
                .args(["--root", sim.root.to_str().unwrap(), "exec", "--"])
                // Each `true` is an exec, which maps the loader and libc: mmap after mmap.
                .args(["sh", "-c", "while :; do /bin/true; done"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        send(child.id(), Signal::Terminate).unwrap();
        let out = child.wait_for_exit(Duration::from_secs(10));
        let out = out.unwrap_or_else(|e| panic!("round {round}: the command did not end within 10 s of SIGTERM: {e}"));
        assert_eq!(out.status.code(), Some(128 + 15), "round {round}: it ended by SIGTERM");
    }
}
