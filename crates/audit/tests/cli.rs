//! `safenic-audit` refuses bad input in one line, naming what is wrong, with a failure.

use std::process::Command;

fn audit(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_safenic-audit")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_input_is_refused_in_one_line() {
    for (args, names) in [
        (&["--binary", "/nonexistent/safenic"][..], "/nonexistent/safenic"),
        (&["vet", "--root", "/nonexistent"], "/nonexistent"),
        (&["jit", "--root", "/nonexistent"], "/nonexistent"),
        (&["--frobnicate"], "--frobnicate"),
    ] {
        let (ok, err) = audit(args);
        assert!(!ok, "{args:?} fails");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(names), "{args:?}: names {names}: {err}");
    }
}
