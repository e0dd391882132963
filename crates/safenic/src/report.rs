//! `safenic bench`: every driver and model measured on nicsim, printed as a Markdown table
//! (the form docs/results.md keeps).

use bench::{Driver, Instructions, Throughput};

pub struct Options {
    pub drivers: Vec<Driver>,
    pub modes: Vec<String>,
    pub seconds: f64,
    pub callgrind_seconds: f64,
    pub throughput: bool,
    pub instructions: bool,
}

struct Row {
    driver: String,
    mode: String,
    throughput: Option<Throughput>,
    instructions: Option<Instructions>,
}

pub fn run(o: &Options) -> Result<(), String> {
    let mut rows = Vec::new();
    for d in &o.drivers {
        for mode in &o.modes {
            eprintln!("safenic bench: {} {mode}…", d.name);
            let throughput = if o.throughput { Some(bench::throughput(d, mode, o.seconds)?) } else { None };
            let instructions =
                if o.instructions { Some(bench::instructions(d, mode, o.callgrind_seconds)?) } else { None };
            rows.push(Row { driver: d.name.clone(), mode: mode.clone(), throughput, instructions });
        }
    }
    println!(
        "| driver | model | forwarded Mpps (64 B, both directions) | offered Mpps | no-descriptor Mpps | limited by | instructions/packet (callgrind) | packets under callgrind |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let dash = || "–".to_string();
    for r in &rows {
        let (fwd, offered, nodesc, limit) = match &r.throughput {
            Some(t) => (
                format!("{:.2}", t.forwarded_mpps),
                format!("{:.2}", t.offered_mpps),
                format!("{:.3}", t.no_descriptor_mpps),
                t.limited_by.to_string(),
            ),
            None => (dash(), dash(), dash(), dash()),
        };
        let (ipp, packets) = match &r.instructions {
            Some(i) if i.saturated => (format!("{:.1}", i.per_packet()), i.packets.to_string()),
            // Idle polls are in the count: say so rather than print a misleading figure.
            Some(i) => (format!("{:.1} (not saturated)", i.per_packet()), i.packets.to_string()),
            None => (dash(), dash()),
        };
        println!("| {} | {} | {fwd} | {offered} | {nodesc} | {limit} | {ipp} | {packets} |", r.driver, r.mode);
    }
    Ok(())
}
