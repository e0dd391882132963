//! Bad input to any command, and a reader that goes away. Every subcommand of `safenic` and
//! `nicsim` given a bad value answers with one line on standard error that names what is
//! wrong, a non-zero status, no panic and no backtrace, before it touches a device. A command
//! whose standard output is closed by its reader (`| head`) ends quietly with status 0.
//! Needs root and hugepages for the cases that need a running nicsim (`make test` provides them).

use crate::common;

use common::{Sim, A, B, SAFENIC};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn nicsim() -> PathBuf {
    PathBuf::from(SAFENIC).with_file_name("nicsim")
}

fn join<'a>(first: &[&'a str], then: &[&'a str]) -> Vec<&'a str> {
    [first, then].concat()
}

/// Runs `program args` and checks the one-line error; returns it.
fn refused(program: &PathBuf, args: &[&str]) -> String {
    let out = Command::new(program)
        // A backtrace would show if anything panicked, whatever the caller's environment says.
        .env("RUST_BACKTRACE", "1")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let name = program.file_name().unwrap().to_string_lossy();
    let err = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
    let shown = format!("`{name} {}` said: {err}", args.join(" "));
    assert!(!out.status.success(), "{shown}: must fail");
    assert_eq!(err.lines().count(), 1, "{shown}: one line");
    assert!(err.starts_with(&format!("{name}: ")), "{shown}: names the program");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{shown}: no panic");
    assert!(out.stdout.is_empty(), "{shown}: nothing on standard output");
    err
}

#[test]
fn every_safenic_subcommand_refuses_bad_values_in_one_line() {
    let safenic = PathBuf::from(SAFENIC);
    let fwd = |extra: &[&'static str]| join(&["fwd", "restricted", A, B, "--sysfs", "/nonexistent"], extra);
    let table: Vec<(Vec<&str>, &str)> = vec![
        (fwd(&["--seconds", "nan"]), "--seconds"),
        (fwd(&["--seconds", "inf"]), "--seconds"),
        (fwd(&["--seconds=-1"]), "--seconds"),
        (fwd(&["--seconds", "0"]), "--seconds"),
        (fwd(&["--seconds", "soon"]), "--seconds"),
        (fwd(&["--outputs", "0"]), "1 to 64"),
        (fwd(&["--outputs", "65"]), "1 to 64"),
        (fwd(&["--link-timeout", "0"]), "0.1 to 600 seconds"),
        (fwd(&["--link-timeout", "ten"]), "0.1 to 600 seconds"),
        (fwd(&["--cpu=-1"]), "--cpu"),
        (fwd(&["--seconds", "-1"]), "-1"),
        (fwd(&["--mac-rewrite", "all"]), "--mac-rewrite"),
        (fwd(&["--bogus"]), "--bogus"),
        (vec!["fwd", "fast", A, B], "fast"),
        (vec!["fwd", "restricted", A], "<OUTPUT>"),
        (vec!["gen", A, "--rate", "nan"], "--rate"),
        (vec!["gen", A, "--rate", "0"], "--rate"),
        (vec!["gen", A, "--rate=-5"], "--rate"),
        (vec!["gen", A, "--rate", "inf"], "--rate"),
        (vec!["gen", A, "--size", "59"], "60 to 1514"),
        (vec!["gen", A, "--size", "1515"], "60 to 1514"),
        (vec!["gen", A, "--count", "0"], "--count"),
        (vec!["gen", A, "--count=-1"], "--count"),
        (vec!["gen", A, "--seconds", "nan"], "--seconds"),
        (vec!["gen", A, "--seconds=-1"], "--seconds"),
        (vec!["bench", "--trial-seconds", "nan"], "--trial-seconds"),
        (vec!["bench", "--trial-seconds", "0"], "--trial-seconds"),
        (vec!["bench", "--resolution", "0"], "above 0"),
        (vec!["bench", "--resolution", "101"], "0 to 100"),
        (vec!["bench", "--loss-tolerance=-1"], "--loss-tolerance"),
        (vec!["bench", "--loss-tolerance", "many"], "0 to 100"),
        (vec!["bench", "--profiles", "/tmp/x", "--throughput-only"], "--profiles"),
        (vec!["bench", "--splice", "README.md"], "--out"),
        (vec!["bench", "--out", "/tmp/x", "--splice", "/nonexistent/results.md"], "/nonexistent/results.md"),
        (vec!["bench", "--callgrind-seconds=-1"], "--callgrind-seconds"),
        (vec!["bench", "--modes", "fast"], "--modes"),
        (vec!["bench", "--driver", "no-command"], "NAME=COMMAND"),
        (vec!["bench", "--repetitions", "0"], "1 to 100"),
        (vec!["bench", "--profile", "slow"], "--profile"),
        (vec!["bench", "--throughput-only", "--out", "/tmp/x"], "--throughput-only"),
        (vec!["figures", "/nonexistent/results.json", "/tmp/x"], "/nonexistent/results.json"),
        (vec!["figures", "Cargo.toml", "/tmp/x"], "results.json written by safenic bench"),
        (vec!["chaos", "--seconds", "nan"], "--seconds"),
        (vec!["chaos", "--modes", "fast"], "--modes"),
        (vec!["chaos", "--only", "no-such-driver"], "no-such-driver"),
        (vec!["frobnicate"], "frobnicate"),
    ];
    for (args, names) in table {
        let err = refused(&safenic, &args);
        assert!(err.contains(names), "`safenic {}`: the error names {names}: {err}", args.join(" "));
    }
}

#[test]
fn every_nicsim_subcommand_refuses_bad_values_in_one_line() {
    let nicsim = nicsim();
    // Values checked as they are parsed, before any server is asked.
    let start = |extra: &[&'static str]| join(&["traffic", "start", "--port", "0"], extra);
    let table: Vec<(Vec<&str>, &str)> = vec![
        (vec!["serve", "--ports", "0"], "--ports"),
        (vec!["serve", "--ports", "17"], "1 to 16"),
        (vec!["serve", "--link-gbps", "nan"], "--link-gbps"),
        (vec!["serve", "--link-gbps", "0"], "--link-gbps"),
        (vec!["serve", "--link-gbps", "1e9"], "400"),
        (vec!["serve", "--cable", "zero-one"], "--cable"),
        (start(&["--rate", "200%"]), "at most 100%"),
        (start(&["--rate", "0%"]), "above 0%"),
        (start(&["--rate=-1%"]), "above 0%"),
        (start(&["--rate", "nan"]), "not a rate"),
        (start(&["--rate", "inf"]), "not a rate"),
        (start(&["--rate", "0.5pps"]), "at least 1 packet"),
        (start(&["--rate", "fast"]), "not a rate"),
        (start(&["--size", "59"]), "60 to 1514"),
        (start(&["--size-max", "9000"]), "60 to 1514"),
        (start(&["--flows", "0"]), "flows"),
        (start(&["--count", "0"]), "--count"),
        (start(&["--duration", "nan"]), "--duration"),
        (start(&["--duration=-1"]), "--duration"),
        (start(&["--duration", "inf"]), "--duration"),
        (vec!["traffic", "rate", "--port", "0", "--rate", "150%"], "at most 100%"),
        (vec!["stats", "--watch", "0"], "--watch"),
        (vec!["pcap", "--port", "0", "--count", "0"], "--count"),
        (vec!["reflect", A, B, "--seconds", "nan"], "--seconds"),
        (vec!["bench", "--seconds=-1"], "--seconds"),
        (vec!["bench", "--link-gbps", "nan"], "--link-gbps"),
        (vec!["fault", "stall"], "--port"),
        (vec!["fault", "--port", "0", "wire", "jitter"], "runt"),
        (vec!["fault", "--port", "0", "write-back", "--rate", "nan"], "--rate"),
        (vec!["fault", "--port", "0", "write-back", "--count", "0"], "--count"),
        (vec!["--root", "/nonexistent/nicsim", "stats"], "nicsim serve"),
        (vec!["--root", "/nonexistent/nicsim", "exec", "--", "true"], "nicsim serve"),
    ];
    for (args, names) in table {
        let err = refused(&nicsim, &args);
        assert!(err.contains(names), "`nicsim {}`: the error names {names}: {err}", args.join(" "));
    }
    // Values only the running server can judge: the line rate, the ports it has.
    let sim = Sim::start("bad-input");
    let root = sim.root.display().to_string();
    let at = |extra: &[&'static str]| join(&["--root", &root], extra);
    let served: Vec<(Vec<&str>, &str)> = vec![
        (at(&["traffic", "start", "--port", "0", "--rate", "1e30"]), "exceeds the line rate"),
        (at(&["traffic", "start", "--port", "0", "--rate", "20Mpps"]), "exceeds the line rate"),
        (at(&["traffic", "start", "--port", "9"]), "no port 9"),
        (at(&["traffic", "start", "--port", "0", "--size", "200", "--size-max", "100"]), "100"),
        (at(&["traffic", "start", "--port", "0", "--duration", "0.0001"]), "at least 1 ms"),
        (at(&["pcap", "--port", "0"]), "--file"),
        (at(&["fault", "--port", "9", "stall"]), "no port 9"),
        (at(&["fault", "--port", "0", "stall", "--ms", "0"]), "1 to 60000 ms"),
        (at(&["fault", "--port", "0", "wire", "runt", "--probability", "2"]), "probability"),
        (at(&["fault", "--port", "0", "wire", "runt", "--probability", "nan"]), "probability"),
        (at(&["serve"]), "already serves"),
    ];
    for (args, names) in served {
        let err = refused(&nicsim, &args);
        assert!(err.contains(names), "`nicsim {}`: the error names {names}: {err}", args.join(" "));
    }
    let s = sim.stats();
    assert!(s.ports.iter().all(|p| !p.generator_active && p.generated == 0), "no refused request started traffic");
    assert!(s.ports.iter().all(|p| p.injected == Default::default()), "no refused request injected a fault");
}

#[test]
fn the_driver_manifest_tool_refuses_bad_input_in_one_line() {
    let drivers = PathBuf::from(SAFENIC).with_file_name("safenic-drivers");
    for (program, args, names) in [
        (&drivers, vec!["build", "no-such-driver"], "safenic-drivers list"),
        (&drivers, vec!["--root", "/nonexistent", "list"], "drivers.toml"),
        (&drivers, vec!["frobnicate"], "frobnicate"),
    ] {
        let err = refused(program, &args);
        assert!(err.contains(names), "`{} {}`: the error names {names}: {err}", program.display(), args.join(" "));
    }
}

/// Runs `program args` with standard output a pipe whose reader has already gone.
fn with_closed_stdout(program: &PathBuf, args: &[&str]) -> std::process::Output {
    let mut child = Command::new(program)
        .env("RUST_BACKTRACE", "1")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    let sim = Sim::start("closed-pipe");
    let root = sim.root.display().to_string();
    for args in [
        vec!["--root", &root, "stats", "--json"],
        vec!["--root", &root, "stats"],
        vec!["--root", &root, "lint"],
        vec!["--root", &root, "stats", "--watch", "2"],
        vec!["--help"],
    ] {
        let out = with_closed_stdout(&nicsim(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "nicsim {}: exit 0, got {:?}: {err}", args.join(" "), out.status);
        assert!(err.is_empty(), "nicsim {}: nothing on standard error: {err}", args.join(" "));
    }
    // The driver stops as on SIGTERM once its progress line finds nobody reading.
    let mut driver = Command::new(SAFENIC);
    driver.args(["fwd", "restricted", A, B, "--sysfs", &sim.devices(), "--cpu", "1", "--progress"]);
    let mut child = platform::Reaped::spawn(driver.stdout(Stdio::piped()).stderr(Stdio::piped())).unwrap();
    drop(child.take_stdout());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the driver went on forwarding with nobody reading");
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = child.output();
    assert!(status.success(), "safenic fwd --progress: exit 0, got {status:?}: {err}");
    assert!(err.is_empty(), "nothing on standard error: {err}");
}
