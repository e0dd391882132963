//! The tables `safenic bench-dpdk` prints and splices into docs/results.md.

use super::overload;
use super::{Instructions, Options, Report, BURST};

fn median(v: Vec<f64>) -> f64 {
    crate::results::median(&v)
}

impl Report {
    /// The tables of docs/results.md: instructions, then the overload test with each
    /// measure's median over the repetitions and the paired ratios' range.
    pub fn markdown(&self, o: &Options) -> String {
        let mut s = String::new();
        if !self.instructions.is_empty() {
            s += &self.instructions_table(o);
        }
        if !self.overload.is_empty() {
            s += &self.overload_table(o);
        }
        s
    }

    fn instructions_table(&self, o: &Options) -> String {
        let mut s = format!(
            "Instructions and estimated cycles per forwarded packet: each l2fwd {} s under callgrind, one lcore \
             forwarding both ports, counted inside its forwarding loop (\"all\": DPDK's driver and mbuf code \
             included; \"own\": the l2fwd binary's). On nicsim, both generators offer line rate, far more than \
             l2fwd forwards under valgrind, so every burst is full.\n\n\
             | device | l2fwd | packets | RX burst fill | Ir/packet, all | Ir/packet, own | est. cycles/packet |\n\
             |---|---|---:|---:|---:|---:|---:|\n",
            o.callgrind_seconds
        );
        for m in &self.instructions {
            s += &format!(
                "| {} | {} | {} | {:.1} | {:.2} | {:.2} | {:.2} |\n",
                m.device.name(),
                m.name,
                m.packets,
                m.burst_fill,
                m.per_packet(|m| m.all),
                m.per_packet(|m| m.own),
                m.per_packet(|m| m.cycles)
            );
        }
        for c in self.instructions.iter().filter(|m| m.name == "C") {
            for m in self.instructions.iter().filter(|m| m.name != "C" && m.device == c.device) {
                let r = |f: fn(&Instructions) -> u64| m.per_packet(f) / c.per_packet(f);
                s += &format!(
                    "| {} | **{} / C** | | | **{:.3}** | **{:.3}** | **{:.3}** |\n",
                    c.device.name(),
                    m.name,
                    r(|m| m.all),
                    r(|m| m.own),
                    r(|m| m.cycles)
                );
            }
        }
        s += &format!("\nEstimated cycles = {}.\n\n", crate::callgrind::ESTIMATE_FORMULA);
        s
    }

    fn overload_table(&self, o: &Options) -> String {
        let mut s = format!(
            "Overload test: {} trials of each l2fwd per device, alternating, each a {} s window after a {} s \
             warm-up; one lcore forwards both ports, both directions together; medians, and the range of the \
             paired Rust/C ratios. nicsim's columns are its own counters over the same window.\n\n\
             | device | l2fwd | forwarded, Mpps | RX burst fill | RX polls, M/s | TX dropped | nicsim offered, Mpps | \
             nicsim delivered, Mpps | nicsim missed |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
            o.repetitions,
            o.overload_seconds,
            overload::WARMUP.as_secs()
        );
        for (device, pairs) in &self.overload {
            for (name, rust) in [("Rust", true), ("C", false)] {
                let trials: Vec<&overload::Trial> = pairs.iter().map(|(r, c)| if rust { r } else { c }).collect();
                let med = |f: &dyn Fn(&overload::Trial) -> f64| median(trials.iter().map(|t| f(t)).collect());
                let nicsim = if trials.iter().all(|t| t.nicsim.is_some()) {
                    let w = |f: fn(&overload::NicsimWindow) -> f64| med(&|t| t.nicsim.as_ref().map_or(f64::NAN, f));
                    format!(
                        "{:.2} | {:.2} | {:.0}",
                        w(overload::NicsimWindow::offered_mpps),
                        w(overload::NicsimWindow::delivered_mpps),
                        w(|n| n.missed as f64)
                    )
                } else {
                    "unbounded | | ".to_string()
                };
                s += &format!(
                    "| {} | {name} | {:.2} | {:.1} | {:.2} | {:.2} % | {nicsim} |\n",
                    device.name(),
                    med(&overload::Trial::forwarded_mpps),
                    med(&overload::Trial::burst_fill),
                    med(&overload::Trial::polls_mps),
                    100.0 * med(&overload::Trial::tx_dropped),
                );
            }
            let ratios: Vec<f64> = pairs.iter().map(|(r, c)| r.forwarded_mpps() / c.forwarded_mpps()).collect();
            let (lo, hi) = ratios.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &r| (lo.min(r), hi.max(r)));
            // Mostly empty bursts: the device, not l2fwd, set the rate.
            let starved = pairs.iter().any(|(r, c)| r.burst_fill().min(c.burst_fill()) < BURST as f64 / 2.0);
            let label =
                if starved { " (not an overload: the bursts were mostly empty, the device set the rate)" } else { "" };
            s += &format!(
                "| {} | **Rust / C** | **{:.3}** ({lo:.3}–{hi:.3}){label} | | | | | | |\n",
                device.name(),
                median(ratios.clone())
            );
        }
        s
    }
}
