//! `#[gpu_startup::test]`: checks a test function and its options and expands to `startup_common::gpu_test!`, which
//! writes the trampoline and the test table's two globals (`startup-common/src/rust/test_table.rs`). Like libtest's
//! `#[test]`, the function and its registration exist in test builds (`cfg(test)`) only.

use std::sync::atomic::{AtomicUsize, Ordering};

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::ext::IdentExt;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprArray, ExprLit, Ident, ItemFn, Lit, LitStr, ReturnType, Type};

use crate::{check_plain, parse_function};

const ATTRIBUTE: &str = "#[gpu_startup::test]";
const SIGNATURES: &str = "`fn NAME()` or `fn NAME() -> Result<(), E>`";
const OPTIONS: &str = "`ignore`, `should_panic`, `should_panic(expected = \"text\")`, `threads = N`, \
                       `threads = [X, Y, Z]`, `blocks = N`, `blocks = [X, Y, Z]`, `timeout = SECONDS`";

/// Where the attribute is: its file, line and column, which make the test's symbols unique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Site {
    pub file: String,
    pub line: usize,
    pub column: usize,
}

/// Where the test function's name is in its source: the file as the compiler names it, and the 1-based line and
/// column (in characters) where the name starts and just past where it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    pub file: String,
    pub start: [usize; 2],
    pub end: [usize; 2],
}

impl Location {
    /// The location as `gpu_test!` takes it: `TestSpec`'s `source` builder.
    fn builder(&self) -> TokenStream2 {
        let file = &self.file;
        // A file of more than 4 billion lines is not compiled; the number only labels the test.
        let [start_line, start_column, end_line, end_column] =
            [self.start[0], self.start[1], self.end[0], self.end[1]].map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        quote!(source(#file, #start_line, #start_column, #end_line, #end_column))
    }
}

/// A test's options, from the attribute and from libtest's own `#[ignore]` and `#[should_panic]` on the function.
#[derive(Default)]
struct Options {
    ignore: bool,
    /// `should_panic`, with the text the panic must contain.
    should_panic: Option<Option<LitStr>>,
    threads: Option<[u32; 3]>,
    blocks: Option<[u32; 3]>,
    timeout_ms: Option<u32>,
    /// The options already given, to refuse one given twice.
    given: Vec<String>,
}

impl Options {
    fn note(&mut self, option: &str, span: Span) -> syn::Result<()> {
        if self.given.iter().any(|given| given == option) {
            return Err(syn::Error::new(span, format!("`{option}` is given twice")));
        }
        self.given.push(option.to_owned());
        Ok(())
    }

    /// One option of the attribute, or of a `#[should_panic(...)]` on the function.
    fn parse(&mut self, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        let name = meta.path.get_ident().map(Ident::to_string).unwrap_or_default();
        match name.as_str() {
            "ignore" => {
                self.note("ignore", meta.path.span())?;
                if meta.input.peek(syn::Token![=]) || meta.input.peek(syn::token::Paren) {
                    return Err(meta.error("`ignore` takes no value"));
                }
                self.ignore = true;
            }
            "should_panic" => {
                self.note("should_panic", meta.path.span())?;
                self.should_panic = Some(should_panic_text(&meta)?);
            }
            "threads" | "blocks" => {
                self.note(&name, meta.path.span())?;
                let shape = shape(&name, &meta.value()?.parse()?)?;
                *if name == "threads" { &mut self.threads } else { &mut self.blocks } = Some(shape);
            }
            "timeout" => {
                self.note("timeout", meta.path.span())?;
                self.timeout_ms = Some(timeout_ms(&meta.value()?.parse()?)?);
            }
            _ => return Err(meta.error(format!("`{ATTRIBUTE}` takes {OPTIONS}"))),
        }
        Ok(())
    }

    /// Takes libtest's `#[ignore]` and `#[should_panic]` off the function into the options; refuses `#[test]`.
    fn take_libtest_attributes(&mut self, attributes: &mut Vec<Attribute>) -> syn::Result<()> {
        let mut kept = Vec::with_capacity(attributes.len());
        for attribute in attributes.drain(..) {
            let path = attribute.path();
            if path.is_ident("test") {
                return Err(syn::Error::new(
                    attribute.span(),
                    format!("`{ATTRIBUTE}` makes the function a test: remove `#[test]`"),
                ));
            } else if path.is_ident("ignore") {
                self.note("ignore", attribute.span())?;
                self.ignore = true;
            } else if path.is_ident("should_panic") {
                match &attribute.meta {
                    syn::Meta::Path(_) => {
                        self.note("should_panic", attribute.span())?;
                        self.should_panic = Some(None);
                    }
                    syn::Meta::NameValue(pair) => {
                        self.note("should_panic", attribute.span())?;
                        self.should_panic = Some(Some(string_literal(&pair.value)?));
                    }
                    syn::Meta::List(_) => attribute.parse_nested_meta(|meta| {
                        if !meta.path.is_ident("expected") {
                            return Err(meta.error("`should_panic` takes `expected = \"text\"`"));
                        }
                        self.note("should_panic", attribute.span())?;
                        self.should_panic = Some(Some(meta.value()?.parse()?));
                        Ok(())
                    })?,
                }
            } else {
                kept.push(attribute);
            }
        }
        *attributes = kept;
        Ok(())
    }

    /// The options as `gpu_test!` takes them: `TestSpec`'s builders.
    fn builders(&self) -> Vec<TokenStream2> {
        let mut builders = Vec::new();
        if self.ignore {
            builders.push(quote!(ignore));
        }
        match &self.should_panic {
            Some(Some(text)) => builders.push(quote!(should_panic_with(#text))),
            Some(None) => builders.push(quote!(should_panic)),
            None => {}
        }
        if let Some([x, y, z]) = self.threads {
            builders.push(quote!(threads_xyz(#x, #y, #z)));
        }
        if let Some([x, y, z]) = self.blocks {
            builders.push(quote!(blocks_xyz(#x, #y, #z)));
        }
        if let Some(milliseconds) = self.timeout_ms {
            builders.push(quote!(timeout_ms(#milliseconds)));
        }
        builders
    }
}

/// `should_panic` alone, `should_panic = "text"` or `should_panic(expected = "text")`.
fn should_panic_text(meta: &ParseNestedMeta<'_>) -> syn::Result<Option<LitStr>> {
    if meta.input.peek(syn::Token![=]) {
        return Ok(Some(meta.value()?.parse()?));
    }
    if !meta.input.peek(syn::token::Paren) {
        return Ok(None);
    }
    let mut expected = None;
    meta.parse_nested_meta(|inner| {
        if !inner.path.is_ident("expected") || expected.is_some() {
            return Err(inner.error("`should_panic` takes `expected = \"text\"`"));
        }
        expected = Some(inner.value()?.parse()?);
        Ok(())
    })?;
    Ok(expected)
}

fn string_literal(value: &Expr) -> syn::Result<LitStr> {
    match value {
        Expr::Lit(ExprLit { lit: Lit::Str(text), .. }) => Ok(text.clone()),
        other => Err(syn::Error::new(other.span(), "expected the text the panic must contain, in quotes")),
    }
}

/// `N` (x; y and z are 1) or `[X, Y, Z]`, each from 1 to `u32::MAX`.
fn shape(what: &str, value: &Expr) -> syn::Result<[u32; 3]> {
    let count = |value: &Expr| -> syn::Result<u32> {
        let problem =
            || syn::Error::new(value.span(), format!("`{what}` counts are whole numbers from 1 to 4294967295"));
        match value {
            Expr::Lit(ExprLit { lit: Lit::Int(int), .. }) => {
                int.base10_parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(problem)
            }
            _ => Err(problem()),
        }
    };
    match value {
        Expr::Array(ExprArray { elems, .. }) if elems.len() == 3 => {
            Ok([count(&elems[0])?, count(&elems[1])?, count(&elems[2])?])
        }
        Expr::Array(array) => Err(syn::Error::new(array.span(), format!("`{what} = [X, Y, Z]` takes three counts"))),
        single => Ok([count(single)?, 1, 1]),
    }
}

/// `timeout = 5` or `timeout = 0.25`: seconds, at least a millisecond, at most `u32::MAX` milliseconds.
fn timeout_ms(value: &Expr) -> syn::Result<u32> {
    let seconds = match value {
        Expr::Lit(ExprLit { lit: Lit::Int(int), .. }) => int.base10_parse::<f64>().ok(),
        Expr::Lit(ExprLit { lit: Lit::Float(float), .. }) => float.base10_parse::<f64>().ok(),
        _ => None,
    };
    let milliseconds = seconds.map(|seconds| (seconds * 1000.0).round());
    match milliseconds {
        Some(ms) if ms >= 1.0 && ms <= f64::from(u32::MAX) => Ok(ms as u32),
        _ => Err(syn::Error::new(
            value.span(),
            "`timeout` is a number of seconds, from 0.001 to 4294967 (`timeout = 5`, `timeout = 0.5`)",
        )),
    }
}

/// Whether a test may return `ty`: `()`, or a `Result` whose success is `()` (`Result<(), E>`, `io::Result<()>`).
fn returns_unit_or_result(ty: &Type) -> bool {
    match ty {
        Type::Tuple(tuple) => tuple.elems.is_empty(),
        Type::Path(path) if path.qself.is_none() => {
            let Some(last) = path.path.segments.last() else { return false };
            let syn::PathArguments::AngleBracketed(arguments) = &last.arguments else { return false };
            last.ident == "Result"
                && matches!(arguments.args.first(), Some(syn::GenericArgument::Type(Type::Tuple(unit))) if unit.elems.is_empty())
        }
        Type::Paren(inner) => returns_unit_or_result(&inner.elem),
        _ => false,
    }
}

/// The test that `item` is, with the options `args`, at `site`; `locate` says where a function's name is.
pub(crate) fn expand_test(
    args: TokenStream2,
    item: TokenStream2,
    site: &Site,
    locate: &dyn Fn(&Ident) -> Location,
) -> syn::Result<TokenStream2> {
    let mut options = Options::default();
    syn::parse::Parser::parse2(syn::meta::parser(|meta| options.parse(meta)), args)?;
    let mut function: ItemFn = parse_function(ATTRIBUTE, SIGNATURES, item)?;
    options.take_libtest_attributes(&mut function.attrs)?;
    let signature = &function.sig;
    check_plain(ATTRIBUTE, SIGNATURES, signature)?;
    if !signature.inputs.is_empty() {
        return Err(syn::Error::new(
            signature.inputs.span(),
            format!("`{ATTRIBUTE}` expects {SIGNATURES}, with no arguments"),
        ));
    }
    if let ReturnType::Type(_, ty) = &signature.output {
        if !returns_unit_or_result(ty) {
            return Err(syn::Error::new(
                ty.span(),
                format!("`{ATTRIBUTE}` expects {SIGNATURES} (E: Debug), not a function returning `{}`", quote!(#ty)),
            ));
        }
        if options.should_panic.is_some() && !matches!(&**ty, Type::Tuple(unit) if unit.elems.is_empty()) {
            return Err(syn::Error::new(ty.span(), "a `should_panic` test returns `()`: its panic is what it shows"));
        }
    }
    let name = &signature.ident;
    let id = LitStr::new(&symbol_id(name, site), Span::call_site());
    let mut builders = options.builders();
    builders.push(locate(name).builder());
    let private = quote! { ::gpu_startup::__private };
    Ok(quote! {
        #[cfg(test)]
        #function

        #[cfg(test)]
        #private::gpu_test!(#id, #name #(, #builders)*);
    })
}

/// The suffix of the test's two symbols: its name (in the characters every GPU assembler takes) and a hash of the
/// crate, the attribute's place and how many tests this compilation registered before it. A test's place alone
/// tells most apart, the crate those of several crates, and the count those that one `macro_rules!` makes (they
/// share the place of the macro's definition).
fn symbol_id(function: &Ident, site: &Site) -> String {
    static REGISTERED: AtomicUsize = AtomicUsize::new(0);
    let name: String =
        function.unraw().to_string().chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let crate_name = std::env::var("CARGO_CRATE_NAME").unwrap_or_default();
    let count = REGISTERED.fetch_add(1, Ordering::Relaxed);
    let hash = fnv1a([
        crate_name.as_bytes(),
        site.file.as_bytes(),
        &site.line.to_le_bytes(),
        &site.column.to_le_bytes(),
        &count.to_le_bytes(),
    ]);
    format!("{name}_{hash:016x}")
}

/// FNV-1a, 64 bits, over `parts` with a separator between them.
fn fnv1a<const N: usize>(parts: [&[u8]; N]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for part in parts {
        for &byte in part.iter().chain(&[0xff]) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use quote::format_ident;

    use super::*;

    fn site(line: usize) -> Site {
        Site { file: "src/lib.rs".into(), line, column: 5 }
    }

    fn expand(args: &str, item: &str) -> syn::Result<String> {
        let locate = |name: &Ident| Location { file: format!("src/{name}.rs"), start: [7, 4], end: [7, 9] };
        let tokens = expand_test(args.parse().unwrap(), item.parse().unwrap(), &site(1), &locate)?;
        Ok(tokens.to_string().split_whitespace().collect::<Vec<_>>().join(" "))
    }

    fn error(args: &str, item: &str) -> String {
        expand(args, item).unwrap_err().to_string()
    }

    #[test]
    fn a_plain_test_is_registered_in_test_builds() {
        let expanded = expand("", "fn adds() { assert_eq!(1 + 1, 2); }").unwrap();
        assert!(expanded.starts_with("# [cfg (test)] fn adds ()"), "{expanded}");
        assert!(expanded.contains("# [cfg (test)] :: gpu_startup :: __private :: gpu_test ! (\"adds_"), "{expanded}");
        let source = "source (\"src/adds.rs\" , 7u32 , 4u32 , 7u32 , 9u32)";
        assert!(expanded.ends_with(&format!("\" , adds , {source}) ;")), "{expanded}");
    }

    #[test]
    fn options_become_the_specs_builders() {
        let expanded =
            expand("should_panic(expected = \"sum\"), threads = 32, blocks = [2, 3, 1], timeout = 0.25", "fn t() {}")
                .unwrap();
        for builder in [
            "should_panic_with (\"sum\")",
            "threads_xyz (32u32 , 1u32 , 1u32)",
            "blocks_xyz (2u32 , 3u32 , 1u32)",
            "timeout_ms (250u32)",
        ] {
            assert!(expanded.contains(builder), "{builder} in {expanded}");
        }
        let expanded = expand("ignore, timeout = 5", "fn t() {}").unwrap();
        assert!(expanded.contains(", t , ignore , timeout_ms (5000u32) , source (\"src/t.rs\""), "{expanded}");
        assert!(expand("should_panic", "fn t() {}").unwrap().contains(", t , should_panic , source ("));
        assert!(expand("should_panic = \"x\"", "fn t() {}").unwrap().contains("should_panic_with (\"x\")"));
    }

    #[test]
    fn libtests_own_attributes_are_taken_off_the_function() {
        let expanded = expand("", "#[ignore] #[should_panic(expected = \"boom\")] #[inline] fn t() {}").unwrap();
        assert!(expanded.starts_with("# [cfg (test)] # [inline] fn t ()"), "{expanded}");
        assert!(expanded.contains(", t , ignore , should_panic_with (\"boom\") , source ("), "{expanded}");
        assert!(expand("", "#[should_panic = \"x\"] fn t() {}").unwrap().contains("should_panic_with (\"x\")"));
    }

    #[test]
    fn a_result_test_is_allowed_but_not_with_should_panic() {
        for item in ["fn t() -> Result<(), &'static str> { Ok(()) }", "fn t() -> io::Result<()> { Ok(()) }"] {
            assert!(expand("", item).is_ok(), "{item}");
        }
        assert_eq!(
            error("should_panic", "fn t() -> Result<(), u8> { Ok(()) }"),
            "a `should_panic` test returns `()`: its panic is what it shows"
        );
    }

    #[test]
    fn a_wrong_signature_or_option_is_named() {
        for (args, item, problem) in [
            (
                "",
                "fn t(x: u32) {}",
                "`#[gpu_startup::test]` expects `fn NAME()` or `fn NAME() -> Result<(), E>`, with no arguments",
            ),
            (
                "",
                "fn t() -> u8 { 0 }",
                "`#[gpu_startup::test]` expects `fn NAME()` or `fn NAME() -> Result<(), E>` (E: Debug), not a function returning `u8`",
            ),
            ("", "fn t() -> Result<u8, ()> { Ok(0) }", "not a function returning `Result < u8 , () >`"),
            ("", "async fn t() {}", "not an `async fn`"),
            ("", "unsafe fn t() {}", "not an `unsafe fn`"),
            ("", "fn t<T>() {}", "not a generic function"),
            ("", "struct T;", "`#[gpu_startup::test]` goes on a function"),
            ("", "#[test] fn t() {}", "`#[gpu_startup::test]` makes the function a test: remove `#[test]`"),
            ("ignore", "#[ignore] fn t() {}", "`ignore` is given twice"),
            ("threads = 1, threads = 2", "fn t() {}", "`threads` is given twice"),
            ("threads = 0", "fn t() {}", "`threads` counts are whole numbers from 1 to 4294967295"),
            ("blocks = [1, 2]", "fn t() {}", "`blocks = [X, Y, Z]` takes three counts"),
            ("blocks = x", "fn t() {}", "`blocks` counts are whole numbers from 1 to 4294967295"),
            ("timeout = 0", "fn t() {}", "`timeout` is a number of seconds, from 0.001 to 4294967"),
            ("timeout = 5000000", "fn t() {}", "`timeout` is a number of seconds"),
            ("ignore = \"later\"", "fn t() {}", "`ignore` takes no value"),
            ("should_panic(text = \"x\")", "fn t() {}", "`should_panic` takes `expected = \"text\"`"),
            ("repeat = 3", "fn t() {}", "`#[gpu_startup::test]` takes `ignore`, `should_panic`"),
        ] {
            let error = error(args, item);
            assert!(error.contains(problem), "{args} {item}: {error}");
        }
    }

    #[test]
    fn symbols_differ_by_place_and_by_count() {
        let name = format_ident!("r#type");
        let first = symbol_id(&name, &site(3));
        assert!(first.starts_with("type_") && first.len() == "type_".len() + 16, "{first}");
        assert_ne!(symbol_id(&name, &site(3)), first, "the same place twice, as a macro_rules! makes");
        let unicode = symbol_id(&format_ident!("grüße"), &site(3));
        assert!(unicode.starts_with("gre_"), "{unicode}");
    }

    #[test]
    fn the_hash_is_fnv1a() {
        // FNV-1a of the empty input is its offset basis; the separator byte makes parts count.
        assert_ne!(fnv1a([b"ab", b"c"]), fnv1a([b"a", b"bc"]));
        assert_eq!(fnv1a::<0>([]), 0xcbf2_9ce4_8422_2325);
    }
}
