//! Several queue pairs in the bench (`safenic bench-queues`, docs/results.md): instructions
//! and estimated cycles per forwarded packet of each driver and model with 1, 2, 4 and 16
//! queue pairs on one core, RSS spreading the generator's flows; how evenly those flows
//! spread; and what two cores forward, measured on a host whose second core nicsim's engine
//! also uses.

use crate::{count_instructions, rings_overflowed, Counting, Driver, Harness, Instructions, DRIVER_CPU, NICSIM_CPU};
use std::time::Duration;

/// Queue pairs per core the bench measures.
pub const QUEUES: [usize; 4] = [1, 2, 4, 16];
/// Flows of the generators: enough for every queue to see traffic at 16 queues.
pub const FLOWS: u32 = 1024;
/// The RSS key the drivers program (crates/ixgbe's `RSS_KEY`, drivers/c's `rss_key`): the
/// datasheet's verification key.
pub const KEY: [u8; 40] = nicsim::port::VERIFICATION_KEY;

/// Instructions per packet of `driver` in `mode` on `queues` queue pairs, one core, measured
/// again (at most [`crate::rfc2544::TRIES`] runs) while the driver was not the limit.
pub fn instructions(driver: &Driver, mode: &str, queues: usize, seconds: f64) -> Result<Instructions, String> {
    let session = Harness::start(&format!("{}-{mode}-q{queues}-cg", driver.name))?;
    let extra = ["--queues".to_string(), queues.to_string()];
    let how = Counting { mode, extra: &extra, saturated: rings_overflowed, vfio: None, flows: FLOWS };
    let (mut counted, _) = count_instructions(&session, driver, &how, seconds)?;
    let mut runs = 1;
    while !counted.saturated && runs < crate::rfc2544::TRIES {
        eprintln!("bench: {} {mode} on {queues} queues was not saturated in run {runs}; measuring again", driver.name);
        counted = count_instructions(&session, driver, &how, seconds)?.0;
        runs += 1;
    }
    Ok(counted)
}

/// One driver and model at every count of [`QUEUES`], in one round.
#[derive(Debug, Clone)]
pub struct Row {
    pub driver: String,
    pub mode: String,
    pub by_queues: Vec<Instructions>,
}

/// `rounds` rounds, each measuring every driver in every model of `modes` at every count of
/// [`QUEUES`].
pub fn run(drivers: &[Driver], modes: &[&str], seconds: f64, rounds: usize) -> Result<Vec<Vec<Row>>, String> {
    (0..rounds)
        .map(|_| {
            let mut round = Vec::new();
            for d in drivers {
                for &mode in modes {
                    let by_queues =
                        QUEUES.iter().map(|&q| instructions(d, mode, q, seconds)).collect::<Result<_, _>>()?;
                    round.push(Row { driver: d.name.clone(), mode: mode.to_string(), by_queues });
                }
            }
            Ok(round)
        })
        .collect()
}

/// Packets per second `driver` forwards in `mode` with `extra` arguments (where its threads
/// run), both generators at line rate with [`FLOWS`] flows, over `seconds` after a second of
/// warm-up; not under callgrind.
pub fn forwarding_rate(driver: &Driver, mode: &str, extra: &[String], seconds: f64) -> Result<f64, String> {
    let session = Harness::start(&format!("{}-{mode}-rate", driver.name))?;
    session.start_traffic(FLOWS)?;
    let mut child = session.spawn_with(&[], driver, mode, extra)?;
    session.wait_ready(&mut child, Duration::from_secs(60))?;
    crate::pause(Duration::from_secs(1))?;
    let before = session.stats()?;
    crate::pause(Duration::from_secs_f64(seconds))?;
    let after = session.stats()?;
    crate::terminate(child, Duration::from_secs(30))?;
    session.stop_traffic()?;
    Ok(crate::growth(&before, &after, |p| p.sink_packets) as f64 / seconds)
}

/// The forwarding rates of the two-core comparison: one queue pair on the driver's core, and
/// two queue pairs, one on each core (nicsim's engine's core included).
pub fn two_core_rates(driver: &Driver, mode: &str, seconds: f64) -> Result<(f64, f64), String> {
    let one = forwarding_rate(driver, mode, &[], seconds)?;
    let cores = format!("{DRIVER_CPU},{NICSIM_CPU}");
    let two = forwarding_rate(driver, mode, &["--queues".into(), "2".into(), "--cores".into(), cores], seconds)?;
    Ok((one, two))
}

/// Frames of each `nicsim bench-rx` run.
pub const NICSIM_FRAMES: u64 = 200_000;

/// nicsim's receive path per frame (`nicsim bench-rx` under callgrind, counting
/// `nicsim::rx_cost::deliver`): `queues` RX queues, RSS on if `rss`.
pub fn nicsim_rx_cost(nicsim: &std::path::Path, queues: usize, rss: bool) -> Result<Instructions, String> {
    let scratch = platform::fs::ScratchDir::new("safenic-bench", &format!("rx-cost-{queues}"))
        .map_err(|e| format!("making a scratch directory: {e}"))?;
    let out = scratch.path().join("callgrind.out");
    let mut cmd = std::process::Command::new("valgrind");
    cmd.args(["--tool=callgrind", "--cache-sim=yes", "--branch-sim=yes", "--toggle-collect=nicsim::rx_cost::deliver"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(nicsim)
        .args(["bench-rx", "--queues", &queues.to_string(), "--frames", &NICSIM_FRAMES.to_string()]);
    if rss {
        cmd.arg("--rss");
    }
    let done = cmd.output().map_err(|e| format!("running valgrind: {e} (scripts/setup installs it)"))?;
    let said = String::from_utf8_lossy(&done.stdout);
    let expected = format!("{NICSIM_FRAMES} of {NICSIM_FRAMES} frames");
    if !done.status.success() || !said.contains(&expected) {
        return Err(format!("nicsim bench-rx --queues {queues}: {said} {}", String::from_utf8_lossy(&done.stderr)));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    let events = crate::callgrind::Events::parse(&text).ok_or("no event totals in nicsim's profile")?;
    Ok(Instructions { events, packets: NICSIM_FRAMES, saturated: true })
}

/// nicsim's receive path at one queue without RSS, then with RSS at every count of [`QUEUES`].
pub fn nicsim_costs(nicsim: &std::path::Path) -> Result<Vec<(String, Instructions)>, String> {
    let mut rows = vec![("1 queue, RSS off".to_string(), nicsim_rx_cost(nicsim, 1, false)?)];
    for q in QUEUES {
        rows.push((format!("{q} queue(s), RSS on"), nicsim_rx_cost(nicsim, q, true)?));
    }
    Ok(rows)
}

/// The table of nicsim's receive path per frame, each row's ratio to one queue with RSS.
pub fn nicsim_table(rows: &[(String, Instructions)]) -> String {
    let mut s = format!(
        "nicsim's receive path per frame (`nicsim bench-rx`, {NICSIM_FRAMES} generated frames of {FLOWS} flows \
         into rings a driver keeps giving back, counted by callgrind in `nicsim::rx_cost::deliver`): \
         classification, the run of the frame's queue, the copy and the write-back.\n\n\
         | queues | Ir/frame | est. cycles/frame | Ir / 1 queue with RSS |\n|---|---:|---:|---:|\n"
    );
    let base = rows.get(1).map_or(1.0, |(_, i)| i.per_packet());
    for (name, i) in rows {
        s += &format!(
            "| {name} | {:.1} | {:.1} | {:.3} |\n",
            i.per_packet(),
            i.cycles_per_packet(),
            i.per_packet() / base
        );
    }
    s
}

/// The tables of docs/results.md: per driver and model, the median over the rounds of
/// instructions and estimated cycles per packet at each queue count, and each count's ratio
/// to one queue pair with the range of the per-round ratios; then how evenly the flows spread.
pub fn markdown(rounds: &[Vec<Row>], seconds: f64) -> String {
    let median = |v: Vec<f64>| crate::results::median(&v);
    let counts: Vec<String> = QUEUES.iter().map(|q| format!("{q} q")).collect();
    let mut s = format!(
        "Per forwarded packet, one core, {FLOWS} flows each way spread by RSS, each run {seconds} s under \
         callgrind counting inside the forwarding loop only, {} round(s) (medians; a ratio is to one queue \
         pair, its range over the rounds).\n\n| driver | model | measure | {} |\n|---|---|---|{}\n",
        rounds.len(),
        counts.join(" | "),
        "---:|".repeat(QUEUES.len())
    );
    let Some(first) = rounds.first() else { return s };
    for row in first {
        let all: Vec<&Row> =
            rounds.iter().filter_map(|r| r.iter().find(|x| x.driver == row.driver && x.mode == row.mode)).collect();
        for (name, f) in [
            ("Ir/packet", Instructions::per_packet as fn(&Instructions) -> f64),
            ("est. cycles", Instructions::cycles_per_packet),
        ] {
            let at = |k: usize| all.iter().map(|r| f(&r.by_queues[k])).collect::<Vec<f64>>();
            let one = at(0);
            let cells: Vec<String> = (0..QUEUES.len())
                .map(|k| {
                    let v = at(k);
                    if k == 0 {
                        return format!("{:.2}", median(v));
                    }
                    let per: Vec<f64> = v.iter().zip(&one).map(|(x, y)| x / y).collect();
                    let (lo, hi) = per.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                    format!("{:.2} (**{:.3}**, {lo:.3}–{hi:.3})", median(v.clone()), median(v) / median(one.clone()))
                })
                .collect();
            s += &format!("| {} | {} | {name} | {} |\n", row.driver, row.mode, cells.join(" | "));
        }
        let unsaturated = all.iter().any(|r| r.by_queues.iter().any(|i| !i.saturated));
        if unsaturated {
            s += &format!(
                "| {} | {} | **not saturated in every run**: a figure may include idle polls | |\n",
                row.driver, row.mode
            );
        }
    }
    s + "\n" + &spread_table()
}

/// How evenly the generator's flows spread: the busiest queue's share over an even one.
pub fn spread_table() -> String {
    // Toeplitz is linear in its input, so 2^k consecutive flows spread exactly evenly.
    let flows = [64u32, 100, 1000, 1024];
    let mut s = String::from(
        "How evenly RSS spreads the generator's flows (stream 0, the drivers' key and table): the busiest \
         queue's frames over an even share.\n\n| flows | 2 queues | 4 queues | 16 queues |\n|---:|---:|---:|---:|\n",
    );
    for f in flows {
        let cell = |q: usize| format!("{:.2}", crate::rss::imbalance(&KEY, 0, f, q));
        s += &format!("| {f} | {} | {} | {} |\n", cell(2), cell(4), cell(16));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callgrind::Events;

    fn counted(ir: u64, packets: u64) -> Instructions {
        Instructions { events: Events { ir, ..Events::default() }, packets, saturated: true }
    }

    #[test]
    fn the_table_gives_each_count_its_median_and_ratio_to_one_queue() {
        let row = |irs: [u64; 4]| Row {
            driver: "rust".into(),
            mode: "const".into(),
            by_queues: irs.iter().map(|&ir| counted(ir, 10)).collect(),
        };
        let t = markdown(&[vec![row([1000, 1010, 1020, 1100])], vec![row([1000, 990, 1020, 1100])]], 2.0);
        assert!(t.contains("| rust | const | Ir/packet | 100.00 | 100.00 (**1.000**, 0.990–1.010) |"), "{t}");
        assert!(t.contains("110.00 (**1.100**, 1.100–1.100) |"), "{t}");
        assert!(t.contains("| 1024 |"), "{t}");
    }
}
