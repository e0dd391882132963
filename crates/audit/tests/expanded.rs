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
