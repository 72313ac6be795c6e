//! The attributes of `gpu-startup`: `#[main]`, `#[constructor]`, `#[destructor]` and `#[test]`. Use them through `gpu-startup`,
//! whose documentation has their examples; this crate is its implementation detail (as cortex-m-rt keeps its
//! `#[entry]` in cortex-m-rt-macros).
//!
//! Each attribute checks the function it is put on and writes, next to it, the C-ABI function the startup calls:
//! PTX calls through a function pointer only with the callee's exact prototype, so the user's plain `fn()` is
//! wrapped in one of exactly the prototypes of `docs/abi.md`.

use std::sync::atomic::{AtomicUsize, Ordering};

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Ident, ItemFn, LitInt, ReturnType, Signature, Type};

mod test;

/// See `gpu_startup::main`.
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    output(expand_main(args.into(), item.into()))
}

/// See `gpu_startup::constructor`.
#[proc_macro_attribute]
pub fn constructor(args: TokenStream, item: TokenStream) -> TokenStream {
    output(expand_callback(Callback::Constructor, args.into(), item.into()))
}

/// See `gpu_startup::destructor`.
#[proc_macro_attribute]
pub fn destructor(args: TokenStream, item: TokenStream) -> TokenStream {
    output(expand_callback(Callback::Destructor, args.into(), item.into()))
}

/// See `gpu_startup::test`.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    let span = proc_macro::Span::call_site();
    let site = test::Site { file: span.file(), line: span.line(), column: span.column() };
    // Where the function's name is, as libtest's `--list --format json` reports a test: the compiler's spans.
    let locate = |name: &Ident| {
        let span = name.span().unwrap();
        let (start, end) = (span.start(), span.end());
        test::Location { file: span.file(), start: [start.line(), start.column()], end: [end.line(), end.column()] }
    };
    output(test::expand_test(args.into(), item.into(), &site, &locate))
}

fn output(expansion: syn::Result<TokenStream2>) -> TokenStream {
    expansion.unwrap_or_else(syn::Error::into_compile_error).into()
}

const MAIN_SIGNATURES: &str = "`fn main() -> i32` or `fn main()`";

/// What `main` returns, which decides how the C `main` gets its status.
#[derive(Debug, PartialEq, Eq)]
enum MainReturn {
    Unit,
    Status,
    Never,
}

fn expand_main(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let attribute = "#[gpu_startup::main]";
    if !args.is_empty() {
        return Err(syn::Error::new(args.span(), format!("`{attribute}` takes no arguments")));
    }
    let function = parse_function(attribute, MAIN_SIGNATURES, item)?;
    let signature = &function.sig;
    check_plain(attribute, MAIN_SIGNATURES, signature)?;
    if !signature.inputs.is_empty() {
        return Err(syn::Error::new(
            signature.inputs.span(),
            format!(
                "`{attribute}` expects {MAIN_SIGNATURES}, with no arguments: read them with \
                 `gpu_startup::env::args()`"
            ),
        ));
    }
    let returns = match &signature.output {
        ReturnType::Default => MainReturn::Unit,
        ReturnType::Type(_, ty) => match &**ty {
            Type::Tuple(tuple) if tuple.elems.is_empty() => MainReturn::Unit,
            Type::Never(_) => MainReturn::Never,
            Type::Path(path) if path.qself.is_none() && path.path.is_ident("i32") => MainReturn::Status,
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    format!(
                        "`{attribute}` expects {MAIN_SIGNATURES}, not a function returning `{}`: return the exit \
                         status as an `i32`",
                        quote!(#other)
                    ),
                ));
            }
        },
    };
    let name = &signature.ident;
    let call = match returns {
        MainReturn::Unit => quote! { #name(); 0 },
        MainReturn::Status | MainReturn::Never => quote! { #name() },
    };
    let private = quote! { ::gpu_startup::__private };
    // A test build runs tests, never `main`: without a `main` of its own, its image is a test binary even when it
    // has no tests (`docs/testing-your-code.md`).
    Ok(quote! {
        #[cfg_attr(test, allow(dead_code))]
        #function

        /// The C `main` that every thread of the grid calls (`docs/abi.md`), running the function above.
        #[doc(hidden)]
        #[cfg(not(test))]
        #[unsafe(export_name = "main")]
        // `_start` calls it once per thread; inlined there, it would be in the image twice, as the loader needs the
        // exported `main` kept.
        #[inline(never)]
        extern "C" fn __gpu_startup_main(
            _argc: #private::c_int,
            _argv: *mut *mut #private::c_char,
            _envp: *mut *mut #private::c_char,
        ) -> #private::c_int {
            #call
        }
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Callback {
    Constructor,
    Destructor,
}

impl Callback {
    fn attribute(self) -> &'static str {
        match self {
            Callback::Constructor => "#[gpu_startup::constructor]",
            Callback::Destructor => "#[gpu_startup::destructor]",
        }
    }
}

const CALLBACK_SIGNATURE: &str = "`fn NAME()`, with no arguments and no return value";

/// The priority a constructor or destructor has without `priority = N`: after every explicit one, as in C.
const DEFAULT_PRIORITY: u16 = 65535;

fn expand_callback(kind: Callback, args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let attribute = kind.attribute();
    let priority = parse_priority(attribute, args)?;
    let function = parse_function(attribute, CALLBACK_SIGNATURE, item)?;
    let signature = &function.sig;
    check_plain(attribute, CALLBACK_SIGNATURE, signature)?;
    if !signature.inputs.is_empty() {
        let hint = match kind {
            Callback::Constructor => ": read `main`'s arguments with `gpu_startup::env::args()`",
            Callback::Destructor => "",
        };
        return Err(syn::Error::new(
            signature.inputs.span(),
            format!("`{attribute}` expects {CALLBACK_SIGNATURE}{hint}"),
        ));
    }
    let returns_unit = match &signature.output {
        ReturnType::Default => true,
        ReturnType::Type(_, ty) => matches!(&**ty, Type::Tuple(tuple) if tuple.elems.is_empty()),
    };
    if !returns_unit {
        return Err(syn::Error::new(
            signature.output.span(),
            format!("`{attribute}` expects {CALLBACK_SIGNATURE}: it cannot return a value"),
        ));
    }
    let name = &signature.ident;
    let priority = LitInt::new(&priority.to_string(), Span::call_site());
    let private = quote! { ::gpu_startup::__private };
    let (wrapper, registration) = match kind {
        Callback::Constructor => {
            let wrapper = unique_ident("init", name);
            (
                quote! {
                    extern "C" fn #wrapper(
                        _argc: #private::c_int,
                        _argv: *mut *mut #private::c_char,
                        _envp: *mut *mut #private::c_char,
                    ) {
                        #name()
                    }
                },
                quote! { #private::constructor!(#priority, #wrapper); },
            )
        }
        Callback::Destructor => {
            let wrapper = unique_ident("fini", name);
            (
                quote! {
                    extern "C" fn #wrapper() {
                        #name()
                    }
                },
                quote! { #private::destructor!(#priority, #wrapper); },
            )
        }
    };
    Ok(quote! {
        #function

        /// The C-ABI function the startup calls, running the function above.
        #[doc(hidden)]
        #wrapper
        #registration
    })
}

/// `priority = N` with N from 0 to 65535, or nothing.
fn parse_priority(attribute: &str, args: TokenStream2) -> syn::Result<u16> {
    let mut priority = None;
    let parser = syn::meta::parser(|meta| {
        if !meta.path.is_ident("priority") {
            return Err(meta.error(format!("`{attribute}` takes only `priority = N` (0 to 65535)")));
        }
        if priority.is_some() {
            return Err(meta.error("`priority` is given twice"));
        }
        let literal: LitInt = meta.value()?.parse()?;
        let value = literal.base10_parse::<u16>().map_err(|_| {
            syn::Error::new(literal.span(), format!("the priority of `{attribute}` is a number from 0 to 65535"))
        })?;
        priority = Some(value);
        Ok(())
    });
    syn::parse::Parser::parse2(parser, args)?;
    Ok(priority.unwrap_or(DEFAULT_PRIORITY))
}

pub(crate) fn parse_function(attribute: &str, expected: &str, item: TokenStream2) -> syn::Result<ItemFn> {
    syn::parse2(item.clone())
        .map_err(|_| syn::Error::new(item.span(), format!("`{attribute}` goes on a function: {expected}")))
}

/// Refuses what the startup cannot call through a plain function pointer: `async`, `const`, `unsafe`, an ABI,
/// generics, variadics.
pub(crate) fn check_plain(attribute: &str, expected: &str, signature: &Signature) -> syn::Result<()> {
    let problem = if signature.asyncness.is_some() {
        Some((signature.asyncness.span(), "an `async fn`"))
    } else if signature.constness.is_some() {
        Some((signature.constness.span(), "a `const fn`"))
    } else if signature.unsafety.is_some() {
        Some((signature.unsafety.span(), "an `unsafe fn`"))
    } else if signature.abi.is_some() {
        Some((signature.abi.span(), "a function with an `extern` ABI"))
    } else if !signature.generics.params.is_empty() || signature.generics.where_clause.is_some() {
        Some((signature.generics.span(), "a generic function"))
    } else if signature.variadic.is_some() {
        Some((signature.variadic.span(), "a variadic function"))
    } else {
        None
    };
    match problem {
        Some((span, what)) => Err(syn::Error::new(span, format!("`{attribute}` expects {expected}, not {what}"))),
        None => Ok(()),
    }
}

/// A name for a wrapper that no other in the program has: on NVIDIA it becomes part of an exported symbol
/// (`__init_array_object_<name>_<priority>`), so two crates, or two modules of one, may each have a `fn setup`.
fn unique_ident(kind: &str, function: &Ident) -> Ident {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let crate_name = std::env::var("CARGO_CRATE_NAME").unwrap_or_default();
    let crate_name: String = crate_name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let number = NEXT.fetch_add(1, Ordering::Relaxed);
    format_ident!("__gpu_startup_{}_{}_{}_{}", kind, crate_name, function.unraw(), number)
}

#[cfg(test)]
mod tests {
    // Not `super::*`: the crate's own `test` attribute would shadow the built-in one.
    use super::{Callback, TokenStream2, expand_callback, expand_main, format_ident, unique_ident};

    fn main_error(item: &str) -> String {
        expand_main(TokenStream2::new(), item.parse().unwrap()).unwrap_err().to_string()
    }

    fn callback_error(kind: Callback, args: &str, item: &str) -> String {
        expand_callback(kind, args.parse().unwrap(), item.parse().unwrap()).unwrap_err().to_string()
    }

    fn normalized(tokens: TokenStream2) -> String {
        tokens.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn main_exports_a_c_main_that_returns_the_status() {
        let expanded = normalized(expand_main(TokenStream2::new(), "fn main() -> i32 { 3 }".parse().unwrap()).unwrap());
        assert!(expanded.starts_with("# [cfg_attr (test , allow (dead_code))] fn main () -> i32 { 3 }"), "{expanded}");
        assert!(
            expanded.contains(
                "# [cfg (not (test))] # [unsafe (export_name = \"main\")] # [inline (never)] extern \"C\" fn __gpu_startup_main"
            ),
            "{expanded}"
        );
        assert!(expanded.ends_with("{ main () }"), "{expanded}");
    }

    #[test]
    fn main_returning_nothing_exits_with_zero() {
        for item in ["fn start() {}", "fn start() -> () {}"] {
            let expanded = normalized(expand_main(TokenStream2::new(), item.parse().unwrap()).unwrap());
            assert!(expanded.ends_with("{ start () ; 0 }"), "{expanded}");
        }
        let expanded =
            normalized(expand_main(TokenStream2::new(), "fn run() -> ! { loop {} }".parse().unwrap()).unwrap());
        assert!(expanded.ends_with("{ run () }"), "{expanded}");
    }

    #[test]
    fn a_wrong_main_names_the_expected_signatures() {
        for (item, problem) in [
            ("fn main(argc: i32) -> i32 { 0 }", "with no arguments: read them with `gpu_startup::env::args()`"),
            ("fn main() -> u8 { 0 }", "not a function returning `u8`"),
            ("fn main() -> Result<(), ()> { Ok(()) }", "not a function returning `Result < () , () >`"),
            ("async fn main() {}", "not an `async fn`"),
            ("unsafe fn main() {}", "not an `unsafe fn`"),
            ("extern \"C\" fn main() {}", "not a function with an `extern` ABI"),
            ("fn main<T>() {}", "not a generic function"),
            ("const fn main() {}", "not a `const fn`"),
        ] {
            let error = main_error(item);
            assert!(error.starts_with("`#[gpu_startup::main]` expects `fn main() -> i32` or `fn main()`"), "{error}");
            assert!(error.contains(problem), "{item}: {error}");
        }
        assert_eq!(
            main_error("struct Main;"),
            "`#[gpu_startup::main]` goes on a function: `fn main() -> i32` or `fn main()`"
        );
        let error = expand_main("threads = 4".parse().unwrap(), "fn main() {}".parse().unwrap()).unwrap_err();
        assert_eq!(error.to_string(), "`#[gpu_startup::main]` takes no arguments");
    }

    #[test]
    fn callbacks_get_wrappers_of_the_exact_prototypes_and_their_priority() {
        let expanded = normalized(
            expand_callback(Callback::Constructor, "priority = 101".parse().unwrap(), "fn setup() {}".parse().unwrap())
                .unwrap(),
        );
        assert!(expanded.contains("_argc : :: gpu_startup :: __private :: c_int"), "{expanded}");
        assert!(expanded.contains("{ setup () }"), "{expanded}");
        assert!(
            expanded.contains(":: gpu_startup :: __private :: constructor ! (101 , __gpu_startup_init_"),
            "{expanded}"
        );
        let expanded = normalized(
            expand_callback(Callback::Destructor, TokenStream2::new(), "fn r#type() {}".parse().unwrap()).unwrap(),
        );
        assert!(
            expanded.contains(":: gpu_startup :: __private :: destructor ! (65535 , __gpu_startup_fini_"),
            "{expanded}"
        );
        assert!(expanded.contains("extern \"C\" fn __gpu_startup_fini_"), "{expanded}");
    }

    #[test]
    fn wrappers_of_functions_with_one_name_differ() {
        let first = unique_ident("init", &format_ident!("setup"));
        let second = unique_ident("init", &format_ident!("setup"));
        assert_ne!(first, second);
        assert!(first.to_string().starts_with("__gpu_startup_init_"), "{first}");
    }

    #[test]
    fn a_wrong_callback_or_priority_is_named() {
        for (kind, args, item, problem) in [
            (
                Callback::Constructor,
                "",
                "fn setup(argc: i32) {}",
                "`#[gpu_startup::constructor]` expects `fn NAME()`, with no arguments and no return value: read `main`'s arguments with `gpu_startup::env::args()`",
            ),
            (
                Callback::Destructor,
                "",
                "fn done(x: u8) {}",
                "`#[gpu_startup::destructor]` expects `fn NAME()`, with no arguments and no return value",
            ),
            (
                Callback::Destructor,
                "",
                "fn done() -> i32 { 0 }",
                "`#[gpu_startup::destructor]` expects `fn NAME()`, with no arguments and no return value: it cannot return a value",
            ),
            (
                Callback::Constructor,
                "",
                "unsafe fn setup() {}",
                "`#[gpu_startup::constructor]` expects `fn NAME()`, with no arguments and no return value, not an `unsafe fn`",
            ),
            (
                Callback::Constructor,
                "priority = 65536",
                "fn setup() {}",
                "the priority of `#[gpu_startup::constructor]` is a number from 0 to 65535",
            ),
            (Callback::Constructor, "priority = high", "fn setup() {}", "expected integer literal"),
            (
                Callback::Constructor,
                "order = 1",
                "fn setup() {}",
                "`#[gpu_startup::constructor]` takes only `priority = N` (0 to 65535)",
            ),
            (Callback::Destructor, "priority = 1, priority = 2", "fn done() {}", "`priority` is given twice"),
        ] {
            assert_eq!(callback_error(kind, args, item), problem, "{args} {item}");
        }
    }
}
