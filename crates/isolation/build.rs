//! Builds the C parts as shared objects that the crate embeds and loads at run time: the
//! domain heap that an MPK domain's library allocates from, and the libraries the tests and
//! the bench isolate (a deliberately broken one, and the packet filter), and one whose
//! initialiser attacks its caller, for a test. Each is compiled for
//! the x86-64 level the Rust code is built for, with the stack protector on.

use std::path::{Path, PathBuf};
use std::process::Command;

const OBJECTS: [(&str, &str); 4] = [
    ("csrc/domain_heap.c", "libsafenic_domain_heap.so"),
    ("csrc/broken.c", "libsafenic_broken.so"),
    ("csrc/filter.c", "libsafenic_filter.so"),
    // Only tests/attack.rs embeds it.
    ("csrc/attack.c", "libsafenic_attack.so"),
];

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let compiler = cc::Build::new().opt_level(2).get_compiler();
    let march = target_cpu().map(|cpu| format!("-march={cpu}"));
    for (source, object) in OBJECTS {
        println!("cargo:rerun-if-changed={source}");
        shared_object(compiler.path(), march.as_deref(), Path::new(source), &out.join(object));
    }
    println!("cargo:rustc-link-lib=dylib=dl");
}

fn shared_object(cc: &Path, march: Option<&str>, source: &Path, object: &Path) {
    let mut cmd = Command::new(cc);
    cmd.args(["-O2", "-g", "-fPIC", "-shared", "-pthread", "-fstack-protector-strong", "-Wall", "-Wextra", "-Werror"]);
    cmd.args(march);
    cmd.arg("-o").arg(object).arg(source);
    let status = cmd.status().unwrap_or_else(|e| panic!("running {}: {e} (scripts/setup installs gcc)", cc.display()));
    assert!(status.success(), "compiling {} failed", source.display());
}

/// The `-C target-cpu` of RUSTFLAGS (the Makefile sets it), so C and Rust share one level.
fn target_cpu() -> Option<String> {
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").ok()?;
    let mut it = flags.split('\x1f').peekable();
    while let Some(f) = it.next() {
        if let Some(cpu) = f.strip_prefix("target-cpu=").or_else(|| f.strip_prefix("-Ctarget-cpu=")) {
            return Some(cpu.to_string());
        }
        if f == "-C" {
            if let Some(cpu) = it.peek().and_then(|n| n.strip_prefix("target-cpu=")) {
                return Some(cpu.to_string());
            }
        }
    }
    None
}
