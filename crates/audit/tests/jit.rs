//! The audit's reading of JIT code, on a real .NET runtime: a fixture program
//! (tests/fixtures/csharp/Checks.cs) runs with its perf map on, and the audit reads its methods
//! from the process. The method whose index the JIT cannot prove must show its bounds check (a
//! call to libcoreclr's JIT_RngChkFail), the one whose index is the array's own must show none,
//! and the one that allocates an allocation. Needs .NET Core and Mono's compiler (scripts/setup
//! installs them; make test runs it).

use audit::hot_paths::CheckKind;
use audit::jit::{parse_perf_map, JitImage, LiveProcess};
use audit::jit_loops::walk;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory under the target directory (the runtime's TMPDIR), removed when dropped.
struct Scratch(PathBuf);
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The fixture's process, killed and reaped if the test ends before it does.
struct Fixture(Child);
impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_bounds_check_and_an_allocation_are_found_in_jit_code_and_a_proven_index_has_none() {
    let csharp = repository().join("drivers/csharp");
    let built = Command::new("make").arg("-sC").arg(&csharp).arg("audit-fixture").status().expect("running make");
    assert!(built.success(), "building the fixture failed: run scripts/setup (it installs mono-devel and .NET Core)");
    let tmp = Scratch(Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("audit-jit-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();
    let mut child = Fixture(
        Command::new(csharp.join("build/dotnet/dotnet"))
            .arg(csharp.join("build/dotnet/audit-fixture.dll"))
            .env("COMPlus_PerfMapEnabled", "1")
            .env("TMPDIR", &tmp.0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the fixture under .NET Core"),
    );
    let mut ready = String::new();
    BufReader::new(child.0.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    assert!(ready.starts_with("ready"), "the fixture said {ready:?}");

    let map = std::fs::read_to_string(tmp.0.join(format!("perf-{}.map", child.0.id()))).unwrap();
    let image = JitImage::new(parse_perf_map(&map), LiveProcess::open(child.0.id()).unwrap());
    let kinds = |method: &str| -> Vec<CheckKind> {
        let w = walk(&image, method, &[]).unwrap();
        w.functions.iter().flat_map(|(_, f, _)| f.checks.iter().map(|c| c.kind)).collect()
    };
    let checked = walk(&image, "Checks::Checked", &[]).unwrap();
    let check = &checked.functions[0].1.checks;
    assert_eq!(check.len(), 1, "{check:?}");
    assert_eq!(check[0].kind, CheckKind::BoundsCheck);
    assert!(check[0].callee.starts_with("JIT_RngChkFail@libcoreclr.so"), "{}", check[0].callee);
    assert!(check[0].source.starts_with("Checks::Checked+0x"), "{}", check[0].source);
    assert_eq!(kinds("Checks::Unchecked"), []);
    assert!(kinds("Checks::Allocates").contains(&CheckKind::Allocation), "{:?}", kinds("Checks::Allocates"));
    assert!(walk(&image, "Checks::Missing", &[]).is_err());

    // Its standard input closed, the fixture ends by itself.
    drop(child.0.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        match child.0.try_wait().unwrap() {
            Some(status) => break status,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            None => panic!("the fixture did not end within 30 s of its input closing"),
        }
    };
    assert!(status.success(), "{status:?}");
}
