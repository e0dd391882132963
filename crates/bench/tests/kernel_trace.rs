//! The kernel's trace events see what takes a core from a thread: here another thread made
//! to share its core, which the scheduler must switch to. Needs root (`make test` runs as root).

use bench::kernel_trace::CoreTrace;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The thread of this process called `name`, from /proc.
fn tid_named(name: &str) -> Option<u32> {
    std::fs::read_dir("/proc/self/task").ok()?.flatten().find_map(|e| {
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        (comm.trim() == name).then(|| e.file_name().to_str()?.parse().ok())?
    })
}

/// A thread on `cpu` that spins until `stop`.
fn spinner(name: &str, cpu: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            platform::sched::pin_current_thread(cpu).unwrap();
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
        .unwrap()
}

#[test]
fn a_thread_that_shares_the_drivers_core_is_seen_preempting_it_by_name() {
    let cpu = platform::sched::available_cpus() - 1;
    let trace = CoreTrace::start(cpu).expect("tracing (as root)");
    trace.begin().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let driver = spinner("fake-driver", cpu, stop.clone());
    let started = Instant::now();
    let tid = loop {
        if let Some(t) = tid_named("fake-driver") {
            break t;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the spinning thread never showed up");
        std::thread::yield_now();
    };
    // Two runnable threads on one core for 300 ms: the scheduler gives each slices of
    // milliseconds, so the driver is preempted by the intruder many times.
    let intruder = spinner("intruder", cpu, stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    // Read while both threads live: the bench names a task only if /proc shows it its own.
    let stalls = trace.end(&[tid]).unwrap();
    stop.store(true, Ordering::Relaxed);
    driver.join().unwrap();
    intruder.join().unwrap();
    let preempted: Vec<_> = stalls.iter().filter(|w| w.cause.contains("preempted by intruder")).collect();
    assert!(!preempted.is_empty(), "{stalls:?}");
    for w in &preempted {
        assert_eq!(w.cpu, cpu);
        assert!(w.end_ns - w.start_ns >= bench::kernel_trace::SHORTEST_NS, "{w:?}");
    }
    // What the trace saw before `begin` is gone: nothing of this test is seen twice.
    trace.begin().unwrap();
    assert!(trace.end(&[tid]).unwrap().iter().all(|w| !w.cause.contains("intruder")));
}
