//! The x86-64 instruction-set level every driver is compiled for. The Rust workspace gets it
//! from `-C target-cpu` (the Makefile sets it from `ISA`, `scripts/isa-level` picks the
//! default); the manifest's `{isa}` stands for it, so that the C drivers a Rust program runs or
//! measures are the ones compiled with the same `-march`.

/// What `{isa}` stands for in the manifest's `build`, `command` and `binary`.
pub const PLACEHOLDER: &str = "{isa}";

/// The psABI level this program was compiled for, read from the target features the compiler
/// enabled: `x86-64`, `x86-64-v2`, `x86-64-v3` or `x86-64-v4`.
pub const fn compiled() -> &'static str {
    if cfg!(all(
        target_feature = "avx512f",
        target_feature = "avx512bw",
        target_feature = "avx512cd",
        target_feature = "avx512dq",
        target_feature = "avx512vl"
    )) {
        "x86-64-v4"
    } else if cfg!(all(
        target_feature = "avx2",
        target_feature = "bmi1",
        target_feature = "bmi2",
        target_feature = "fma",
        target_feature = "f16c",
        target_feature = "lzcnt",
        target_feature = "movbe"
    )) {
        "x86-64-v3"
    } else if cfg!(all(
        target_feature = "sse4.2",
        target_feature = "ssse3",
        target_feature = "popcnt",
        target_feature = "cmpxchg16b"
    )) {
        "x86-64-v2"
    } else {
        "x86-64"
    }
}

/// `text` with `{isa}` replaced by [`compiled`].
pub fn resolve(text: &str) -> String {
    text.replace(PLACEHOLDER, compiled())
}
