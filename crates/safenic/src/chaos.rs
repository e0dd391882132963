//! `safenic chaos`: drivers of the manifest in every model against each kind of hostile
//! device fault (see `bench::chaos`), as a table of verdicts. `make chaos-report` writes it
//! into docs/results.md.

use bench::chaos::{campaign, Dose, Kind, Outcome, Verdict};
use bench::Driver;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::PathBuf;

/// Where `--splice` puts the table.
pub const SPLICE_BEGIN: &str = "<!-- safenic chaos: begin -->";
pub const SPLICE_END: &str = "<!-- safenic chaos: end -->";

pub struct Options {
    /// Manifest drivers to run (default: every one with `conformance = true`).
    pub only: Vec<String>,
    pub modes: Vec<&'static str>,
    pub dose: Dose,
    pub out: Option<PathBuf>,
    pub splice: Option<PathBuf>,
}

/// One driver in one model, every kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Column {
    pub driver: String,
    pub mode: String,
    pub outcomes: Vec<Outcome>,
}

pub fn run(o: &Options) -> Result<(), String> {
    platform::signals::install_termination_flag().map_err(|e| format!("installing signal handlers: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let root = manifest::repository_of(&exe).unwrap_or_else(|| PathBuf::from("."));
    let m = manifest::Manifest::load(&root)?;
    let drivers: Vec<Driver> = m
        .drivers
        .iter()
        .filter(|d| if o.only.is_empty() { d.conformance } else { o.only.contains(&d.name) })
        .map(|d| Driver {
            name: d.name.clone(),
            command: d.command_words(&root, &exe),
            hot_function: String::new(),
            perf_map: d.perf_map,
        })
        .collect();
    if let Some(unknown) = o.only.iter().find(|n| !drivers.iter().any(|d| &d.name == *n)) {
        return Err(format!("--only {unknown}: no such driver in {}", manifest::MANIFEST));
    }
    let mut columns = Vec::new();
    for d in &drivers {
        for &mode in &o.modes {
            let _ = cli::outln!("{} {mode}: {} kinds of fault…", d.name, Kind::ALL.len());
            let outcomes = campaign(d, mode, &Kind::ALL, o.dose)?;
            for x in &outcomes {
                let _ = cli::outln!("  {}: {} ({} injected): {}", x.kind, x.verdict, x.injected, x.detail);
            }
            if let Some(x) = outcomes.last() {
                let _ = cli::outln!("  driver's last summary: {}", x.summary);
            }
            columns.push(Column { driver: d.name.clone(), mode: mode.into(), outcomes });
        }
    }
    let table = markdown(&columns, o.dose);
    cli::outln!("\n{table}")?;
    if let Some(dir) = &o.out {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let json = serde_json::to_string_pretty(&columns).map_err(|e| e.to_string())?;
        let file = dir.join("chaos.json");
        std::fs::write(&file, json).map_err(|e| format!("writing {}: {e}", file.display()))?;
    }
    if let Some(file) = &o.splice {
        crate::report::splice_file(file, (SPLICE_BEGIN, SPLICE_END), &table)?;
    }
    Ok(())
}

/// The table: a row per kind of fault, a column per driver and model; each cell the verdict
/// and how many faults were injected. Then what every verdict other than the expected one
/// rests on.
pub fn markdown(columns: &[Column], dose: Dose) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Faults per port: {} hostile write-backs; wire faults hit 5% of {} frames; seed {}. \
         Cells: verdict (faults injected, both ports).\n",
        dose.write_backs_per_port, dose.wire_frames, dose.seed
    );
    let head: Vec<String> = columns.iter().map(|c| format!("{} {}", c.driver, c.mode)).collect();
    let _ = writeln!(t, "| fault | {} |", head.join(" | "));
    let _ = writeln!(t, "|---|{}", "---|".repeat(columns.len()));
    for kind in Kind::ALL {
        let cells: Vec<String> = columns
            .iter()
            .map(|c| match c.outcomes.iter().find(|x| x.kind == kind) {
                Some(x) if x.verdict == expected(kind) => format!("{} ({})", x.verdict, x.injected),
                Some(x) => format!("**{}** ({})", x.verdict, x.injected),
                None => "–".into(),
            })
            .collect();
        let _ = writeln!(t, "| {kind} | {} |", cells.join(" | "));
    }
    let mut notes = String::new();
    for c in columns {
        for x in c.outcomes.iter().filter(|x| x.verdict != expected(x.kind)) {
            let _ = writeln!(notes, "- {} {}, {}: {}", c.driver, c.mode, x.kind, x.detail);
        }
    }
    if !notes.is_empty() {
        let _ = write!(t, "\nWhere a driver neither survived nor exited cleanly, what was seen:\n\n{notes}");
    }
    t
}

/// What a driver should do under `kind`.
fn expected(kind: Kind) -> Verdict {
    if kind.ends_the_driver() {
        Verdict::CleanExit
    } else {
        Verdict::Survived
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(kind: Kind, verdict: Verdict) -> Outcome {
        Outcome { kind, verdict, injected: 3, detail: format!("why {kind}"), summary: String::new() }
    }

    #[test]
    fn the_table_has_a_row_per_kind_and_marks_what_the_issue_does_not_ask_for() {
        let columns = [Column {
            driver: "d".into(),
            mode: "const".into(),
            outcomes: vec![
                outcome(Kind::WriteBack, Verdict::Stalled),
                outcome(Kind::Stall, Verdict::Survived),
                outcome(Kind::Reset, Verdict::CleanExit),
            ],
        }];
        let t = markdown(&columns, Dose::TEST);
        assert!(t.contains("| fault | d const |"), "{t}");
        assert!(t.contains("| hostile write-backs | **stalled** (3) |"), "{t}");
        assert!(t.contains("| stall | survived (3) |") && t.contains("| surprise reset | clean exit (3) |"), "{t}");
        assert!(t.contains("| surprise removal | – |"), "a kind that did not run: {t}");
        assert_eq!(t.matches("\n| ").count(), 1 + Kind::ALL.len(), "header and one row per kind: {t}");
        assert!(t.contains("- d const, hostile write-backs: why hostile write-backs"), "{t}");
        assert!(!t.contains("why stall"), "expected verdicts need no note: {t}");
    }
}
