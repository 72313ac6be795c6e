//! The tidy test: the repository's text says what the project is and points at things that exist. It fails on
//! - links in Markdown files and in comments (`[text](docs/x.md)`, `../README.md`, with `#anchors` checked against
//!   the target's headings) and on file paths in code spans (`` `loader/src/run.rs` ``) that lead nowhere in the
//!   repository;
//! - the words in [`FORBIDDEN`], which speak of how the work was done rather than of the project;
//! - files or folders of a crate whose modules refer to each other (`cycles`);
//! - Rust files without a `//!` header, or of more than 500 lines without a reason in it (`sources`).
//!
//! It reads the files git knows (tracked, or new and not ignored), so it checks a change before it is committed. It
//! runs as a test: `cargo test -p xtask tidy`, part of `cargo xtask test`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

mod cycles;
mod sources;

/// Phrases that describe how the work was organised, not what the project is or does, and what to write instead.
/// Case-insensitive; `\s+` between words also matches a line break with the next line's comment marker. A match in
/// which the group `allowed` took part is not a finding (a term of the trade that shares the words). This file is
/// the one place the list lives, and is itself exempt from it.
const FORBIDDEN: &[(&str, &str)] = &[
    (
        r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth)\s+session\b",
        "names a work period: say what the project is and does; its history is in git",
    ),
    (r"\bwork\s+periods?\b", "names a work period: say what the project is and does; its history is in git"),
    (r"\bdevice\s+(?:tool|time)\b", "names the machinery that lent a GPU: name the GPU and the command instead"),
    (
        r"\bthe\s+seed\b(?P<allowed>\s+corpus)?",
        "names the project's first version: say \"LLVM libc's first design\" for the barrier kernel, or what it is",
    ),
    (
        r"\b(?:was\s+)?verified\s+here\b|\bwhat\s+was\s+verified\b",
        "says where a check happened: say what is verified and how (a test, a GPU)",
    ),
    (
        r"\bthe\s+project\s+has\s+no\s+(?:AMD\s+|NVIDIA\s+)?GPU\b",
        "speaks of the work's means: say what is and is not verified without such a GPU",
    ),
    (r"\bassistant\b", "speaks of how the work was done, not of the project"),
    (r"(?m)^/?\.(?:device-bundle|gl|whl)/?$", "ignores a folder of the tooling that did the work, not of the project"),
];

/// The files of this test: its list and its tests' examples name the forbidden words.
const EXEMPT: &[&str] = &["xtask/src/tidy.rs", "xtask/src/tidy/tests.rs"];

/// Extensions of files whose path in a code span is checked even when its first folder is not one of the
/// repository's (`src/main.rs` within a crate).
const SOURCE_EXTENSIONS: &[&str] = &["md", "rs", "toml", "c", "h"];

/// One thing the tidy test found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Problem {
    path: String,
    line: usize,
    message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.message)
    }
}

/// The repository as the checks see it: every file's path (relative to the root, `/`-separated), with its text
/// when it is UTF-8.
#[derive(Default)]
struct Repo {
    files: BTreeMap<String, Option<String>>,
    dirs: BTreeSet<String>,
}

impl Repo {
    fn new(files: impl IntoIterator<Item = (String, Option<String>)>) -> Self {
        let files: BTreeMap<_, _> = files.into_iter().collect();
        let mut dirs = BTreeSet::new();
        for path in files.keys() {
            let mut dir = path.as_str();
            while let Some((parent, _)) = dir.rsplit_once('/') {
                dirs.insert(parent.to_owned());
                dir = parent;
            }
        }
        Self { files, dirs }
    }

    /// The files git lists under `root`: tracked ones that still exist, and untracked ones it does not ignore.
    fn from_git(root: &std::path::Path) -> anyhow::Result<Self> {
        use anyhow::Context;
        let output = std::process::Command::new("git")
            .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
            .current_dir(root)
            .output()
            .context("the tidy test lists the repository's files with `git ls-files`, which could not run")?;
        anyhow::ensure!(output.status.success(), "git ls-files failed: {}", String::from_utf8_lossy(&output.stderr));
        let mut files = Vec::new();
        for path in output.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
            let path = String::from_utf8(path.to_vec()).context("a file name that is not UTF-8")?;
            let Ok(bytes) = std::fs::read(root.join(&path)) else { continue };
            files.push((path, String::from_utf8(bytes).ok()));
        }
        Ok(Self::new(files))
    }

    fn exists(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        path.is_empty() || self.files.contains_key(path) || self.dirs.contains(path)
    }

    fn text(&self, path: &str) -> Option<&str> {
        self.files.get(path).and_then(|text| text.as_deref())
    }

    /// The folder of the nearest `Cargo.toml` at or above `dir`, below the root (a crate, not the workspace).
    fn package_of<'p>(&self, mut dir: &'p str) -> Option<&'p str> {
        while !dir.is_empty() {
            if self.files.contains_key(&format!("{dir}/Cargo.toml")) {
                return Some(dir);
            }
            dir = dir.rsplit_once('/').map_or("", |(parent, _)| parent);
        }
        None
    }
}

/// Every problem in the repository, sorted by file and line.
fn check(repo: &Repo) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (path, text) in &repo.files {
        let Some(text) = text else { continue };
        if !EXEMPT.contains(&path.as_str()) {
            problems.extend(forbidden_words(path, text));
        }
        if let Some(prose) = prose(path, text) {
            problems.extend(dead_links(repo, path, &prose));
        }
        problems.extend(sources::source_file(path, text));
    }
    problems.extend(cycles::module_cycles(repo));
    problems.sort();
    problems
}

static FORBIDDEN_REGEXES: LazyLock<Vec<(Regex, &str)>> = LazyLock::new(|| {
    FORBIDDEN
        .iter()
        .map(|(pattern, why)| (Regex::new(&format!("(?i){pattern}")).expect("a valid pattern"), *why))
        .collect()
});

fn forbidden_words(path: &str, text: &str) -> Vec<Problem> {
    let text = without_comment_markers(text);
    let mut problems = Vec::new();
    for (regex, why) in FORBIDDEN_REGEXES.iter() {
        for found in regex.captures_iter(&text) {
            if found.name("allowed").is_some() {
                continue;
            }
            let whole = found.get(0).expect("group 0 is the match");
            let words = whole.as_str().split_whitespace().collect::<Vec<_>>().join(" ");
            problems.push(Problem {
                path: path.to_owned(),
                line: line_of(&text, whole.start()),
                message: format!("\"{words}\" {why}"),
            });
        }
    }
    problems
}

/// `text` with each line's indentation and comment marker (`//`, `///`, `//!`, `#`, `*`) replaced by spaces, so
/// that a phrase broken across comment lines still reads as one; byte offsets stay the same.
fn without_comment_markers(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let body = line.trim_start_matches([' ', '\t']);
            let marker = ["//!", "///", "//", "#", "*"].into_iter().find(|m| body.starts_with(m)).unwrap_or("");
            let prefix = line.len() - body.len() + marker.len();
            " ".repeat(prefix) + &line[prefix..]
        })
        .collect()
}

/// The part of a file written as Markdown, at the same byte offsets, everything else blanked: a Markdown file
/// outside its fenced code blocks, or the comments of a source file. `None` for other files.
fn prose(path: &str, text: &str) -> Option<String> {
    let extension = path.rsplit_once('.').map_or("", |(_, e)| e);
    let blank = |s: &str| s.chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect::<String>();
    let mut out = String::with_capacity(text.len());
    match extension {
        "md" => {
            let mut fence: Option<&str> = None;
            for line in text.split_inclusive('\n') {
                let body = line.trim_start();
                let opens = ["```", "~~~"].into_iter().find(|f| body.starts_with(f));
                match (fence, opens) {
                    (None, Some(f)) => {
                        fence = Some(f);
                        out.push_str(&blank(line));
                    }
                    (Some(open), Some(f)) if open == f => {
                        fence = None;
                        out.push_str(&blank(line));
                    }
                    (Some(_), _) => out.push_str(&blank(line)),
                    (None, None) => out.push_str(line),
                }
            }
        }
        "rs" | "c" | "h" | "toml" => {
            let (markers, trailing): (&[&str], &str) =
                if extension == "toml" { (&["#"], "#") } else { (&["//!", "///", "//", "/*", "*"], "//") };
            for line in text.split_inclusive('\n') {
                match comment_start(line, markers, trailing) {
                    Some((at, marker)) => {
                        out.push_str(&blank(&line[..at + marker]));
                        out.push_str(&line[at + marker..]);
                    }
                    None => out.push_str(&blank(line)),
                }
            }
        }
        _ => return None,
    }
    Some(out)
}

/// Where a line's comment starts: a line that is a comment (one of `markers`), or `trailing` after code and
/// whitespace, outside string literals. Returns the offset and the marker's length.
fn comment_start(line: &str, markers: &[&str], trailing: &str) -> Option<(usize, usize)> {
    let body = line.trim_start();
    if let Some(marker) = markers.iter().find(|m| body.starts_with(**m)) {
        return Some((line.len() - body.len(), marker.len()));
    }
    let mut in_string = false;
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            // A `'"'` character literal opens no string.
            '"' if !(line[..at].ends_with('\'') && line[at + 1..].starts_with('\'')) => in_string = !in_string,
            _ if !in_string && line[at..].starts_with(trailing) && line[..at].ends_with(char::is_whitespace) => {
                return Some((at, trailing.len()));
            }
            _ => {}
        }
    }
    None
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].bytes().filter(|&b| b == b'\n').count() + 1
}

/// A code span or a link target found in prose, with its byte offset in the file.
struct Reference<'t> {
    offset: usize,
    target: &'t str,
    /// A Markdown link (`[text](target)`), rather than a path in a code span.
    link: bool,
}

static LINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?m)\]\(([^()\s]+)(?:\s+"[^"]*")?\)|^[ \t]*\[[^\]]+\]:[ \t]+(\S+)"#).unwrap());

/// The code spans and link targets of `prose`. Code spans pair backtick runs of equal length within a paragraph, as
/// CommonMark does; links are looked for outside code spans.
fn references(prose: &str) -> Vec<Reference<'_>> {
    let mut found = Vec::new();
    let mut outside = prose.as_bytes().to_vec();
    let mut paragraph_start = 0;
    for paragraph_end in paragraph_ends(prose) {
        let paragraph = &prose[paragraph_start..paragraph_end];
        let runs = backtick_runs(paragraph);
        let mut i = 0;
        while i < runs.len() {
            let (open, length) = runs[i];
            match runs[i + 1..].iter().position(|&(_, l)| l == length) {
                Some(j) => {
                    let close = runs[i + 1 + j].0;
                    let start = paragraph_start + open + length;
                    let end = paragraph_start + close;
                    found.push(Reference { offset: start, target: prose[start..end].trim(), link: false });
                    outside[start..end].fill(b' ');
                    i += j + 2;
                }
                None => i += 1,
            }
        }
        paragraph_start = paragraph_end;
    }
    let outside = String::from_utf8_lossy(&outside);
    for captures in LINK.captures_iter(&outside) {
        let target = captures.get(1).or_else(|| captures.get(2)).expect("one alternative matched");
        found.push(Reference { offset: target.start(), target: &prose[target.range()], link: true });
    }
    found
}

/// Byte offsets where the paragraphs of `text` end (after each blank line, and the end of the text).
fn paragraph_ends(text: &str) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        offset += line.len();
        if line.trim().is_empty() {
            ends.push(offset);
        }
    }
    ends.push(text.len());
    ends
}

/// The runs of backticks in `text`: (offset, length).
fn backtick_runs(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'`' {
            let start = i;
            while i < bytes.len() && bytes[i] == b'`' {
                i += 1;
            }
            runs.push((start, i - start));
        } else {
            i += 1;
        }
    }
    runs
}

fn dead_links(repo: &Repo, path: &str, prose: &str) -> Vec<Problem> {
    let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
    let mut problems = Vec::new();
    for reference in references(prose) {
        let Some(message) = check_reference(repo, path, dir, &reference) else { continue };
        problems.push(Problem { path: path.to_owned(), line: line_of(prose, reference.offset), message });
    }
    problems
}

/// Why a reference leads nowhere, or `None` when it is fine or is not a reference to a file of the repository.
fn check_reference(repo: &Repo, path: &str, dir: &str, reference: &Reference<'_>) -> Option<String> {
    let target = reference.target;
    let (file, anchor) = target.split_once('#').map_or((target, None), |(f, a)| (f, Some(a)));
    if reference.link {
        if target.contains("://") || target.starts_with("mailto:") || target.contains("::") {
            return None;
        }
        // A rustdoc link to an item (`[Port](super::Port)`, `[x](Self)`) names no file.
        if !file.is_empty() && !file.contains('/') && !file.contains('.') {
            return None;
        }
    } else if !is_path_mention(repo, file) {
        return None;
    }
    let resolved = if file.is_empty() {
        Some(path.to_owned())
    } else if reference.link && path.ends_with(".md") {
        // Markdown renders a link relative to the file that holds it.
        join(dir, file).filter(|p| repo.exists(p))
    } else {
        // A path in a code span (or a comment) may be written from the root, the file's folder or its crate.
        [Some(""), Some(dir), repo.package_of(dir)]
            .into_iter()
            .flatten()
            .find_map(|base| join(base, file).filter(|p| repo.exists(p)))
    };
    let Some(resolved) = resolved else { return Some(format!("`{target}` leads to no file of the repository")) };
    let anchor = anchor.filter(|a| !a.is_empty())?;
    let text = repo.text(&resolved).filter(|_| resolved.ends_with(".md"))?;
    if heading_slugs(text).iter().any(|slug| slug == anchor) {
        None
    } else {
        Some(format!("`{target}`: {resolved} has no heading `#{anchor}`"))
    }
}

/// Whether a code span's text is meant as a path of the repository: path characters only, with a `/` or ending in
/// `.md`, not absolute, and either starting with one of the repository's top-level names or ending in a source
/// file's extension. Placeholders (`<target>`), globs and build outputs (`target/...`) are not.
fn is_path_mention(repo: &Repo, text: &str) -> bool {
    let path_chars = |c: char| c.is_ascii_alphanumeric() || "._-/".contains(c);
    if text.is_empty() || !text.chars().all(path_chars) || text.starts_with('/') || text.contains("//") {
        return false;
    }
    if !text.contains('/') && !text.ends_with(".md") {
        return false;
    }
    let relative = text.trim_start_matches("./");
    let first = relative.split('/').next().unwrap_or("");
    if first == "target" {
        return false;
    }
    let top_level = first == ".." || (relative.contains('/') && repo.exists(first));
    let name = relative.rsplit('/').next().unwrap_or("");
    let source = name.rsplit_once('.').is_some_and(|(stem, e)| !stem.is_empty() && SOURCE_EXTENSIONS.contains(&e));
    top_level || source
}

/// `base/relative` with `.` and `..` resolved; `None` when it would leave the repository.
fn join(base: &str, relative: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            _ => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens, and
/// `-1`, `-2`, ... after repeats.
fn heading_slugs(markdown: &str) -> Vec<String> {
    let mut slugs = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~") {
            fenced = !fenced;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !fenced) else { continue };
        let slug: String = heading
            .trim_start_matches('#')
            .trim()
            .to_lowercase()
            .chars()
            .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let repeats = seen.entry(slug.clone()).or_default();
        slugs.push(if *repeats == 0 { slug } else { format!("{slug}-{repeats}") });
        *repeats += 1;
    }
    slugs
}

#[test]
fn the_repository_is_tidy() {
    let repo = Repo::from_git(&crate::project_root()).expect("the repository's files");
    let problems = check(&repo);
    assert!(
        problems.is_empty(),
        "\n{}\n\n{} problem(s) above: fix the link or the path, or say what the project is instead (the word list is \
         in {})\n",
        problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"),
        problems.len(),
        EXEMPT[0],
    );
}

mod tests;
