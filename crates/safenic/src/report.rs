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
            rows.push(Row { driver: d.name.clone(), mode: mode.clone(), throughput: None, instructions: None });
        }
    }
    // Every throughput window first, then every callgrind run: a throughput window measured
    // right after a callgrind run came out 30-60% low, whichever the driver.
    let find = |name: &str| o.drivers.iter().find(|d| d.name == name).expect("a row per driver");
    if o.throughput {
        // Model by model, so the drivers compared with each other are measured back to back:
        // this machine's speed drifts by up to 2x over minutes.
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&i| o.modes.iter().position(|m| *m == rows[i].mode));
        for i in order {
            let r = &mut rows[i];
            eprintln!("safenic bench: throughput of {} {}…", r.driver, r.mode);
            r.throughput = Some(bench::throughput(find(&r.driver), &r.mode, o.seconds)?);
        }
    }
    if o.instructions {
        for r in rows.iter_mut() {
            eprintln!("safenic bench: instructions of {} {} under callgrind…", r.driver, r.mode);
            r.instructions = Some(bench::instructions(find(&r.driver), &r.mode, o.callgrind_seconds)?);
        }
    }
    cli::outln!(
        "| driver | model | forwarded Mpps (64 B, both directions) | offered Mpps | no-descriptor Mpps | nicsim skipped Mpps | limited by | windows | instructions/packet (callgrind) | packets under callgrind |"
    )?;
    cli::outln!("|---|---|---|---|---|---|---|---|---|---|")?;
    let dash = || "–".to_string();
    for r in &rows {
        let (fwd, offered, nodesc, skipped, limit, windows) = match &r.throughput {
            Some(t) => (
                format!("{:.2}", t.forwarded_mpps),
                format!("{:.2}", t.offered_mpps),
                format!("{:.3}", t.no_descriptor_mpps),
                format!("{:.3}", t.skipped_mpps),
                t.limited_by.to_string(),
                t.windows.to_string(),
            ),
            None => (dash(), dash(), dash(), dash(), dash(), dash()),
        };
        let (ipp, packets) = match &r.instructions {
            Some(i) if i.saturated => (format!("{:.1}", i.per_packet()), i.packets.to_string()),
            // Idle polls are in the count: say so rather than print a misleading figure.
            Some(i) => (format!("{:.1} (not saturated)", i.per_packet()), i.packets.to_string()),
            None => (dash(), dash()),
        };
        cli::outln!(
            "| {} | {} | {fwd} | {offered} | {nodesc} | {skipped} | {limit} | {windows} | {ipp} | {packets} |",
            r.driver,
            r.mode
        )?;
    }
    Ok(())
}
