//! `safenic figures`: a bench run's figures and tables written again from its results.json,
//! with what set each figure named by the current rules from the run's own trial logs.

use platform::fs::ScratchDir;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn figures(results: &Path, dir: &Path, splice: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_safenic"))
        .arg("figures")
        .arg(results)
        .arg(dir)
        .arg("--splice")
        .arg(splice)
        .output()
        .unwrap()
}

#[test]
fn the_committed_run_is_written_again_with_its_unseen_stalls_named_and_no_figure_changed() {
    let scratch = ScratchDir::new("safenic-figures-test", "relabel").unwrap();
    let results = scratch.path().join("results.json");
    // As a run before the rule wrote it: every such figure the driver's.
    let committed = std::fs::read_to_string(repository().join("docs/bench/results.json")).unwrap();
    let unseen = committed.matches("\"unseen stall\"").count();
    assert!(unseen > 0, "the committed run names unseen stalls");
    std::fs::write(&results, committed.replace("\"unseen stall\"", "\"driver\"")).unwrap();
    let doc = scratch.path().join("doc.md");
    std::fs::write(&doc, "before\n<!-- safenic bench: begin -->\nold table\n<!-- safenic bench: end -->\nafter\n")
        .unwrap();

    let out = figures(&results, &scratch.path().join("figures"), &doc);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&doc).unwrap();
    assert!(text.starts_with("before\n") && text.ends_with("after\n") && !text.contains("old table"), "{text}");
    assert!(text.contains("| limited by (NDR) |") && text.contains("| unseen stall, "), "{text}");
    assert_eq!(std::fs::read_to_string(&results).unwrap(), committed, "the same labels as the committed run");
    let md = std::fs::read_to_string(scratch.path().join("results.md")).unwrap();
    assert!(text.contains(md.trim()), "results.md is the spliced table");
    assert!(scratch.path().join("figures").read_dir().unwrap().count() > 0);

    // Naming is a function of the logs: a second pass changes nothing, to the last bit.
    let first = std::fs::read(&results).unwrap();
    let out = figures(&results, &scratch.path().join("figures"), &doc);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&results).unwrap(), first);
    assert_eq!(std::fs::read_to_string(&doc).unwrap(), text);
}

#[test]
fn a_file_without_the_markers_is_refused_in_one_line_and_nothing_is_written() {
    let scratch = ScratchDir::new("safenic-figures-test", "refused").unwrap();
    let results = scratch.path().join("results.json");
    std::fs::copy(repository().join("docs/bench/results.json"), &results).unwrap();
    let before = std::fs::read(&results).unwrap();
    let doc = scratch.path().join("doc.md");
    std::fs::write(&doc, "no markers here\n").unwrap();

    let out = figures(&results, &scratch.path().join("figures"), &doc);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("markers") && stderr.contains("doc.md"), "{stderr}");
    assert_eq!(std::fs::read(&results).unwrap(), before);
    assert_eq!(std::fs::read_to_string(&doc).unwrap(), "no markers here\n");
    assert!(!scratch.path().join("results.md").exists() && !scratch.path().join("figures").exists());
}
