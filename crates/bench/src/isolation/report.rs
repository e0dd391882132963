//! The isolation bench's tables.

use super::{Report, Row};
use std::fmt::Write;

/// Sandcrust's empty call and SDRaD-FFI's, as published (SecDev'23, Xeon Silver 4116).
const SANDCRUST_EMPTY_NS: f64 = 8671.0;
const SDRAD_FFI_EMPTY_NS: f64 = 177.2;
/// PKRU writes per call: SDRaD's enter and exit (four each, SecDev'23) and ours (trampoline.rs).
const SDRAD_PKRU_WRITES: u32 = 8;
const OUR_PKRU_WRITES: u32 = 2;

pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Per call, median of {} interleaved rounds ({}); in brackets each backend's time over the direct call's: median (minimum–maximum of the rounds).", r.rounds, r.cpu);
    if let Some((caller, helper)) = r.cpus {
        let _ = writeln!(s, "The caller runs on CPU {caller}, the process backend's helper on CPU {helper}: the MPK backend is compared with the direct call on CPU {caller}, the process backend with the direct call on CPU {helper}, where its work runs (the two CPUs of this VM are not equally fast at every moment).");
    }
    if !r.mpk_available {
        let _ = writeln!(s, "\nThis host has no PKU: the MPK column is empty; its time needs a host with PKU (its tests run in a guest, make test-mpk).");
    }
    let helper = r.cpus.map_or("the same CPU".to_string(), |(_, h)| format!("CPU {h}"));
    let _ = writeln!(s, "\n| workload | direct | MPK | direct on {helper} | process |\n|---|---:|---:|---:|---:|");
    for row in &r.rows {
        let place = if row.in_place { " ¹" } else { "" };
        let basis = time(row.direct_helper_cpu_ns.unwrap_or(row.direct_ns));
        let (name, direct, mpk, process) =
            (&row.name, time(row.direct_ns), mpk(row), with_ratio(row.process_ns, row.process_ratio));
        let _ = writeln!(s, "| {name}{place} | {direct} | {mpk} | {basis} | {process} |");
    }
    let _ = writeln!(s, "\n¹ The input placed once in the domain's input area (`Domain::input_area`, no copy per call); the other rows copy it in with every call (`Domain::call`). The output is read where the domain wrote it, in every row.");
    let _ = writeln!(s, "\nA violation, from the faulting call to a domain ready for the next one (the fault, the discard, the re-creation), median:\n");
    for (backend, ns, calls) in &r.recovery {
        let how = match backend {
            isolation::Backend::Mpk => "rewind, library data written back from its snapshot, heap and stack dropped",
            _ => "helper killed, reaped and started again (the program re-executed, the library loaded)",
        };
        let _ = writeln!(
            s,
            "- {backend}: {} over {calls} null calls ({how}); SDRaD measured 3.4–3.5 µs for its rewind.",
            time(*ns)
        );
    }
    let _ = writeln!(s, "\nGoals (docs/isolation.md):");
    if let Some(empty) = r.rows.iter().find(|w| w.name == "empty call") {
        let goal = SANDCRUST_EMPTY_NS / 4.0;
        let _ = writeln!(
            s,
            "- process backend's empty call ≤ ¼ of Sandcrust's {:.2} µs = {:.2} µs: {} ({}).",
            SANDCRUST_EMPTY_NS / 1000.0,
            goal / 1000.0,
            time(empty.process_ns),
            verdict(empty.process_ns <= goal)
        );
        if let Some(m) = empty.mpk_ns {
            let _ = writeln!(
                s,
                "- MPK backend's empty call: {} (SDRaD-FFI published {SDRAD_FFI_EMPTY_NS} ns on its machine).",
                time(m)
            );
        }
    }
    let big_png: Vec<&Row> = r.rows.iter().filter(|w| w.name.starts_with("libpng") && w.bytes >= 64 * 1024).collect();
    for (label, overhead) in [
        ("process", big_png.iter().map(|w| w.process_ratio.0).fold(0.0, f64::max)),
        ("MPK", big_png.iter().filter_map(|w| w.mpk_ratio.map(|m| m.0)).fold(0.0, f64::max)),
    ] {
        if overhead > 0.0 {
            let pct = (overhead - 1.0) * 100.0;
            let _ = writeln!(
                s,
                "- {label} backend on libpng decoding of 64 KB and more, ≤ 5 %: at most {pct:+.1} % ({}).",
                verdict(pct <= 5.0)
            );
        }
    }
    let _ = writeln!(
        s,
        "- MPK backend's PKRU writes per call ≤ SDRaD's {SDRAD_PKRU_WRITES}: {OUR_PKRU_WRITES}, one to enter and one to leave (met); a thread writes PKRU once more the first time it meets a domain."
    );
    s
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "not met"
    }
}

fn mpk(row: &Row) -> String {
    match (row.mpk_ns, row.mpk_ratio) {
        (Some(ns), Some(ratio)) => with_ratio(ns, ratio),
        _ => "needs PKU".into(),
    }
}

fn with_ratio(ns: f64, (median, min, max): (f64, f64, f64)) -> String {
    format!("{} ({median:.2}× ({min:.2}–{max:.2}))", time(ns))
}

fn time(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}
