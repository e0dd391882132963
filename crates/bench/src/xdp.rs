//! AF_XDP in the bench (`safenic bench-xdp`, docs/afxdp.md): the Rust driver's flexible loop
//! over crates/afxdp beside the C baseline's over libxdp, between two veth pairs in network
//! namespaces of its own, in copy mode, each fed by `safenic gen` through AF_XDP on the far
//! end. Per driver and round: instructions and estimated cycles per forwarded packet under
//! callgrind (inside its loop only), then its rate on this host and the CPU time its process
//! spent per packet in user space and in the kernel (system calls: the copy-mode transmit path
//! runs in the driver's `sendto`), paired in one run.

use crate::callgrind::Events;
use crate::{Driver, Instructions};
use platform::Reaped;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The CPU of the driver under measure; the generators and the kernel's receive path share the
/// other.
pub const DRIVER_CPU: usize = 1;
pub const GENERATOR_CPU: usize = 0;

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("running ip (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// `ip netns exec NS cmd…`.
pub fn in_ns(ns: &str, cmd: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(cmd);
    c
}

/// Two outer namespaces (a, b), each with one end of a veth pair whose other end is in the
/// middle namespace (m), where a driver forwards between the two; static neighbours, no IPv6,
/// checksums computed by the stack. All removed when dropped.
pub struct Veths {
    /// a, b, m.
    pub ns: [String; 3],
    /// The ends in a and b.
    pub outer: [String; 2],
    /// The ends in m, the driver's ports.
    pub inner: [String; 2],
}

impl Drop for Veths {
    fn drop(&mut self) {
        // A namespace takes its veth ends, and their peers, with it.
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "delete", ns]).stderr(Stdio::null()).status();
        }
    }
}

/// Addresses in a subnet reserved for documentation (RFC 5737).
pub const ADDRESS: [&str; 2] = ["198.51.100.1", "198.51.100.2"];

/// The MAC address of outer end `i` (locally administered).
pub fn mac(i: usize) -> String {
    format!("02:00:5e:00:53:{:02x}", i + 1)
}

impl Veths {
    /// Namespaces and interfaces named after this process and `tag`.
    pub fn new(tag: &str) -> Result<Veths, String> {
        let id = std::process::id() % 100_000;
        let v = Veths {
            ns: ["a", "b", "m"].map(|s| format!("safenic-xdp-{tag}-{id}-{s}")),
            outer: [format!("sx{id}a0"), format!("sx{id}b0")],
            inner: [format!("sx{id}a1"), format!("sx{id}b1")],
        };
        for n in &v.ns {
            let _ = Command::new("ip").args(["netns", "delete", n]).stderr(Stdio::null()).status();
        }
        for n in &v.ns {
            ip(&["netns", "add", n])?;
            for key in ["all", "default"] {
                let sysctl = format!("net.ipv6.conf.{key}.disable_ipv6=1");
                let ok = in_ns(n, &["sysctl", "-qw", &sysctl]).status().is_ok_and(|s| s.success());
                ok.then_some(()).ok_or_else(|| format!("sysctl -w {sysctl} in {n}"))?;
            }
            ip(&["-n", n, "link", "set", "lo", "up"])?;
        }
        for i in 0..2 {
            let (o, n, m) = (&v.outer[i], &v.ns[i], &v.ns[2]);
            ip(&[
                "-n",
                n,
                "link",
                "add",
                o,
                "address",
                &mac(i),
                "type",
                "veth",
                "peer",
                "name",
                &v.inner[i],
                "netns",
                m,
            ])?;
            ip(&["-n", n, "addr", "add", &format!("{}/24", ADDRESS[i]), "dev", o])?;
            ip(&["-n", n, "neigh", "add", ADDRESS[1 - i], "lladdr", &mac(1 - i), "dev", o, "nud", "permanent"])?;
            // The stack leaves TCP and UDP checksums to a NIC that a veth does not have; an
            // AF_XDP socket gets the frame as it is, so the stack must fill them in itself.
            let off =
                in_ns(n, &["ethtool", "-K", o, "tx", "off"]).output().map_err(|e| format!("running ethtool: {e}"))?;
            if !off.status.success() {
                return Err(format!("ethtool -K {o} tx off: {}", String::from_utf8_lossy(&off.stderr).trim()));
            }
            ip(&["-n", n, "link", "set", o, "up"])?;
            ip(&["-n", m, "link", "set", &v.inner[i], "up"])?;
        }
        Ok(v)
    }

    /// Outer end `i`'s counters, as `ip -s link` has them: (packets sent, packets received).
    pub fn counters(&self, i: usize) -> Result<(u64, u64), String> {
        let out = Command::new("ip")
            .args(["-n", &self.ns[i], "-s", "-j", "link", "show", "dev", &self.outer[i]])
            .output()
            .map_err(|e| format!("running ip: {e}"))?;
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("ip -j's JSON: {e}"))?;
        let stats = &json[0]["stats64"];
        let get = |dir: &str| stats[dir]["packets"].as_u64().ok_or_else(|| format!("no {dir} packets in ip -s -j"));
        Ok((get("tx")?, get("rx")?))
    }

    /// The driver's two ports.
    pub fn ports(&self) -> [String; 2] {
        self.inner.clone().map(|i| format!("xdp:{i}"))
    }
}

/// What a run of the driver said: packets each way, seconds, and the kernel's receive-ring
/// overflows on each port (XDP_STATISTICS).
#[derive(Debug, Clone, Default)]
pub struct Said {
    pub packets: u64,
    pub seconds: f64,
    pub ring_full: [u64; 2],
}

/// The summary and port lines of a driver's standard output.
pub fn said(stdout: &str) -> Result<Said, String> {
    let summary = stdout
        .lines()
        .find(|l| l.contains(" fwd flexible: "))
        .ok_or_else(|| format!("no summary line in {stdout:?}"))?;
    let words: Vec<&str> = summary.split_whitespace().collect();
    let number = |w: &&str| w.parse::<f64>().ok();
    let packets: u64 = words.windows(2).filter(|w| w[1] == "packets,").filter_map(|w| w[0].parse::<u64>().ok()).sum();
    let seconds = words.windows(2).find(|w| w[1] == "s,").and_then(|w| number(&w[0])).unwrap_or(0.0);
    let full: Vec<u64> = stdout
        .lines()
        .filter(|l| l.starts_with("xdp:") && l.contains("kernel:"))
        .filter_map(|l| {
            let at = l.find(" receive ring full")?;
            l[..at].split_whitespace().last()?.parse().ok()
        })
        .collect();
    let ring_full = [full.first().copied().unwrap_or(0), full.get(1).copied().unwrap_or(0)];
    Ok(Said { packets, seconds, ring_full })
}

/// One driver as the AF_XDP bench runs it.
#[derive(Debug, Clone)]
pub struct XdpDriver {
    pub name: String,
    /// The command before the mode, as the manifest's (`{mode}` already replaced).
    pub command: Vec<String>,
    /// Its loop, for callgrind's `--toggle-collect`.
    pub hot_function: String,
}

/// The drivers of the AF_XDP bench, from `safenic bench`'s: Rust (its loop is the one
/// `forward_virtio` of every flexible pair but two 82599s) and the C baseline's builds.
pub fn drivers(bench_drivers: &[Driver]) -> Vec<XdpDriver> {
    bench_drivers
        .iter()
        .filter_map(|d| {
            let hot = match d.name.as_str() {
                "rust" => "*forward_virtio*",
                "c-clang" | "c-gcc" => "*forward_xdp*",
                _ => return None,
            };
            let command = d.command.iter().map(|w| w.replace("{mode}", "flexible")).collect();
            Some(XdpDriver { name: d.name.clone(), command, hot_function: hot.into() })
        })
        .collect()
}

/// `safenic gen xdp:OUTER` in each outer namespace on [`GENERATOR_CPU`], as fast as it goes.
fn generators(v: &Veths, safenic: &Path) -> Result<Vec<Reaped>, String> {
    (0..2)
        .map(|i| {
            let port = format!("xdp:{}", v.outer[i]);
            let cpu = GENERATOR_CPU.to_string();
            let safenic = safenic.display().to_string();
            Reaped::spawn(
                platform::process::die_with_parent(&mut in_ns(
                    &v.ns[i],
                    &["taskset", "-c", &cpu, &safenic, "gen", &port],
                ))
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
            )
            .map_err(|e| format!("starting safenic gen: {e}"))
        })
        .collect()
}

/// Starts `prefix… driver flexible xdp:a1 xdp:b1 --cpu 1 extra…` in the middle namespace,
/// its output piped.
fn spawn_driver(v: &Veths, d: &XdpDriver, prefix: &[String], extra: &[&str]) -> Result<Reaped, String> {
    let [a, b] = v.ports();
    let cpu = DRIVER_CPU.to_string();
    let mut words: Vec<&str> = prefix.iter().map(String::as_str).collect();
    words.extend(d.command.iter().map(String::as_str));
    words.extend(["flexible", &a, &b, "--cpu", &cpu]);
    words.extend(extra);
    Reaped::spawn(
        platform::process::die_with_parent(&mut in_ns(&v.ns[2], &words)).stdout(Stdio::piped()).stderr(Stdio::piped()),
    )
    .map_err(|e| format!("starting {}: {e}", d.name))
}

/// One driver in one round.
#[derive(Debug, Clone)]
pub struct Measured {
    pub name: String,
    pub counted: Instructions,
    /// Packets per second forwarded on this host, both directions together.
    pub mpps: f64,
    /// CPU time of the driver's process per forwarded packet, in user space and in the kernel.
    pub user_ns: f64,
    pub kernel_ns: f64,
}

/// Instructions per packet of `d` under callgrind for `seconds` (generators running).
fn instructions(v: &Veths, d: &XdpDriver, seconds: f64, out_dir: &Path) -> Result<Instructions, String> {
    let profile = out_dir.join(format!("callgrind.{}.{}", d.name, std::process::id()));
    let prefix: Vec<String> = [
        "valgrind",
        "--tool=callgrind",
        "--cache-sim=yes",
        "--branch-sim=yes",
        "--dump-instr=yes",
        &format!("--callgrind-out-file={}", profile.display()),
        &format!("--toggle-collect={}", d.hot_function),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let secs = format!("{seconds}");
    // The driver stops itself after `seconds`.
    let child = spawn_driver(v, d, &prefix, &["--seconds", &secs])?;
    let out = child
        .wait_for_exit(Duration::from_secs_f64(seconds * 3.0 + 120.0))
        .map_err(|e| format!("waiting for {}: {e}", d.name))?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return Err(format!("{} failed: {stdout} {}", d.name, String::from_utf8_lossy(&out.stderr)));
    }
    let said = said(&stdout)?;
    let text = std::fs::read_to_string(&profile).map_err(|e| format!("reading {}: {e}", profile.display()))?;
    let _ = std::fs::remove_file(&profile);
    let events = Events::parse(&text).ok_or_else(|| format!("no event totals in {}", profile.display()))?;
    // The kernel's receive rings overflowed on both ports: the driver, not the generators,
    // was the limit, so its polls found full batches.
    let saturated = said.ring_full.iter().all(|&n| n > 0);
    Ok(Instructions { events, packets: said.packets, saturated })
}

/// User and system CPU time of process `pid` so far, in seconds (`/proc/PID/stat`, in
/// USER_HZ = 100 ticks).
fn cpu_times(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the command's ')'.
    Some((fields.get(11)?.parse::<f64>().ok()? / 100.0, fields.get(12)?.parse::<f64>().ok()? / 100.0))
}

/// The rate of `d` on this host for `seconds`, and its CPU time per packet.
fn rate(v: &Veths, d: &XdpDriver, seconds: f64) -> Result<(f64, f64, f64), String> {
    let child = spawn_driver(v, d, &[], &[])?;
    let pid = child.id();
    let started = Instant::now();
    // Past its start-up.
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_times(pid).ok_or("the driver ended early")?;
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let after = cpu_times(pid).ok_or("the driver ended early")?;
    let out = child.terminate(Duration::from_secs(30)).map_err(|e| format!("stopping {}: {e}", d.name))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let s = said(&text)?;
    // Packets in the measured window, at the run's average rate (the start-up half second
    // and the stop are a small part of it).
    let total = started.elapsed().as_secs_f64().max(s.seconds).max(1e-9);
    let packets = (s.packets as f64 * seconds / total).max(1.0);
    let ns = |cpu: f64| cpu * 1e9 / packets;
    Ok((s.packets as f64 / s.seconds.max(1e-9) / 1e6, ns(after.0 - before.0), ns(after.1 - before.1)))
}

/// `rounds` rounds, each measuring every driver once under callgrind and once for its rate,
/// on fresh veths with the generators running.
pub fn run(
    drivers: &[XdpDriver],
    safenic: &Path,
    out_dir: &Path,
    callgrind_seconds: f64,
    rate_seconds: f64,
    rounds: usize,
) -> Result<Vec<Vec<Measured>>, String> {
    let v = Veths::new("bench")?;
    let _generators = generators(&v, safenic)?;
    std::thread::sleep(Duration::from_millis(500));
    (0..rounds)
        .map(|_| {
            drivers
                .iter()
                .map(|d| {
                    let counted = instructions(&v, d, callgrind_seconds, out_dir)?;
                    let (mpps, user_ns, kernel_ns) = rate(&v, d, rate_seconds)?;
                    Ok(Measured { name: d.name.clone(), counted, mpps, user_ns, kernel_ns })
                })
                .collect::<Result<Vec<_>, String>>()
        })
        .collect()
}

/// Where callgrind's profiles go meanwhile.
pub fn profile_dir() -> PathBuf {
    std::env::temp_dir()
}

fn median(v: Vec<f64>) -> f64 {
    crate::results::median(&v)
}

/// The table of docs/results.md: each driver's medians, then Rust against each C build.
pub fn markdown(rounds: &[Vec<Measured>], callgrind_seconds: f64, rate_seconds: f64) -> String {
    let names: Vec<String> = rounds.first().map(|r| r.iter().map(|m| m.name.clone()).collect()).unwrap_or_default();
    let of = |name: &str, f: &dyn Fn(&Measured) -> f64| -> Vec<f64> {
        rounds.iter().filter_map(|r| r.iter().find(|m| m.name == name)).map(f).collect()
    };
    let mut s = format!(
        "AF_XDP in copy mode between two veth pairs, each fed by `safenic gen` through AF_XDP on its \
         far end, {} round(s) interleaving the drivers (medians; a ratio's range is over the rounds). \
         Instructions and estimated cycles per forwarded packet inside the loop only, {callgrind_seconds} s \
         under callgrind each; then the rate on this host for {rate_seconds} s, driver on CPU {DRIVER_CPU}, \
         both generators and the kernel's receive path on CPU {GENERATOR_CPU}, and the CPU time of the \
         driver's process per packet, in user space and in the kernel (its `sendto` runs the copy-mode \
         transmit path).\n\n\
         | driver | packets (last round) | Ir/packet | est. cycles/packet | driver the limit | Mpps (this host) | user ns/packet | kernel ns/packet |\n\
         |---|---:|---:|---:|---|---:|---:|---:|\n",
        rounds.len()
    );
    for name in &names {
        let last = rounds.last().and_then(|r| r.iter().find(|m| &m.name == name));
        let saturated = rounds.iter().flatten().filter(|m| &m.name == name).all(|m| m.counted.saturated);
        s += &format!(
            "| {name} | {} | {:.2} | {:.2} | {} | {:.3} | {:.0} | {:.0} |\n",
            last.map_or(0, |m| m.counted.packets),
            median(of(name, &|m| m.counted.per_packet())),
            median(of(name, &|m| m.counted.cycles_per_packet())),
            if saturated { "yes" } else { "**no**: the figure may include idle polls" },
            median(of(name, &|m| m.mpps)),
            median(of(name, &|m| m.user_ns)),
            median(of(name, &|m| m.kernel_ns)),
        );
    }
    for c in ["c-clang", "c-gcc"] {
        if !names.iter().any(|n| n == "rust") || !names.iter().any(|n| n == c) {
            continue;
        }
        let ratio = |f: &dyn Fn(&Measured) -> f64| -> (f64, f64, f64) {
            let per: Vec<f64> = rounds
                .iter()
                .filter_map(|r| {
                    let a = r.iter().find(|m| m.name == "rust")?;
                    let b = r.iter().find(|m| m.name == c)?;
                    Some(f(a) / f(b).max(1e-9))
                })
                .collect();
            let lo = per.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = per.iter().copied().fold(0.0, f64::max);
            (median(of("rust", f)) / median(of(c, f)).max(1e-9), lo, hi)
        };
        let (ir, ir_lo, ir_hi) = ratio(&|m| m.counted.per_packet());
        let (cy, cy_lo, cy_hi) = ratio(&|m| m.counted.cycles_per_packet());
        let (pps, pps_lo, pps_hi) = ratio(&|m| m.mpps);
        s += &format!(
            "\nRust / {c}: instructions {ir:.3} ({ir_lo:.3}–{ir_hi:.3}), estimated cycles {cy:.3} \
             ({cy_lo:.3}–{cy_hi:.3}), packets per second {pps:.3} ({pps_lo:.3}–{pps_hi:.3}).\n"
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drivers_output_gives_its_packets_seconds_and_ring_overflows() {
        let out = "xdp:a1@0: copy mode, native XDP: forwarding\n\
                   xdp:b1@0: copy mode, native XDP: forwarding\n\
                   xdp:a1@0: copy mode, native XDP; kernel: 3 dropped, 120 receive ring full, 3 fill ring empty, 0 invalid receive and 0 invalid transmit descriptors\n\
                   xdp:b1@0: copy mode, native XDP; kernel: 0 dropped, 7 receive ring full, 0 fill ring empty, 0 invalid receive and 0 invalid transmit descriptors\n\
                   safenic fwd flexible: xdp:a1 -> xdp:b1 1000 packets, xdp:b1 -> xdp:a1 234 packets, 2.5 s, 0.494 Mpps, 0 malformed, 0 dropped (AF_XDP)\n";
        let s = said(out).unwrap();
        assert_eq!((s.packets, s.ring_full), (1234, [120, 7]));
        assert!((s.seconds - 2.5).abs() < 1e-9);
        assert!(said("nothing").is_err());
    }
}
