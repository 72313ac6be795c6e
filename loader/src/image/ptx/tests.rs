//! The PTX reader's tests: tokens, globals, initializers, parameter sizes, and what it says of what it cannot read.

use super::*;

fn tokens(text: &str) -> Vec<&str> {
    Lexer::new(text).collect()
}

fn param_size(declaration: &str) -> Option<u64> {
    let mut param = Param::default();
    Lexer::new(declaration).for_each(|token| param.push(token));
    param.size()
}

// The readers over text tokenized once, as an image's is.
fn globals(text: &str) -> Vec<String> {
    Parsed::new(text).globals
}

fn defines_strong_function(text: &str, name: &str) -> bool {
    super::defines_strong_function(Parsed::new(text).of(text), name)
}

fn initialized_globals(text: &str, prefix: &str) -> Vec<(String, GlobalBytes)> {
    super::initialized_globals(Parsed::new(text).of(text), prefix)
}

fn kernels(text: &str) -> Result<Vec<KernelSignature>, String> {
    super::kernels(Parsed::new(text).of(text))
}

#[test]
fn tokens_are_the_lexers_tokens_in_their_place() {
    let text = ".visible /* c */ .entry k(.param .u64 p) // e\n{ ret; }";
    let parsed = Parsed::new(text);
    assert_eq!(parsed.of(text).tokens().collect::<Vec<_>>(), tokens(text));
}

#[test]
fn tokens_skip_comments_and_split_punctuation() {
    assert_eq!(
        tokens(".visible .global .b8 x[16]; // one\n/* two\n.entry hidden( */ .entry k(.param .u64 p)"),
        [".visible", ".global", ".b8", "x", "[", "16", "]", ";", ".entry", "k", "(", ".param", ".u64", "p", ")"]
    );
    assert_eq!(tokens("a//b\nc/*d*/e"), ["a", "c", "e"]);
    assert_eq!(tokens("/* unterminated .entry k("), Vec::<&str>::new());
    assert_eq!(tokens("a / b"), ["a", "/", "b"]);
}

#[test]
fn strings_hide_comment_markers() {
    assert_eq!(tokens(".file 1 \"/src/*/a.c\"\n.entry k"), [".file", "1", "\"/src/*/a.c\"", ".entry", "k"]);
    assert_eq!(tokens("\"unterminated\n.entry k"), ["\"unterminated", ".entry", "k"]);
    assert_eq!(tokens("\"no end"), ["\"no end"]);
}

#[test]
fn tokens_keep_multibyte_characters_whole() {
    assert_eq!(tokens("é(ü) // ö\n日本"), ["é", "(", "ü", ")", "日本"]);
}

#[test]
fn ptx_is_recognized_by_its_first_directives() {
    assert!(looks_like_ptx("// LLVM\n/* x */ .version 7.8\n.target sm_90"));
    assert!(!looks_like_ptx(".target sm_90\n.version 7.8"));
    assert!(!looks_like_ptx(".version 7.8"));
    assert!(!looks_like_ptx("// .version 7.8\n.target sm_90"));
}

#[test]
fn functions_with_return_parameters_are_named() {
    let text = ".visible .func (.param .b32 retval) main(.param .b32 a)\n.visible .func other()\n.visible .entry (";
    assert_eq!(globals(text), ["main", "other"]);
}

#[test]
fn a_function_defined_weak_or_declared_extern_is_not_defined_strongly() {
    let main = |linkage: &str| format!("{linkage} .func (.param .b32 retval) main(.param .b32 a)\n{{ ret; }}");
    assert!(defines_strong_function(&main(".visible"), "main"));
    assert!(defines_strong_function(&main(""), "main"), "an internal definition is the module's own");
    assert!(!defines_strong_function(&main(".weak"), "main"));
    assert!(!defines_strong_function(&main(".extern"), "main"));
    assert!(!defines_strong_function(&main(".visible"), "other"));
    // A call names the function without `.func`.
    assert!(!defines_strong_function("{ call.uni (retval0), main, (param0); }", "main"));
    // A prototype before the definition is the same function.
    let twice = format!("{};\n{}", main(".visible"), main(".visible"));
    assert!(defines_strong_function(&twice, "main"));
}

#[test]
fn byte_arrays_are_read_from_their_initializers() {
    let text = ".visible .global .align 1 .b8 meta_a[3] = {1, 0x2,\n\t0xff};\n\
                .visible .global .align 8 .u64 meta_entry = trampoline;\n\
                .global .align 1 .b8 meta_hidden[1] = {1};\n\
                .visible .global .align 1 .b8 other[1] = {1};";
    let globals = initialized_globals(text, "meta_");
    assert_eq!(
        globals,
        [
            ("meta_a".to_owned(), Ok(vec![1, 2, 255])),
            ("meta_entry".to_owned(), Err("global `meta_entry` is not a byte array (`.b8`)".into())),
        ]
    );
}

#[test]
fn a_byte_array_that_does_not_hold_together_is_named() {
    for (declaration, problem) in [
        (".b8 m[4] = {1, 2, 3};", "is 4 bytes, but its initializer has 3"),
        (".b8 m[2] = {1, 2, 3};", "is 2 bytes, but its initializer has 3"),
        (".b8 m[1] = {256};", "has an initializer element that is not a byte"),
        (".b8 m[1] = {x};", "has an initializer element that is not a byte"),
        (".b8 m[1] = {1 2};", "has an initializer element that is not a byte"),
        (".b8 m[1];", "has no initializer"),
        (".b8 m = {1};", "has no array size"),
        (".b8 m[1] = {1,", "has an unterminated initializer"),
    ] {
        let text = format!(".visible .global .b8 m0[1] = {{7}};\n.visible .global .align 1 {declaration}");
        let globals = initialized_globals(&text, "m");
        assert_eq!(globals[0], ("m0".to_owned(), Ok(vec![7])));
        assert_eq!(globals[1], ("m".to_owned(), Err(format!("global `m` {problem}"))), "{declaration}");
    }
}

#[test]
fn param_sizes_of_scalars_arrays_and_pointers() {
    assert_eq!(param_size(".param .u64 x"), Some(8));
    assert_eq!(param_size(".param .b32 x"), Some(4));
    assert_eq!(param_size(".param .align 8 .b8 x[48]"), Some(48));
    assert_eq!(param_size(".param .f32 x[2][3]"), Some(24));
    assert_eq!(param_size(".param .u64 .ptr .global .align 8 x"), Some(8));
    assert_eq!(param_size("garbage"), None);
    assert_eq!(param_size(".param .b8 x[]"), None);
    assert_eq!(param_size(".param .b8 x[4"), None);
    assert_eq!(param_size(".param .b8 x[four]"), None);
    assert_eq!(param_size(".param .b8 .u32 x"), None);
    assert_eq!(param_size(".param .b7 x"), None);
    assert_eq!(param_size(".param .b64 x[3000000000000000000]"), None);
    assert_eq!(param_size(".param .b8 x[4294967296][4294967296]"), None);
}

#[test]
fn an_unreadable_parameter_is_quoted_on_one_line_and_short() {
    let text = format!(".entry k(.param\n.b8 x[{}])", "1".repeat(300));
    let error = kernels(&text).unwrap_err();
    assert!(error.starts_with("cannot read parameter `.param .b8 x[111"), "{error}");
    assert!(error.ends_with("...` of `k`") && error.len() < 160, "{error}");
}
