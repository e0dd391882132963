//! The driver manifest, `drivers/drivers.toml`: the one list of drivers that the build, the
//! conformance suite, the bench and the audit's Table 2 all read. A driver joins with one entry.
#![forbid(unsafe_code)]

pub mod isa;

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Where the manifest is, relative to the repository.
pub const MANIFEST: &str = "drivers/drivers.toml";

/// The models every driver implements.
pub const MODES: [&str; 3] = ["restricted", "const", "flexible"];

/// The whole manifest.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[serde(rename = "driver")]
    pub drivers: Vec<DriverEntry>,
}

/// One driver.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DriverEntry {
    /// Its name in test names (with `-` as `_`), reports and tables: `rust`, `c-clang`.
    pub name: String,
    pub language: String,
    /// A shell command, run from the repository, that builds it (`None`: nothing to build);
    /// `{isa}` is replaced.
    pub build: Option<String>,
    /// The words before `<mode> <BDF-in> <BDF-out> …`; `{mode}`, `{isa}` and `{safenic}` are
    /// replaced.
    pub command: String,
    /// Its source files and folders (lines of code in Table 2).
    pub sources: Vec<String>,
    /// The binary of a model, for Table 2; `{mode}` and `{isa}` are replaced.
    pub binary: Option<String>,
    /// The symbol of a model's main loop, for Table 2; `{mode}` is replaced. With `perf_map`
    /// and no `binary`, the method (`Namespace.Type::Method`) in the running driver's perf map.
    pub main_loop: Option<String>,
    /// With it, the audit proves the main loops of `binary` free of run-time checks, as it
    /// does the Rust driver's hot paths; these are the callees it does not follow, because
    /// they run outside the per-packet code (the meter's tick). A JIT driver's loops are
    /// always audited.
    #[serde(default)]
    pub hot_loop_cold_calls: Option<Vec<String>>,
    /// A JIT-compiled driver, whose loops have no symbol for callgrind's `--toggle-collect`:
    /// the bench runs it with `COMPlus_PerfMapEnabled=1` (.NET's switch) and finds its loops in
    /// the runtime's perf map (`/tmp/perf-<pid>.map`).
    #[serde(default)]
    pub perf_map: bool,
    /// Run through the conformance suite.
    pub conformance: bool,
    /// Measured by `safenic bench`.
    pub bench: bool,
}

impl Manifest {
    /// The manifest of the repository at `root`.
    pub fn load(root: &Path) -> Result<Manifest, String> {
        let path = root.join(MANIFEST);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e} (run from the repository or pass --root)", path.display()))?;
        Manifest::parse(&text).map_err(|e| format!("{MANIFEST}: {e}"))
    }

    /// A manifest from its text, checked: names unique and usable as test names, a `binary`
    /// only with a `main_loop`, a `main_loop` in a `binary` or a perf map.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let m: Manifest = toml::from_str(text).map_err(|e| e.to_string().trim().replace('\n', " "))?;
        for (i, d) in m.drivers.iter().enumerate() {
            if d.name.is_empty() || !d.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
                return Err(format!("driver name `{}`: use lowercase letters, digits and `-`", d.name));
            }
            if m.drivers[..i].iter().any(|e| e.name == d.name) {
                return Err(format!("driver `{}` appears twice", d.name));
            }
            if d.command.split_whitespace().next().is_none() {
                return Err(format!("driver `{}` has an empty command", d.name));
            }
            if d.binary.is_some() && d.main_loop.is_none() {
                return Err(format!("driver `{}`: Table 2 needs both `binary` and `main_loop`", d.name));
            }
            if d.main_loop.is_some() && d.binary.is_none() && !d.perf_map {
                return Err(format!(
                    "driver `{}`: a `main_loop` is found in a `binary`, or in a running JIT's perf map (`perf_map = true`)",
                    d.name
                ));
            }
            if d.hot_loop_cold_calls.is_some() && d.main_loop.is_none() {
                return Err(format!(
                    "driver `{}`: `hot_loop_cold_calls` needs the `binary` and `main_loop` it audits",
                    d.name
                ));
            }
        }
        Ok(m)
    }

    pub fn get(&self, name: &str) -> Option<&DriverEntry> {
        self.drivers.iter().find(|d| d.name == name)
    }
}

impl DriverEntry {
    /// Its command's words, `{safenic}` replaced by `safenic`, `{isa}` by this program's
    /// level ([`isa::compiled`]) and every relative path (a word with a `/`: the program, or
    /// the program a runtime runs) made absolute against the repository `root`; `{mode}` is
    /// left for the caller.
    pub fn command_words(&self, root: &Path, safenic: &Path) -> Vec<String> {
        command_words(&self.command, root, safenic)
    }

    /// Its build command for this program's level, if it has one.
    pub fn build_command(&self) -> Option<String> {
        self.build.as_deref().map(isa::resolve)
    }

    /// The binary of model `mode`, relative to the repository, if Table 2 lists it.
    pub fn binary_of(&self, mode: &str) -> Option<String> {
        self.binary.as_deref().map(|b| isa::resolve(b).replace("{mode}", mode))
    }

    /// The paths built for one level: its binary and the words of its command that name
    /// `{isa}` (for [`isa::check_built`]).
    pub fn built_paths(&self) -> Vec<String> {
        let words = self.command.split_whitespace().filter(|w| w.contains(isa::PLACEHOLDER));
        self.binary.iter().map(String::as_str).chain(words).map(str::to_string).collect()
    }

    /// The name as a Rust identifier (for test modules): `c-clang` → `c_clang`.
    pub fn ident(&self) -> String {
        self.name.replace('-', "_")
    }
}

/// The words of a driver `command` as [`DriverEntry::command_words`] gives them.
pub fn command_words(command: &str, root: &Path, safenic: &Path) -> Vec<String> {
    let mut words: Vec<String> = command
        .split_whitespace()
        .map(|w| isa::resolve(w).replace("{safenic}", &safenic.display().to_string()))
        .collect();
    for word in &mut words {
        if word.contains('/') && !word.starts_with(['/', '-']) {
            *word = root.join(&*word).display().to_string();
        }
    }
    words
}

/// The conformance suite's test modules for `manifest`: one `conformance!` entry per driver
/// with `conformance = true` (the safenic crate's build script writes this into the suite).
pub fn conformance_entries(manifest: &Manifest) -> String {
    let entries: String = manifest
        .drivers
        .iter()
        .filter(|d| d.conformance)
        .map(|d| format!("    {} => {:?}, {:?};\n", d.ident(), d.name, d.command))
        .collect();
    format!("conformance! {{\n{entries}}}\n")
}

/// The repository a program was built in, if it sits in its `target/<profile>/`.
pub fn repository_of(program: &Path) -> Option<PathBuf> {
    let root = program.parent()?.parent()?.parent()?;
    root.join(MANIFEST).exists().then(|| root.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repository() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn the_repository_manifest_lists_every_driver() {
        let m = Manifest::load(&repository()).unwrap();
        let names: Vec<&str> = m.drivers.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["rust", "c-clang", "c-gcc", "c-asan", "ada", "csharp"]);
        assert!(m.drivers.iter().all(|d| d.conformance));
        assert!(!m.get("c-asan").unwrap().bench, "a sanitizer build is tested, not measured");
    }

    #[test]
    fn a_bad_manifest_is_refused_with_the_reason() {
        let ok = "[[driver]]\nname = \"x\"\nlanguage = \"C\"\ncommand = \"x fwd\"\nsources = []\nconformance = true\nbench = false\n";
        assert_eq!(Manifest::parse(ok).unwrap().drivers.len(), 1);
        let e = Manifest::parse(&ok.replace("bench", "bnech")).unwrap_err();
        assert!(e.contains("bnech"), "{e}");
        assert!(Manifest::parse(&format!("{ok}{ok}")).unwrap_err().contains("twice"));
        assert!(Manifest::parse(&ok.replace("\"x\"", "\"X y\"")).unwrap_err().contains("lowercase"));
        assert!(Manifest::parse(&ok.replace("sources = []", "sources = []\nbinary = \"b\"")).is_err());
        let main_loop = ok.replace("sources = []", "sources = []\nmain_loop = \"F::f\"");
        assert!(Manifest::parse(&main_loop).unwrap_err().contains("perf_map"));
        assert!(Manifest::parse(&main_loop.replace("bench", "perf_map = true\nbench")).is_ok());
    }

    #[test]
    fn commands_resolve_against_the_repository() {
        let m = Manifest::load(&repository()).unwrap();
        let root = Path::new("/repo");
        let rust = m.get("rust").unwrap().command_words(root, Path::new("/build/safenic"));
        assert_eq!(rust, ["/build/safenic", "fwd"]);
        let clang = m.get("c-clang").unwrap().command_words(root, Path::new("/x"));
        let level = isa::compiled();
        assert_eq!(clang, [format!("/repo/drivers/c/build/{level}/clang/safenic-c-{{mode}}"), "fwd".to_string()]);
        let gcc = m.get("c-gcc").unwrap();
        assert_eq!(gcc.build_command().unwrap(), format!("make -j3 -C drivers/c gcc ISA={level}"));
        assert_eq!(gcc.binary_of("const").unwrap(), format!("drivers/c/build/{level}/gcc/safenic-c-const"));
        // A runtime and the program it runs: both paths resolve; options and plain words stay.
        let words = command_words("drivers/x/run drivers/x/app.dll fwd --sysfs=a/b", root, Path::new("/x"));
        assert_eq!(words, ["/repo/drivers/x/run", "/repo/drivers/x/app.dll", "fwd", "--sysfs=a/b"]);
    }

    #[test]
    fn conformance_entries_name_each_tested_driver() {
        let m = Manifest::load(&repository()).unwrap();
        let text = conformance_entries(&m);
        assert!(text.contains("c_asan => \"c-asan\", \"drivers/c/build/asan/safenic-c-{mode} fwd\";"), "{text}");
    }
}
