//! The Rust l2fwd beside DPDK's C l2fwd, in one run: instructions and estimated cycles (the
//! bench's formula, `bench::callgrind`) per forwarded packet under callgrind, on DPDK's `net_null` devices (a pure CPU measure: the device makes and takes
//! frames, no wire, no nicsim), counted inside each l2fwd's forwarding loop only.
//!
//! `l2fwd_bench --rust PATH --c PATH [--seconds N]` (`make bench-dpdk` runs it)
//!
//! Packets: net_null answers every receive burst with a full one (32 frames) while its pool
//! has mbufs, so packets = 32 × the calls of net_null's receive function, which is what the
//! Rust l2fwd's `safenic_rx_burst` calls; the Rust l2fwd's own count at exit checks that rule.

#![forbid(unsafe_code)]

mod callgrind;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

const BURST: u64 = 32;
const EAL: [&str; 11] =
    ["-l", "0", "--no-pci", "--no-huge", "-m", "512", "--no-shconf", "--vdev", "net_null0", "--vdev", "net_null1"];
const APP: [&str; 7] = ["--", "-p", "0x3", "-q", "2", "-T", "0"];

struct Measured {
    packets: u64,
    /// Estimated cycles of the whole loop ([`bench::callgrind::ESTIMATE_FORMULA`]).
    cycles: u64,
    /// Every instruction of the forwarding loop, DPDK's driver and libraries included.
    all: u64,
    /// The l2fwd binary's own instructions in the loop.
    own: u64,
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("l2fwd_bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let rust = PathBuf::from(value("--rust").ok_or("--rust PATH: the Rust l2fwd")?);
    let c = PathBuf::from(value("--c").ok_or("--c PATH: DPDK's C l2fwd (scripts/build-dpdk-l2fwd)")?);
    let seconds: u64 =
        value("--seconds").map_or(Ok(20), |s| s.parse().map_err(|_| format!("--seconds {s}: a whole number")))?;

    // The Rust l2fwd with each crate for the Ethernet header, then DPDK's C l2fwd.
    let mut rows: Vec<(String, Measured)> = Vec::new();
    let mut rx = String::new();
    for headers in ["smoltcp", "etherparse"] {
        let (profile, out) = profile(&rust, "*forward_loop*", &["--headers", headers], seconds)?;
        // net_null's receive function: what the Rust l2fwd's shim calls to receive.
        rx = profile
            .calls
            .keys()
            .find(|(caller, _)| caller == "safenic_rx_burst")
            .map(|(_, callee)| callee.clone())
            .ok_or("no call from safenic_rx_burst in the Rust l2fwd's profile")?;
        let m = measure(&profile, &rx, &rust)?;
        let printed = total(&out, "Total packets received:").ok_or("the Rust l2fwd printed no totals")?;
        if printed != m.packets {
            return Err(format!(
                "the packet rule is off: 32 × receive calls = {}, the Rust l2fwd counted {printed}",
                m.packets
            ));
        }
        rows.push((format!("Rust, {headers}"), m));
    }
    let (c_profile, _) = profile(&c, "l2fwd_launch_one_lcore", &[], seconds)?;
    rows.push(("C".to_string(), measure(&c_profile, &rx, &c)?));

    println!("l2fwd on net_null, one lcore, both ports, callgrind ({seconds} s each):");
    println!(
        "{:<18} {:>12} {:>16} {:>16} {:>20}",
        "", "packets", "Ir/packet, all", "Ir/packet, own", "est. cycles/packet"
    );
    for (name, m) in &rows {
        let per = |ir: u64| ir as f64 / m.packets as f64;
        println!("{name:<18} {:>12} {:>16.2} {:>16.2} {:>20.2}", m.packets, per(m.all), per(m.own), per(m.cycles));
    }
    let c_m = &rows[rows.len() - 1].1;
    let per = |m: &Measured, f: fn(&Measured) -> u64| f(m) as f64 / m.packets as f64;
    for (name, m) in &rows[..rows.len() - 1] {
        println!(
            "{name} / C: {:.3} (all), {:.3} (own), {:.3} (estimated cycles)",
            per(m, |m| m.all) / per(c_m, |m| m.all),
            per(m, |m| m.own) / per(c_m, |m| m.own),
            per(m, |m| m.cycles) / per(c_m, |m| m.cycles),
        );
    }
    println!("estimated cycles = {}", bench::callgrind::ESTIMATE_FORMULA);
    Ok(())
}

/// Runs `binary` (with `extra` options) under callgrind for `seconds`, collecting inside `loop_fn` only, and stops
/// it with SIGINT as a user would; its profile and standard output.
fn profile(
    binary: &std::path::Path,
    loop_fn: &str,
    extra: &[&str],
    seconds: u64,
) -> Result<(callgrind::Profile, String), String> {
    let out_file = std::env::temp_dir().join(format!("l2fwd-bench-{}.callgrind", std::process::id()));
    let child = Command::new("valgrind")
        .args(["--tool=callgrind", "--cache-sim=yes", "--branch-sim=yes"])
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(format!("--toggle-collect={loop_fn}"))
        .arg(binary)
        .args(EAL)
        .args(APP)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("valgrind: {e} (scripts/setup installs it)"))?;
    std::thread::sleep(Duration::from_secs(seconds));
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "{} under callgrind: {}\n{}",
            binary.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = std::fs::read_to_string(&out_file).map_err(|e| format!("{}: {e}", out_file.display()))?;
    let _ = std::fs::remove_file(&out_file);
    let events = bench::callgrind::Events::parse(&text).ok_or("a callgrind file without totals")?;
    Ok((callgrind::parse(&text, events.estimated_cycles()), stdout))
}

fn measure(p: &callgrind::Profile, rx: &str, binary: &std::path::Path) -> Result<Measured, String> {
    let rx_calls: u64 = p.calls.iter().filter(|((_, callee), _)| callee == rx).map(|(_, n)| n).sum();
    let name = binary.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let own = p.ir_by_object.iter().filter(|(object, _)| object.ends_with(name)).map(|(_, ir)| ir).sum();
    if rx_calls == 0 {
        return Err(format!("{}: no receive burst in the collected part", binary.display()));
    }
    Ok(Measured { packets: BURST * rx_calls, cycles: p.cycles, all: p.total(), own })
}

/// `label   N` from l2fwd's statistics screen.
fn total(text: &str, label: &str) -> Option<u64> {
    text.lines().rev().find_map(|l| l.strip_prefix(label)).and_then(|v| v.trim().parse().ok())
}
