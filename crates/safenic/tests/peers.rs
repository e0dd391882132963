//! Linux network stacks as the peers (docs/virtio.md, "Put safenic between two network
//! namespaces"): two namespaces, each with a TAP interface and an address in a private test
//! subnet, joined through nicsim's two ports (`nicsim serve --tap`) with a driver forwarding
//! between them with `--mac-rewrite none`. For the Rust driver and the C baseline, each on the
//! 82599 and on virtio-net: ping both ways with 56 and 1472 bytes, an iperf3 TCP and a UDP
//! transfer, and a tcpdump capture on one TAP holding the frames. Traffic never leaves the
//! namespaces; they, the TAPs and every process go when a test ends, also when it fails.
//! Needs root, hugepages, /dev/fuse, iproute2, iputils-ping, iperf3 and tcpdump (`make test`
//! and `make test-peers` install them); tests run one at a time.

use crate::common;

use common::{in_ns, Driver, A, B, RUST};
use nicsim::session::Session;
use nicsim::wire::read_pcap;
use platform::fs::ScratchDir;
use platform::Reaped;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const C_CLANG: Driver = Driver { name: "c-clang", command: "drivers/c/build/{isa}/clang/safenic-c-{mode} fwd" };
/// Addresses in a subnet reserved for documentation (RFC 5737): nothing outside answers them.
const ADDRESS: [&str; 2] = ["192.0.2.1", "192.0.2.2"];

/// Runs `ip args…`; panics with its output if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip (iproute2)");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Two namespaces with a TAP each, joined by nicsim's ports; all removed when dropped.
struct Peers {
    ns: [String; 2],
    tap: [String; 2],
    session: Session,
    nicsim: Option<Reaped>,
    scratch: ScratchDir,
}

impl Drop for Peers {
    fn drop(&mut self) {
        // nicsim stops on request, removing its tree and its TAPs before it exits; only then
        // do the namespaces and the scratch directory go.
        let _ = self.session.shutdown();
        if let Some(nicsim) = self.nicsim.take() {
            let _ = nicsim.wait_for_exit(Duration::from_secs(10));
        }
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "delete", ns]).status();
        }
    }
}

impl Peers {
    /// Namespaces and TAPs named after this process and `tag`, nicsim's ports of `device`.
    fn start(tag: &str, device: &str) -> Peers {
        let id = std::process::id() % 100_000;
        let ns = [format!("safenic-{tag}-{id}-a"), format!("safenic-{tag}-{id}-b")];
        let tap = [format!("sft{id}a"), format!("sft{id}b")];
        let scratch = ScratchDir::new(common::SCRATCH_PREFIX, &format!("peers-{tag}")).unwrap();
        for n in &ns {
            let _ = Command::new("ip").args(["netns", "delete", n]).stderr(Stdio::null()).status();
            ip(&["netns", "add", n]);
        }
        let mut peers = Peers { ns, tap, session: Session::connect(scratch.path()), nicsim: None, scratch };
        let root = peers.scratch.path().join("nicsim");
        let nicsim = Path::new(common::SAFENIC).with_file_name("nicsim");
        let child = Reaped::spawn(
            Command::new(nicsim)
                .arg("--root")
                .arg(&root)
                .args(["serve", "--ports", "2", "--cpu", "0", "--device", device])
                .arg("--tap")
                .arg(format!("{},netns={}", peers.tap[0], peers.ns[0]))
                .arg("--tap")
                .arg(format!("{},netns={}", peers.tap[1], peers.ns[1]))
                .stdout(Stdio::null()),
        )
        .expect("spawning nicsim serve");
        peers.nicsim = Some(child);
        peers.session = Session::connect(&root);
        peers.session.wait_answering(Duration::from_secs(10)).expect("nicsim serve came up");
        for ((ns, tap), address) in peers.ns.iter().zip(&peers.tap).zip(ADDRESS) {
            ip(&["-n", ns, "addr", "add", &format!("{address}/24"), "dev", tap]);
            ip(&["-n", ns, "link", "set", tap, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        peers
    }

    fn devices(&self) -> PathBuf {
        self.session.root().join("devices")
    }

    /// `driver flexible A B --mac-rewrite none` and whatever `extra` adds, once its queues run.
    fn forward(&self, driver: Driver, extra: &[&str]) -> Reaped {
        let devices = self.devices();
        let mut child = Reaped::spawn(
            Command::new(&driver.words("flexible")[0])
                .args(&driver.words("flexible")[1..])
                .args(["flexible", A, B, "--mac-rewrite", "none", "--cpu", "1", "--sysfs"])
                .arg(&devices)
                .args(extra)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .expect("spawning the driver");
        let alive = || match child.try_wait() {
            Ok(Some(status)) => Err(format!("the driver exited early with {status}: {}", child.output())),
            _ => Ok(()),
        };
        self.session.wait_ports_up(Duration::from_secs(30), alive).unwrap();
        child
    }

    /// `ping -s size` from namespace `from` to the other's address.
    fn ping(&self, from: usize, size: usize) {
        common::ping_from(&self.ns[from], ADDRESS[1 - from], size);
    }

    /// An iperf3 transfer from namespace a to b (`udp`: 100 Mb/s of UDP): what the client says.
    fn iperf(&self, udp: bool) -> String {
        common::iperf_between(&self.ns[0], &self.ns[1], ADDRESS[1], udp)
    }
}

/// Everything the issue asks of a path through `driver`: ping both ways with 56 and 1472
/// bytes, a capture of it on b's TAP, iperf3 TCP and UDP.
fn peers_talk_through(tag: &str, device: &str, driver: Driver, extra: &[&str]) {
    let peers = Peers::start(tag, device);
    let fwd = peers.forward(driver, extra);
    let capture = peers.scratch.path().join("b.pcap");
    let tcpdump = Reaped::spawn(
        in_ns(&peers.ns[1], &["tcpdump", "-i", &peers.tap[1], "-U", "-c", "6", "-w"])
            .arg(&capture)
            .arg("icmp")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("running tcpdump");
    // tcpdump opens its capture before it writes the file's header.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !capture.exists() {
        assert!(Instant::now() < deadline, "tcpdump did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    for from in [0, 1] {
        peers.ping(from, 56);
        peers.ping(from, 1472);
    }
    let mut tcpdump = tcpdump;
    let deadline = Instant::now() + Duration::from_secs(30);
    while tcpdump.try_wait().ok().flatten().is_none() {
        assert!(Instant::now() < deadline, "tcpdump did not see 6 ICMP frames");
        std::thread::sleep(Duration::from_millis(50));
    }
    let frames = read_pcap(&capture).expect("tcpdump's capture");
    assert_eq!(frames.len(), 6);
    assert!(frames.iter().all(|f| f[12..14] == [0x08, 0x00] && f[23] == 1), "IPv4 ICMP frames on b's TAP");
    let tcp = peers.iperf(false);
    assert!(tcp.contains("receiver"), "iperf3 TCP: {tcp}");
    let udp = peers.iperf(true);
    assert!(udp.contains("receiver"), "iperf3 UDP: {udp}");
    eprintln!("{tag}: iperf3 TCP {}", tcp.lines().find(|l| l.contains("receiver")).unwrap_or_default().trim());
    let out = fwd.terminate(Duration::from_secs(30)).expect("stopping the driver");
    assert!(out.status.success(), "{}: {}", driver.name, String::from_utf8_lossy(&out.stderr));
    let lint = peers.session.lint().unwrap();
    assert!(lint.is_empty(), "{lint:?}");
}

#[test]
fn linux_peers_talk_through_the_rust_driver_on_the_82599() {
    peers_talk_through("ixgbe", "82599", RUST, &["--flow-control"]);
}

#[test]
fn linux_peers_talk_through_the_rust_driver_on_virtio() {
    peers_talk_through("virtio", "virtio-net", RUST, &[]);
}

#[test]
fn linux_peers_talk_through_the_c_baseline_on_the_82599() {
    peers_talk_through("c", "82599", C_CLANG, &["--flow-control"]);
}

#[test]
fn linux_peers_talk_through_the_c_baseline_on_virtio() {
    peers_talk_through("c-virtio", "virtio-net", C_CLANG, &[]);
}
