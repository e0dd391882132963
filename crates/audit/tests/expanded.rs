//! A procedural macro that builds the `unsafe` keyword while it runs leaves no trace in any
//! source text; the audit finds what it emitted in the expanded code. The fixture is a small
//! workspace written to a temporary directory: a proc-macro crate and a crate that uses it.
//! Needs the nightly toolchain (scripts/setup installs it).

use audit::expanded::check_crate;

const MACRO_CRATE: &str = r#"
use proc_macro::TokenStream;

/// Emits `fn poke() { <the keyword> { … } }` without spelling the keyword anywhere.
#[proc_macro]
pub fn poke(_: TokenStream) -> TokenStream {
    let keyword: String = ['u', 'n', 's', 'a', 'f', 'e'].iter().collect();
    format!("pub fn poke(p: *mut u8) {{ {keyword} {{ p.write_volatile(1) }} }}").parse().unwrap()
}
"#;

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn unsafe_code_a_proc_macro_emits_is_found_in_the_expanded_code() {
    let root = std::env::temp_dir().join(format!("safenic-audit-expand-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    write(&root.join("Cargo.toml"), "[workspace]\nresolver = \"2\"\nmembers = [\"poker\", \"victim\"]\n");
    write(
        &root.join("poker/Cargo.toml"),
        "[package]\nname = \"poker\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\nproc-macro = true\n",
    );
    write(&root.join("poker/src/lib.rs"), MACRO_CRATE);
    write(
        &root.join("victim/Cargo.toml"),
        "[package]\nname = \"victim\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\npoker = { path = \"../poker\" }\n",
    );
    // Not one `unsafe` in the source: the text scan has nothing to find.
    let victim = "#![forbid(unsafe_code)]\npoker::poke!();\n#[derive(Clone, Copy)]\npub struct Fine;\n";
    write(&root.join("victim/src/lib.rs"), victim);
    assert!(audit::unsafe_code::scan(victim).unwrap().is_empty());

    let report = check_crate(&root, "victim", "--lib");
    std::fs::remove_dir_all(&root).unwrap();
    let report = report.unwrap();
    assert_eq!(report.findings.len(), 1, "the emitted block and nothing else (not the derive): {report:?}");
    assert!(report.findings[0].starts_with("an unsafe block"), "{report:?}");
}

const LINKER_MACRO: &str = r##"
use proc_macro::TokenStream;

/// Emits a `memcpy` that replaces libc's and an `.init_array` entry that runs before main.
#[proc_macro]
pub fn hijack(_: TokenStream) -> TokenStream {
    concat!(
        "#[no_mangle] pub extern \"C\" fn memcpy(d: *mut u8, _s: *const u8, _n: usize) -> *mut u8 { d }\n",
        "#[link_section = \".init_array\"] #[used] static EARLY: extern \"C\" fn() = early;\n",
        "extern \"C\" fn early() {}\n",
    )
    .parse()
    .unwrap()
}
"##;

/// As round two's review did: a proc macro that emits linker attributes bare into a crate of
/// edition 2021 (where the keyword is not required around them), linked into the driver.
#[test]
fn linker_attributes_a_proc_macro_emits_are_found_in_the_expanded_code() {
    let root = std::env::temp_dir().join(format!("safenic-audit-linker-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    write(&root.join("Cargo.toml"), "[workspace]\nresolver = \"2\"\nmembers = [\"hijacker\", \"cli\"]\n");
    write(
        &root.join("hijacker/Cargo.toml"),
        "[package]\nname = \"hijacker\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\nproc-macro = true\n",
    );
    write(&root.join("hijacker/src/lib.rs"), LINKER_MACRO);
    write(
        &root.join("cli/Cargo.toml"),
        "[package]\nname = \"cli\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nhijacker = { path = \"../hijacker\" }\n",
    );
    let victim = "#![forbid(unsafe_code)]\nhijacker::hijack!();\n";
    write(&root.join("cli/src/lib.rs"), victim);
    assert!(audit::unsafe_code::scan(victim).unwrap().is_empty());

    let report = check_crate(&root, "cli", "--lib");
    std::fs::remove_dir_all(&root).unwrap();
    let found = report.unwrap().findings;
    for attribute in ["no_mangle", "link_section"] {
        assert!(found.iter().any(|f| f.starts_with(&format!("a #[{attribute}] attribute"))), "{found:?}");
    }
}

/// Every workspace crate linked into the driver binary, but the two rooms, is expanded and
/// checked: a crate added to its dependencies must be added to `EXPANDED`.
#[test]
fn every_workspace_crate_linked_into_the_driver_is_expanded() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .output()
        .unwrap();
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let members: Vec<&str> = m["workspace_members"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let name = |id: &str| m["packages"].as_array().unwrap().iter().find(|p| p["id"] == id).unwrap()["name"].clone();
    let nodes = m["resolve"]["nodes"].as_array().unwrap();
    let safenic = members.iter().find(|id| name(id) == "safenic").unwrap().to_string();
    let (mut seen, mut stack) = (std::collections::BTreeSet::new(), vec![safenic]);
    while let Some(id) = stack.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        let node = nodes.iter().find(|n| n["id"] == id.as_str()).unwrap();
        for d in node["deps"].as_array().unwrap() {
            let normal = d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null());
            if normal && members.contains(&d["pkg"].as_str().unwrap()) {
                stack.push(d["pkg"].as_str().unwrap().to_string());
            }
        }
    }
    for id in seen {
        let krate = name(&id);
        let krate = krate.as_str().unwrap();
        let rooms = ["invariants", "platform"];
        let tool_rooms = audit::tool_dependencies::TOOL_ROOMS;
        assert!(
            rooms.contains(&krate)
                || tool_rooms.iter().any(|(c, _)| *c == krate)
                || audit::expanded::EXPANDED.iter().any(|(c, _)| *c == krate),
            "{krate} is linked into safenic but its expanded code is not checked"
        );
    }
}
