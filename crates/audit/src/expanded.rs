//! The driver's code after macro expansion: a procedural macro can emit `unsafe` that its
//! source never spells (it may build the keyword while it runs), and the compiler accepts it
//! under `#![forbid(unsafe_code)]` in some forms. The driver crates are expanded with nightly
//! rustc (`-Zunpretty=expanded`) and the result parsed with `syn`: outside the two rooms, no
//! unsafe code may appear in it but what the compiler's own derives emit.

use crate::unsafe_code::{UnsafeKind, KEYWORD};
use proc_macro2::Span;
use serde::Serialize;
use std::path::Path;
use std::process::Command;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// The crates (and targets) whose expanded code is checked: the driver library, the binary
/// with the forwarding loops, and every other workspace crate linked into it (all but the two
/// rooms, `invariants` and `platform`, whose unsafe code is counted and commented instead).
pub const EXPANDED: &[(&str, &str)] = &[
    ("ixgbe", "--lib"),
    ("virtio", "--lib"),
    ("afxdp", "--lib"),
    ("safenic", "--bin=safenic"),
    ("cli", "--lib"),
    ("bench", "--lib"),
    ("manifest", "--lib"),
    ("nicsim", "--lib"),
];

/// Attributes that place or name a symbol for the linker, or change a function's ABI.
const LINKER_ATTRIBUTES: &[&str] = &["no_mangle", "export_name", "link_section", "link_name", "link", "naked"];

/// Traits the compiler's built-in derives implement unsafely (`#[derive(Clone)]` on a `Copy`
/// type implements `TrivialClone`).
const DERIVED_UNSAFE_IMPLS: &[&str] = &["::core::clone::TrivialClone"];

/// The derive whose output holds an unsafe block ([`is_derived_unreachable`]).
const DERIVED_PARTIAL_EQ: &str = "::core::cmp::PartialEq";

/// Unsafe code found in the expanded code of one crate.
#[derive(Debug, Clone, Serialize)]
pub struct ExpandedReport {
    pub krate: String,
    /// What was found, with the line in the expanded text.
    pub findings: Vec<String>,
}

/// Expands every crate of [`EXPANDED`] in the workspace at `root` and reports unsafe code.
pub fn check(root: &Path) -> Result<Vec<ExpandedReport>, String> {
    EXPANDED.iter().map(|(krate, target)| check_crate(root, krate, target)).collect()
}

/// Expands `krate`'s `target` (e.g. `--lib`) in the workspace at `root` and reports unsafe code.
pub fn check_crate(root: &Path, krate: &str, target: &str) -> Result<ExpandedReport, String> {
    let out = Command::new("cargo")
        .args(["+nightly", "rustc", "--quiet", "-p", krate, target, "--profile", "check", "--target-dir"])
        .arg(root.join(crate::NIGHTLY_TARGET))
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["--", "-Zunpretty=expanded"])
        .env_remove("RUSTFLAGS")
        .output()
        .map_err(|e| format!("running cargo +nightly rustc: {e} (scripts/setup installs the nightly toolchain)"))?;
    if !out.status.success() {
        return Err(format!(
            "expanding {krate}: {}",
            String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("cargo failed")
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(ExpandedReport { krate: krate.to_string(), findings: scan_expanded(&text)? })
}

/// Unsafe code in expanded source text, except the derives' own.
pub fn scan_expanded(text: &str) -> Result<Vec<String>, String> {
    let file = syn::parse_file(text)
        .map_err(|e| format!("the expanded code does not parse, line {}: {e}", e.span().start().line))?;
    let mut v = Expanded { findings: Vec::new(), in_derived_partial_eq: false };
    v.visit_file(&file);
    Ok(v.findings)
}

struct Expanded {
    findings: Vec<String>,
    /// Inside an `#[automatically_derived] impl ::core::cmp::PartialEq`.
    in_derived_partial_eq: bool,
}

impl Expanded {
    fn found(&mut self, what: &str, span: Span) {
        self.findings.push(format!("{what} at line {} of the expanded code", span.start().line));
    }

    fn visit_impl_unsafety(&mut self, i: &syn::ItemImpl) {
        if let Some(u) = i.unsafety {
            let path = i.trait_.as_ref().map(|(_, p, _)| path_text(p));
            if !path.as_deref().is_some_and(|p| DERIVED_UNSAFE_IMPLS.contains(&p)) {
                let of = path.as_deref().unwrap_or("a type");
                self.found(&format!("an {} of {of}", UnsafeKind::Impl.describe()), u.span);
            }
        }
    }
}

/// `::core::cmp::PartialEq`, as a path is written.
fn path_text(p: &syn::Path) -> String {
    let lead = if p.leading_colon.is_some() { "::" } else { "" };
    format!("{lead}{}", p.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>().join("::"))
}

/// The block `#[derive(PartialEq)]` writes for the impossible arm of a multi-variant enum:
/// `{ ::core::intrinsics::unreachable() }` and nothing else. The intrinsic is unstable, so
/// code outside the compiler's own derives cannot call it on the stable toolchain.
fn is_derived_unreachable(block: &syn::ExprUnsafe) -> bool {
    match block.block.stmts.as_slice() {
        [syn::Stmt::Expr(syn::Expr::Call(call), None)] => {
            call.args.is_empty()
                && matches!(&*call.func, syn::Expr::Path(p) if path_text(&p.path) == "::core::intrinsics::unreachable")
        }
        _ => false,
    }
}

impl<'ast> Visit<'ast> for Expanded {
    fn visit_expr(&mut self, e: &'ast syn::Expr) {
        if let syn::Expr::Unsafe(block) = e {
            if !(self.in_derived_partial_eq && is_derived_unreachable(block)) {
                self.found(&format!("an {}", UnsafeKind::Block.describe()), block.span());
            }
        }
        syn::visit::visit_expr(self, e);
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let derived = i.attrs.iter().any(|a| a.path().is_ident("automatically_derived"));
        let trait_path = i.trait_.as_ref().map(|(_, p, _)| path_text(p));
        let outer = self.in_derived_partial_eq;
        self.in_derived_partial_eq = derived && trait_path.as_deref() == Some(DERIVED_PARTIAL_EQ);
        self.visit_impl_unsafety(i);
        syn::visit::visit_item_impl(self, i);
        self.in_derived_partial_eq = outer;
    }
    fn visit_signature(&mut self, s: &'ast syn::Signature) {
        if let Some(u) = s.unsafety {
            self.found(&format!("an {}", UnsafeKind::Function.describe()), u.span);
        }
        syn::visit::visit_signature(self, s);
    }
    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        if let Some(u) = t.unsafety {
            self.found(&format!("an {}", UnsafeKind::Trait.describe()), u.span);
        }
        syn::visit::visit_item_trait(self, t);
    }
    fn visit_item_foreign_mod(&mut self, m: &'ast syn::ItemForeignMod) {
        self.found("an extern block", m.span());
        syn::visit::visit_item_foreign_mod(self, m);
    }
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if a.path().is_ident(KEYWORD) {
            self.found(&format!("an {}", UnsafeKind::Attribute.describe()), a.span());
        }
        // Unsafe in meaning, whether or not wrapped in the keyword: a macro's output in an
        // older edition may carry them bare (a `memcpy` that replaces libc's, an
        // `.init_array` entry that runs before main).
        if let Some(name) = LINKER_ATTRIBUTES.iter().find(|n| a.path().is_ident(n)) {
            self.found(&format!("a #[{name}] attribute"), a.span());
        }
        syn::visit::visit_attribute(self, a);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let name = m.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        if matches!(name.as_str(), "asm" | "naked_asm" | "global_asm") {
            self.found("assembly", m.span());
        }
        syn::visit::visit_macro(self, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_macro_emitted_is_found_and_the_derives_unsafe_impls_are_not() {
        // As rustc prints a crate whose proc macro built the keyword itself, beside a
        // `#[derive(Clone, Copy)]`.
        let expanded = "#![forbid(unsafe_code)]\nfn poked() { UNSAFE { core::ptr::write_volatile(8 as *mut u8, 1) } }\nstruct S;\nUNSAFE impl ::core::clone::TrivialClone for S {}\n#[allow(unused)]\nUNSAFE impl Send for S {}\n"
            .replace("UNSAFE", KEYWORD);
        let found = scan_expanded(&expanded).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with(&format!("an {KEYWORD} block at line 2")), "{found:?}");
        assert!(found[1].starts_with(&format!("an {KEYWORD} impl of Send at line 6")), "{found:?}");
    }

    #[test]
    fn the_partial_eq_derive_s_unreachable_arm_is_its_own_and_nothing_else_is() {
        let derived = "#[automatically_derived]\nimpl ::core::cmp::PartialEq for E {\n fn eq(&self, o: &E) -> bool { match 0 { _ => UNSAFE { ::core::intrinsics::unreachable() } } }\n}\n"
            .replace("UNSAFE", KEYWORD);
        assert!(scan_expanded(&derived).unwrap().is_empty());
        // The same block elsewhere, or another block in that impl, is reported.
        let elsewhere = derived.replace("#[automatically_derived]\n", "");
        assert_eq!(scan_expanded(&elsewhere).unwrap().len(), 1);
        let other = derived.replace("::core::intrinsics::unreachable()", "(8 as *mut u8).write(1)");
        assert_eq!(scan_expanded(&other).unwrap().len(), 1);
    }

    #[test]
    fn linker_attributes_a_macro_emitted_bare_are_found() {
        // What a proc macro can emit into an edition-2021 crate without the keyword.
        let expanded = "#[no_mangle]\npub extern \"C\" fn memcpy() {}\n#[export_name = \"x\"]\nfn x() {}\n\
                        #[link_section = \".init_array\"]\n#[used]\nstatic INIT: fn() = x;\nfn fine() {}\n";
        let found = scan_expanded(expanded).unwrap();
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].starts_with("a #[no_mangle] attribute at line 1"), "{found:?}");
        assert!(found[1].starts_with("a #[export_name] attribute at line 3"), "{found:?}");
        assert!(found[2].starts_with("a #[link_section] attribute at line 5"), "{found:?}");
    }
}
