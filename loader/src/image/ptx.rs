//! What the loader reads from PTX text without compiling it: whether bytes are PTX, the visible globals and entries,
//! whether a function is defined strongly, the bytes of byte arrays' initializers, and each entry's parameter sizes. Everything is one pass over [`Tokens`], which borrows from the text: nothing is
//! copied, whatever the size of the file.

use super::{GlobalBytes, KernelSignature};

/// PTX's tokens, with whitespace and `//` and `/* */` comments skipped: a quoted string (as in `.file`), one
/// punctuation character, or a word (a run of anything else: directives, names, numbers, instructions).
pub(super) struct Tokens<'a> {
    rest: &'a str,
}

/// The characters that are tokens of their own.
const PUNCTUATION: &[u8] = b"(),;[]{}=";

impl<'a> Tokens<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Self { rest: text }
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        loop {
            let text = self.rest.trim_start_matches(|c: char| c.is_ascii_whitespace());
            let bytes = text.as_bytes();
            // Every boundary below is an ASCII byte, so every slice is at a character boundary.
            let len = match bytes {
                [] => {
                    self.rest = text;
                    return None;
                }
                [b'/', b'/', ..] => {
                    self.rest = text.find('\n').map_or("", |end| &text[end..]);
                    continue;
                }
                [b'/', b'*', ..] => {
                    self.rest = text[2..].find("*/").map_or("", |end| &text[2 + end + 2..]);
                    continue;
                }
                // A string runs to its closing quote, or to the end of its line when it has none.
                [b'"', ..] => text[1..]
                    .find(['"', '\n'])
                    .map_or(text.len(), |end| if bytes[1 + end] == b'"' { end + 2 } else { end + 1 }),
                [first, ..] if PUNCTUATION.contains(first) => 1,
                _ => (1..bytes.len())
                    .find(|&i| {
                        let byte = bytes[i];
                        byte.is_ascii_whitespace()
                            || PUNCTUATION.contains(&byte)
                            || byte == b'"'
                            || (byte == b'/' && matches!(bytes.get(i + 1), Some(b'/' | b'*')))
                    })
                    .unwrap_or(bytes.len()),
            };
            let (token, rest) = text.split_at(len);
            self.rest = rest;
            return Some(token);
        }
    }
}

/// PTX starts, after comments, with `.version`, and `.target` follows. `head` may be cut anywhere.
pub(super) fn looks_like_ptx(head: &str) -> bool {
    let mut tokens = Tokens::new(head);
    tokens.next() == Some(".version") && tokens.any(|token| token == ".target")
}

fn is_punctuation(token: &str) -> bool {
    token.len() == 1 && PUNCTUATION.contains(&token.as_bytes()[0])
}

/// The names of the `.visible` (exported) globals and entries in PTX.
pub(super) fn globals(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut tokens = Tokens::new(text);
    while let Some(token) = tokens.next() {
        if token != ".visible" {
            continue;
        }
        let name = match tokens.next() {
            Some(".entry" | ".func") => match tokens.next() {
                // `.func (.param .b32 retval) name(...)`: the return parameters come first.
                Some("(") => tokens.by_ref().find(|&token| token == ")").and_then(|_| tokens.next()),
                name => name,
            },
            // `.visible .global .align 8 .u64 NAME = ...;` or `... .b8 NAME[16];`: the name is the first word that
            // is not a directive or a number.
            Some(".global" | ".const") => {
                tokens.find(|token| !token.starts_with('.') && !token.bytes().all(|b| b.is_ascii_digit()))
            }
            _ => None,
        };
        if let Some(name) = name.filter(|name| !is_punctuation(name) && !name.starts_with('"')) {
            names.push(name.to_owned());
        }
    }
    names
}

/// Whether PTX defines the function `name` (a `.func`, visible or not) with neither `.weak` nor `.extern`: a
/// weak definition, or a declaration of one defined elsewhere, is not the module's own.
pub(super) fn defines_strong_function(text: &str, name: &str) -> bool {
    let mut strong = false;
    let mut linkage = None;
    let mut tokens = Tokens::new(text);
    while let Some(token) = tokens.next() {
        match token {
            ".visible" | ".weak" | ".extern" | ".common" => linkage = Some(token),
            ".func" => {
                let function = match tokens.next() {
                    // `.func (.param .b32 retval) name(...)`: the return parameters come first.
                    Some("(") => tokens.by_ref().find(|&token| token == ")").and_then(|_| tokens.next()),
                    function => function,
                };
                if function == Some(name) {
                    if matches!(linkage, Some(".weak" | ".extern" | ".common")) {
                        return false;
                    }
                    strong = true;
                }
                linkage = None;
            }
            _ => linkage = None,
        }
    }
    strong
}

/// Whether the body of entry `entry` has the instruction `instruction` (as `griddepcontrol.wait`, which inline
/// assembly leaves in the body as written). `false` when there is no such entry.
pub(super) fn entry_has_instruction(text: &str, entry: &str, instruction: &str) -> bool {
    let mut tokens = Tokens::new(text);
    while let Some(token) = tokens.next() {
        if token != ".entry" || tokens.next() != Some(entry) {
            continue;
        }
        // The body is the first brace block after the parameters; braces nest inside it (`{ .reg ...; }` scopes).
        let mut depth = 0u32;
        for token in tokens.by_ref() {
            match token {
                "{" => depth += 1,
                "}" if depth <= 1 => return false,
                "}" => depth -= 1,
                _ if depth > 0 && token == instruction => return true,
                _ => {}
            }
        }
        return false;
    }
    false
}

/// The `.visible .global` byte arrays whose names start with `prefix`, each with its initializer's bytes (`.b8
/// NAME[N] = {1, 0x2, ...};`) or what keeps them from being read.
pub(super) fn initialized_globals(text: &str, prefix: &str) -> Vec<(String, GlobalBytes)> {
    let mut globals = Vec::new();
    let mut tokens = Tokens::new(text).peekable();
    while let Some(token) = tokens.next() {
        if token != ".visible" || tokens.next_if_eq(&".global").is_none() {
            continue;
        }
        // The directives before the name (`.align 1`, `.b8`), then the name.
        let mut byte_array = false;
        let name = loop {
            match tokens.next() {
                Some(".b8" | ".u8" | ".s8") => byte_array = true,
                Some(token) if token.starts_with('.') || token.bytes().all(|b| b.is_ascii_digit()) => {}
                name => break name,
            }
        };
        let Some(name) = name.filter(|name| name.starts_with(prefix) && !is_punctuation(name)) else { continue };
        let bytes = if byte_array {
            byte_array_initializer(&mut tokens).map_err(|what| format!("global `{name}` {what}"))
        } else {
            Err(format!("global `{name}` is not a byte array (`.b8`)"))
        };
        globals.push((name.to_owned(), bytes));
    }
    globals
}

/// The bytes of `[N] = {...}`, from the tokens after a byte array's name; the tokens are read to its `;`.
fn byte_array_initializer<'a>(tokens: &mut impl Iterator<Item = &'a str>) -> Result<Vec<u8>, String> {
    let mut statement = tokens.take_while(|&token| token != ";");
    let size = match (statement.next(), statement.next(), statement.next()) {
        (Some("["), Some(size), Some("]")) => size.parse::<usize>().ok(),
        _ => None,
    };
    let size = size.ok_or("has no array size")?;
    if (statement.next(), statement.next()) != (Some("="), Some("{")) {
        return Err("has no initializer".into());
    }
    let mut bytes = Vec::new();
    loop {
        let element = statement.next().ok_or("has an unterminated initializer")?;
        let byte = match element.strip_prefix("0x").or_else(|| element.strip_prefix("0X")) {
            Some(hex) => u8::from_str_radix(hex, 16).ok(),
            None => element.parse().ok(),
        };
        bytes.push(byte.ok_or("has an initializer element that is not a byte")?);
        match statement.next() {
            Some(",") => {}
            Some("}") => break,
            _ => return Err("has an initializer element that is not a byte".into()),
        }
    }
    if bytes.len() != size {
        return Err(format!("is {size} bytes, but its initializer has {}", bytes.len()));
    }
    Ok(bytes)
}

/// Every `.entry` in PTX with its parameters' sizes.
pub(super) fn kernels(text: &str) -> Result<Vec<KernelSignature>, String> {
    let mut kernels = Vec::new();
    let mut tokens = Tokens::new(text).peekable();
    while let Some(token) = tokens.next() {
        if token != ".entry" {
            continue;
        }
        let name = tokens.next_if(|token| !is_punctuation(token)).unwrap_or_default();
        let param_sizes = parameter_sizes(text, name, &mut tokens)?;
        kernels.push(KernelSignature { name: name.to_owned(), param_sizes });
    }
    Ok(kernels)
}

/// The sizes of the parameters of `name` when `tokens` are at its parameter list (none when they are not at a `(`).
/// Each parameter is read as its tokens come, so an unterminated list costs no memory.
fn parameter_sizes<'a>(
    text: &'a str,
    name: &str,
    tokens: &mut core::iter::Peekable<Tokens<'a>>,
) -> Result<Vec<u64>, String> {
    let mut sizes = Vec::new();
    if tokens.next_if_eq(&"(").is_none() {
        return Ok(sizes);
    }
    let mut param = Param::default();
    loop {
        let Some(token) = tokens.next() else {
            return Err(format!("unterminated parameter list of `{name}`"));
        };
        if token == "," || token == ")" {
            if let Some(first) = param.first {
                let size = param.size().ok_or_else(|| {
                    format!("cannot read parameter `{}` of `{name}`", one_line(text, first, param.last))
                })?;
                sizes.push(size);
            }
            param = Param::default();
            if token == ")" {
                return Ok(sizes);
            }
        } else {
            param.push(token);
        }
    }
}

/// A constructor or destructor global whose initializer names a function: the global, the function, and the
/// function's parameter sizes (`None` when the image defines or declares no function of that name).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct CallbackTarget<'a> {
    pub global: &'a str,
    pub function: &'a str,
    pub param_sizes: Option<Vec<u64>>,
}

/// Every global named with one of `prefixes` (the constructor and destructor globals) whose initializer is a
/// function (`.u64 __init_array_object_f_101 = f;`), with that function's parameters, from its `.func` header.
pub(super) fn callback_targets<'a>(text: &'a str, prefixes: &[&str]) -> Result<Vec<CallbackTarget<'a>>, String> {
    let mut functions: Vec<(&str, Vec<u64>)> = Vec::new();
    let mut targets: Vec<(&str, &str)> = Vec::new();
    let mut tokens = Tokens::new(text).peekable();
    while let Some(token) = tokens.next() {
        if token == ".func" {
            // `.func (.param .b32 func_retval0) name(.param .b32 name_param_0, ...)`; a declaration without
            // parameters may leave out the parentheses.
            if tokens.next_if_eq(&"(").is_some() {
                tokens.by_ref().find(|&token| token == ")");
            }
            let Some(name) = tokens.next_if(|token| !is_punctuation(token)) else { continue };
            functions.push((name, parameter_sizes(text, name, &mut tokens)?));
        } else if prefixes.iter().any(|prefix| token.starts_with(prefix))
            && tokens.next_if_eq(&"=").is_some()
            && let Some(function) = tokens.next_if(|token| !is_punctuation(token))
        {
            targets.push((token, function));
        }
    }
    Ok(targets
        .into_iter()
        .map(|(global, function)| CallbackTarget {
            global,
            function,
            param_sizes: functions.iter().find(|(name, _)| *name == function).map(|(_, sizes)| sizes.clone()),
        })
        .collect())
}

/// One parameter declaration, read token by token: `.param .u64 x`, `.param .align 8 .b8 x[48]`,
/// `.param .u64 .ptr .global .align 8 x`.
#[derive(Default)]
struct Param<'a> {
    first: Option<&'a str>,
    last: &'a str,
    /// The element's size in bits, from its type (`.b8`, `.u64`, `.f32`, ...).
    bits: Option<u64>,
    /// Elements: the product of the `[N]` dimensions.
    count: Option<u64>,
    dimension: Dimension,
    malformed: bool,
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Dimension {
    #[default]
    Outside,
    /// After `[`.
    Open,
    /// After `[N`.
    Number,
}

impl<'a> Param<'a> {
    fn push(&mut self, token: &'a str) {
        self.first.get_or_insert(token);
        self.last = token;
        match (self.dimension, token) {
            (Dimension::Outside, "[") => self.dimension = Dimension::Open,
            (Dimension::Open, number) => {
                let count = number.parse::<u64>().ok().and_then(|n| n.checked_mul(self.count.unwrap_or(1)));
                self.malformed |= count.is_none();
                self.count = count;
                self.dimension = Dimension::Number;
            }
            (Dimension::Number, "]") => self.dimension = Dimension::Outside,
            (Dimension::Number, _) => self.malformed = true,
            (Dimension::Outside, token) => {
                if let Some(bits) = type_bits(token) {
                    self.malformed |= self.bits.replace(bits).is_some();
                }
            }
        }
    }

    /// The size in bytes, or `None` when the declaration cannot be read.
    fn size(&self) -> Option<u64> {
        if self.malformed || self.dimension != Dimension::Outside {
            return None;
        }
        (self.bits? / 8).checked_mul(self.count.unwrap_or(1))
    }
}

/// The width of a fundamental type: `.b8`, `.u16`, `.s32`, `.f64`, `.b128`.
fn type_bits(token: &str) -> Option<u64> {
    let digits = token.strip_prefix('.')?.strip_prefix(['b', 'u', 's', 'f'])?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|bits| bits % 8 == 0 && *bits > 0)
}

/// The text from token `first` to token `last` (both borrowed from `text`), on one line and at most 100 characters:
/// for a message.
fn one_line(text: &str, first: &str, last: &str) -> String {
    let start = first.as_ptr() as usize - text.as_ptr() as usize;
    let end = last.as_ptr() as usize + last.len() - text.as_ptr() as usize;
    let words = text[start..end].split_whitespace().collect::<Vec<_>>().join(" ");
    match words.char_indices().nth(100) {
        Some((cut, _)) => format!("{}...", &words[..cut]),
        None => words,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<&str> {
        Tokens::new(text).collect()
    }

    fn param_size(declaration: &str) -> Option<u64> {
        let mut param = Param::default();
        Tokens::new(declaration).for_each(|token| param.push(token));
        param.size()
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
}
