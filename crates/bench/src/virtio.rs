//! virtio-net in the bench (`safenic bench-virtio`, docs/virtio.md): instructions and estimated
//! cycles per forwarded packet of the Rust virtio driver (through each interface) and of the C
//! baseline's, which has the same algorithm on the legacy interface. Each runs under callgrind
//! between nicsim's two virtio-net functions with both generators offering line rate, counted
//! inside its loop `forward_virtio` only, in rounds that interleave the drivers.

use crate::{count_instructions, Counting, Driver, Harness, Instructions};
use nicsim::control::PortStats;
use nicsim::pciconfig::Kind;
use nicsim::session::SessionOptions;

/// One driver as the virtio bench runs it: the driver and what it is given after the ports.
#[derive(Debug, Clone)]
pub struct VirtioDriver {
    /// Name in reports, e.g. `rust-legacy`.
    pub name: String,
    pub driver: Driver,
    pub extra: Vec<String>,
}

/// What callgrind counted for one driver in one round.
#[derive(Debug, Clone)]
pub struct Measured {
    pub name: String,
    pub counted: Instructions,
}

/// A virtio port is lossless: instead of dropping, it holds the generator with XOFF whenever its
/// packet buffer passes the high-water mark. A slice in which it sent XOFF again is one in
/// which the driver, not nicsim, was the limit.
fn held_the_generator(a: &PortStats, b: &PortStats) -> bool {
    b.flow_control.xoff_sent > a.flow_control.xoff_sent
}

/// The drivers of the virtio bench, from `safenic bench`'s: the Rust driver through the modern
/// and the legacy interface, and the C baseline (clang and gcc) on the legacy interface.
pub fn drivers(bench_drivers: &[Driver]) -> Vec<VirtioDriver> {
    let mut out = Vec::new();
    for d in bench_drivers {
        let driver = Driver { hot_function: "*forward_virtio*".into(), ..d.clone() };
        match d.name.as_str() {
            "rust" => {
                out.push(VirtioDriver { name: "rust-modern".into(), driver: driver.clone(), extra: Vec::new() });
                let extra = vec!["--virtio-interface".to_string(), "legacy".to_string()];
                out.push(VirtioDriver { name: "rust-legacy".into(), driver, extra });
            }
            "c-clang" | "c-gcc" => out.push(VirtioDriver { name: d.name.clone(), driver, extra: Vec::new() }),
            _ => {}
        }
    }
    out
}

/// Instructions per packet of `d` in the flexible model between two virtio ports, under
/// callgrind for `seconds`; measured again (at most [`crate::rfc2544::TRIES`] runs) while the
/// driver was not the limit throughout.
pub fn instructions(d: &VirtioDriver, seconds: f64) -> Result<Instructions, String> {
    let opts = SessionOptions { devices: vec![Kind::VirtioNet], ..SessionOptions::default() };
    let session = Harness::start_with(&format!("{}-virtio-cg", d.name), opts)?;
    let how = Counting { mode: "flexible", extra: &d.extra, saturated: held_the_generator, vfio: None, flows: 1 };
    let (mut counted, _) = count_instructions(&session, &d.driver, &how, seconds)?;
    let mut runs = 1;
    while !counted.saturated && runs < crate::rfc2544::TRIES {
        eprintln!("bench: {} on virtio was not saturated under callgrind in run {runs}; measuring again", d.name);
        counted = count_instructions(&session, &d.driver, &how, seconds)?.0;
        runs += 1;
    }
    Ok(counted)
}

/// `rounds` rounds, each measuring every driver once, in turn.
pub fn run(drivers: &[VirtioDriver], seconds: f64, rounds: usize) -> Result<Vec<Vec<Measured>>, String> {
    (0..rounds)
        .map(|_| {
            drivers
                .iter()
                .map(|d| Ok(Measured { name: d.name.clone(), counted: instructions(d, seconds)? }))
                .collect::<Result<Vec<_>, String>>()
        })
        .collect()
}

fn median(v: Vec<f64>) -> f64 {
    crate::results::median(&v)
}

/// The pairs whose ratio the table gives: each Rust interface against each C build.
const PAIRS: [(&str, &str); 4] =
    [("rust-legacy", "c-clang"), ("rust-legacy", "c-gcc"), ("rust-modern", "c-clang"), ("rust-modern", "c-gcc")];

/// The table of docs/results.md: each driver's median over the rounds, then each pair's ratio
/// of medians with the range of the per-round ratios.
pub fn markdown(rounds: &[Vec<Measured>], seconds: f64) -> String {
    let names: Vec<String> = rounds.first().map(|r| r.iter().map(|m| m.name.clone()).collect()).unwrap_or_default();
    let of = |name: &str, f: fn(&Instructions) -> f64| -> Vec<f64> {
        rounds.iter().filter_map(|r| r.iter().find(|m| m.name == name)).map(|m| f(&m.counted)).collect()
    };
    let mut s = format!(
        "Instructions and estimated cycles per forwarded packet between two virtio-net ports of nicsim, \
         each driver {seconds} s under callgrind per round, {} round(s) interleaving the drivers, counted \
         inside `forward_virtio` only (medians; a ratio's range is over the rounds). Both generators offer \
         line rate and the ports hold them with XOFF, so every burst is full.\n\n\
         | driver | interface | packets (last round) | Ir/packet | est. cycles/packet | driver the limit |\n\
         |---|---|---:|---:|---:|---|\n",
        rounds.len()
    );
    for name in &names {
        let last = rounds.last().and_then(|r| r.iter().find(|m| &m.name == name));
        let interface = if name == "rust-modern" { "modern" } else { "legacy" };
        let saturated = rounds.iter().flatten().filter(|m| &m.name == name).all(|m| m.counted.saturated);
        s += &format!(
            "| {name} | {interface} | {} | {:.2} | {:.2} | {} |\n",
            last.map_or(0, |m| m.counted.packets),
            median(of(name, Instructions::per_packet)),
            median(of(name, Instructions::cycles_per_packet)),
            if saturated { "yes" } else { "**no**: the figure may include idle polls" }
        );
    }
    for (rust, c) in PAIRS {
        if !names.iter().any(|n| n == rust) || !names.iter().any(|n| n == c) {
            continue;
        }
        let ratio = |f: fn(&Instructions) -> f64| {
            let (r, k) = (of(rust, f), of(c, f));
            let per_round: Vec<f64> = r.iter().zip(&k).map(|(a, b)| a / b).collect();
            let (lo, hi) = per_round.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            (median(r) / median(k), lo, hi)
        };
        let (ir, ir_lo, ir_hi) = ratio(Instructions::per_packet);
        let (cy, cy_lo, cy_hi) = ratio(Instructions::cycles_per_packet);
        s += &format!(
            "| **{rust} / {c}** | | | **{ir:.3}** ({ir_lo:.3}–{ir_hi:.3}) | **{cy:.3}** ({cy_lo:.3}–{cy_hi:.3}) | |\n"
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callgrind::Events;

    fn measured(name: &str, ir: u64, packets: u64) -> Measured {
        let counted = Instructions { events: Events { ir, ..Events::default() }, packets, saturated: true };
        Measured { name: name.into(), counted }
    }

    #[test]
    fn the_table_gives_medians_and_paired_ratios_with_their_range() {
        let rounds = vec![
            vec![measured("rust-legacy", 1000, 10), measured("c-clang", 1250, 10)],
            vec![measured("rust-legacy", 900, 10), measured("c-clang", 1000, 10)],
        ];
        let t = markdown(&rounds, 5.0);
        assert!(t.contains("| rust-legacy | legacy | 10 | 95.00 |"), "{t}");
        assert!(t.contains("| c-clang | legacy | 10 | 112.50 |"), "{t}");
        // Ratio of medians 95 / 112.5, per-round ratios 0.8 and 0.9.
        assert!(t.contains("**0.844** (0.800–0.900)"), "{t}");
        assert!(!t.contains("rust-modern / c-clang"), "no row for a driver not measured");
    }

    #[test]
    fn the_rust_driver_is_measured_through_both_interfaces_and_c_on_legacy() {
        let d = |name: &str| Driver::parse(&format!("{name}=x fwd")).unwrap();
        let v = drivers(&[d("rust"), d("c-clang"), d("ada")]);
        let names: Vec<&str> = v.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["rust-modern", "rust-legacy", "c-clang"]);
        assert_eq!(v[1].extra, ["--virtio-interface", "legacy"]);
        assert!(v.iter().all(|d| d.driver.hot_function == "*forward_virtio*"));
    }
}
