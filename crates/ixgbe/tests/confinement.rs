//! Once a queue starts, safe code cannot write memory through the file system: not its own
//! through `/proc/self/mem`, not through a thread it started before, a thread or a program it
//! starts after, `/sys` or `/dev/mem`; and a file of that kind opened for writing before the
//! first queue makes the queue refuse to start. Each attack runs in a process of its own (the
//! confinement is for good), as this binary run with `--ignored --exact <helper>`.
//! Needs root and hugepages (`make test` provides them); against nicsim in that process.

mod common;

use ixgbe::queues::{QueueMemory, RxQueue};
use std::fs::OpenOptions;
use std::process::Command;
use std::sync::mpsc;

const RING: usize = 64;

/// Runs `helper` of this binary in a child process; returns its exit status and output.
fn run_helper(helper: &str) -> (bool, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", helper, "--nocapture", "--test-threads=1"])
        .output()
        .expect("running the helper");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Whether opening `path` for writing is refused (the file is never written either way).
fn write_open_refused(path: &str) -> Result<(), String> {
    match OpenOptions::new().write(true).open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(()),
        Err(e) => Err(format!("{path}: refused, but not by the confinement: {e}")),
        Ok(_) => Err(format!("{path}: opened for writing")),
    }
}

#[test]
fn a_started_queue_closes_every_file_way_to_memory() {
    let (ok, out) = run_helper("attacks_after_the_first_queue");
    for check in [
        "own memory",
        "thread started before",
        "thread started after",
        "program started after",
        "sysfs",
        "a device under /dev",
        "device node",
        "seccomp on every thread",
        "storage still writable",
    ] {
        assert!(out.contains(&format!("passed: {check}")), "{check} did not pass:\n{out}");
    }
    assert!(ok, "helper failed:\n{out}");
}

#[test]
fn a_file_opened_for_writing_before_keeps_the_queue_from_starting() {
    let (ok, out) = run_helper("mem_opened_before_the_first_queue");
    assert!(out.contains("passed: a queue over an open /proc/self/mem"), "{out}");
    assert!(ok, "helper failed:\n{out}");
}

#[test]
#[ignore = "a helper process of a_started_queue_closes_every_file_way_to_memory"]
fn attacks_after_the_first_queue() {
    let sim = common::nicsim("confinement");
    let (go, wait) = mpsc::channel::<()>();
    let (done, result) = mpsc::channel();
    let early = std::thread::spawn(move || {
        wait.recv().unwrap();
        done.send(write_open_refused("/proc/self/mem")).unwrap();
    });
    let port = common::port(&sim, 0);
    let device = port.device();
    let mut mem = QueueMemory::<RING>::allocate(2 * RING).unwrap();
    let parts = mem.parts().unwrap();
    let mut pool = parts.pool;
    let _rx = RxQueue::<RING>::new(&device, parts.rx, &mut pool).expect("the first queue starts");

    let mut failures = Vec::new();
    let mut check = |name: &str, r: Result<(), String>| match r {
        Ok(()) => println!("passed: {name}"),
        Err(e) => failures.push(format!("{name}: {e}")),
    };
    check("own memory", write_open_refused("/proc/self/mem"));
    go.send(()).unwrap();
    check("thread started before", result.recv().unwrap());
    early.join().unwrap();
    check("thread started after", std::thread::spawn(|| write_open_refused("/proc/self/mem")).join().unwrap());
    let pid = std::process::id();
    let child = Command::new("sh").arg("-c").arg(format!("exec 3<>/proc/{pid}/mem")).output().unwrap();
    check(
        "program started after",
        (!child.status.success()).then_some(()).ok_or_else(|| "a child opened the driver's memory".to_string()),
    );
    check("sysfs", write_open_refused("/sys/bus/pci/rescan"));
    // /dev/mem where the kernel has it; /dev/kmsg (a device that is not on the list) elsewhere.
    let dev = if std::path::Path::new("/dev/mem").exists() { "/dev/mem" } else { "/dev/kmsg" };
    check("a device under /dev", write_open_refused(dev));
    let node = sim.root().join("mem-node");
    let mknod = Command::new("mknod").arg(&node).args(["c", "1", "1"]).output().unwrap();
    check(
        "device node",
        (!mknod.status.success() && !node.exists()).then_some(()).ok_or_else(|| "made a /dev/mem node".to_string()),
    );
    let seccomp_everywhere = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .all(|t| std::fs::read_to_string(t.path().join("status")).is_ok_and(|s| s.lines().any(|l| l == "Seccomp:\t2")));
    check("seccomp on every thread", seccomp_everywhere.then_some(()).ok_or_else(|| "a thread without".into()));
    let file = sim.root().join("still-writable");
    check("storage still writable", std::fs::write(&file, b"x").map_err(|e| format!("{}: {e}", file.display())));
    assert!(failures.is_empty(), "not refused: {failures:#?}");
}

#[test]
#[ignore = "a helper process of a_file_opened_for_writing_before_keeps_the_queue_from_starting"]
fn mem_opened_before_the_first_queue() {
    let sim = common::nicsim("confinement-fd");
    let port = common::port(&sim, 0);
    let device = port.device();
    let _mem_file = OpenOptions::new().read(true).write(true).open("/proc/self/mem").unwrap();
    let mut mem = QueueMemory::<RING>::allocate(2 * RING).unwrap();
    // Asked twice: the first refusal must not be undone by the second request.
    for attempt in ["the queue must not start", "asking twice must not start it"] {
        let parts = mem.parts().unwrap();
        let mut pool = parts.pool;
        let e = RxQueue::<RING>::new(&device, parts.rx, &mut pool).err().expect(attempt);
        let text = e.to_string();
        assert!(text.contains("/mem open for writing") && text.contains("close it"), "{attempt}: {text}");
    }
    println!("passed: a queue over an open /proc/self/mem");
}
