//! The public surface of the trusted crates: every item safe code of another crate can name,
//! read from rustdoc's JSON output (nightly `--output-format json`), each with the `# Soundness`
//! note that argues it is sound for any safe caller: its own, its type's or trait's, or that of
//! a module it is in (a note may cover what one argument covers). An item without one fails the
//! audit, and so does a surface that differs from the list in docs/safety.md, so that a new
//! public item is read by a reviewer there.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The crates whose every public item must be sound for any safe caller.
pub const TRUSTED: [&str; 4] = ["invariants", "platform", "dpdk", "isolation"];

/// Where docs/safety.md holds the list.
pub const DOCUMENT: &str = "docs/safety.md";
const BEGIN: &str = "<!-- public surface: written by `safenic-audit surface --splice docs/safety.md` -->";
const END: &str = "<!-- end of the public surface -->";
/// The heading a soundness argument has in an item's documentation.
const NOTE: &str = "# Soundness";

/// One public item.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Item {
    /// Its shortest public path.
    pub path: String,
    pub kind: String,
    /// What holds its `# Soundness` note (itself, its type, a module), if anything.
    pub covered_by: Option<String>,
}

/// What the audit found of the surface.
#[derive(Debug, Clone, Serialize)]
pub struct SurfaceReport {
    pub items: Vec<Item>,
    /// Whether docs/safety.md lists exactly [`SurfaceReport::items`].
    pub documented: bool,
}

impl SurfaceReport {
    pub fn uncovered(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(|i| i.covered_by.is_none())
    }

    pub fn passed(&self) -> bool {
        self.documented && self.uncovered().next().is_none()
    }
}

/// The surface of every trusted crate of the workspace at `root`, and whether docs/safety.md
/// lists it.
pub fn check(root: &Path) -> Result<SurfaceReport, String> {
    let items = surface(root)?;
    let document = std::fs::read_to_string(root.join(DOCUMENT)).map_err(|e| format!("reading {DOCUMENT}: {e}"))?;
    let documented = listed(&document).as_deref() == Some(listing(&items).as_str());
    Ok(SurfaceReport { items, documented })
}

/// Writes the surface's list into docs/safety.md, between its markers.
pub fn splice(root: &Path, items: &[Item]) -> Result<(), String> {
    let path = root.join(DOCUMENT);
    let document = std::fs::read_to_string(&path).map_err(|e| format!("reading {DOCUMENT}: {e}"))?;
    let (start, end) = markers(&document)
        .ok_or_else(|| format!("{DOCUMENT} has no list to replace: add the lines {BEGIN} and {END}"))?;
    let written = format!("{}{}{}", &document[..start], listing(items), &document[end..]);
    std::fs::write(&path, written).map_err(|e| format!("writing {DOCUMENT}: {e}"))
}

fn markers(document: &str) -> Option<(usize, usize)> {
    let start = document.find(BEGIN)? + BEGIN.len();
    let end = start + document[start..].find(END)?;
    Some((start, end))
}

fn listed(document: &str) -> Option<String> {
    markers(document).map(|(start, end)| document[start..end].to_string())
}

/// The list as docs/safety.md holds it.
pub fn listing(items: &[Item]) -> String {
    let mut out = String::from("\n\n| item | kind | `# Soundness` note in |\n|---|---|---|\n");
    for i in items {
        let note = i.covered_by.as_deref().unwrap_or("**none**");
        out.push_str(&format!("| `{}` | {} | {note} |\n", i.path, i.kind));
    }
    out.push('\n');
    out
}

/// Every public item of the trusted crates, sorted by path.
pub fn surface(root: &Path) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    for krate in TRUSTED {
        let json = rustdoc_json(root, krate)?;
        items.extend(items_of(&json)?);
    }
    items.sort();
    Ok(items)
}

/// rustdoc's JSON of `krate`'s library, written under [`crate::NIGHTLY_TARGET`].
fn rustdoc_json(root: &Path, krate: &str) -> Result<Value, String> {
    let target = root.join(crate::NIGHTLY_TARGET);
    let out = Command::new("cargo")
        .args(["+nightly", "rustdoc", "--quiet", "--lib", "-p", krate, "--target-dir"])
        .arg(&target)
        .args(["--", "-Z", "unstable-options", "--output-format", "json"])
        .current_dir(root)
        .env_remove("RUSTFLAGS")
        .output()
        .map_err(|e| format!("running cargo +nightly rustdoc: {e} (scripts/setup installs the nightly toolchain)"))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stderr);
        return Err(format!("rustdoc of {krate}: {}", text.lines().last().unwrap_or("").trim()));
    }
    let path = target.join("doc").join(format!("{krate}.json"));
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("reading {}: {e}", path.display()))
}

/// The walk over one crate's JSON: items by id, and module paths' documentation.
struct Crate<'a> {
    index: &'a serde_json::Map<String, Value>,
    paths: &'a serde_json::Map<String, Value>,
    /// Canonical module path → its documentation.
    module_docs: BTreeMap<Vec<String>, String>,
    /// Item id → (shortest public path, kind, covered by).
    found: BTreeMap<String, (Vec<String>, String, Option<String>)>,
    /// Modules walked already (a glob re-export may lead back to one).
    walked: std::collections::BTreeSet<String>,
}

fn items_of(json: &Value) -> Result<Vec<Item>, String> {
    let malformed = || "rustdoc's JSON has no index, paths or root (a newer format?)".to_string();
    let index = json.get("index").and_then(Value::as_object).ok_or_else(malformed)?;
    let paths = json.get("paths").and_then(Value::as_object).ok_or_else(malformed)?;
    let root = json.get("root").map(id_of).ok_or_else(malformed)?;
    let mut module_docs = BTreeMap::new();
    for (id, entry) in paths {
        if entry.get("kind").and_then(Value::as_str) == Some("module") {
            let docs = index.get(id).map(docs_of).unwrap_or_default();
            module_docs.insert(path_of(entry), docs);
        }
    }
    let mut c = Crate { index, paths, module_docs, found: BTreeMap::new(), walked: Default::default() };
    let name = index.get(&root).and_then(|r| r.get("name")).and_then(Value::as_str).ok_or_else(malformed)?;
    c.module(&root, &[name.to_string()]);
    Ok(c.found.into_values().map(|(path, kind, covered_by)| Item { path: path.join("::"), kind, covered_by }).collect())
}

fn id_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn docs_of(item: &Value) -> String {
    item.get("docs").and_then(Value::as_str).unwrap_or("").to_string()
}

fn path_of(entry: &Value) -> Vec<String> {
    let parts = entry.get("path").and_then(Value::as_array);
    parts.map(|p| p.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// The one key of an item's `inner`: its kind.
fn kind_of(item: &Value) -> Option<(&str, &Value)> {
    item.get("inner")?.as_object()?.iter().next().map(|(k, v)| (k.as_str(), v))
}

fn public(item: &Value) -> bool {
    item.get("visibility").and_then(Value::as_str) == Some("public")
}

impl Crate<'_> {
    fn module(&mut self, id: &str, path: &[String]) {
        if !self.walked.insert(id.to_string()) {
            return;
        }
        let Some(items) = self.index.get(id).and_then(kind_of).and_then(|(_, m)| m.get("items")?.as_array()) else {
            return;
        };
        for child in items.iter().map(id_of) {
            self.child(&child, path);
        }
    }

    /// An item of the module at `path`, found through it.
    fn child(&mut self, id: &str, path: &[String]) {
        let Some(item) = self.index.get(id) else { return };
        if !public(item) {
            return;
        }
        let Some((kind, inner)) = kind_of(item) else { return };
        if kind == "use" {
            let target = inner.get("id").filter(|v| !v.is_null()).map(id_of);
            let name = inner.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            match target {
                Some(t) if self.index.contains_key(&t) => {
                    if inner.get("is_glob").and_then(Value::as_bool) == Some(true) {
                        self.module(&t, path);
                    } else {
                        self.named(&t, &[path, &[name]].concat());
                    }
                }
                _ => {
                    let source = inner.get("source").and_then(Value::as_str).unwrap_or("?");
                    let note = format!("another crate ({source}), a pinned dependency");
                    self.record(&format!("use:{source}"), &[path, &[name]].concat(), "re-export", Some(note));
                }
            }
            return;
        }
        let name = item.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        self.named(id, &[path, &[name]].concat());
    }

    /// The item `id`, public at `path`.
    fn named(&mut self, id: &str, path: &[String]) {
        let Some(item) = self.index.get(id) else { return };
        let Some((kind, inner)) = kind_of(item) else { return };
        let covered = self.covered(id, item, path, None);
        self.record(id, path, kind, covered);
        match kind {
            "module" => self.module(id, path),
            "struct" | "enum" | "union" => {
                for imp in inner.get("impls").and_then(Value::as_array).into_iter().flatten().map(id_of) {
                    self.inherent(&imp, id, path);
                }
            }
            "trait" => {
                for member in inner.get("items").and_then(Value::as_array).into_iter().flatten().map(id_of) {
                    self.member(&member, id, path);
                }
            }
            _ => {}
        }
    }

    /// The public items of an inherent impl of the type `owner` at `path`.
    fn inherent(&mut self, imp: &str, owner: &str, path: &[String]) {
        let Some((_, inner)) = self.index.get(imp).and_then(kind_of) else { return };
        if inner.get("trait").is_some_and(|t| !t.is_null()) {
            return; // a trait's impl: the trait's items, sound as the type is
        }
        for member in inner.get("items").and_then(Value::as_array).into_iter().flatten().map(id_of) {
            if self.index.get(&member).is_some_and(public) {
                self.member(&member, owner, path);
            }
        }
    }

    fn member(&mut self, id: &str, owner: &str, path: &[String]) {
        let Some(item) = self.index.get(id) else { return };
        let Some((kind, _)) = kind_of(item) else { return };
        let name = item.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        let at = [path, &[name]].concat();
        let covered = self.covered(id, item, &at, Some((owner, path)));
        self.record(id, &at, kind, covered);
    }

    /// What holds the note that covers `item`: itself, its owner, or a module of its public
    /// or its canonical path (or its owner's).
    fn covered(&self, id: &str, item: &Value, path: &[String], owner: Option<(&str, &[String])>) -> Option<String> {
        if docs_of(item).contains(NOTE) {
            return Some("itself".to_string());
        }
        let mut canonical = vec![path.to_vec(), self.paths.get(id).map(path_of).unwrap_or_default()];
        if let Some((owner, at)) = owner {
            if self.index.get(owner).map(docs_of).is_some_and(|d| d.contains(NOTE)) {
                return Some(format!("`{}`", at.join("::")));
            }
            canonical.push(self.paths.get(owner).map(path_of).unwrap_or_default());
        }
        let mut modules: Vec<Vec<String>> = Vec::new();
        for full in canonical {
            for len in (1..full.len()).rev() {
                modules.push(full[..len].to_vec());
            }
        }
        modules
            .into_iter()
            .find(|m| self.module_docs.get(m).is_some_and(|d| d.contains(NOTE)))
            .map(|m| format!("`{}`", m.join("::")))
    }

    fn record(&mut self, id: &str, path: &[String], kind: &str, covered: Option<String>) {
        let shorter = |(p, _, _): &(Vec<String>, String, Option<String>)| path.len() < p.len();
        if self.found.get(id).is_none_or(shorter) {
            self.found.insert(id.to_string(), (path.to_vec(), kind.to_string(), covered));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate as rustdoc's JSON gives it: `krate` re-exports `inner::Thing`, whose module has
    /// a note; `bare` has none, `noted` its own; `Thing::method` is covered by its module.
    fn fixture(module_note: bool) -> Value {
        let note = |on: bool| if on { "Why it holds.\n\n# Soundness\nIt does." } else { "No argument." };
        serde_json::json!({
            "root": 0,
            "index": {
                "0": {"name": "krate", "visibility": "public", "docs": "", "inner": {"module": {"items": [1, 2, 3, 4]}}},
                "1": {"name": "inner", "visibility": "crate", "docs": note(module_note), "inner": {"module": {"items": [5]}}},
                "2": {"name": null, "visibility": "public", "inner": {"use": {"source": "inner::Thing", "name": "Thing", "id": 5, "is_glob": false}}},
                "3": {"name": "bare", "visibility": "public", "docs": "", "inner": {"function": {}}},
                "4": {"name": "noted", "visibility": "public", "docs": note(true), "inner": {"function": {}}},
                "5": {"name": "Thing", "visibility": "public", "docs": "", "inner": {"struct": {"impls": [6, 8]}}},
                "6": {"name": null, "visibility": "default", "inner": {"impl": {"trait": null, "items": [7]}}},
                "7": {"name": "method", "visibility": "public", "docs": "", "inner": {"function": {}}},
                "8": {"name": null, "visibility": "default", "inner": {"impl": {"trait": {"path": "Drop"}, "items": [9]}}},
                "9": {"name": "drop", "visibility": "default", "docs": "", "inner": {"function": {}}}
            },
            "paths": {
                "0": {"path": ["krate"], "kind": "module"},
                "1": {"path": ["krate", "inner"], "kind": "module"},
                "5": {"path": ["krate", "inner", "Thing"], "kind": "struct"}
            }
        })
    }

    #[test]
    fn every_public_item_is_found_at_its_shortest_path_with_what_covers_it() {
        let items = items_of(&fixture(true)).unwrap();
        let found: Vec<(&str, &str, Option<&str>)> =
            items.iter().map(|i| (i.path.as_str(), i.kind.as_str(), i.covered_by.as_deref())).collect();
        assert!(found.contains(&("krate::Thing", "struct", Some("`krate::inner`"))), "{found:?}");
        assert!(found.contains(&("krate::Thing::method", "function", Some("`krate::inner`"))), "{found:?}");
        assert!(found.contains(&("krate::noted", "function", Some("itself"))), "{found:?}");
        assert!(found.contains(&("krate::bare", "function", None)), "an item without a note: {found:?}");
        assert!(!found.iter().any(|(p, ..)| p.ends_with("drop")), "a trait impl's items are the type's: {found:?}");
        assert!(!found.iter().any(|(p, ..)| *p == "krate::inner"), "a private module is not surface: {found:?}");
        let without = items_of(&fixture(false)).unwrap();
        assert!(without.iter().any(|i| i.path == "krate::Thing::method" && i.covered_by.is_none()));
    }

    #[test]
    fn the_document_lists_the_surface_between_its_markers() {
        let items = vec![Item { path: "krate::bare".into(), kind: "function".into(), covered_by: None }];
        let document = format!("intro\n{BEGIN}{}{END}\nafter\n", listing(&items));
        assert_eq!(listed(&document).as_deref(), Some(listing(&items).as_str()));
        assert!(listing(&items).contains("| `krate::bare` | function | **none** |"));
        assert_eq!(listed("no markers here"), None);
    }
}
