//! Every way to write unsafe code that the audit must see, and what it must not mistake for
//! unsafe code. The fixtures are source texts: they are parsed, never compiled.

use audit::budget::unsafe_budget;
use audit::unsafe_code::{scan, UnsafeKind, KEYWORD};

/// A fixture with `UNSAFE` where the keyword goes: spelled that way so that this file, which
/// has no unsafe code, does not appear to have any to a text search.
fn code(fixture: &str) -> String {
    fixture.replace("UNSAFE", KEYWORD)
}

/// The kinds found in `fixture`, in order.
fn kinds(fixture: &str) -> Vec<UnsafeKind> {
    let source = code(fixture);
    scan(&source).unwrap_or_else(|e| panic!("{e}\n{source}")).into_iter().map(|s| s.kind).collect()
}

#[test]
fn a_naked_function_with_assembly_is_found() {
    // Compiles under #![forbid(unsafe_code)] on rustc 1.95 (rust-lang/rust#131801).
    let src = "#[UNSAFE(naked)]\npub extern \"C\" fn poke(a: usize, v: u64) {\n    core::arch::naked_asm!(\"mov qword ptr [rdi], rsi\", \"ret\")\n}\n";
    let k = kinds(src);
    assert!(k.contains(&UnsafeKind::Attribute), "{k:?}");
    assert!(k.contains(&UnsafeKind::Assembly), "{k:?}");
}

#[test]
fn every_unsafe_attribute_is_found() {
    for attr in ["#[UNSAFE(no_mangle)]", "#[UNSAFE(export_name = \"f\")]", "#[UNSAFE(link_section = \".x\")]"] {
        assert_eq!(kinds(&format!("{attr}\npub fn f() {{}}\n")), [UnsafeKind::Attribute], "{attr}");
    }
    let hidden = "#[cfg_attr(all(), UNSAFE(no_mangle))]\npub fn f() {}\n";
    assert_eq!(kinds(hidden), [UnsafeKind::Attribute]);
}

/// Edition 2021 spells the linker's attributes without the keyword; they are as unsafe, and
/// count in a trusted crate's budget (the compiler's `unsafe_code` lint refuses them elsewhere).
#[test]
fn linker_attributes_without_the_keyword_are_found() {
    for attr in ["#[no_mangle]", "#[export_name = \"f\"]", "#[link_section = \".init_array\"]"] {
        assert_eq!(kinds(&format!("{attr}\npub fn f() {{}}\n")), [UnsafeKind::Attribute], "{attr}");
    }
    assert_eq!(kinds("#[cfg_attr(all(), no_mangle)]\npub fn f() {}\n"), [UnsafeKind::Attribute]);
    assert_eq!(kinds("#[inline]\n#[used]\n#[cfg_attr(test, derive(Debug))]\nstruct S;\n"), []);
}

#[test]
fn assembly_in_every_form_is_found() {
    for src in [
        "fn f() { std::arch::asm!(\"nop\") }",
        "fn f() { core::arch::asm!(\"nop\"); }",
        "core::arch::global_asm!(\".globl x\");",
        "use std::arch::asm;\nfn f() { asm!(\"nop\") }",
    ] {
        assert!(kinds(src).contains(&UnsafeKind::Assembly), "{src}");
    }
}

#[test]
fn blocks_impls_functions_traits_and_extern_blocks_are_found() {
    let src = "fn a() { UNSAFE { x() } }\nUNSAFE impl Send for T {}\nUNSAFE fn b() {}\nUNSAFE trait U {}\nextern \"C\" { fn c(); }\nimpl V { UNSAFE fn d(&self) {} }\n";
    assert_eq!(
        kinds(src),
        [
            UnsafeKind::Block,
            UnsafeKind::Impl,
            UnsafeKind::Function,
            UnsafeKind::Trait,
            UnsafeKind::ExternBlock,
            UnsafeKind::Function
        ]
    );
}

#[test]
fn unsafe_inside_a_macro_is_found() {
    // syn cannot see what a macro makes of its tokens: the keyword anywhere in them counts.
    for src in [
        "macro_rules! m { () => { UNSAFE { core::ptr::read(0 as *const u8) } } }",
        "fn f() { let v = vec![UNSAFE { g() }]; }",
        "my_proc_macro! { UNSAFE fn h() {} }",
    ] {
        assert!(kinds(src).contains(&UnsafeKind::InMacro), "{src}");
    }
}

#[test]
fn strings_comments_and_names_are_not_unsafe_code() {
    let src = "// UNSAFE { not code }\n/* UNSAFE { nor this } */\nfn f() { let s = \"UNSAFE { x() }\"; let r = r#\"UNSAFE impl\"#; let unsafe_count = 1; println!(\"UNSAFE\"); }\n";
    assert_eq!(kinds(src), []);
}

#[test]
fn a_block_needs_a_safety_comment_right_above() {
    let src = "fn a() {\n    // SAFETY: fine.\n    UNSAFE { x() };\n    let y =\n        // SAFETY: also fine,\n        // over two lines.\n        UNSAFE {\n            z()\n        };\n    UNSAFE { w() }\n}\n";
    let sites = scan(&code(src)).unwrap();
    let summary: Vec<(usize, usize, bool)> = sites.iter().map(|s| (s.line, s.lines, s.documented)).collect();
    assert_eq!(summary, [(3, 1, true), (7, 3, true), (10, 1, false)]);
}

#[test]
fn the_budget_refuses_unsafe_outside_the_rooms_and_a_crate_that_does_not_forbid_it() {
    let root = std::env::temp_dir().join(format!("safenic-audit-budget-{}", std::process::id()));
    let crates = [
        ("ixgbe", "#![forbid(unsafe_code)]\nfn x() {\n// SAFETY: documented.\nUNSAFE { f() }\n}\n"),
        ("platform", "fn x() {\nUNSAFE { g() }\n}\n"),
        ("nicsim", "pub fn y() {}\n"),
        (
            "bench",
            "#![forbid(unsafe_code)]\n#[UNSAFE(naked)]\nextern \"C\" fn z() { core::arch::naked_asm!(\"ret\") }\n",
        ),
    ];
    for (name, body) in crates {
        let dir = root.join("crates").join(name);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[package]\n").unwrap();
        std::fs::write(dir.join("src/lib.rs"), code(body)).unwrap();
    }
    let budget = unsafe_budget(&root).unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    let get = |n: &str| budget.iter().find(|c| c.name == n).unwrap().clone();
    let (ixgbe, platform, nicsim, bench) = (get("ixgbe"), get("platform"), get("nicsim"), get("bench"));
    assert_eq!(ixgbe.not_allowed, ["crates/ixgbe/src/lib.rs:4 unsafe block"], "ixgbe may not have unsafe");
    assert!(!ixgbe.passed());
    assert_eq!(platform.undocumented, ["crates/platform/src/lib.rs:2"]);
    assert!(!platform.passed(), "a block without // SAFETY: fails even in a room");
    assert!(!nicsim.forbids_unsafe_code && !nicsim.passed(), "a crate outside the rooms must forbid unsafe code");
    assert_eq!(bench.not_allowed.len(), 2, "the naked function: {:?}", bench.not_allowed);
}

/// The DPDK crate may hold unsafe code for its FFI in `src/`, but its tests and examples are
/// users of its safe API, like any other crate.
#[test]
fn an_ffi_room_allows_unsafe_only_in_its_library() {
    let root = std::env::temp_dir().join(format!("safenic-audit-ffi-{}", std::process::id()));
    let dir = root.join("crates/dpdk");
    for sub in ["src", "tests", "examples"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(dir.join("Cargo.toml"), "[package]\n").unwrap();
    let block = code("fn x() {\n// SAFETY: documented.\nUNSAFE { f() }\n}\n");
    for file in ["src/lib.rs", "tests/t.rs", "examples/l2fwd.rs"] {
        std::fs::write(dir.join(file), &block).unwrap();
    }
    let budget = unsafe_budget(&root).unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    let dpdk = budget.iter().find(|c| c.name == "dpdk").unwrap();
    assert_eq!(
        dpdk.not_allowed,
        ["crates/dpdk/examples/l2fwd.rs:3 unsafe block", "crates/dpdk/tests/t.rs:3 unsafe block"]
    );
    assert!(!dpdk.passed());
}
