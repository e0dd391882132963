//! The audit of Ada code: a fixture built with GNAT's checks on (as the Ada driver is) must
//! show its range check and its validity check, each at its source line, and nothing in the
//! procedure whose index is proven; Ada's unsafe features outside a Platform package, and checks turned off,
//! fail the budget. Needs GNAT (scripts/setup installs it; make test runs it).

use audit::ada_features::ada_budget;
use audit::elf::Binary;
use audit::hot_paths::{audit_hot_paths, CheckKind};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ada")
}

/// A scratch directory under the target directory, removed when dropped.
struct Scratch(PathBuf);
impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("audit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn ada_checks_are_found_at_their_source_lines_and_a_proven_index_has_none() {
    let out = Scratch::new("ada-fixture");
    let built = Command::new("gnatmake")
        .args(["-q", "-O2", "-g", "-gnato", "-gnata", "-D"])
        .arg(&out.0)
        .arg(format!("-aI{}", fixture_dir().display()))
        .arg(fixture_dir().join("main.adb"))
        .arg("-o")
        .arg(out.0.join("main"))
        .current_dir(&out.0)
        .output()
        .expect("running gnatmake: install GNAT with scripts/setup (make test does)");
    assert!(built.status.success(), "gnatmake failed on the fixture: {}", String::from_utf8_lossy(&built.stderr));
    let exe = out.0.join("main");
    let binary = Binary::read(&exe).unwrap();

    let text = std::fs::read_to_string(fixture_dir().join("fixture.adb")).unwrap();
    for (procedure, marker) in [("fixture__store_checked", "-- RANGE"), ("fixture__store_unvalidated", "-- VALIDITY")] {
        let reports = audit_hot_paths(&exe, &binary, &[procedure.into()], &[]).unwrap();
        let checks: Vec<_> = reports.iter().flat_map(|r| &r.checks).collect();
        let line = text.lines().position(|l| l.contains(marker)).unwrap() + 1;
        let want = format!("crates/audit/tests/fixtures/ada/fixture.adb:{line}");
        assert!(
            checks
                .iter()
                .any(|c| c.kind == CheckKind::AdaCheck && c.callee.starts_with("__gnat_rcheck_") && c.source == want),
            "the audit must name GNAT's check in {procedure} at {want}: {checks:#?}"
        );
    }

    let reports = audit_hot_paths(&exe, &binary, &["fixture__store_proven".into()], &[]).unwrap();
    assert!(reports.iter().all(|r| r.checks.is_empty()), "{reports:#?}");
}

#[test]
fn unsafe_ada_outside_the_platform_packages_and_checks_turned_off_fail_the_budget() {
    let root = Scratch::new("ada-budget");
    let src = root.0.join("drivers/x/src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("platform-os.ads"),
        "package Platform.Os is\n   function F return Integer with Import;\nend Platform.Os;\n",
    )
    .unwrap();
    std::fs::write(src.join("ring.adb"), "package body Ring is\n   -- Unchecked_Conversion in a comment is fine\n   function C is new Ada.Unchecked_Conversion (A, B);\nend Ring;\n").unwrap();
    std::fs::write(
        root.0.join("drivers/x/x.gpr"),
        "project X is\n   for Default_Switches (\"Ada\") use (\"-O3\");\nend X;\n",
    )
    .unwrap();
    let sources = vec!["drivers/x/src".to_string()];
    let b = ada_budget(&root.0, "x", &sources).unwrap().unwrap();
    assert_eq!(b.not_allowed, ["drivers/x/src/ring.adb:3 Unchecked_Conversion"]);
    assert_eq!(b.total(), 2, "{b:#?}");
    assert!(b.checks_off.is_empty() && !b.passed());

    std::fs::write(src.join("ring.adb"), "package body Ring is\nend Ring;\n").unwrap();
    assert!(ada_budget(&root.0, "x", &sources).unwrap().unwrap().passed());
    std::fs::write(
        root.0.join("drivers/x/x.gpr"),
        "project X is\n   for Default_Switches (\"Ada\") use (\"-O3\", \"-gnatp\");\nend X;\n",
    )
    .unwrap();
    let b = ada_budget(&root.0, "x", &sources).unwrap().unwrap();
    assert_eq!(b.checks_off, ["drivers/x/x.gpr:2"]);
    assert!(!b.passed());
}
