//! A driver that ends without running its destructors, with queues enabled: `process::exit`,
//! `abort` or SIGKILL (sent to its keeper too). The kernel frees its memory at once, while the
//! device may still write it. The keeper (`platform::keeper`) holds each queue's memory and
//! stops the queue first. A
//! real device always gets keepers; here they are asked for on nicsim's devices
//! (`keep_every_queue`). nicsim runs in this process and each driver in a child (this binary
//! run with `--ignored --exact <helper>`); nicsim stops a queue left enabled on memory no
//! process holds any more with a `released` fault, which the control run shows.
//! Needs root and hugepages (`make test` provides them).

mod common;

use common::enabled_queues;
use ixgbe::queues::{QueueMemory, RxQueue, TxQueue};
use ixgbe::Port;
use nicsim::session::Session;
use nicsim::wire::TrafficSpec;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const RING: usize = 64;

/// Run in a child by the tests below: opens both ports of the nicsim at `KEEPER_TEST_SYSFS`,
/// enables an RX queue on one and a TX queue on the other, and ends as `KEEPER_TEST_END` says
/// without dropping them.
#[test]
#[ignore = "helper: run by the tests of this file"]
fn helper_end_with_queues_enabled() {
    let sysfs = std::env::var("KEEPER_TEST_SYSFS").expect("run by a test");
    if std::env::var("KEEPER_TEST_KEEP").is_ok() {
        platform::keeper::keep_every_queue();
    }
    let open = |n| {
        let port = Port::open(Path::new(&sysfs), &nicsim::sysfs::port_address(n)).unwrap();
        port.device().init().unwrap();
        port.device().wait_for_link(Duration::from_secs(10)).unwrap();
        port
    };
    let (port_a, port_b) = (open(0), open(1));
    let (a, b) = (port_a.device(), port_b.device());
    let mut mem = QueueMemory::<RING>::allocate(2 * RING).unwrap();
    let parts = mem.parts().unwrap();
    let mut pool = parts.pool;
    let _rx = RxQueue::<RING>::new(&a, parts.rx, &mut pool).unwrap();
    let _tx = TxQueue::<RING>::new(&b, parts.tx).unwrap();
    println!("queues enabled");
    match std::env::var("KEEPER_TEST_END").as_deref() {
        Ok("abort") => std::process::abort(),
        Ok("kill") => {
            // As an attacker would end it: the keeper first (refused: it is outside the
            // confinement, and root), then itself.
            if let Some(keeper) = platform::keeper::keeper_pid() {
                let _ = Command::new("kill").args(["-KILL", &keeper.to_string()]).status();
            }
            let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
            std::thread::sleep(Duration::from_secs(60));
        }
        _ => std::process::exit(0),
    }
    unreachable!("the process ended");
}

/// Runs the helper against `sim`, ending as `end` says, with or without keepers; returns what
/// it printed.
fn drive_and_end(sim: &Session, end: &str, keep: bool) -> String {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--ignored", "--exact", "helper_end_with_queues_enabled", "--nocapture", "--test-threads=1"])
        .env("KEEPER_TEST_SYSFS", sim.devices())
        .env("KEEPER_TEST_END", end);
    if keep {
        command.env("KEEPER_TEST_KEEP", "1");
    }
    let out = command.output().expect("running the helper");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("queues enabled"), "the helper did not get its queues going:\n{text}");
    if end == "kill" {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "the helper did not end by SIGKILL:\n{text}");
    }
    text
}

/// Every DMA fault nicsim recorded (a queue on released memory among them).
fn released_faults(sim: &Session) -> Vec<String> {
    let stats = sim.stats().unwrap();
    stats.ports.iter().flat_map(|p| p.faults.iter().map(|f| format!("port {}: {f:?}", p.port))).collect()
}

/// Waits up to a minute (the keeper needs microseconds) for `done`.
fn eventually(what: &str, done: impl Fn() -> bool) {
    assert!(common::within_a_minute(done), "{what} did not happen within a minute");
}

/// A frame for port 0, whose RX queue was the driver's: into its ring's memory if the queue
/// is still enabled.
fn send_a_frame(sim: &Session) {
    sim.start_traffic(0, TrafficSpec { count: Some(1), ..Default::default() }).unwrap();
}

#[test]
fn queues_of_a_driver_that_ends_without_drop_are_stopped_by_their_keepers() {
    for end in ["exit", "abort", "kill"] {
        let sim = common::nicsim(&format!("keeper-{end}"));
        let out = drive_and_end(&sim, end, true);
        eventually(&format!("{end}: both queues' stop"), || enabled_queues(&sim) == [(0, 0), (0, 0)]);
        send_a_frame(&sim);
        eventually(&format!("{end}: the frame's drop"), || sim.stats().unwrap().ports[0].generated == 1);
        // nicsim's own release look runs every 100 ms: give it a few.
        std::thread::sleep(Duration::from_millis(500));
        let faults = released_faults(&sim);
        assert!(faults.is_empty(), "{end}: the device reached released memory:\n{faults:#?}\n{out}");
    }
}

#[test]
fn without_keepers_the_device_is_left_on_released_memory() {
    // The control: what the keepers prevent. The queues stay enabled on memory no process
    // holds, and the first frame into it is a fault nicsim stops.
    let sim = common::nicsim("keeper-none");
    drive_and_end(&sim, "exit", false);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(enabled_queues(&sim), [(1, 0), (0, 1)], "nothing stopped the queues");
    send_a_frame(&sim);
    eventually("nicsim's released fault", || !released_faults(&sim).is_empty());
    // `ReleasedRing` if nicsim had found the ring's memory before it went, else a descriptor
    // read from memory no driver gave: either way the freed ring.
    let faults = released_faults(&sim);
    assert!(
        faults[0].contains("direction: Rx, queue: 0")
            && (faults[0].contains("ReleasedRing") || faults[0].contains("DescriptorRead")),
        "{faults:#?}"
    );
}
