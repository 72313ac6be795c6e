//! What the loader reads from PTX text without compiling it: whether bytes are PTX, the visible globals and entries,
//! whether a function is defined strongly, the bytes of byte arrays' initializers, and each entry's parameter sizes.
//! The text is tokenized once, when the image is read ([`Parsed`]: each token's place in the text, and the visible
//! globals); everything else is a pass over those [`Tokens`], which borrow from the text: no token is copied,
//! whatever the size of the file.

use super::{GlobalBytes, KernelSignature};

/// PTX's tokens, with whitespace and `//` and `/* */` comments skipped: a quoted string (as in `.file`), one
/// punctuation character, or a word (a run of anything else: directives, names, numbers, instructions).
pub(super) struct Lexer<'a> {
    rest: &'a str,
}

/// The characters that are tokens of their own.
const PUNCTUATION: &[u8] = b"(),;[]{}=";

impl<'a> Lexer<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Self { rest: text }
    }
}

impl<'a> Iterator for Lexer<'a> {
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

/// A token's place in the text: its first byte and the byte after it.
type Span = (usize, usize);

/// PTX text, tokenized once: every token's place, and the names of the visible globals and entries.
#[derive(Debug)]
pub(super) struct Parsed {
    spans: Vec<Span>,
    pub globals: Vec<String>,
}

impl Parsed {
    pub(super) fn new(text: &str) -> Self {
        let base = text.as_ptr() as usize;
        let spans = Lexer::new(text)
            .map(|token| {
                let start = token.as_ptr() as usize - base;
                (start, start + token.len())
            })
            .collect();
        let mut parsed = Self { spans, globals: Vec::new() };
        parsed.globals = globals(parsed.of(text));
        parsed
    }

    /// The tokenized text: `text` must be the text this was made of.
    pub(super) fn of<'a>(&'a self, text: &'a str) -> Ptx<'a> {
        Ptx { text, spans: &self.spans }
    }
}

/// PTX text with its tokens.
#[derive(Clone, Copy)]
pub(super) struct Ptx<'a> {
    pub text: &'a str,
    spans: &'a [Span],
}

impl<'a> Ptx<'a> {
    pub(super) fn tokens(self) -> Tokens<'a> {
        Tokens { text: self.text, spans: self.spans.iter() }
    }
}

/// The tokens of [`Ptx`], in order.
pub(super) struct Tokens<'a> {
    text: &'a str,
    spans: std::slice::Iter<'a, Span>,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        self.spans.next().map(|&(start, end)| &self.text[start..end])
    }
}

/// PTX starts, after comments, with `.version`, and `.target` follows. `head` may be cut anywhere.
pub(super) fn looks_like_ptx(head: &str) -> bool {
    let mut tokens = Lexer::new(head);
    tokens.next() == Some(".version") && tokens.any(|token| token == ".target")
}

fn is_punctuation(token: &str) -> bool {
    token.len() == 1 && PUNCTUATION.contains(&token.as_bytes()[0])
}

/// The names of the `.visible` (exported) globals and entries in PTX.
fn globals(ptx: Ptx<'_>) -> Vec<String> {
    let mut names = Vec::new();
    let mut tokens = ptx.tokens();
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
pub(super) fn defines_strong_function(ptx: Ptx<'_>, name: &str) -> bool {
    let mut strong = false;
    let mut linkage = None;
    let mut tokens = ptx.tokens();
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
pub(super) fn entry_has_instruction(ptx: Ptx<'_>, entry: &str, instruction: &str) -> bool {
    let mut tokens = ptx.tokens();
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
pub(super) fn initialized_globals(ptx: Ptx<'_>, prefix: &str) -> Vec<(String, GlobalBytes)> {
    let mut globals = Vec::new();
    let mut tokens = ptx.tokens().peekable();
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
pub(super) fn kernels(ptx: Ptx<'_>) -> Result<Vec<KernelSignature>, String> {
    let text = ptx.text;
    let mut kernels = Vec::new();
    let mut tokens = ptx.tokens().peekable();
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
pub(super) fn callback_targets<'a>(ptx: Ptx<'a>, prefixes: &[&str]) -> Result<Vec<CallbackTarget<'a>>, String> {
    let text = ptx.text;
    let mut functions: Vec<(&str, Vec<u64>)> = Vec::new();
    let mut targets: Vec<(&str, &str)> = Vec::new();
    let mut tokens = ptx.tokens().peekable();
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
mod tests;
