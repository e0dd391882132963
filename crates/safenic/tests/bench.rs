//! The benchmark harness measures safenic on nicsim: a short RFC 2544 search with latency, and
//! a short callgrind run of the restricted model. Needs root, hugepages and valgrind (`make test`
//! provides them); tests run one at a time.

use bench::rfc2544::{Search, LOAD_PERCENTS};
use bench::{instructions, rfc2544, Driver};

/// The Rust driver as the manifest describes it, with this build's safenic.
fn safenic() -> Driver {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let m = manifest::Manifest::load(&root).unwrap();
    let all = bench::drivers_of(&m, &root, std::path::Path::new(env!("CARGO_BIN_EXE_safenic")));
    all.into_iter().find(|d| d.name == "rust").expect("the manifest lists the Rust driver")
}

#[test]
#[ignore = "make test-slow runs it, with the benches' other smoke runs"]
fn rfc2544_throughput_and_latency_are_measured_with_every_frame_accounted_for() {
    let search = Search { trial_seconds: 0.1, resolution: 0.25, loss_tolerance: 0.0 };
    let measured = rfc2544(&safenic(), "restricted", &[64, 1518], &search).expect("RFC 2544 run");
    assert_eq!(measured.iter().map(|r| r.frame_size).collect::<Vec<_>>(), [64, 1518]);
    for r in &measured {
        let f = &r.found;
        // Two ports at 10 Gb/s: 14.88 Mpps each with 64-byte frames, 0.81 with 1518.
        let line = 2.0 * 10e9 / ((r.frame_size + 20) * 8) as f64;
        assert!((f.line_rate_pps - line).abs() < 1.0, "{f:?}");
        assert!((0.0..=line).contains(&f.rate_pps), "{f:?}");
        assert_eq!(f.trials, f.log.len(), "{f:?}");
        assert_eq!(f.log[0].rate_pps, line, "the line rate is tried first: {f:?}");
        for t in &f.log {
            // Every frame the rate owed over the trial was generated or skipped, however far
            // nicsim fell behind (a frame of rounding per port); nothing came out that did not
            // go in.
            let owed = t.rate_pps * search.trial_seconds;
            assert!(((t.offered + t.skipped) as f64 - owed).abs() <= 2.0, "{t:?}");
            assert!(t.received <= t.offered, "{t:?}");
        }
        // The rate found passed (unless none did) and every failing rate tried lies above it. A
        // trial in which nicsim fell behind tested nicsim and was run again: it may fail at or
        // below the rate found, on a slow host.
        let passed_at =
            |rate: f64| f.log.iter().any(|t| t.rate_pps == rate && !t.nicsim_fell_behind() && t.passed(0.0));
        assert!(f.rate_pps == 0.0 || passed_at(f.rate_pps), "{f:?}");
        let mut failed = f.log.iter().filter(|t| !t.passed(0.0) && !t.nicsim_fell_behind());
        assert!(failed.all(|t| t.rate_pps > f.rate_pps), "{f:?}");
        assert_eq!(r.found.limited_by() == "line rate", f.rate_pps == line, "{f:?}");
        // The NDR and the PDR came from the same trials; a trial that lost nothing passes every
        // goal, and one the host failed is set aside only by them, so zero loss with nothing set
        // aside <= NDR <= PDR. Every trial set aside says why.
        let (ndr, pdr) = (&r.ndr, &r.pdr);
        assert_eq!((&ndr.log, &pdr.log), (&f.log, &f.log));
        assert!(f.rate_pps <= ndr.rate_pps && ndr.rate_pps <= pdr.rate_pps, "{f:?} {ndr:?} {pdr:?}");
        assert!(f.set_aside.is_empty());
        for s in ndr.set_aside.iter().chain(&pdr.set_aside) {
            assert!(s.reason.contains("receive-tail stalls"), "{s:?}");
        }
        for t in &f.log {
            // Drops the host is blamed for are drops in tail stalls, which are drops.
            assert!(t.host_stall_drops <= t.tail_stall_drops, "{t:?}");
            assert!(t.tail_stall_drops <= t.no_descriptor + t.missed, "{t:?}");
        }
        // Latency at 10% to 100% of the NDR, percentiles in order, of every frame and of those
        // outside host stalls.
        if ndr.rate_pps > 0.0 {
            assert_eq!(r.latency.iter().map(|l| l.percent).collect::<Vec<_>>(), LOAD_PERCENTS, "{r:?}");
        }
        for l in &r.latency {
            assert!((l.trial.rate_pps - ndr.rate_pps * f64::from(l.percent) / 100.0).abs() < 1.0, "{l:?}");
            assert!(0 < l.p50_ns && l.p50_ns <= l.p99_ns && l.p99_ns <= l.p999_ns && l.p999_ns <= l.max_ns, "{l:?}");
            // Unknown when nicsim could not keep every slow frame (rings full at the line rate
            // hold most frames for longer than that).
            if let Some(o) = l.outside_host_stalls {
                assert!(o.p50_ns <= o.p99_ns && o.p99_ns <= o.p999_ns && o.p999_ns <= o.max_ns, "{l:?}");
                assert!(o.max_ns <= l.max_ns, "a subset of the frames has no longer maximum: {l:?}");
            }
        }
    }
    assert_eq!(leftovers(), Vec::<String>::new(), "the run leaves nothing in /dev/shm");
}

#[test]
#[ignore = "make test-slow runs it, with the benches' other smoke runs"]
fn instructions_per_packet_come_from_the_forwarding_loop_only() {
    let i = instructions(&safenic(), "restricted", 2.0, None).expect("callgrind run");
    assert!(i.saturated, "under valgrind the driver is the limit: {i:?}");
    assert!(i.packets > 10_000, "{i:?}");
    // The loop's own work: tens to hundreds of instructions per packet, not the thousands
    // that setup or idle polling would add.
    let per = i.per_packet();
    assert!((20.0..1_000.0).contains(&per), "{per} instructions per packet: {i:?}");
    // The cache and branch simulations ran, and their misses add to the estimate.
    assert!(i.events.d1mr + i.events.bcm > 0, "{i:?}");
    assert!(i.cycles_per_packet() > per, "{i:?}");
    assert_eq!(leftovers(), Vec::<String>::new(), "the run leaves nothing in /dev/shm");
}

#[test]
#[ignore = "make test-slow runs it, with the benches' other smoke runs"]
fn bench_virtio_compares_each_rust_interface_with_each_c_build() {
    // The whole command, briefly: every driver under callgrind, the table and its ratios.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_safenic"))
        .args(["bench-virtio", "--callgrind-seconds", "0.5", "--rounds", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for (driver, interface) in
        [("rust-modern", "modern"), ("rust-legacy", "legacy"), ("c-clang", "legacy"), ("c-gcc", "legacy")]
    {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("| {driver} |")))
            .unwrap_or_else(|| panic!("{driver}: {text}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[2], interface, "{row}");
        let (packets, per, cycles): (u64, f64, f64) =
            (cells[3].parse().unwrap(), cells[4].parse().unwrap(), cells[5].parse().unwrap());
        assert!(packets > 1_000, "{row}");
        // The loop's own work: tens to hundreds of instructions per packet, not the thousands
        // that setup or idle polling would add; the cache and branch simulations add to it.
        assert!((20.0..1_000.0).contains(&per) && cycles > per, "{row}");
        assert_eq!(cells[6], "yes", "under valgrind the driver is the limit: {row}");
    }
    for pair in ["rust-legacy / c-clang", "rust-legacy / c-gcc", "rust-modern / c-clang", "rust-modern / c-gcc"] {
        assert!(text.contains(&format!("| **{pair}** |")), "{pair}: {text}");
    }
    assert_eq!(leftovers_of_any_bench(), Vec::<String>::new(), "the runs leave nothing in /dev/shm");
}

#[test]
#[ignore = "make test-slow runs it, with the benches' other smoke runs"]
fn bench_xdp_compares_the_rust_driver_with_each_c_build_over_af_xdp() {
    // The whole command, briefly: veths, generators, every driver under callgrind and at rate.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_safenic"))
        .args(["bench-xdp", "--callgrind-seconds", "1", "--rate-seconds", "0.5", "--rounds", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for driver in ["rust", "c-clang", "c-gcc"] {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("| {driver} |")))
            .unwrap_or_else(|| panic!("{driver}: {text}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (packets, per, cycles): (u64, f64, f64) =
            (cells[2].parse().unwrap(), cells[3].parse().unwrap(), cells[4].parse().unwrap());
        assert!(packets > 1_000, "{row}");
        // The loop's own work: tens to hundreds of instructions per packet, not the thousands
        // that setup or idle polling would add; the cache and branch simulations add to it.
        assert!((20.0..1_000.0).contains(&per) && cycles > per, "{row}");
        let (mpps, user, kernel): (f64, f64, f64) =
            (cells[6].parse().unwrap(), cells[7].parse().unwrap(), cells[8].parse().unwrap());
        assert!(mpps > 0.0 && user + kernel > 0.0, "a rate and CPU time were measured: {row}");
    }
    for c in ["c-clang", "c-gcc"] {
        assert!(text.contains(&format!("Rust / {c}: instructions ")), "{c}: {text}");
    }
    let left = std::process::Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&left.stdout).contains("safenic-xdp-bench"), "its namespaces go with it");
    assert_eq!(leftovers_of_any_bench(), Vec::<String>::new(), "the runs leave nothing in /dev/shm");
}

/// What any harness session left in /dev/shm (the command runs in a process of its own).
fn leftovers_of_any_bench() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("safenic-bench-"))
                .collect()
        })
        .unwrap_or_default()
}

/// What this process's harness sessions left in /dev/shm.
fn leftovers() -> Vec<String> {
    let mine = format!("safenic-bench-{}-", std::process::id());
    std::fs::read_dir("/dev/shm")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| n.starts_with(&mine)).collect())
        .unwrap_or_default()
}

#[test]
#[ignore = "make test-slow runs it, with the benches' other smoke runs"]
fn a_driver_without_the_named_loop_is_an_error() {
    let mut d = safenic();
    d.hot_function = "*no_such_function*".into();
    let e = instructions(&d, "restricted", 1.0, None).unwrap_err();
    assert!(e.contains("no instructions"), "{e}");
    assert_eq!(leftovers(), Vec::<String>::new(), "a failed run leaves nothing in /dev/shm either");
}

#[test]
#[ignore = "make test-slow runs it, with the benches' other smoke runs"]
fn an_interrupted_bench_stops_its_driver_and_leaves_nothing_behind() {
    use platform::signals::Signal;
    use std::io::{BufRead, BufReader};
    let mut bench = platform::Reaped::spawn(
        std::process::Command::new(env!("CARGO_BIN_EXE_safenic"))
            .args(["bench", "--profile", "quick", "--only", "rust", "--modes", "const", "--trial-seconds", "2"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped()),
    )
    .unwrap();
    // Once it is measuring the driver (a trial of 2 s is under way), SIGTERM.
    let mut progress = BufReader::new(bench.take_stderr().unwrap()).lines();
    let started = progress.by_ref().map_while(Result::ok).find(|l| l.contains("throughput and latency of rust const"));
    assert!(started.is_some(), "the bench reports what it measures");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let pid = bench.id();
    bench.signal(Signal::Terminate).unwrap();
    let rest: Vec<String> = progress.map_while(Result::ok).collect();
    let out = bench.wait_for_exit(std::time::Duration::from_secs(30)).unwrap();
    assert!(!out.status.success(), "{rest:?}");
    assert_eq!(rest.len(), 1, "one line: {rest:?}");
    assert!(rest[0].contains("interrupted"), "{rest:?}");
    let mine = format!("safenic-bench-{pid}-");
    let left: Vec<String> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&mine))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "nicsim's files are removed");
    let drivers: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&mine))
        .collect();
    assert_eq!(drivers, Vec::<String>::new(), "the driver has stopped");
}
