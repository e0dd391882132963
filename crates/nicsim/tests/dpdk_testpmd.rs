//! DPDK's own drivers, unmodified, on nicsim: Debian's `dpdk-testpmd` forwards a known number
//! of frames each way in io mode, through the 82599 driver (`net_ixgbe`) and through the
//! virtio driver (`net_virtio`, modern interface, its mapped BAR served access by access),
//! and nicsim's sinks receive every one exactly once (docs/dpdk.md).
//!
//! The verdict does not depend on the host: flow control holds the generators whenever
//! testpmd falls behind (no frame is missed), and testpmd retries a full transmit ring instead
//! of dropping. DPDK's port start has deadlines of microseconds (10 µs for a reset): `nicsim
//! exec` serves the registers they are on access by access, so they are met on a shared core.

use crate::common;

use common::serve::{start_dpdk, Nicsim, A, B, BIN};
use nicsim::port::toeplitz_by_bits;
use nicsim::wire::TrafficSpec;
use platform::Reaped;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FRAMES: u64 = 200_000;
/// Forwarding in io mode with retries, and 802.3x flow control on both ports (high and low
/// water in KiB of the 512 KiB packet buffer, the longest pause, XON on).
const COMMANDS: &str = "set fwd io retry
set burst tx delay 10 retry 1000000
set flow_ctrl rx on tx on 480 400 65535 1 mac_ctrl_frame_fwd off autoneg off 0
set flow_ctrl rx on tx on 480 400 65535 1 mac_ctrl_frame_fwd off autoneg off 1
";

fn testpmd() -> &'static str {
    let found =
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("dpdk-testpmd").is_file()));
    assert!(found, "dpdk-testpmd is not installed: run scripts/setup (it installs Debian's dpdk-dev)");
    "dpdk-testpmd"
}

/// testpmd's "Accumulated forward statistics" figure after `label` (e.g. "RX-packets:").
fn accumulated(log: &str, label: &str) -> Option<u64> {
    let tail = &log[log.find("Accumulated forward statistics")?..];
    let after = &tail[tail.find(label)? + label.len()..];
    after.split_whitespace().next()?.parse().ok()
}

use nicsim::exec::dpdk_missed_a_deadline as missed_reset_poll;

/// testpmd with its own arguments `app` after the script's, forwarding, and the path of its
/// log; `Err` with the log when DPDK gave up on a port after its reset poll
/// ([`missed_reset_poll`]).
fn start_testpmd(
    sim: &Nicsim,
    script: &str,
    exec: &[&str],
    app: &[&str],
) -> Result<(Reaped, std::path::PathBuf), String> {
    let commands = sim.scratch_file("testpmd.cmd");
    std::fs::write(&commands, script).unwrap();
    let log_path = sim.scratch_file("testpmd.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let root = sim.root.to_str().unwrap().to_string();
    let mut run = Reaped::spawn(
        Command::new(BIN)
            // Line-buffered, so that "Press enter to exit" (forwarding has started) shows at once.
            .args(["--root", &root, "exec"])
            .args(&exec[..1])
            .args(["--", "stdbuf", "-oL", testpmd(), "-l", "0-1", "-n", "1"])
            .args(&exec[1..])
            .arg("--in-memory")
            // Names the virtio interface DPDK chose ("modern virtio pci detected").
            .arg("--log-level=pmd.net.virtio.init:debug")
            .args(["-a", A, "-a", B, "--", "--auto-start", &format!("--cmdline-file={}", commands.display())])
            .args(app)
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    )
    .expect("starting nicsim exec");
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !read_log().contains("Press enter to exit") {
        if run.try_wait().unwrap().is_some() && missed_reset_poll(&read_log()) {
            return Err(read_log());
        }
        assert!(run.try_wait().unwrap().is_none(), "testpmd exited before forwarding:\n{}", read_log());
        assert!(Instant::now() < deadline, "testpmd did not start forwarding in 120 s:\n{}", read_log());
        std::thread::sleep(Duration::from_millis(100));
    }
    if missed_reset_poll(&read_log()) {
        run.take_stdin().unwrap().write_all(b"\n").unwrap();
        let _ = run.wait_for_exit(Duration::from_secs(60));
        return Err(read_log());
    }
    Ok((run, log_path))
}

const UIO: &[&str] = &["--uio"];

#[test]
fn testpmd_forwards_every_frame_exactly_once() {
    let sim = Nicsim::start("testpmd", &[]);
    forward_every_frame_exactly_once(&sim, COMMANDS, UIO);
}

/// On functions bound to vfio-pci, DMA addresses being virtual addresses (`--iova-mode=va`,
/// DPDK's default without root) and physical ones (`pa`): each is an IOVA of DPDK's container.
#[test]
fn testpmd_forwards_every_frame_exactly_once_through_vfio_in_both_iova_modes() {
    for mode in ["va", "pa"] {
        let sim = Nicsim::start(&format!("testpmd-vfio-{mode}"), &[]);
        let eal = format!("--iova-mode={mode}");
        let log = forward_every_frame_exactly_once(&sim, COMMANDS, &["--vfio", &eal]);
        let selected = format!("Selected IOVA mode '{}'", mode.to_uppercase());
        for line in ["VFIO support initialized", "Using IOMMU type 1", selected.as_str()] {
            assert!(log.contains(line), "{line}:\n{log}");
        }
        let gone = sim.stats();
        assert!(gone.ports.iter().all(|p| p.iommu.is_none() && p.iommu_faults == 0), "{:?}", gone.ports[0].iommu);
    }
}

/// virtio-net has no 802.3x settings: nicsim holds the generator while a receive queue is full.
#[test]
fn testpmd_forwards_every_frame_exactly_once_on_virtio_net() {
    let sim = Nicsim::start("testpmd-virtio", &["--device", "virtio-net"]);
    // An address added makes net_virtio send the whole MAC table over the control queue
    // (VIRTIO_NET_CTRL_MAC_TABLE_SET): it must be taken, and lint stays silent.
    let script = "mac_addr add 0 02:00:00:00:00:99\nmac_addr add 1 02:00:00:00:00:98\n\
                  set fwd io retry\nset burst tx delay 10 retry 1000000\n";
    let log = forward_every_frame_exactly_once(&sim, script, UIO);
    assert!(log.contains("modern virtio pci detected"), "DPDK uses the modern interface:\n{log}");
    assert!(!log.contains("mac_addr_cmd error"), "the MAC table was refused:\n{log}");
}

/// net_virtio on virtio-net functions bound to vfio-pci: BAR4 mapped through the device
/// descriptor (served access by access), the rings IOVAs of DPDK's container.
#[test]
fn testpmd_forwards_every_frame_exactly_once_on_virtio_net_through_vfio() {
    let sim = Nicsim::start("testpmd-virtio-vfio", &["--device", "virtio-net"]);
    let script = "set fwd io retry\nset burst tx delay 10 retry 1000000\n";
    let log = forward_every_frame_exactly_once(&sim, script, &["--vfio", "--iova-mode=va"]);
    for line in ["VFIO support initialized", "modern virtio pci detected"] {
        assert!(log.contains(line), "{line}:\n{log}");
    }
    assert!(sim.stats().ports.iter().all(|p| p.iommu.is_none() && p.iommu_faults == 0));
}

/// Runs testpmd with `script` on `sim`'s two ports, sends FRAMES each way, checks that each
/// arrived exactly once, and returns testpmd's log.
fn forward_every_frame_exactly_once(sim: &Nicsim, script: &str, exec: &[&str]) -> String {
    let (mut run, log_path) = start_dpdk("testpmd", || start_testpmd(sim, script, exec, &[]));
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    if let Err(e) = sim.wait_ports_up(Duration::from_secs(30), || Ok(())) {
        panic!("{e}; testpmd's log:\n{}", read_log());
    }
    for port in [0, 1] {
        sim.start_traffic(port, TrafficSpec { count: Some(FRAMES), ..TrafficSpec::default() }).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while sim.stats().ports.iter().any(|p| p.sink_packets < FRAMES) {
        assert!(Instant::now() < deadline, "frames missing after 120 s: {:?}", sim.stats().ports);
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = sim.stats();
    let lint = sim.lint().unwrap();
    run.take_stdin().unwrap().write_all(b"\n").unwrap();
    let out = run.wait_for_exit(Duration::from_secs(60)).unwrap();
    let log = read_log();
    assert!(out.status.success(), "testpmd (through nicsim exec) failed: {:?}\n{log}", out.status);
    for p in &stats.ports {
        let lost: u64 = p.streams.iter().map(|(_, s)| s.lost).sum();
        let reordered: u64 = p.streams.iter().map(|(_, s)| s.reordered).sum();
        assert_eq!(
            (p.generated, p.sink_packets, lost, reordered, p.device.mpc),
            (FRAMES, FRAMES, 0, 0, 0),
            "port {}: every frame once, none missed",
            p.port
        );
    }
    // Read at start and at stop only, testpmd's figures are exact on nicsim too.
    assert_eq!(accumulated(&log, "RX-packets:"), Some(2 * FRAMES), "{log}");
    assert_eq!(accumulated(&log, "TX-packets:"), Some(2 * FRAMES), "{log}");
    assert_eq!(accumulated(&log, "RX-dropped:"), Some(0), "{log}");
    assert!(lint.is_empty(), "lint is silent for DPDK: {lint:?}");
    assert!(log.contains("nicsim exec:   port 1 (0000:5e:00.1): generated 200000 | sink 200000 (lost 0)"), "{log}");
    log
}

/// Flows per generator of the RSS test; every flow sends `FRAMES / RSS_FLOWS` frames. Not a
/// power of two: the hash is linear, so 2^k consecutive flows would spread exactly evenly.
const RSS_FLOWS: u32 = 100;

/// testpmd on four queue pairs per port with RSS on UDP, one forwarding core: each queue
/// received exactly the frames that the Toeplitz hash, computed here from the generated
/// 5-tuples with the key and redirection table testpmd reports, sends it, and every flow
/// arrived in order [DS 7.1.2.8].
#[test]
fn testpmd_spreads_udp_flows_over_four_queues_as_toeplitz_predicts() {
    let sim = Nicsim::start("testpmd-rss", &[]);
    let mut script = String::from(COMMANDS);
    for port in 0..2 {
        for q in 0..4 {
            // Queue q counts in QPRC(q) (RQSMR) [DS 8.2.3.8.9].
            script.push_str(&format!("set stat_qmap rx {port} {q} {q}\n"));
        }
        script.push_str(&format!("show port {port} rss-hash key\n"));
        script.push_str(&format!("show port {port} rss reta 128 (0xffffffffffffffff,0xffffffffffffffff)\n"));
    }
    let queues = ["--rxq=4", "--txq=4", "--nb-cores=1", "--rss-udp"];
    let (mut run, log_path) = start_dpdk("testpmd", || start_testpmd(&sim, &script, UIO, &queues));
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    if let Err(e) = sim.wait_ports_up(Duration::from_secs(30), || Ok(())) {
        panic!("{e}; testpmd's log:\n{}", read_log());
    }
    // The script has run once the last redirection table is in the log.
    let deadline = Instant::now() + Duration::from_secs(60);
    while read_log().matches("RSS RETA configuration: hash index=127").count() < 2 {
        assert!(Instant::now() < deadline, "testpmd did not show both RETAs:\n{}", read_log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = read_log();
    let spec = TrafficSpec { count: Some(FRAMES), flows: RSS_FLOWS, ..TrafficSpec::default() };
    for port in [0, 1] {
        sim.start_traffic(port, spec.clone()).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while sim.stats().ports.iter().any(|p| p.sink_packets < FRAMES) {
        assert!(Instant::now() < deadline, "frames missing after 120 s: {:?}", sim.stats().ports);
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = sim.stats();
    run.take_stdin().unwrap().write_all(b"\n").unwrap();
    let out = run.wait_for_exit(Duration::from_secs(60)).unwrap();
    assert!(out.status.success(), "testpmd failed: {:?}\n{}", out.status, read_log());
    let keys = rss_keys(&log);
    let retas = retas(&log);
    assert_eq!((keys.len(), retas.len()), (2, 2), "testpmd showed a key and a table per port:\n{log}");
    for p in &stats.ports {
        let (_, st) = &p.streams[0];
        assert_eq!((st.received, st.lost, st.flow_reordered), (FRAMES, 0, 0), "port {}: {st:?}", p.port);
        // Port p received its own generator's stream (stream p), hashed by p's key and table.
        let sender = &stats.ports[1 - p.port];
        let predicted = predicted_queues(sender.port as u8, &keys[sender.port], &retas[sender.port]);
        assert_eq!(&sender.device.qprc[..4], &predicted[..], "port {}'s RX queues", sender.port);
        assert!(predicted.iter().all(|&n| n > 0), "the flows reach every queue: {predicted:?}");
    }
}

/// The keys testpmd printed, in port order ("RSS key:" and a line of hex).
fn rss_keys(log: &str) -> Vec<Vec<u8>> {
    let lines: Vec<&str> = log.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim() == "RSS key:")
        .filter_map(|(i, _)| lines.get(i + 1))
        .map(|hex| {
            (0..hex.trim().len() / 2).map(|k| u8::from_str_radix(&hex.trim()[2 * k..2 * k + 2], 16).unwrap()).collect()
        })
        .collect()
}

/// The redirection tables testpmd printed, in port order: 128 queues each.
fn retas(log: &str) -> Vec<Vec<usize>> {
    let mut tables: Vec<Vec<usize>> = Vec::new();
    for line in log.lines() {
        let Some(rest) = line.trim().strip_prefix("RSS RETA configuration: hash index=") else { continue };
        let (index, queue) = rest.split_once(", queue=").unwrap();
        let (index, queue): (usize, usize) = (index.parse().unwrap(), queue.trim().parse().unwrap());
        if index == 0 {
            tables.push(Vec::new());
        }
        tables.last_mut().unwrap().push(queue);
    }
    tables
}

/// Frames per RX queue of the port receiving nicsim's stream `stream` (flows as the
/// generator makes them: source 10.<stream>.0.<flow>, UDP port 1024 + flow, to
/// 10.255.<stream>.1, port 20051).
fn predicted_queues(stream: u8, key: &[u8], reta: &[usize]) -> [u64; 4] {
    let mut counts = [0u64; 4];
    for flow in 0..RSS_FLOWS {
        let mut input = vec![10, stream, 0, flow as u8, 10, 255, stream, 1];
        input.extend((1024 + flow as u16).to_be_bytes());
        input.extend(20051u16.to_be_bytes());
        counts[reta[(toeplitz_by_bits(key, &input) & 0x7F) as usize]] += FRAMES / u64::from(RSS_FLOWS);
    }
    counts
}
