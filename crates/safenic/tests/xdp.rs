//! AF_XDP against the real kernel (docs/afxdp.md): three network namespaces made by the test,
//! a veth pair from each outer one to the middle one, and `safenic fwd flexible xdp:… xdp:…`
//! in the middle with `--mac-rewrite none`. Ping both ways with 56 and 1472 bytes, a tcpdump
//! capture behind the driver, iperf3 TCP and UDP, every frame counted against the kernel's own
//! counters, a link going down and an interface deleted under the driver, and bad input.
//! The outer namespaces have static neighbours and no IPv6, so that no frame is sent that the
//! test did not ask for. Namespaces and processes go when a test ends, also when it fails.
//! Needs root, iproute2, ethtool, iputils-ping, iperf3 and tcpdump (`make test` installs them); tests
//! run one at a time.

use crate::common;

use bench::xdp::{in_ns, Veths, ADDRESS};
use common::{Driver, RUST};
use nicsim::wire::{read_pcap, TrafficSpec};
use platform::fs::ScratchDir;
use platform::Reaped;
use std::io::{BufRead, BufReader};
use std::process::{ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const C_CLANG: Driver = Driver { name: "c-clang", command: "drivers/c/build/{isa}/clang/safenic-c-{mode} fwd" };

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip (iproute2)");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// bench::xdp's namespaces and veths, and a scratch directory for captures.
struct Net {
    v: Veths,
    scratch: ScratchDir,
}

impl std::ops::Deref for Net {
    type Target = Veths;
    fn deref(&self) -> &Veths {
        &self.v
    }
}

impl Net {
    fn new(tag: &str) -> Net {
        let scratch = ScratchDir::new(common::SCRATCH_PREFIX, &format!("veths-{tag}")).unwrap();
        Net { v: Veths::new(tag).expect("namespaces and veths"), scratch }
    }

    fn counters(&self, i: usize) -> (u64, u64) {
        self.v.counters(i).unwrap()
    }

    /// `driver flexible xdp:a1 xdp:b1 --mac-rewrite none` in the middle namespace, once it
    /// says that it forwards; its standard output, to read the summary from.
    fn forward(&self, driver: Driver, extra: &[&str]) -> (Reaped, BufReader<ChildStdout>) {
        let [a, b] = self.ports();
        self.forward_between(driver, &a, &b, extra)
    }

    /// `driver flexible A B --mac-rewrite none …` in the middle namespace, once every AF_XDP
    /// port of the two says that it forwards.
    fn forward_between(&self, driver: Driver, a: &str, b: &str, extra: &[&str]) -> (Reaped, BufReader<ChildStdout>) {
        let words = driver.words("flexible");
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut child = Reaped::spawn(
            in_ns(&self.ns[2], &words)
                .args(["flexible", a, b, "--mac-rewrite", "none"])
                .args(extra)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .expect("spawning safenic");
        let mut out = BufReader::new(child.take_stdout().unwrap());
        let mut ready = 0;
        while ready < [a, b].iter().filter(|p| p.starts_with("xdp:")).count() {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap() == 0 {
                panic!("safenic exited before it forwarded: {}", child.output());
            }
            ready += line.contains(": forwarding") as usize;
        }
        (child, out)
    }

    fn ping(&self, from: usize, size: usize) {
        common::ping_from(&self.ns[from], ADDRESS[1 - from], size);
    }

    /// An iperf3 transfer from a to b (`udp`: 100 Mb/s of UDP): what the client says.
    fn iperf(&self, udp: bool) -> String {
        common::iperf_between(&self.ns[0], &self.ns[1], ADDRESS[1], udp)
    }
}

/// The rest of the driver's output once it stopped: (a→b, b→a) packets, and every line.
fn summary(out: &mut BufReader<ChildStdout>) -> ([u64; 2], String) {
    let mut text = String::new();
    std::io::Read::read_to_string(out, &mut text).unwrap();
    let last = text.lines().find(|l| l.contains(" fwd flexible: ")).unwrap_or_else(|| panic!("no summary: {text}"));
    let words: Vec<&str> = last.split_whitespace().collect();
    let counts: Vec<u64> = words
        .windows(2)
        .filter(|w| w[1] == "packets," && w[0].parse::<u64>().is_ok())
        .map(|w| w[0].parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 2, "{last}");
    ([counts[0], counts[1]], text)
}

/// Frames the kernel could not give `port`'s socket, from the driver's line of its
/// XDP_STATISTICS: dropped (no fill buffer) and receive ring full.
fn kernel_lost(text: &str, port: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("xdp:{port}@0:")))
        .unwrap_or_else(|| panic!("no XDP_STATISTICS line for {port}: {text}"));
    let count = |what: &str| {
        let at = line.find(what).unwrap_or_else(|| panic!("no {what:?} in {line}"));
        line[..at].split_whitespace().last().and_then(|n| n.parse::<u64>().ok()).unwrap_or_else(|| panic!("{line}"))
    };
    count(" dropped,") + count(" receive ring full")
}

/// Everything the issue asks of a path through `driver` over AF_XDP: ping both ways with 56 and
/// 1472 bytes, a capture behind it, iperf3 TCP and UDP, every frame counted.
fn peers_talk_through(driver: Driver) {
    let v = Net::new(&format!("talk-{}", driver.name));
    let before = [v.counters(0), v.counters(1)];
    let (fwd, mut out) = v.forward(driver, &[]);
    let capture = v.scratch.path().join("b.pcap");
    let mut tcpdump = Reaped::spawn(
        in_ns(&v.ns[1], &["tcpdump", "-i", &v.outer[1], "-U", "-c", "6", "-w"])
            .arg(&capture)
            .arg("icmp")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("running tcpdump");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !capture.exists() {
        assert!(Instant::now() < deadline, "tcpdump did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    for from in [0, 1] {
        v.ping(from, 56);
        v.ping(from, 1472);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while tcpdump.try_wait().ok().flatten().is_none() {
        assert!(Instant::now() < deadline, "tcpdump did not see 6 ICMP frames");
        std::thread::sleep(Duration::from_millis(50));
    }
    let frames = read_pcap(&capture).expect("tcpdump's capture");
    assert_eq!(frames.len(), 6);
    assert!(frames.iter().all(|f| f[12..14] == [0x08, 0x00] && f[23] == 1), "IPv4 ICMP frames behind the driver");
    let tcp = v.iperf(false);
    assert!(tcp.contains("receiver"), "iperf3 TCP: {tcp}");
    let udp = v.iperf(true);
    assert!(udp.contains("receiver"), "iperf3 UDP: {udp}");
    eprintln!(
        "{} over AF_XDP: iperf3 TCP {}",
        driver.name,
        tcp.lines().find(|l| l.contains("receiver")).unwrap_or_default().trim()
    );
    let after = [v.counters(0), v.counters(1)];
    let status = fwd.terminate(Duration::from_secs(30)).expect("stopping the driver");
    let (counts, text) = summary(&mut out);
    assert!(status.status.success(), "{text} {}", String::from_utf8_lossy(&status.stderr));
    // Every frame an outer end sent, the kernel handed to the driver's socket or counted as
    // lost there (its receive ring full, or no fill buffer); every frame the driver forwarded,
    // the other outer end received.
    let sent = [after[0].0 - before[0].0, after[1].0 - before[1].0];
    let received = [after[1].1 - before[1].1, after[0].1 - before[0].1];
    let lost = v.inner.clone().map(|port| kernel_lost(&text, &port));
    assert_eq!(
        [counts[0] + lost[0], counts[1] + lost[1]],
        sent,
        "sent (ip -s link) against forwarded and lost (XDP_STATISTICS): {text}"
    );
    assert_eq!(counts, received, "received (ip -s link) against forwarded: {text}");
    assert!(text.contains("0 malformed, 0 dropped"), "{text}");
}

#[test]
fn linux_peers_talk_through_the_rust_driver_over_af_xdp_and_every_frame_is_counted() {
    peers_talk_through(RUST);
}

#[test]
#[ignore = "make test-slow runs it: the C baseline over AF_XDP, beside the Rust driver's test"]
fn linux_peers_talk_through_the_c_baseline_over_af_xdp_and_every_frame_is_counted() {
    peers_talk_through(C_CLANG);
}

#[test]
fn a_link_going_down_or_an_interface_deleted_under_the_driver_ends_it_with_one_line() {
    for (driver, tag, expected) in [
        (RUST, "down", "went down"),
        (RUST, "gone", "was deleted"),
        (C_CLANG, "c-down", "went down"),
        (C_CLANG, "c-gone", "was deleted"),
    ] {
        let v = Net::new(tag);
        let (fwd, _out) = v.forward(driver, &[]);
        let (m, port) = (&v.ns[2], &v.inner[0]);
        match tag.ends_with("down") {
            true => ip(&["-n", m, "link", "set", port, "down"]),
            false => ip(&["-n", m, "link", "delete", port]),
        }
        // It stops by itself (a generous bound, so that only a hang fails): status 1, not killed.
        let out = fwd.wait_for_exit(Duration::from_secs(60)).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{tag}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{tag}: one line: {stderr}");
        // An interface being deleted goes down first, and the driver may look in between (it
        // looks again 100 ms later, so it rarely does): either line names the cause.
        let either = tag.ends_with("gone") && stderr.contains(&format!("{port} went down"));
        assert!(stderr.contains(&format!("{port} {expected}")) || either, "{tag}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn bad_input_over_af_xdp_is_one_line_that_names_the_fix() {
    bad_input(RUST);
}

#[test]
#[ignore = "make test-slow runs it: the C baseline over AF_XDP, beside the Rust driver's test"]
fn bad_input_to_the_c_baseline_over_af_xdp_is_one_line_that_names_the_fix() {
    bad_input(C_CLANG);
}

fn bad_input(driver: Driver) {
    let v = Net::new(&format!("bad-{}", driver.name));
    let [a, b] = v.inner.clone().map(|i| format!("xdp:{i}"));
    let m = &v.ns[2];
    let run = |prefix: &[&str], args: &[&str]| {
        let mut words: Vec<String> = prefix.iter().map(|w| w.to_string()).collect();
        words.extend(driver.words(args[0]));
        let mut words: Vec<&str> = words.iter().map(String::as_str).collect();
        words.extend(args);
        words.extend(["--seconds", "5"]);
        let out = in_ns(m, &words).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        stderr
    };
    let (a7, ax) = (format!("{a}@7"), format!("{a}@x"));
    let cases: Vec<(Vec<&str>, Vec<&str>, &str)> = vec![
        (vec![], vec!["flexible", "xdp:safenic-no0", &b], "no interface named safenic-no0"),
        (vec![], vec!["flexible", &a7, &b], "queue 7: give one below"),
        (vec![], vec!["flexible", &ax, &b], "the queue after @ is a number"),
        (vec![], vec!["flexible", &a, &a], "both input and output"),
        (vec![], vec!["flexible", &a, &b, "--xdp-bind", "zero-copy"], "no zero-copy AF_XDP: bind in copy mode"),
        (vec![], vec!["restricted", &a, &b], "use flexible"),
        (vec![], vec!["flexible", &a, &b, "--queues", "2"], "an AF_XDP port is one queue"),
        (vec!["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"], vec!["flexible", &a, &b], "needs root"),
    ];
    for (prefix, args, expected) in &cases {
        let e = run(prefix, args);
        assert!(e.contains(expected), "{args:?}: {e}");
    }
    // A port down at the start is refused with the command that brings it up.
    ip(&["-n", m, "link", "set", &v.inner[1], "down"]);
    let e = run(&[], &["flexible", &a, &b]);
    assert!(e.contains(&format!("ip link set {} up", v.inner[1])), "{e}");
}

/// An AF_XDP port and a port of nicsim's (`device`) forward to each other: nicsim's generator
/// through the nicsim port to the veth, pings from the veth's far end to nicsim's sink, every
/// frame counted at both ends.
fn af_xdp_and_a_nicsim_port(device: nicsim::pciconfig::Kind, tag: &str) {
    let sim = common::Sim::start_devices(&format!("nicsim-{tag}"), &[device]);
    let v = Net::new(tag);
    let xdp = format!("xdp:{}", v.inner[0]);
    let devices = sim.devices();
    let (fwd, mut out) = v.forward_between(RUST, &xdp, common::A, &["--sysfs", &devices, "--cpu", "1"]);
    // The nicsim port's queues run before the AF_XDP port opens, so they are up now.
    let before = v.counters(0);
    let n = 20_000;
    sim.start_traffic(0, TrafficSpec { rate_pps: Some(50_000.0), count: Some(n), ..Default::default() }).unwrap();
    // Pings to b's address leave a's veth for the driver, which sends them out of nicsim's port.
    let _ = in_ns(&v.ns[0], &["ping", "-c", "5", "-i", "0.2", "-w", "3", ADDRESS[1]]).output().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while v.counters(0).1 - before.1 < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = v.counters(0);
    let stats = sim.stats();
    let status = fwd.terminate(Duration::from_secs(30)).expect("stopping the driver");
    let (counts, text) = summary(&mut out);
    assert!(status.status.success(), "{text} {}", String::from_utf8_lossy(&status.stderr));
    // The generator's frames, held back by flow control rather than dropped, all reach a's end.
    assert_eq!(stats.ports[0].generated, n, "{text}");
    assert_eq!(counts[1], n, "nicsim's port to the veth: {text}");
    assert_eq!(after.1 - before.1, n, "frames a's veth end received (ip -s link): {text}");
    // What a sent, the driver forwarded or the kernel counted as lost, and nicsim's sink got.
    assert_eq!(counts[0] + kernel_lost(&text, &v.inner[0]), after.0 - before.0, "{text}");
    assert!(counts[0] >= 5, "the pings went through: {text}");
    assert_eq!(stats.ports[0].sink_packets, counts[0], "{text}");
    assert!(text.contains("0 malformed, 0 dropped"), "{text}");
}

#[test]
fn an_af_xdp_port_and_an_82599_port_forward_to_each_other() {
    af_xdp_and_a_nicsim_port(nicsim::pciconfig::Kind::Ixgbe, "x");
}

#[test]
fn an_af_xdp_port_and_a_virtio_port_forward_to_each_other() {
    af_xdp_and_a_nicsim_port(nicsim::pciconfig::Kind::VirtioNet, "v");
}
