//! Where the hot paths are registered: `HOT_PATHS` and `COLD_CALLS` in
//! `crates/safenic/src/fwd.rs`, read from the source with `syn` so that the list the driver
//! compiles and the list the audit checks are one.

use std::path::Path;

/// The file that registers the hot paths, relative to the repository.
pub const REGISTRY: &str = "crates/safenic/src/fwd.rs";

/// The registered hot paths, and the calls out of them that are allowed with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    pub hot_paths: Vec<String>,
    pub cold_calls: Vec<(String, String)>,
}

pub fn read(root: &Path) -> Result<Registry, String> {
    let path = root.join(REGISTRY);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("reading {}: {e} (run from the repository root or pass --root)", path.display()))?;
    parse(&text).map_err(|e| format!("{REGISTRY}: {e}"))
}

pub fn parse(text: &str) -> Result<Registry, String> {
    let file = syn::parse_file(text).map_err(|e| e.to_string())?;
    let constant = |name: &str| {
        file.items.iter().find_map(|i| match i {
            syn::Item::Const(c) if c.ident == name => Some((*c.expr).clone()),
            _ => None,
        })
    };
    let hot = constant("HOT_PATHS").ok_or("no `const HOT_PATHS`")?;
    let cold = constant("COLD_CALLS").ok_or("no `const COLD_CALLS`")?;
    let hot_paths = elements(&hot)?.iter().map(string).collect::<Result<Vec<_>, _>>()?;
    let cold_calls = elements(&cold)?
        .iter()
        .map(|e| match e {
            syn::Expr::Tuple(t) if t.elems.len() == 2 => Ok((string(&t.elems[0])?, string(&t.elems[1])?)),
            _ => Err("COLD_CALLS holds (name, reason) pairs".to_string()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if hot_paths.is_empty() {
        return Err("HOT_PATHS is empty: nothing to audit".into());
    }
    Ok(Registry { hot_paths, cold_calls })
}

/// The elements of `&[a, b, …]`.
fn elements(e: &syn::Expr) -> Result<Vec<syn::Expr>, String> {
    match e {
        syn::Expr::Reference(r) => elements(&r.expr),
        syn::Expr::Array(a) => Ok(a.elems.iter().cloned().collect()),
        _ => Err("expected a list `&[…]` of literals".into()),
    }
}

fn string(e: &syn::Expr) -> Result<String, String> {
    match e {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Ok(s.value()),
        _ => Err("expected a string literal".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_read_from_the_source() {
        let text = r#"
            pub const HOT_PATHS: &[&str] = &["a::run", "a::batch"];
            pub const COLD_CALLS: &[(&str, &str)] = &[("a::tick", "once a second")];
        "#;
        let r = parse(text).unwrap();
        assert_eq!(r.hot_paths, ["a::run", "a::batch"]);
        assert_eq!(r.cold_calls, [("a::tick".to_string(), "once a second".to_string())]);
        assert!(parse("pub const HOT_PATHS: &[&str] = &[];\npub const COLD_CALLS: &[(&str, &str)] = &[];").is_err());
        assert!(parse("const X: u8 = 1;").is_err());
    }

    #[test]
    fn the_repository_registers_the_forwarding_loops() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let r = read(&root).unwrap();
        assert!(r.hot_paths.iter().any(|h| h == "safenic::fwd::forward_flexible"), "{r:?}");
    }
}
