//! Unsafe code, found by parsing each source file with `syn`: blocks, impls, functions and
//! traits declared unsafe, attributes wrapped in the keyword (`naked`, `no_mangle`,
//! `export_name`, `link_section`), inline and global assembly, `extern` blocks, and the keyword
//! inside any macro's tokens (a `macro_rules!` body or an invocation's arguments). A string or a
//! comment that spells the keyword is not code, and is not counted.
//!
//! The keyword itself is spelled in two pieces here ([`KEYWORD`]), so that this crate, which has
//! no unsafe code, does not appear to have any to a text search.

use proc_macro2::{Span, TokenStream, TokenTree};
use serde::Serialize;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// The keyword the audit looks for.
pub const KEYWORD: &str = concat!("un", "safe");

/// Attributes that name or place a symbol for the linker (a `memcpy` that replaces libc's, an
/// `.init_array` entry): unsafe whether or not the keyword wraps them, which edition 2024
/// requires and edition 2021 does not.
const LINKER_ATTRIBUTES: &[&str] = &["no_mangle", "export_name", "link_section"];

/// What kind of unsafe code a site is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnsafeKind {
    Block,
    Impl,
    Function,
    Trait,
    /// `no_mangle` and the like, wrapped in the keyword.
    Attribute,
    /// `asm!`, `naked_asm!`, `global_asm!`.
    Assembly,
    /// `extern "C" { … }`: declarations whose calls are unsafe.
    ExternBlock,
    /// The keyword inside a macro's tokens, where `syn` cannot see what it becomes.
    InMacro,
}

impl UnsafeKind {
    pub fn describe(self) -> &'static str {
        match self {
            UnsafeKind::Block => "unsafe block",
            UnsafeKind::Impl => concat!("un", "safe impl"),
            UnsafeKind::Function => concat!("un", "safe fn"),
            UnsafeKind::Trait => concat!("un", "safe trait"),
            UnsafeKind::Attribute => "unsafe attribute",
            UnsafeKind::Assembly => "assembly",
            UnsafeKind::ExternBlock => "extern block",
            UnsafeKind::InMacro => "unsafe inside a macro",
        }
    }

    /// Blocks, impls and attributes must say why they are sound, in a `// SAFETY:` comment
    /// right above.
    pub fn needs_safety_comment(self) -> bool {
        matches!(self, UnsafeKind::Block | UnsafeKind::Impl | UnsafeKind::Attribute)
    }
}

/// One place of unsafe code in a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnsafeSite {
    pub kind: UnsafeKind,
    /// 1-based first line.
    pub line: usize,
    /// Lines it spans.
    pub lines: usize,
    /// A `// SAFETY:` comment right above (or on its first line).
    pub documented: bool,
}

/// The unsafe code of one Rust source text, or why it does not parse.
pub fn scan(source: &str) -> Result<Vec<UnsafeSite>, String> {
    let file = syn::parse_file(source).map_err(|e| {
        let at = e.span().start();
        format!("line {}: {e}", at.line)
    })?;
    let mut v = Finder { sites: Vec::new() };
    v.visit_file(&file);
    let lines: Vec<&str> = source.lines().collect();
    let mut sites: Vec<UnsafeSite> = v
        .sites
        .into_iter()
        .map(|(kind, span)| {
            let (start, end) = (span.start().line, span.end().line.max(span.start().line));
            UnsafeSite { kind, line: start, lines: end - start + 1, documented: safety_comment_above(&lines, start) }
        })
        .collect();
    sites.sort_by_key(|s| (s.line, s.kind));
    sites.dedup();
    Ok(sites)
}

struct Finder {
    sites: Vec<(UnsafeKind, Span)>,
}

impl Finder {
    fn add(&mut self, kind: UnsafeKind, span: Span) {
        self.sites.push((kind, span));
    }

    /// The keyword anywhere in a macro's tokens.
    fn tokens(&mut self, tokens: &TokenStream) {
        for t in tokens.clone() {
            match t {
                TokenTree::Ident(i) if i == KEYWORD => self.add(UnsafeKind::InMacro, i.span()),
                TokenTree::Group(g) => self.tokens(&g.stream()),
                _ => {}
            }
        }
    }

    fn mac(&mut self, mac: &syn::Macro) {
        let name = mac.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        if matches!(name.as_str(), "asm" | "naked_asm" | "global_asm") {
            self.add(UnsafeKind::Assembly, mac.span());
        }
        self.tokens(&mac.tokens);
    }
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_expr(&mut self, e: &'ast syn::Expr) {
        if let syn::Expr::Unsafe(block) = e {
            self.add(UnsafeKind::Block, block.span());
        }
        syn::visit::visit_expr(self, e);
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if let Some(u) = i.unsafety {
            // From the keyword to the end of the impl.
            self.add(UnsafeKind::Impl, u.span.join(i.brace_token.span.close()).unwrap_or(u.span));
        }
        syn::visit::visit_item_impl(self, i);
    }
    fn visit_signature(&mut self, s: &'ast syn::Signature) {
        if let Some(u) = s.unsafety {
            self.add(UnsafeKind::Function, u.span);
        }
        syn::visit::visit_signature(self, s);
    }
    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        if let Some(u) = t.unsafety {
            self.add(UnsafeKind::Trait, u.span);
        }
        syn::visit::visit_item_trait(self, t);
    }
    fn visit_item_foreign_mod(&mut self, m: &'ast syn::ItemForeignMod) {
        self.add(UnsafeKind::ExternBlock, m.span());
        syn::visit::visit_item_foreign_mod(self, m);
    }
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if a.path().is_ident(KEYWORD) || LINKER_ATTRIBUTES.iter().any(|n| a.path().is_ident(n)) {
            self.add(UnsafeKind::Attribute, a.span());
        }
        if let syn::Meta::List(l) = &a.meta {
            // `no_mangle` wrapped in the keyword inside `cfg_attr(…)`, and the like.
            let mut inner = Finder { sites: Vec::new() };
            inner.tokens(&l.tokens);
            self.sites.extend(inner.sites.into_iter().map(|(_, s)| (UnsafeKind::Attribute, s)));
            if a.path().is_ident("cfg_attr") {
                // `cfg_attr(…, no_mangle)`, without the keyword.
                for t in l.tokens.clone() {
                    if let TokenTree::Ident(i) = t {
                        if LINKER_ATTRIBUTES.iter().any(|n| i == n) {
                            self.add(UnsafeKind::Attribute, i.span());
                        }
                    }
                }
            }
        }
        syn::visit::visit_attribute(self, a);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.mac(m);
        syn::visit::visit_macro(self, m);
    }
}

/// Whether a `// SAFETY:` comment is on line `line` (1-based) or in the comment lines right
/// above it, allowing for a statement that begins on an earlier line (`let x =` …).
fn safety_comment_above(lines: &[&str], line: usize) -> bool {
    let i = line.saturating_sub(1);
    if lines.get(i).is_some_and(|l| l.contains("SAFETY:")) {
        return true;
    }
    let mut k = i;
    while k > 0 {
        k -= 1;
        let t = lines[k].trim_start();
        if t.starts_with("//") {
            if t.contains("SAFETY:") {
                return true;
            }
            continue;
        }
        let continues = t.ends_with('=') || t.ends_with('(') || t.ends_with(',') || t.is_empty() || t.starts_with("#[");
        if !continues || k + 3 < i {
            return false;
        }
    }
    false
}
