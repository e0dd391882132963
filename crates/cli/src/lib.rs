//! What the `safenic` and `nicsim` commands share about their command lines:
//! - bad arguments are one line on standard error that names the fix, exit status 2, never a
//!   backtrace ([`parse`]);
//! - numbers are checked when parsed: no NaN, no infinity, no zero or negative where it means
//!   nothing ([`seconds`], [`positive`], [`at_least_one`]);
//! - a reader that closes standard output early (`nicsim stats | head`) ends the command
//!   quietly with status 0, as it does a Unix tool ([`outln!`], [`finish`]).

#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

/// Parses the process arguments into `C`. Help and version go to standard output as usual;
/// any other error is printed as one line, prefixed with `program`, and the process exits 2.
pub fn parse<C: clap::Parser>(program: &str) -> C {
    match C::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "{program}: {}", one_line(&e.render().to_string()));
            std::process::exit(2)
        }
    }
}

/// clap's message without its blank lines, usage and "for more information" footer, joined
/// into one line that still says which argument is wrong and what it takes.
pub fn one_line(rendered: &str) -> String {
    let mut parts = Vec::new();
    for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        parts.push(line.strip_prefix("error: ").unwrap_or(line));
    }
    format!("{} (see --help)", parts.join(" "))
}

/// A duration in seconds: a finite number above zero.
pub fn seconds(s: &str) -> Result<f64, String> {
    positive(s).map_err(|_| format!("`{s}` is not a duration: give a number of seconds above 0, e.g. 2.5"))
}

/// A finite number above zero.
pub fn positive(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number above 0")),
    }
}

/// A whole number of at least 1.
pub fn at_least_one(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(format!("`{s}` is not a whole number of at least 1")),
    }
}

/// The error [`print`] returns when standard output was closed by its reader: not a failure.
pub const STDOUT_CLOSED: &str = "standard output was closed";

/// Writes one line to standard output and flushes it. A closed pipe is [`STDOUT_CLOSED`], which
/// callers pass up (with `?`) so that the command ends, cleaning up as it returns.
pub fn print(args: std::fmt::Arguments<'_>) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(STDOUT_CLOSED.into()),
        Err(e) => Err(format!("writing to standard output: {e}")),
    }
}

/// `println!` that returns [`print`]'s result instead of panicking on a closed pipe.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::print(format_args!($($arg)*))
    };
}

/// The exit status of a command that ended with `result`: 0 when it succeeded or its reader
/// closed standard output, otherwise 1 after one line `program: error` on standard error.
pub fn finish(program: &str, result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e == STDOUT_CLOSED => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "{program}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_reject_what_means_nothing() {
        for bad in ["nan", "NaN", "inf", "-inf", "-1", "0", "", "1e400", "abc"] {
            assert!(seconds(bad).is_err(), "{bad}");
            assert!(positive(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds("2.5"), Ok(2.5));
        assert_eq!(positive(" 1e6 "), Ok(1e6));
        for bad in ["0", "-1", "1.5", "x", "18446744073709551616"] {
            assert!(at_least_one(bad).is_err(), "{bad}");
        }
        assert_eq!(at_least_one("7"), Ok(7));
    }

    #[test]
    fn clap_errors_become_one_line() {
        let rendered = "error: invalid value 'nan' for '--seconds <SECONDS>': `nan` is not a duration\n\n\
                        For more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "invalid value 'nan' for '--seconds <SECONDS>': `nan` is not a duration (see --help)"
        );
        let missing = "error: the following required arguments were not provided:\n  <INPUT>\n  <OUTPUT>\n\n\
                       Usage: safenic fwd <MODE> <INPUT> <OUTPUT>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(missing),
            "the following required arguments were not provided: <INPUT> <OUTPUT> (see --help)"
        );
    }
}
