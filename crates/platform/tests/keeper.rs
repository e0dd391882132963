//! A queue's keeper, against a pretend device: a BAR that is a file on tmpfs, which the test
//! maps too, and which confirms a stop at once (a bit reads back as written). What the keeper
//! does with a device that confirms nothing is tested in `keeper`'s unit tests.

use platform::fs::ScratchDir;
use platform::keeper::{Keeper, StopPlan};
use platform::MappedRegion;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const PLAN: StopPlan =
    StopPlan { control: 0x28, enable: 1 << 25, ctrl: 0x0, master_disable: 1 << 2, status: 0x8, master_enable: 1 << 19 };

fn bar_file(scratch: &ScratchDir) -> std::path::PathBuf {
    let path = scratch.path().join("bar0");
    std::fs::write(&path, vec![0u8; 4096]).unwrap();
    path
}

fn map(path: &Path) -> MappedRegion {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    MappedRegion::map_file(&file, 0, 4096, false).unwrap()
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

/// Waits up to a minute (an event the keeper makes in microseconds) for `done`.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(60), "{what} did not happen within a minute");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_queue_confirmed_stopped_sends_its_keeper_away_without_touching_the_device() {
    let scratch = ScratchDir::new("platform-test", "keeper-stopped").unwrap();
    let bar = map(&bar_file(&scratch));
    bar.write_u32(PLAN.control, PLAN.enable);
    let keeper = Keeper::start(&bar, PLAN).unwrap();
    let pid = keeper.pid();
    assert!(!ended(pid), "the keeper waits while the queue runs");
    keeper.stopped();
    assert!(ended(pid), "reaped once told");
    assert_eq!(bar.read_u32(PLAN.control), PLAN.enable, "the keeper left the queue alone");
    assert_eq!(bar.read_u32(PLAN.ctrl), 0);
}

/// Run in a child by the test below: enables the queue, starts its keeper and ends with
/// `process::exit`, which runs no destructor.
#[test]
#[ignore = "helper: run by a_driver_that_exits_without_drop_has_its_queue_stopped"]
fn helper_exit_with_the_queue_enabled() {
    let path = std::env::var("KEEPER_TEST_BAR").expect("run by its test");
    let bar = map(Path::new(&path));
    bar.write_u32(PLAN.control, PLAN.enable);
    let keeper = Keeper::start(&bar, PLAN).unwrap();
    println!("keeper {}", keeper.pid());
    std::process::exit(0);
}

#[test]
fn a_driver_that_exits_without_drop_has_its_queue_stopped() {
    let scratch = ScratchDir::new("platform-test", "keeper-exit").unwrap();
    let path = bar_file(&scratch);
    let bar = map(&path);
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "helper_exit_with_the_queue_enabled", "--nocapture", "--test-threads=1"])
        .env("KEEPER_TEST_BAR", &path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let pid: u32 = text
        .lines()
        .find_map(|l| l.rsplit_once("keeper ")?.1.trim().parse().ok())
        .unwrap_or_else(|| panic!("the helper started no keeper:\n{text}{}", String::from_utf8_lossy(&out.stderr)));
    eventually("the queue's stop", || bar.read_u32(PLAN.control) & PLAN.enable == 0);
    eventually("the keeper's end", || ended(pid));
    assert_eq!(bar.read_u32(PLAN.ctrl), 0, "the queue stopped, so no master disable");
}
