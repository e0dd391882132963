//! nicsim as a separate process with real drivers: hugepage DMA memory, pagemap physical
//! addresses, /proc discovery, mount namespaces. Needs root and hugepages (`make test` runs
//! scripts/setup first); run one test at a time (each keeps cores busy).

use crate::common;

use common::serve::{Nicsim, A, B, BIN};
use nicsim::peer::{rewrite_macs, Device, IxyQueue, TinyAgent};
use nicsim::regs::*;
use nicsim::wire::{parse_payload, read_pcap, Captured, TrafficSpec};
use platform::DmaBacking;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn test_frame(len: usize, seq: u32) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8).collect();
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 9]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 8]);
    f[12..16].copy_from_slice(&seq.to_le_bytes());
    f
}

/// Sends `count` frames from `tx` to `rx` (over the cable) and checks each arrives intact, in order.
fn pump(
    tx_dev: &Device,
    tx: &mut IxyQueue,
    rx_dev: &Device,
    rx: &mut IxyQueue,
    count: u32,
    len: impl Fn(u32) -> usize,
) {
    let (mut sent, mut got) = (0u32, 0u32);
    let deadline = Instant::now() + Duration::from_secs(120);
    while got < count {
        assert!(Instant::now() < deadline, "stalled after {got} of {count} frames");
        while sent < count && sent - got < 256 && tx.tx(tx_dev, &test_frame(len(sent), sent)) {
            sent += 1;
        }
        rx.rx(rx_dev, 64, |f, qword0| {
            let want = test_frame(len(got), got);
            assert_eq!(f.len(), want.len(), "length of frame {got}");
            assert!(f == &want[..], "content of frame {got}");
            assert_eq!(qword0, 0, "advanced write-back clears qword 0");
            got += 1;
        })
        .unwrap();
    }
}

#[test]
fn ixy_style_driver_both_directions_with_wraparound() {
    let sim = Nicsim::start("ixy", &["--cable", "0-1"]);
    let (da, db) = (sim.open(A), sim.open(B));
    da.init_ixy().unwrap();
    db.init_ixy().unwrap();
    let mut qa = IxyQueue::new(&da, 512, DmaBacking::HugetlbfsFile(None)).unwrap();
    let mut qb = IxyQueue::new(&db, 512, DmaBacking::HugetlbfsFile(None)).unwrap();
    // Every length from 60 to 1514, both directions.
    pump(&da, &mut qa, &db, &mut qb, 1455, |i| 60 + i as usize);
    pump(&db, &mut qb, &da, &mut qa, 1455, |i| 1514 - i as usize);
    // Ring wrap-around: a million minimum-size frames (about 2000 trips around 512 entries).
    pump(&da, &mut qa, &db, &mut qb, 1_000_000, |_| 60);
    std::thread::sleep(Duration::from_millis(5));
    // DD write-back let the driver reclaim every transmit descriptor.
    assert_eq!(qa.tx_clean(), 511);
    // Device statistics (totals since reset; see docs/nicsim.md on clear-on-read).
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(da.read(GPTC), 1_001_455);
    assert_eq!(db.read(GPRC), 1_001_455);
    assert_eq!(db.read(GPTC), 1455);
    let s = sim.stats();
    assert_eq!(s.ports[0].device.gptc, 1_001_455);
    assert_eq!(s.ports[1].device.qprc[0], 1_001_455);
    assert_eq!(s.ports.iter().map(|p| p.dma_faults).sum::<u64>(), 0);
    let lint = sim.lint().unwrap();
    assert!(lint.is_empty(), "a datasheet-following driver has no lint: {lint:?}");
    // Every look at the doorbells while queues ran was timed.
    let d = s.doorbell_interval_ns;
    assert!(d.samples > 1000 && d.min <= d.p50 && d.p50 <= d.p999 && d.p999 <= d.max, "{d:?}");
}

#[test]
fn tinynf_style_agents_forward_a_million_packets_each_way() {
    let sim = Nicsim::start("tinynf", &[]);
    let (da, db) = (sim.open(A), sim.open(B));
    da.init_tinynf().unwrap();
    db.init_tinynf().unwrap();
    // Lossless: whatever the host does to the agents' thread, frames wait and nothing drops.
    da.enable_flow_control();
    db.enable_flow_control();
    let mut ab = TinyAgent::new(&da, &db).unwrap();
    let mut ba = TinyAgent::new(&db, &da).unwrap();
    let pcap = sim.scratch_file("port1.pcap");
    sim.capture(1, &pcap, Captured::Tx, Some(1000)).unwrap();
    const N: u64 = 1_100_000;
    for port in 0..2 {
        let spec = TrafficSpec { rate_pps: Some(1e6), count: Some(N), ..TrafficSpec::default() };
        sim.start_traffic(port, spec).unwrap();
    }
    // The agents poll on their own thread, as a forwarder would; this thread watches.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let agents = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // The largest transmit head each agent saw written back (where the run ends is
            // a matter of timing; that the device wrote heads back at all is not).
            let mut heads = (0, 0);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..1024 {
                    ab.run_once(&da, &db, |f, l| {
                        rewrite_macs(f);
                        l
                    });
                    ba.run_once(&db, &da, |f, l| {
                        rewrite_macs(f);
                        l
                    });
                }
                heads = (heads.0.max(ab.head()), heads.1.max(ba.head()));
            }
            // The agents go back to the test, which keeps them (their queues enabled on their
            // memory) until it has read the statistics: dropped here, their memory would be
            // released under enabled queues, a fault nicsim may log before the read.
            (heads, ab, ba)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut quiet, mut last) = (0, 0);
    while quiet < 3 {
        std::thread::sleep(Duration::from_millis(100));
        let s = sim.stats();
        let total: u64 = s.ports.iter().map(|p| p.sink_packets).sum();
        let done = s.ports.iter().all(|p| p.generated == N);
        quiet = if done && total == last { quiet + 1 } else { 0 };
        last = total;
        assert!(Instant::now() < deadline, "forwarding stalled at {total}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let ((head_ab, head_ba), _ab, _ba) = agents.join().unwrap();
    let s = sim.stats();
    for p in &s.ports {
        let other = 1 - p.port;
        let (stream, st) = &p.streams[0];
        assert_eq!(*stream, other, "port {} receives what port {other} generated", p.port);
        // Every frame is delivered once and in order: with flow control nothing is dropped.
        assert_eq!(st.reordered, 0);
        assert_eq!(s.ports[other].drops.queue_disabled, 0, "the queue was enabled before traffic started");
        assert_eq!(
            (st.received, st.lost, s.ports[other].device.qprdc[0], s.ports[other].device.mpc),
            (N, 0, 0, 0),
            "every frame forwarded once; port {other}: {:?} {:?}, sink port {}: {:?}",
            s.ports[other].device,
            s.ports[other].drops,
            p.port,
            st
        );
        assert_eq!(p.dma_faults, 0);
    }
    assert!(head_ab < 256 && head_ba < 256, "written-back heads lie in the ring");
    assert!(head_ab > 0 && head_ba > 0, "both transmit queues wrote their head back");
    let lint = sim.lint().unwrap();
    assert!(lint.is_empty(), "{lint:?}");
    // The first frames on port 1's wire: MACs rewritten, the rest as generated.
    sim.end_capture(1).unwrap();
    let frames = read_pcap(&pcap).unwrap();
    assert_eq!(frames.len(), 1000);
    // In order, none missing.
    for (k, f) in frames.iter().enumerate() {
        assert_eq!(&f[0..12], &[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(parse_payload(f).map(|(stream, seq, _)| (stream, seq)), Some((0, k as u64)));
    }
}

#[test]
fn dma_fault_stops_the_queue_and_nicsim_serves_on() {
    let sim = Nicsim::start("fault", &[]);
    let (da, db) = (sim.open(A), sim.open(B));
    da.init_ixy().unwrap();
    db.init_ixy().unwrap();
    let mut qa = IxyQueue::new(&da, 512, DmaBacking::AnonymousHugetlb).unwrap();
    let mut qb = IxyQueue::new(&db, 512, DmaBacking::HugetlbfsFile(None)).unwrap();
    assert!(qa.tx(&da, &test_frame(60, 0)));
    // Point the next descriptor at memory the driver never gave the device, then send it.
    let i = qa.tx_next();
    assert!(qa.tx(&da, &test_frame(60, 1)));
    qa.mem.region().write_u64(qa.tx_descriptor(i), 0x1000);
    da.write(tdt(0), (i + 1) % 512);
    let deadline = Instant::now() + Duration::from_secs(10);
    let s = loop {
        let s = sim.stats();
        if s.ports[0].dma_faults > 0 || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(s.ports[0].dma_faults, 1);
    let f = &s.ports[0].faults[0];
    assert_eq!((f.direction, f.queue, f.descriptor, f.address), (nicsim::regs::Direction::Tx, 0, i, 0x1000));
    assert_eq!(s.ports[0].device.gptc, 1, "the frame before it was sent");
    // nicsim survives and serves the other port.
    sim.start_traffic(1, TrafficSpec { count: Some(100), rate_pps: Some(1e5), ..Default::default() }).unwrap();
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while got < 100 && Instant::now() < deadline {
        qb.rx(&db, 64, |f, _| {
            assert_eq!(parse_payload(f).unwrap().1, got as u64);
            got += 1;
        })
        .unwrap();
    }
    assert_eq!(got, 100);
}

/// A driver that unmaps its memory while it lives, its queues still enabled (a use-after-free
/// a leak or a bug can make): nicsim forgets the memory within a look at the drivers' maps
/// and stops both queues with a `released` fault, instead of DMAing into pages that may be
/// another's by then.
#[test]
fn memory_a_live_driver_released_under_enabled_queues_is_a_fault() {
    let sim = Nicsim::start("released-live", &[]);
    let da = sim.open(A);
    da.init_ixy().unwrap();
    let mut q = IxyQueue::new(&da, 512, DmaBacking::HugetlbfsFile(None)).unwrap();
    assert!(q.tx(&da, &test_frame(60, 0)), "a frame, so that nicsim reads the ring");
    let deadline = Instant::now() + Duration::from_secs(10);
    while sim.stats().driver_memory_bytes == 0 {
        assert!(Instant::now() < deadline, "nicsim finds the queues' memory");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(q); // unmapped; the queues stay enabled on it
    let deadline = Instant::now() + Duration::from_secs(10);
    let fault = loop {
        let s = sim.stats();
        if let Some(f) = s.ports[0].faults.iter().find(|f| f.access == nicsim::port::Access::ReleasedRing) {
            break f.clone();
        }
        assert!(Instant::now() < deadline, "no released-ring fault while the driver lives: {:?}", s.ports[0].faults);
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!((fault.direction, fault.queue), (Direction::Tx, 0), "the ring nicsim had read: {fault:?}");
    // The RX ring was never read: the first frame finds its memory gone, and that is a fault too.
    sim.start_traffic(0, TrafficSpec { count: Some(1), ..Default::default() }).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sim.stats().ports[0].faults.iter().any(|f| f.direction == Direction::Rx) {
        assert!(
            Instant::now() < deadline,
            "a frame into released memory is a fault: {:?}",
            sim.stats().ports[0].faults
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(sim.stats().driver_memory_bytes, 0, "and nicsim let the pages go");
}

#[test]
fn exec_shows_exactly_the_fake_functions() {
    let sim = Nicsim::start("exec", &["--bound"]);
    let out = Command::new(BIN)
        .args(["--root", sim.root.to_str().unwrap(), "exec", "--", "ls", "/sys/bus/pci/devices"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{A}\n{B}\n"));
    let first = String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or_default().to_string();
    assert!(first.contains("do not clear on read"), "the first line states the counter difference: {first}");
    // The hugetlbfs mount ixy and its ports expect, in the namespace only.
    let mounted =
        |mounts: &str| mounts.lines().any(|l| l.split(' ').nth(1) == Some("/mnt/huge") && l.contains("hugetlbfs"));
    let outside = mounted(&std::fs::read_to_string("/proc/mounts").unwrap());
    let out = Command::new(BIN)
        .args(["--root", sim.root.to_str().unwrap(), "exec", "--", "cat", "/proc/self/mounts"])
        .output()
        .unwrap();
    assert!(mounted(&String::from_utf8_lossy(&out.stdout)), "nicsim exec mounts hugetlbfs at /mnt/huge");
    assert_eq!(mounted(&std::fs::read_to_string("/proc/mounts").unwrap()), outside, "and only inside");
    let out = Command::new(BIN)
        .args(["--root", sim.root.to_str().unwrap(), "exec", "--", "sh", "-c"])
        .arg(format!("cat /sys/bus/pci/devices/{A}/vendor /sys/bus/pci/devices/{A}/device; echo {A} > /sys/bus/pci/devices/{A}/driver/unbind"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "0x8086\n0x10fb\n");
    // The fake driver's unbind file works like the kernel's: the link disappears.
    let link = sim.devices().join(A).join("driver");
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::symlink_metadata(&link).is_ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(std::fs::symlink_metadata(&link).is_err(), "unbound");
    assert!(std::fs::symlink_metadata(sim.devices().join(B).join("driver")).is_ok(), "the other function stays bound");
    // Outside the namespace nothing changed.
    assert!(
        !Path::new("/sys/bus/pci/devices").join(A).exists()
            || std::fs::read_to_string(Path::new("/sys/bus/pci/devices").join(A).join("device")).is_ok()
    );
}

#[test]
fn pcap_reads_back_with_our_reader_and_tcpdump() {
    let sim = Nicsim::start("pcap", &[]);
    let pcap = sim.scratch_file("port0.pcap");
    sim.capture(0, &pcap, Captured::Rx, Some(50)).unwrap();
    sim.start_traffic(0, TrafficSpec { size: 128, flows: 5, count: Some(50), ..Default::default() }).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while sim.stats().ports[0].pcap_written != Some(50) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    sim.end_capture(0).unwrap();
    let frames = read_pcap(&pcap).unwrap();
    assert_eq!(frames.len(), 50);
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.len(), 128);
        assert_eq!(parse_payload(f).unwrap().1, i as u64);
    }
    let out =
        Command::new("tcpdump").args(["-nn", "-r"]).arg(&pcap).output().expect("tcpdump is installed by scripts/setup");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 50);
    assert!(text.lines().all(|l| l.contains("UDP") && l.contains(".20051")), "{text}");
}

#[test]
fn platform_errors_name_the_fix() {
    let sim = Nicsim::start("errors", &[]);
    let e = Device::open(&sim.devices(), "0000:5e:00.7").err().unwrap().to_string();
    assert!(e.contains("not found") && e.contains("ls "), "{e}");
    let e = Device::open(&sim.devices(), "not-an-address").err().unwrap().to_string();
    assert!(e.contains("DDDD:BB:DD.F"), "{e}");
    std::fs::write(sim.devices().join(A).join("device"), "0x1528\n").unwrap();
    let e = Device::open(&sim.devices(), A).err().unwrap().to_string();
    assert!(e.contains("8086:1528") && e.contains("82599ES"), "{e}");
    let out = Command::new(BIN).args(["--root", "/dev/shm/no-such-nicsim", "stats"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nicsim serve"), "names the fix");
}

/// A removed port, and every port once `nicsim serve` is killed, read all-ones in BAR0 and
/// configuration space, as a card pulled from its slot does; the guardian that serve starts
/// also removes the tree the killed serve left.
#[test]
fn removed_ports_and_a_killed_nicsim_read_all_ones() {
    // The guardian outlives serve: reparented here, and reaped here.
    platform::process::become_subreaper().unwrap();
    let sim = Nicsim::start("removal", &[]);
    let (da, db) = (sim.open(A), sim.open(B));
    assert_ne!(da.read(STATUS), u32::MAX);
    let out = Command::new(BIN).args(["--root", sim.root.to_str().unwrap(), "remove", "--port", "7"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.trim().lines().count() == 1 && err.contains("no port 7"), "{err}");
    let out = Command::new(BIN).args(["--root", sim.root.to_str().unwrap(), "remove", "--port", "0"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Answered after the removal: visible at once.
    for reg in [CTRL, STATUS, LINKS, rdt(0), tdh(0), GPRC] {
        assert_eq!(da.read(reg), u32::MAX, "{} of the removed port", name_of(reg));
    }
    assert_eq!(da.func.config_read_u32(0).unwrap(), u32::MAX, "vendor and device ID of the removed port");
    // A write to the shared file reads back until nicsim's next sweep undoes it.
    da.write(CTRL, CTRL_RST);
    let deadline = Instant::now() + Duration::from_secs(1);
    while da.read(CTRL) != u32::MAX {
        assert!(Instant::now() < deadline, "a write to a removed port is undone within a sweep");
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = sim.stats();
    assert!(s.ports[0].removed && !s.ports[1].removed);
    assert_ne!(db.read(STATUS), u32::MAX, "the other port is still there");
    assert_eq!(db.func.config_read_u16(0).unwrap(), 0x8086);

    let guardian = platform::process::children(sim.child.id());
    assert_eq!(guardian.len(), 1, "serve runs one guardian: {guardian:?}");
    sim.child.signal(platform::signals::Signal::Kill).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.read(STATUS) != u32::MAX || sim.root.exists() || !platform::process::reap(guardian[0]) {
        assert!(Instant::now() < deadline, "the killed serve's devices read all-ones and its tree is gone");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(db.func.config_read_u32(0).unwrap(), u32::MAX);
}

/// Two processes mapping one function's BAR0 when one of them resets it: lint names both
/// (our drivers refuse a claimed function; this is what lint says of drivers that do not).
#[test]
fn lint_names_two_processes_that_map_one_function() {
    let sim = Nicsim::start("shared", &[]);
    let mut reflect = platform::Reaped::spawn(
        Command::new(BIN)
            .args(["--root", sim.root.to_str().unwrap(), "reflect", A, B, "--seconds", "60"])
            .stdout(std::process::Stdio::null()),
    )
    .unwrap();
    sim.session
        .wait_ports_up(Duration::from_secs(30), || match reflect.try_wait() {
            Ok(Some(s)) => Err(format!("reflect exited with {s}")),
            _ => Ok(()),
        })
        .unwrap();
    assert!(sim.session.lint().unwrap().is_empty(), "one process per function: nothing to say");
    let da = sim.open(A);
    da.write(CTRL, da.read(CTRL) | CTRL_RST);
    let deadline = Instant::now() + Duration::from_secs(10);
    let warning = loop {
        let lint = sim.session.lint().unwrap();
        if let Some(w) = lint.into_iter().find(|w| w.rule == nicsim::lint::Rule::SharedFunction) {
            break w;
        }
        assert!(Instant::now() < deadline, "lint reports the second process");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(warning.port, 0);
    for pid in [reflect.id(), std::process::id()] {
        assert!(warning.message.contains(&pid.to_string()), "names {pid}: {}", warning.message);
    }
}

/// `nicsim link down|up`: on a cabled pair the pull takes both ends down, LINKS says so, and
/// both come back after `--link-up-ms`.
#[test]
fn a_cable_pull_takes_both_ends_down_until_it_is_plugged_in() {
    let sim = Nicsim::start("link", &["--cable", "0-1", "--link-up-ms", "50"]);
    let (da, db) = (sim.open(A), sim.open(B));
    let up = |d: &Device| d.read(LINKS) & (1 << 30) != 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(up(&da) && up(&db)) {
        assert!(Instant::now() < deadline, "both links up after power-on");
        std::thread::sleep(Duration::from_millis(5));
    }
    let link = |state: &str| {
        Command::new(BIN).args(["--root", sim.root.to_str().unwrap(), "link", state, "--port", "0"]).output().unwrap()
    };
    assert!(link("down").status.success());
    let s = sim.stats();
    assert!(!s.ports[0].link_up && !s.ports[1].link_up, "both ends of the cable");
    assert!(!up(&da) && !up(&db));
    let plugged = Instant::now();
    assert!(link("up").status.success());
    while !(up(&da) && up(&db)) {
        assert!(Instant::now() < deadline, "both links up again");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(plugged.elapsed() >= Duration::from_millis(45), "after link setup: {:?}", plugged.elapsed());
    let out = link("sideways");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("up") && err.contains("down"), "{err}");
}

/// The byte the victim's memory holds.
const VICTIM_BYTE: u8 = 0x5A;

/// A driver process that maps only port 1's BAR and holds a hugepage of [`VICTIM_BYTE`]s;
/// prints the page's physical address, and once its standard input closes, whether the page is
/// intact. Run by `a_function_does_not_reach_memory_of_a_process_that_maps_another`.
#[test]
#[ignore = "a helper process of a_function_does_not_reach_memory_of_a_process_that_maps_another"]
fn victim_helper() {
    use std::io::Read;
    let Ok(devices) = std::env::var("NICSIM_VICTIM_DEVICES") else { return };
    let _port1 = Device::open(Path::new(&devices), B).unwrap();
    let page = platform::DmaMemory::allocate(platform::hugepage::HUGEPAGE, DmaBacking::AnonymousHugetlb).unwrap();
    page.region().fill(0, platform::hugepage::HUGEPAGE, VICTIM_BYTE);
    println!("victim page at {:#x}", page.phys(0));
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    let mut bytes = vec![0u8; platform::hugepage::HUGEPAGE];
    page.region().read_bytes(0, &mut bytes);
    println!("{}", if bytes.iter().all(|&b| b == VICTIM_BYTE) { "INTACT" } else { "CHANGED" });
}

/// Each function has its own DMA domain, as behind an IOMMU: a driver of port 0 that gives its
/// device the address of memory of a process that maps only port 1 gets DMA faults naming
/// that process; nothing is written there and nothing of it goes on the wire.
#[test]
fn a_function_does_not_reach_memory_of_a_process_that_maps_another() {
    use std::io::BufRead;
    let sim = Nicsim::start("domains", &[]);
    let mut victim = platform::Reaped::spawn(
        Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "end_to_end::victim_helper", "--nocapture", "--test-threads=1"])
            .env("NICSIM_VICTIM_DEVICES", sim.devices())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped()),
    )
    .unwrap();
    let mut lines = std::io::BufReader::new(victim.take_stdout().unwrap()).lines();
    let page = lines
        .by_ref()
        // (libtest writes `test victim_helper ... ` before it on the same line.)
        .find_map(|l| u64::from_str_radix(l.ok()?.split_once("victim page at 0x")?.1.trim(), 16).ok())
        .expect("the victim says where its page is");

    // The hostile driver: this process, on port 0 only.
    let da = sim.open(A);
    da.init_ixy().unwrap();
    let q = IxyQueue::new(&da, 64, DmaBacking::HugetlbfsFile(None)).unwrap();
    q.mem.region().write_u64(q.rx_descriptor(0), page + 4096);
    sim.start_traffic(0, TrafficSpec { count: Some(1), ..TrafficSpec::default() }).unwrap();
    let fault_on = |access: nicsim::port::Access| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = sim.stats();
            if let Some(f) = s.ports[0].faults.iter().find(|f| f.access == access) {
                return (f.clone(), s);
            }
            assert!(Instant::now() < deadline, "a {access} fault on port 0: {:?}", s.ports[0].faults);
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let (f, _) = fault_on(nicsim::port::Access::PacketBufferWrite);
    assert_eq!((f.address, f.owner), (page + 4096, Some(victim.id())), "{f:?}");
    // Transmit from the victim's page: the frame descriptor faults, nothing is sent.
    let d = q.tx_descriptor(0);
    q.mem.region().write_u64(d, page);
    q.mem.region().write_u64(d + 8, 0x2B30_0000 | 60 | (60 << 46));
    da.write(tdt(0), 1);
    let (f, s) = fault_on(nicsim::port::Access::PacketBufferRead);
    assert_eq!((f.address, f.owner), (page, Some(victim.id())), "{f:?}");
    assert_eq!(s.ports[0].sink_packets, 0, "nothing of the victim's page on the wire");
    drop(victim.take_stdin());
    let verdict = lines.map_while(Result::ok).find(|l| l.contains("INTACT") || l.contains("CHANGED"));
    assert_eq!(verdict.as_deref(), Some("INTACT"), "nothing written into the victim's page");
}
