//! The bench's results as Markdown: what `safenic bench` prints and writes to `results.md`.

use bench::results::{Ratio, Results, Row, Spread};

/// In how many repetitions both figures of ratio `x` (at 64 bytes) were set by the drivers or
/// the line rate, as `labels` gives what set them; of how many.
fn drivers_own(r: &Results, x: &Ratio, labels: fn(&Row) -> &[String]) -> (usize, usize) {
    let row = |driver: &str| r.rows.iter().find(|w| w.frame_size == 64 && w.model == x.model && w.driver == driver);
    let (Some(a), Some(b)) = (row(&x.driver), row(&x.baseline)) else { return (0, 0) };
    let own = |label: &String| label == "driver" || label == "line rate";
    let pairs = labels(a).iter().zip(labels(b));
    (pairs.clone().filter(|(p, q)| own(p) && own(q)).count(), pairs.count())
}

pub fn of(r: &Results) -> String {
    let mut t = format!(
        "Profile `{}`: {} repetitions. Every driver compiled for {} (Rust `-C target-cpu`, C \
         `-march`); host CPU: {}. nicsim's ceiling: {} Mpps into both receive rings (before and \
         after the drivers). RFC 2544 throughput: both directions at once, the highest rate with \
         {} loss, binary search over trials of {} s to within {}% of the line rate. Figures are \
         the median (range) over repetitions.\n\n",
        r.profile,
        r.repetitions,
        r.isa,
        r.host_cpu,
        r.nicsim_ceiling_mpps.show(2),
        if r.loss_tolerance == 0.0 { "zero".to_string() } else { format!("at most {}%", r.loss_tolerance * 100.0) },
        r.trial_seconds,
        r.resolution * 100.0,
    );
    t += &host_stalls(r);
    t += "NDR and PDR (FD.io CSIT's non-drop rate, zero loss, and partial drop rate, at most 0.5 % lost): \
          the same search, with a trial set aside and run again when every frame it lost beyond the \
          goal was dropped in a receive-tail stall that a host stall covered: kernel work or another task on \
          the driver's core, from the kernel's trace events, or a stall of nicsim's core (docs/results.md). \
          \"Zero loss, nothing set aside\" is RFC 2544's figure with every trial counted. \
          \"Limited by\" names what failed the lowest rate tried above the figure: the line rate, nicsim \
          (it fell behind in every try), the host (its stalls lost the frames of every try), an unseen \
          stall (every frame too many was dropped while the driver left its receive tail alone for 20 µs \
          or more, and no trace event or stall of nicsim's core covers it: the driver paused or the \
          hypervisor took its core; not a rate the driver fails to keep up with) or the driver (it lost \
          frames while it ran).\n\n";
    t += "| driver | model | NDR, Mpps (64 B) | PDR, Mpps | trials set aside (NDR, PDR) | zero loss, nothing set aside | limited by (NDR) | forwarded at line rate, Mpps | instructions/packet | estimated cycles/packet |\n";
    t += "|---|---|---|---|---|---|---|---|---|---|\n";
    for row in r.rows.iter().filter(|row| row.frame_size == 64) {
        let unsaturated = if row.saturated == Some(false) { " (not saturated)" } else { "" };
        let show = |s: &Option<Spread>| s.as_ref().map_or("–".into(), |s| format!("{}{unsaturated}", s.show(1)));
        let rate = |s: &Option<Spread>| s.as_ref().map_or("–".into(), |s| s.show(2));
        let counts = |v: &[Vec<bench::rfc2544::SetAside>]| v.iter().map(|x| x.len().to_string()).collect::<Vec<_>>();
        let cells = if row.searches.is_empty() {
            ["–".to_string(), "–".into(), "–".into(), "–".into(), "–".into(), "–".into()]
        } else {
            [
                format!("{} of {:.2}", rate(&row.ndr_mpps), row.line_rate_mpps),
                rate(&row.pdr_mpps),
                format!("{}; {}", counts(&row.ndr_set_aside).join(", "), counts(&row.pdr_set_aside).join(", ")),
                row.throughput_mpps.show(2),
                row.ndr_limited_by.join(", "),
                row.forwarded_at_line_rate_mpps.show(2),
            ]
        };
        t += &format!(
            "| {} | {} | {} | {} | {} |\n",
            row.driver,
            row.model,
            cells.join(" | "),
            show(&row.instructions_per_packet),
            show(&row.estimated_cycles_per_packet),
        );
    }
    t += &set_aside(r);
    if r.frame_sizes.len() > 1 {
        t += "\nRFC 2544 throughput at every frame size, Mpps (median; line rate in the header):\n\n";
        t += "| driver | model |";
        let mut rule = "|---|---|".to_string();
        for size in &r.frame_sizes {
            let line = r.rows.iter().find(|row| row.frame_size == *size).map_or(0.0, |row| row.line_rate_mpps);
            t += &format!(" {size} B ({line:.2}) |");
            rule += "---|";
        }
        t += &format!("\n{rule}\n");
        for row in r.rows.iter().filter(|row| row.frame_size == r.frame_sizes[0]) {
            t += &format!("| {} | {} |", row.driver, row.model);
            for size in &r.frame_sizes {
                let at =
                    r.rows.iter().find(|x| x.driver == row.driver && x.model == row.model && x.frame_size == *size);
                t += &at.map_or(" – |".to_string(), |x| format!(" {:.2} |", x.throughput_mpps.median));
            }
            t += "\n";
        }
    }
    if !r.ratios.is_empty() {
        t += "\nRatios inside each repetition (below 1: fewer than the baseline). An NDR or PDR ratio \
              counts every repetition; after it, in how many of them both figures were the drivers' own \
              (limited by the driver or the line rate, not by nicsim, the host or an unseen stall):\n\n";
        t += "| model | ratio | instructions/packet | estimated cycles/packet | NDR | PDR |\n|---|---|---|---|---|---|\n";
        for x in &r.ratios {
            let rate = |s: &Option<Spread>, labels: fn(&Row) -> &[String]| {
                s.as_ref().map_or("–".into(), |s| {
                    let (own, of) = drivers_own(r, x, labels);
                    format!("{}; {own} of {of} the drivers' own", s.show(3))
                })
            };
            t += &format!(
                "| {} | {} / {} | {} | {} | {} | {} |\n",
                x.model,
                x.driver,
                x.baseline,
                x.instructions.show(3),
                x.estimated_cycles.show(3),
                rate(&x.ndr, |row| &row.ndr_limited_by),
                rate(&x.pdr, |row| &row.pdr_limited_by)
            );
        }
    }
    if r.rows.iter().all(|row| row.searches.is_empty()) {
        t += &format!("\nEstimated cycles = {} (callgrind's events in the forwarding loop).\n", r.cycle_estimate);
        return t;
    }
    t += "\nLatency with 64-byte frames, generator to sink in nicsim, of the slower direction, at 10% to \
          100% of each driver's own NDR; µs, median over repetitions; of every frame, and (after the \
          slash) of the frames not in flight during a host stall:\n\n";
    t += "| driver | model | load | Mpps | p50 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|---|\n";
    for row in r.rows.iter().filter(|row| row.frame_size == 64 && !row.searches.is_empty()) {
        if row.latency.is_empty() {
            t += &format!("| {} | {} | – | no rate without loss | | | | |\n", row.driver, row.model);
        }
        for s in &row.latency {
            let all = [&s.p50_ns, &s.p99_ns, &s.p999_ns, &s.max_ns];
            let cells: Vec<String> = (0..4)
                .map(|k| {
                    let us = |x: &Spread| format!("{:.2}", x.median / 1e3);
                    // Below the slow frames nicsim keeps, a percentile is known only to be at most that.
                    let bound = |x: &Spread| {
                        let slow = bench::attribution::SLOW_FRAME_NS as f64;
                        if x.median == slow {
                            format!("≤ {:.2}", slow / 1e3)
                        } else {
                            us(x)
                        }
                    };
                    match &s.outside_host_stalls {
                        Some(outside) => format!("{} / {}", us(all[k]), bound(&outside[k])),
                        None => us(all[k]),
                    }
                })
                .collect();
            t += &format!(
                "| {} | {} | {}% | {:.2} | {} |\n",
                row.driver,
                row.model,
                s.percent,
                s.rate_mpps.median,
                cells.join(" | ")
            );
        }
    }
    t += &format!("\nEstimated cycles = {} (callgrind's events in the forwarding loop).\n", r.cycle_estimate);
    t
}

/// Why trials were set aside: per row, how many and the first reason.
fn set_aside(r: &Results) -> String {
    let mut t = String::new();
    for row in r.rows.iter().filter(|row| row.frame_size == 64) {
        let all: Vec<_> = row.ndr_set_aside.iter().chain(&row.pdr_set_aside).flatten().collect();
        if let Some(first) = all.first() {
            t += &format!(
                "- {} {}: {} trials set aside; the first at {:.2} Mpps: {}.\n",
                row.driver,
                row.model,
                all.len(),
                first.rate_pps / 1e6,
                first.reason
            );
        }
    }
    if t.is_empty() {
        "\nNo trial was set aside.\n".into()
    } else {
        format!("\nTrials set aside as host stalls (counted once per goal):\n\n{t}")
    }
}

/// The host's own stalls on the bench's cores, before and after the drivers: a throughput or
/// latency figure can be no better than the host lets a polling core be.
fn host_stalls(r: &Results) -> String {
    let s = &r.host_stalls;
    if s.before.is_empty() && s.after.is_empty() {
        return String::new();
    }
    let lines = |cores: &[bench::host::CoreStalls]| cores.iter().map(|c| c.line()).collect::<Vec<_>>().join("; ");
    format!(
        "The host's own stalls on these cores (a pinned thread reading the clock in a loop, gaps over \
         20 µs recorded, {} s each): before the drivers {}; after them {}.\n\n",
        s.before.first().map_or(0.0, |c| c.seconds),
        lines(&s.before),
        lines(&s.after)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_ratio_says_in_how_many_repetitions_both_figures_were_the_drivers_own() {
        let committed = include_str!("../../../../docs/bench/results.json");
        let mut r: Results = serde_json::from_str(committed).unwrap();
        let labels = |names: [&str; 3]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        for row in r.rows.iter_mut().filter(|w| w.frame_size == 64 && w.model == "const") {
            match row.driver.as_str() {
                "rust" => {
                    row.ndr_limited_by = labels(["driver", "unseen stall", "line rate"]);
                    row.pdr_limited_by = labels(["nicsim", "host", "unseen stall"]);
                }
                "c-gcc" => {
                    row.ndr_limited_by = labels(["driver", "driver", "driver"]);
                    row.pdr_limited_by = labels(["driver", "driver", "line rate"]);
                }
                _ => {}
            }
        }
        let text = of(&r);
        let line = text.lines().find(|l| l.starts_with("| const | rust / c-gcc |")).unwrap();
        let cells: Vec<&str> = line.split(" | ").collect();
        assert!(cells[4].ends_with("; 2 of 3 the drivers' own"), "{line}");
        assert!(cells[5].ends_with("; 0 of 3 the drivers' own |"), "{line}");
    }
}
