//! The x86-64 instruction-set level every driver is compiled for. The Rust workspace gets it
//! from `-C target-cpu` (the Makefile sets it from `ISA`, `scripts/isa-level` picks the
//! default); the manifest's `{isa}` stands for it, so that the C drivers a Rust program runs or
//! measures are the ones compiled with the same `-march`.

use std::path::Path;

/// What `{isa}` stands for in the manifest's `build`, `command` and `binary`.
pub const PLACEHOLDER: &str = "{isa}";

/// Every level `{isa}` can stand for.
pub const LEVELS: [&str; 4] = ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"];

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

/// Checks that every path of `templates` (relative to `root`; `{isa}` and `{mode}` stand in)
/// is built for this program's level, in every model. If one is not: one line that says which
/// level the drivers were built for, if any, and that `make_target` builds this program and
/// the drivers for one level. A plain `cargo build --release` compiles for `x86-64`, while
/// `make` compiles for `scripts/isa-level`'s choice.
pub fn check_built(root: &Path, templates: &[String], make_target: &str) -> Result<(), String> {
    let here = compiled();
    for template in templates {
        for mode in crate::MODES {
            let at = |level: &str| template.replace(PLACEHOLDER, level).replace("{mode}", mode);
            if root.join(at(here)).exists() {
                continue;
            }
            let built = LEVELS.iter().find(|l| **l != here && root.join(at(l)).exists());
            let found = match built {
                Some(level) => format!("this program was compiled for {here} and the drivers for {level}"),
                None => format!("no driver is built for {here}, the level this program was compiled for"),
            };
            return Err(format!(
                "{} is missing: {found}; `make {make_target}` builds both for one level (`make {make_target} ISA={here}` keeps this one)",
                at(here)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_built_for_another_level_is_named_with_the_make_target() {
        let root = std::env::temp_dir().join(format!("manifest-isa-{}", std::process::id()));
        let other = LEVELS.iter().find(|l| **l != compiled()).unwrap();
        for mode in crate::MODES {
            let dir = root.join(format!("build/{other}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("driver-{mode}")), "").unwrap();
        }
        let templates = ["build/{isa}/driver-{mode}".to_string()];
        let error = check_built(&root, &templates, "audit").unwrap_err();
        let here = compiled();
        assert!(error.starts_with(&format!("build/{here}/driver-restricted is missing: ")), "{error}");
        assert!(error.contains(&format!("compiled for {here} and the drivers for {other}")), "{error}");
        assert!(error.contains("`make audit` builds both") && !error.contains('\n'), "{error}");
        std::fs::create_dir_all(root.join(format!("build/{here}"))).unwrap();
        for mode in crate::MODES {
            std::fs::write(root.join(format!("build/{here}/driver-{mode}")), "").unwrap();
        }
        assert_eq!(check_built(&root, &templates, "audit"), Ok(()));
        std::fs::remove_dir_all(&root).unwrap();
        let error = check_built(&root, &templates, "bench").unwrap_err();
        assert!(error.contains("no driver is built for") && error.contains("`make bench`"), "{error}");
    }
}
