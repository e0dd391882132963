//! The Rust l2fwd (`examples/l2fwd`) as a user runs it, on DPDK's `net_pcap` devices: each port
//! receives the frames of a pcap file once and writes what it sends to another, so the test
//! knows every frame that went in and checks every frame that came out: each forwarded
//! exactly once, in order, to the paired port, with l2fwd's MAC addresses. No hardware, no
//! hugepages.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The example binary, which `cargo test` builds beside this test.
fn l2fwd() -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    deps.parent().unwrap().join("examples/l2fwd")
}

/// Kills and reaps the child when the test ends, also when it fails.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    for word in [0xa1b2c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        out.extend(word.to_le_bytes()); // magic, version 2.4, zone, accuracy, snaplen, Ethernet
    }
    for f in frames {
        for word in [0u32, 0, f.len() as u32, f.len() as u32] {
            out.extend(word.to_le_bytes());
        }
        out.extend(f);
    }
    std::fs::write(path, out).unwrap();
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let mut bytes = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        f.read_to_end(&mut bytes).unwrap();
    }
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if at + 16 + len > bytes.len() {
            break; // a record still being written
        }
        frames.push(bytes[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    frames
}

/// Frame `n` of a port's input: 60 to 1514 bytes, numbered, from a made-up sender.
fn frame(port: u8, n: u32) -> Vec<u8> {
    let len = 60 + (n as usize * 37) % 1455;
    let mut f = vec![port; len];
    f[..6].copy_from_slice(&[0x02, 0xaa, 0, 0, 0, port]);
    f[6..12].copy_from_slice(&[0x02, 0xbb, 0, 0, 0, port]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14..18].copy_from_slice(&n.to_le_bytes());
    f
}

/// `Port N, MAC address: …` as l2fwd prints it.
fn port_mac(stdout: &str, port: u16) -> [u8; 6] {
    let prefix = format!("Port {port}, MAC address: ");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no MAC of port {port}:\n{stdout}"));
    let bytes: Vec<u8> = line.split(':').map(|b| u8::from_str_radix(b, 16).unwrap()).collect();
    bytes.try_into().unwrap()
}

const FRAMES: u32 = 3000;

/// DPDK's own l2fwd, built by `scripts/build-dpdk-l2fwd` (make test runs it).
fn c_l2fwd() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dpdk-l2fwd/l2fwd");
    assert!(path.is_file(), "{} is missing: run scripts/build-dpdk-l2fwd (make test does)", path.display());
    path
}

/// Runs `binary` (an l2fwd, its own options `app`) on two pcap ports whose inputs hold
/// [`FRAMES`] frames each, and a runt after the 100th if `runt`; stops it with SIGTERM once
/// every frame came out; checks it exited 0 after `Bye...` and that every frame of port `from`
/// came out of port `to` (each of `routes`) once, in order, with l2fwd's MAC addresses.
/// Returns its standard output.
fn forward_pcaps(binary: &Path, name: &str, runt: bool, app: &[&str], routes: &[(u16, u16)]) -> String {
    let dir = std::env::temp_dir().join(format!("dpdk-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let inputs: Vec<Vec<Vec<u8>>> = (0..2u8)
        .map(|p| {
            let mut frames: Vec<Vec<u8>> = (0..FRAMES).map(|n| frame(p, n)).collect();
            if runt {
                frames.insert(100, vec![0xee; 10]);
            }
            frames
        })
        .collect();
    let mut args: Vec<String> =
        ["-l", "0-1", "--no-pci", "--no-huge", "-m", "512", "--no-shconf"].map(String::from).to_vec();
    for (p, input) in inputs.iter().enumerate() {
        write_pcap(&dir.join(format!("in{p}.pcap")), input);
        let (rx, tx) = (dir.join(format!("in{p}.pcap")), dir.join(format!("out{p}.pcap")));
        args.extend(["--vdev".into(), format!("net_pcap{p},rx_pcap={},tx_pcap={}", rx.display(), tx.display())]);
    }
    args.extend(["--", "-p", "0x3", "-T", "0"].map(String::from));
    args.extend(app.iter().map(|a| a.to_string()));
    let child = Command::new(binary).args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let mut run = Running(child.unwrap_or_else(|e| panic!("{}: {e}", binary.display())));

    let deadline = Instant::now() + Duration::from_secs(60);
    while (0..2).any(|p| read_pcap(&dir.join(format!("out{p}.pcap"))).len() < FRAMES as usize) {
        assert!(Instant::now() < deadline, "{name} did not forward every frame within a minute");
        assert!(run.0.try_wait().unwrap().is_none(), "{name} exited early");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200)); // anything more would be a duplicate
    let pid = rustix::process::Pid::from_child(&run.0);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let mut stdout = String::new();
    run.0.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let mut stderr = String::new();
    run.0.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = run.0.wait().unwrap();
    assert!(status.success(), "{name}: {status}\n{stdout}\n{stderr}");
    assert!(stdout.contains("Bye..."), "{name} ended cleanly:\n{stdout}");

    for &(from, to) in routes {
        let out = read_pcap(&dir.join(format!("out{to}.pcap")));
        let expected: Vec<Vec<u8>> = (0..FRAMES)
            .map(|n| {
                let mut f = frame(from as u8, n);
                f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, to as u8]);
                f[6..12].copy_from_slice(&port_mac(&stdout, to));
                f
            })
            .collect();
        assert_eq!(out.len(), expected.len(), "{name}, port {from} to {to}: each frame once");
        assert!(out == expected, "{name}, port {from} to {to}: in order, MACs rewritten");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    stdout
}

#[test]
fn l2fwd_forwards_every_frame_once_to_the_paired_port_with_its_macs() {
    // With either crate for the Ethernet header (the bench compares them).
    for headers in ["smoltcp", "etherparse"] {
        let name = format!("l2fwd-{headers}");
        let stdout = forward_pcaps(&l2fwd(), &name, true, &["--headers", headers], &PAIRED);
        // The runts are counted and dropped; every mbuf came back before `Bye...`.
        for line in [
            "Total packets sent:               6000",
            "Total packets received:           6002",
            "Total packets dropped:               2",
        ] {
            assert!(stdout.contains(line), "{name}: {line}:\n{stdout}");
        }
    }
}

/// DPDK's C l2fwd, unmodified, forwards the same frames the same way: the reference the Rust
/// l2fwd is measured against does the same work. (It forwards a runt as it came, so the inputs
/// have none.)
#[test]
fn dpdk_c_l2fwd_forwards_the_same_frames_the_same_way() {
    forward_pcaps(&c_l2fwd(), "c-l2fwd", false, &[], &PAIRED);
}

/// By default the two ports forward to each other.
const PAIRED: [(u16, u16); 2] = [(0, 1), (1, 0)];

/// `--portmap` pairs ports as it says; here each port with itself. Both l2fwds agree.
#[test]
fn a_portmap_pairs_each_port_with_itself_in_both_l2fwds() {
    for (binary, name) in [(l2fwd(), "l2fwd-portmap"), (c_l2fwd(), "c-l2fwd-portmap")] {
        forward_pcaps(&binary, name, false, &["--portmap", "(0,0)(1,1)"], &[(0, 0), (1, 1)]);
    }
}

/// Bad arguments end with one line naming the fix, and a failure: l2fwd's own on stderr alone,
/// EAL's after DPDK's usage text.
#[test]
fn bad_arguments_end_with_one_line_and_a_failure() {
    let eal =
        ["-l", "0", "--no-pci", "--no-huge", "-m", "128", "--no-shconf", "--vdev", "net_null0", "--vdev", "net_null1"];
    let cases: [(&[&str], &str); 9] = [
        (&["--", "-p", "0x3", "--headers", "pnet"], "l2fwd: unknown --headers `pnet`: give smoltcp or etherparse"),
        (&["--", "-p", "0x1", "--portmap", "(0,1)"], "l2fwd: --portmap: port 1 is not enabled in the portmask: add it to -p"),
        (
            &["--", "-p", "0x3", "--portmap", "(0,1)(1,1)"],
            "l2fwd: --portmap: a port of (1,1) is in another pair too: give each port one pair",
        ),
        (&["--", "-p", "0x3", "--portmap=(0;1)"], "l2fwd: invalid --portmap `(0;1)`: give pairs of ports, e.g. (0,1)(2,3)"),
        (&["--", "-p", "0x4"], "l2fwd: portmask names port 2, which DPDK did not probe: it has ports [0, 1]"),
        (&["--", "-p", "zz"], "l2fwd: invalid portmask `zz`: give a hexadecimal mask of ports, e.g. -p 0x3"),
        (&["--", "-p", "0x3", "-q", "0"], "l2fwd: invalid queue number `0`: give 1 to 16 ports per lcore"),
        (
            &["--", "-p", "0x3", "--fast"],
            "l2fwd: unknown option `--fast`: -p PORTMASK [-P] [-q NQ] [-T PERIOD] [--[no-]mac-updating] [--portmap (A,B)(C,D)] [--headers smoltcp|etherparse]",
        ),
        (
            &["--", "-p", "0x3"],
            "l2fwd: 2 ports at -q 1 need 2 lcores, and EAL runs 1: give more lcores (-l) or a larger -q",
        ),
    ];
    for (app, line) in cases {
        let out = Command::new(l2fwd()).args(eal).args(app).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{app:?}: exits with a failure");
        assert_eq!(stderr.lines().last(), Some(line), "{app:?}:\n{stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"), "{app:?}: no backtrace");
    }
    let out = Command::new(l2fwd()).args(["--no-such-eal-option", "--", "-p", "0x3"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("l2fwd: EAL argument \"--no-such-eal-option\" is refused")
            && last.ends_with("dpdk::ALLOWED_EAL_OPTIONS"),
        "{stderr}"
    );
    // An allowed option with a value EAL refuses: EAL's own failure, in one line.
    let out = Command::new(l2fwd()).args(["-l", "999", "--no-pci", "--no-huge", "--", "-p", "0x3"]).output().unwrap();
    let last = String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or_default().to_string();
    assert!(!out.status.success() && last.starts_with("l2fwd: DPDK's EAL did not start: "), "{last}");
}

/// The outside review's attack, as a user of the API runs it: a shared object the program (or
/// anyone) wrote, named to EAL with `-d`, whose constructor would run in the process (as root).
/// Every option that loads or maps something is refused before EAL sees the arguments.
#[test]
fn an_eal_argument_that_loads_code_is_refused_before_eal_runs() {
    struct Scratch(std::path::PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let scratch = Scratch(std::env::temp_dir().join(format!("dpdk-test-eal-d-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).unwrap();
    let (source, object, marker) = (scratch.0.join("evil.c"), scratch.0.join("evil.so"), scratch.0.join("ran"));
    let code = format!(
        "#include <stdio.h>\n__attribute__((constructor)) static void f(void) {{ fclose(fopen(\"{}\", \"w\")); }}\n",
        marker.display()
    );
    std::fs::write(&source, code).unwrap();
    let built = Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&object).arg(&source).status().unwrap();
    assert!(built.success(), "compiling the test's shared object");
    let object = object.display().to_string();
    let attached = format!("-d{object}");
    for load in [vec!["-d", object.as_str()], vec![attached.as_str()]] {
        let out = Command::new(l2fwd())
            .args(["-l", "0", "--no-pci", "--no-huge", "-m", "128", "--no-shconf"])
            .args(&load)
            .args(["--vdev", "net_null0", "--", "-p", "0x1"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{load:?}: refused");
        assert!(stderr.lines().last().unwrap_or_default().contains("is refused"), "{load:?}:\n{stderr}");
        assert!(!marker.exists(), "{load:?}: the shared object's constructor ran");
    }
}
