//! `gpu_startup`'s public API is what `tests/public-api.txt` lists, and nothing else: a public item added, removed
//! or changed (a signature, a re-export, a field, an enum's variants, a trait's impl) fails this test until the
//! listing is written again with `GPU_STARTUP_UPDATE_PUBLIC_API=1 cargo test -p gpu-startup --test public_api`, so
//! every change of the API is a change of that file, seen in review.
//!
//! The listing is read from the sources rather than from rustdoc's JSON: it needs no nightly-only output format,
//! no second cargo while this one holds the build directory, and no dev-dependency. It walks the public modules
//! from `src/lib.rs` and lists every `pub` item (with its `cfg` and `doc(hidden)` attributes), the `pub fn`s of
//! `impl` blocks and the trait impls of the crate's public types, the public fields of its structs and the
//! variants of its enums. Items the crate re-exports from its dependencies appear as their `pub use` lines.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SNAPSHOT: &str = "tests/public-api.txt";
const UPDATE: &str = "GPU_STARTUP_UPDATE_PUBLIC_API";

#[test]
fn the_public_api_is_the_listed_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listing = listing(&root.join("src"));
    let path = root.join(SNAPSHOT);
    if std::env::var_os(UPDATE).is_some() {
        std::fs::write(&path, &listing).unwrap();
        return;
    }
    let listed = std::fs::read_to_string(&path).unwrap_or_default();
    if listed != listing {
        let (old, new): (BTreeSet<&str>, BTreeSet<&str>) = (listed.lines().collect(), listing.lines().collect());
        let added: Vec<&str> = new.difference(&old).copied().collect();
        let removed: Vec<&str> = old.difference(&new).copied().collect();
        panic!(
            "gpu_startup's public API is not the one {SNAPSHOT} lists.\nadded:\n  {}\nremoved:\n  {}\nIf the change is \
             meant, write the listing again: {UPDATE}=1 cargo test -p gpu-startup --test public_api",
            added.join("\n  "),
            removed.join("\n  ")
        );
    }
}

/// What a pair of braces holds.
#[derive(Clone)]
enum Scope {
    /// A module's items; `public` when every module on its path is.
    Module { path: String, public: bool },
    /// An `impl` block's items, for its self type.
    Impl { module: String, self_type: String, of_trait: bool, public: bool },
    /// A public trait's items.
    Trait { module: String, name: String },
    /// A struct's fields or an enum's variants.
    Fields { owner: String, is_enum: bool },
    /// A function body, a constant's value, a private item: nothing in it is listed.
    Opaque,
}

/// One listed line, with the self type it needs to be public (impl items) to be kept.
struct Entry {
    line: String,
    needs_type: Option<String>,
}

/// The listing of the crate whose sources are in `src`.
fn listing(src: &Path) -> String {
    let mut entries = Vec::new();
    let mut types = BTreeSet::new();
    walk(src, &src.join("lib.rs"), "crate", true, &mut entries, &mut types);
    let mut out = String::new();
    for entry in entries {
        if entry.needs_type.is_none_or(|name| types.contains(&name)) {
            out.push_str(&entry.line);
            out.push('\n');
        }
    }
    out
}

/// Lists the items of the module `path`, whose file is `file`, and of the public modules it declares.
fn walk(src: &Path, file: &Path, path: &str, public: bool, entries: &mut Vec<Entry>, types: &mut BTreeSet<String>) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|error| panic!("{}: {error}", file.display()));
    let code = without_comments(&text);
    let mut stack = vec![Scope::Module { path: path.to_owned(), public }];
    let mut statement = String::new();
    // Brackets open in the statement (`[u32; 3]`), and braces of a `use` tree: neither ends nor opens anything.
    let (mut brackets, mut use_tree) = (0u32, 0u32);
    for c in code.chars() {
        match c {
            '(' | '[' => brackets += 1,
            ')' | ']' => brackets = brackets.saturating_sub(1),
            _ => {}
        }
        let in_use = || without_pub(split_attributes(&squeeze(&statement)).1).starts_with("use ");
        match c {
            ';' if brackets > 0 => statement.push(c),
            '{' if use_tree > 0 || in_use() => {
                use_tree += 1;
                statement.push(c);
            }
            '}' if use_tree > 0 => {
                use_tree -= 1;
                statement.push(c);
            }
            '{' | ';' | '}' => {
                let header = squeeze(&statement);
                statement.clear();
                let scope = stack.last().cloned().expect("a scope");
                match c {
                    '{' => stack.push(open(&scope, &header, entries, types)),
                    ';' => item(src, file, &scope, &header, entries, types),
                    _ => {
                        if let Scope::Fields { owner, is_enum } = &scope {
                            fields(owner, *is_enum, &header, entries);
                        }
                        stack.pop();
                    }
                }
            }
            _ => statement.push(c),
        }
    }
}

/// The scope that `{` opens after `header` in `scope`; lists the item it begins.
fn open(scope: &Scope, header: &str, entries: &mut Vec<Entry>, types: &mut BTreeSet<String>) -> Scope {
    let (attributes, rest) = split_attributes(header);
    match scope {
        Scope::Module { path, public } => {
            let visible = *public && is_pub(rest);
            let words = without_pub(rest);
            if let Some(name) = words.strip_prefix("mod ") {
                if visible {
                    entries.push(plain(path, &attributes, &format!("pub mod {name}")));
                }
                return Scope::Module { path: format!("{path}::{name}"), public: visible };
            }
            if words.starts_with("impl") {
                let (self_type, of_trait) = impl_target(words);
                if *public && of_trait {
                    entries.push(Entry {
                        line: format!("{path}: {attributes}{words}"),
                        needs_type: Some(self_type.clone()),
                    });
                }
                return Scope::Impl { module: path.clone(), self_type, of_trait, public: *public };
            }
            if !visible {
                return Scope::Opaque;
            }
            let kind = words.split_whitespace().next().unwrap_or("");
            let name = item_name(words);
            match kind {
                "struct" | "enum" | "union" | "trait" => {
                    types.insert(name.clone());
                    entries.push(plain(path, &attributes, rest));
                    if kind == "trait" {
                        Scope::Trait { module: path.clone(), name }
                    } else {
                        Scope::Fields { owner: format!("{path}::{name}"), is_enum: kind == "enum" }
                    }
                }
                _ => {
                    entries.push(plain(path, &attributes, signature(rest)));
                    Scope::Opaque
                }
            }
        }
        Scope::Impl { module, self_type, of_trait: false, public: true } if is_pub(rest) => {
            entries.push(Entry {
                line: format!("{module}: impl {self_type}: {attributes}{rest}"),
                needs_type: Some(self_type.clone()),
            });
            Scope::Opaque
        }
        Scope::Trait { module, name } => {
            entries.push(plain(module, &attributes, &format!("trait {name}: {rest}")));
            Scope::Opaque
        }
        _ => Scope::Opaque,
    }
}

/// An item that ends with `;` in `scope`: a `use`, a constant, a type, a unit or tuple struct, a module in a file of
/// its own, a trait's required function.
fn item(src: &Path, file: &Path, scope: &Scope, header: &str, entries: &mut Vec<Entry>, types: &mut BTreeSet<String>) {
    let (attributes, rest) = split_attributes(header);
    match scope {
        Scope::Module { path, public: true } if is_pub(rest) => {
            let words = without_pub(rest);
            if let Some(name) = words.strip_prefix("mod ") {
                entries.push(plain(path, &attributes, rest));
                let folder = file.parent().expect("a folder");
                let child = [folder.join(format!("{name}.rs")), folder.join(name).join("mod.rs")]
                    .into_iter()
                    .find(|candidate| candidate.exists())
                    .unwrap_or_else(|| panic!("no file for module {path}::{name}"));
                walk(src, &child, &format!("{path}::{name}"), true, entries, types);
                return;
            }
            if words.starts_with("struct ") {
                types.insert(item_name(words));
            }
            entries.push(plain(path, &attributes, signature(rest)));
        }
        Scope::Trait { module, name } if !rest.is_empty() => {
            entries.push(plain(module, &attributes, &format!("trait {name}: {rest}")));
        }
        Scope::Impl { module, self_type, of_trait: false, public: true } if is_pub(rest) => {
            entries.push(Entry {
                line: format!("{module}: impl {self_type}: {attributes}{rest}"),
                needs_type: Some(self_type.clone()),
            });
        }
        _ => {}
    }
}

/// Lists a public struct's public fields, or an enum's variants, from the text of its braces.
fn fields(owner: &str, is_enum: bool, body: &str, entries: &mut Vec<Entry>) {
    for field in split_top_level(body) {
        let (attributes, rest) = split_attributes(&field);
        if rest.is_empty() || (!is_enum && !is_pub(rest)) {
            continue;
        }
        let kind = if is_enum { "variant" } else { "field" };
        entries.push(Entry { line: format!("{owner}: {kind} {attributes}{rest}"), needs_type: None });
    }
}

/// An item as listed: a constant or static without its value.
fn signature(item: &str) -> &str {
    match without_pub(item).split_whitespace().next() {
        Some("const" | "static") => item.split(" =").next().unwrap_or(item),
        _ => item,
    }
}

fn plain(path: &str, attributes: &str, rest: &str) -> Entry {
    Entry { line: format!("{path}: {attributes}{rest}"), needs_type: None }
}

/// The attributes that change what the API is (`cfg`, `doc(hidden)`, `non_exhaustive`), written before the item, and
/// the item without any attribute.
fn split_attributes(header: &str) -> (String, &str) {
    let mut kept = String::new();
    let mut rest = header.trim();
    while let Some(inner) = rest.strip_prefix("#[") {
        let end = closing(inner, '[', ']').unwrap_or(inner.len());
        let attribute = inner[..end].trim();
        if attribute.starts_with("cfg") || attribute == "doc(hidden)" || attribute == "non_exhaustive" {
            kept.push_str(&format!("#[{attribute}] "));
        }
        rest = inner.get(end + 1..).unwrap_or("").trim_start();
    }
    (kept, rest)
}

/// The index of the bracket that closes the one opened just before `text`.
fn closing(text: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            if depth == 0 {
                return Some(at);
            }
            depth -= 1;
        }
    }
    None
}

/// The comma-separated parts of `body` outside any brackets.
fn split_top_level(body: &str) -> Vec<String> {
    let (mut parts, mut part, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in body.chars() {
        match c {
            '(' | '[' | '<' => depth += 1,
            ')' | ']' | '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(squeeze(&part));
                part.clear();
                continue;
            }
            _ => {}
        }
        part.push(c);
    }
    parts.push(squeeze(&part));
    parts
}

fn is_pub(item: &str) -> bool {
    item == "pub" || item.starts_with("pub ")
}

fn without_pub(item: &str) -> &str {
    item.strip_prefix("pub ").unwrap_or(item)
}

/// The name an item declares: the word after its keyword (`fn`, `struct`, `trait`, ...), without generics.
fn item_name(words: &str) -> String {
    let mut parts = words
        .split_whitespace()
        .skip_while(|word| matches!(*word, "unsafe" | "const" | "extern" | "async" | "\"C\"" | "auto" | "default"));
    parts.next();
    let name = parts.next().unwrap_or("");
    name.split(['<', '(', ':', ';']).next().unwrap_or(name).to_owned()
}

/// The self type of an `impl` header, without generics or path, and whether it implements a trait.
fn impl_target(words: &str) -> (String, bool) {
    let mut after = words.strip_prefix("impl").unwrap_or(words).trim_start();
    if after.starts_with('<') {
        after = after[closing(&after[1..], '<', '>').map_or(after.len(), |end| end + 2)..].trim_start();
    }
    let after = after.split(" where ").next().unwrap_or(after);
    let (self_type, of_trait) = match after.rsplit_once(" for ") {
        Some((_, self_type)) => (self_type, true),
        None => (after, false),
    };
    let base = self_type.split('<').next().unwrap_or(self_type).trim();
    (base.rsplit("::").next().unwrap_or(base).trim_start_matches('&').to_owned(), of_trait)
}

/// Whitespace runs as one space.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` without comments (doc comments and their examples among them), with the braces and semicolons inside string
/// and character literals replaced, so that only the code's own mark scopes and items.
fn without_comments(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let masked = |c: char| match c {
        '{' => '⦃',
        '}' => '⦄',
        ';' => '⁏',
        other => other,
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !chars[..i].last().is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string: `r"..."`, `r#"..."#`.
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let body_start = j + 1;
            let mut k = body_start;
            while k < chars.len() && !chars[k..].iter().take(close.len()).copied().eq(close.chars()) {
                k += 1;
            }
            out.push('"');
            out.extend(chars[body_start..k.min(chars.len())].iter().copied().map(masked));
            out.push('"');
            i = (k + close.len()).min(chars.len());
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(masked(chars[i]));
                    i += 1;
                }
                if i < chars.len() {
                    out.push(masked(chars[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal, not a lifetime.
            let mut j = i + 1;
            if chars.get(j) == Some(&'\\') {
                j += 2;
            } else {
                j += 1;
            }
            while j < chars.len() && chars[j] != '\'' {
                j += 1;
            }
            out.push_str("'_'");
            i = j + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The test's own parsing, on a small crate of two modules.
#[test]
fn the_listing_holds_every_kind_of_public_item() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("public-api-sample");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("lib.rs"),
        "//! A crate. { not code }\npub mod a;\nmod hidden;\n#[doc(hidden)]\npub mod inner { pub fn f() {} }\n\
         pub use core::fmt; // a comment with a ;\npub const N: usize = { 3 };\npub use core::{cell, \
         ops::{Add, Sub}};\npub fn id() -> [u32; 3] { [0; 3] }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("a.rs"),
        "/// Doc with `{`.\n#[derive(Clone)]\npub struct S { pub x: u32, y: u32 }\nstruct P;\nimpl S {\n    pub fn \
         new() -> Self { let _ = \"}\"; let _ = '{'; S { x: 0, y: 0 } }\n    fn private(&self) {}\n}\nimpl Clone for \
         P { fn clone(&self) -> Self { P } }\nimpl<'a> core::fmt::Debug for S { fn fmt(&self, _: &mut \
         core::fmt::Formatter<'a>) -> core::fmt::Result { Ok(()) } }\n#[cfg(feature = \"x\")]\npub enum E { A, \
         B(u8) }\npub trait T { fn m(&self); }\n",
    )
    .unwrap();
    std::fs::write(dir.join("hidden.rs"), "pub fn not_listed() {}\n").unwrap();
    let listing = listing(&dir);
    assert_eq!(
        listing.lines().collect::<Vec<_>>(),
        [
            "crate: pub mod a",
            "crate::a: pub struct S",
            "crate::a::S: field pub x: u32",
            "crate::a: impl S: pub fn new() -> Self",
            "crate::a: impl<'a> core::fmt::Debug for S",
            "crate::a: #[cfg(feature = \"x\")] pub enum E",
            "crate::a::E: variant A",
            "crate::a::E: variant B(u8)",
            "crate::a: pub trait T",
            "crate::a: trait T: fn m(&self)",
            "crate: #[doc(hidden)] pub mod inner",
            "crate::inner: pub fn f()",
            "crate: pub use core::fmt",
            "crate: pub const N: usize",
            "crate: pub use core::{cell, ops::{Add, Sub}}",
            "crate: pub fn id() -> [u32; 3]",
        ]
    );
}
