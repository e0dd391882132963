//! Ada's unsafe features, counted like Rust's unsafe budget: imported foreign code, unchecked
//! conversions and accesses, address attributes and overlays, machine code. They are allowed
//! only in a driver's platform packages (units named `Platform` or `Platform.*`, files
//! `platform*.ad[sb]`). Anywhere, in sources or project files, turning checks off (`pragma
//! Suppress`, `-gnatp`) fails the audit: the driver's claim is that its checks are on.

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Identifiers (case-insensitive) that mark an unsafe feature, and how the report names them.
const FEATURES: [(&str, &str); 9] = [
    ("unchecked_conversion", "Unchecked_Conversion"),
    ("unchecked_deallocation", "Unchecked_Deallocation"),
    ("unchecked_access", "'Unchecked_Access"),
    ("unrestricted_access", "'Unrestricted_Access"),
    ("address_to_access_conversions", "Address_To_Access_Conversions"),
    ("to_address", "System'To_Address"),
    ("import", "imported foreign code"),
    ("unchecked_union", "Unchecked_Union"),
    ("machine_code", "machine code"),
];

/// What one Ada source file uses.
#[derive(Debug, Clone, Serialize)]
pub struct AdaFile {
    pub file: String,
    /// Feature → occurrences.
    pub sites: BTreeMap<String, usize>,
    /// Whether it is a platform package, where the features are allowed.
    pub allowed: bool,
}

/// The unsafe features of one Ada driver.
#[derive(Debug, Clone, Serialize)]
pub struct AdaBudget {
    pub driver: String,
    pub files: Vec<AdaFile>,
    /// `file:line feature` outside the platform packages.
    pub not_allowed: Vec<String>,
    /// `file:line` where checks are turned off.
    pub checks_off: Vec<String>,
}

impl AdaBudget {
    pub fn passed(&self) -> bool {
        self.not_allowed.is_empty() && self.checks_off.is_empty()
    }
    pub fn total(&self) -> usize {
        self.files.iter().flat_map(|f| f.sites.values()).sum()
    }
}

/// The text of a line without its comment and string literals, lower case.
#[cfg(test)]
fn code_of(line: &str) -> String {
    code_keeping(line, false)
}

/// The text of a line without its comment (and its string literals unless `strings`), lower
/// case.
fn code_keeping(line: &str, strings: bool) -> String {
    let mut out = String::new();
    let mut in_string = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            if c == '"' {
                in_string = false;
            }
            if strings {
                out.extend(c.to_lowercase());
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                if strings {
                    out.push(c);
                }
            }
            '-' if chars.peek() == Some(&'-') => break,
            _ => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// Every feature of one line: identifiers from [`FEATURES`], the `'Address` attribute and
/// `Address =>` aspects (overlays).
fn features_of(code: &str) -> Vec<&'static str> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut words: Vec<(usize, &str)> = Vec::new();
    let mut start = None;
    for (i, c) in code.char_indices().chain(std::iter::once((code.len(), ' '))) {
        match (start, is_word(c)) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                words.push((s, &code[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for (at, word) in words {
        if let Some((_, name)) = FEATURES.iter().find(|(id, _)| *id == word) {
            found.push(*name);
        } else if word == "address" {
            let before = code[..at].trim_end();
            let after = code[at + word.len()..].trim_start();
            if before.ends_with('\'') {
                found.push("'Address");
            } else if after.starts_with("=>")
                && (before.ends_with("with") || before.ends_with(','))
                && before.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == "with")
            {
                found.push("address overlay");
            }
        }
    }
    found
}

/// Whether a line turns checks off.
fn turns_checks_off(code: &str) -> bool {
    code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|w| w == "suppress") || code.contains("-gnatp")
}

fn ada_files(root: &Path, sources: &[String]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = crate::sizes::files_of(root, sources)
        .into_iter()
        .filter(|f| f.extension().is_some_and(|x| x == "ads" || x == "adb"))
        .collect();
    // The project files next to the sources: where a -gnatp would be.
    for s in sources {
        let Some(dir) = root.join(s).parent().map(Path::to_path_buf) else { continue };
        if let Ok(entries) = std::fs::read_dir(&dir) {
            files.extend(
                entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "gpr")),
            );
        }
    }
    files.sort();
    files.dedup();
    files
}

/// The budget of a driver whose `sources` hold Ada files; `None` if none do.
pub fn ada_budget(root: &Path, driver: &str, sources: &[String]) -> Result<Option<AdaBudget>, String> {
    let files = ada_files(root, sources);
    if !files.iter().any(|f| f.extension().is_some_and(|x| x == "ads" || x == "adb")) {
        return Ok(None);
    }
    let mut b =
        AdaBudget { driver: driver.to_string(), files: Vec::new(), not_allowed: Vec::new(), checks_off: Vec::new() };
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("reading {}: {e}", f.display()))?;
        let rel = f.strip_prefix(root).unwrap_or(&f).display().to_string();
        let project = f.extension().is_some_and(|x| x == "gpr");
        let allowed = f.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("platform"));
        let mut sites: BTreeMap<String, usize> = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let code = code_keeping(line, project);
            if turns_checks_off(&code) {
                b.checks_off.push(format!("{rel}:{}", n + 1));
            }
            if project {
                continue;
            }
            for feature in features_of(&code) {
                *sites.entry(feature.to_string()).or_default() += 1;
                if !allowed {
                    b.not_allowed.push(format!("{rel}:{} {feature}", n + 1));
                }
            }
        }
        if !project {
            b.files.push(AdaFile { file: rel, sites, allowed });
        }
    }
    Ok(Some(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_are_found_outside_comments_and_strings() {
        assert_eq!(
            features_of(&code_of("function F is new Ada.Unchecked_Conversion (A, B);")),
            ["Unchecked_Conversion"]
        );
        assert_eq!(
            features_of(&code_of("   X : T with Import, Volatile, Address => A;")),
            ["imported foreign code", "address overlay"]
        );
        assert_eq!(features_of(&code_of("   P := V'Address; -- Unchecked_Access")), ["'Address"]);
        assert_eq!(features_of(&code_of("   Put (\"Unchecked_Access\");")), Vec::<&str>::new());
        assert_eq!(features_of(&code_of("   Address : constant System.Address := B;")), Vec::<&str>::new());
        assert_eq!(features_of(&code_of("   return (Regs => R, Address => F.Address);")), Vec::<&str>::new());
        assert_eq!(features_of(&code_of("   H := P'Unrestricted_Access;")), ["'Unrestricted_Access"]);
        assert!(turns_checks_off(&code_of("pragma Suppress (All_Checks);")));
        assert!(!turns_checks_off(&code_of("-- pragma Suppress (All_Checks);")));
        assert!(turns_checks_off(&code_keeping("   for Switches use (\"-O3\", \"-gnatp\");", true)));
        assert!(!turns_checks_off(&code_keeping("--  no -gnatp here", true)));
    }
}
