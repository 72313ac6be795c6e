//! libtest's list in JSON (`--list --format json`) for a binary of `#[gpu_startup::test]`s: a `discovery` event, a
//! `discovered` event for each selected test with where it is in its source (the test table has it), and a
//! `completed` event with the counts, one JSON object a line, with the spacing and escaping of libtest's JSON
//! formatter (in the toolchain's `rust-src`), so that what reads libtest's list (an IDE) reads ours. libtest's parent
//! passes libtest's own list on instead ([`super::libtest`]).

use std::fmt;
use std::io::{self, Write};

use crate::test_list::SourceSpan;

/// A test as the list shows it.
pub struct Discovered<'a> {
    pub name: &'a str,
    /// Whether it is reported ignored: libtest reports none ignored with `--ignored` or `--include-ignored`.
    pub ignore: bool,
    pub source: &'a SourceSpan,
}

/// Writes the list of `tests`, in their order.
pub fn write_list<'a>(out: &mut impl Write, tests: impl IntoIterator<Item = Discovered<'a>>) -> io::Result<()> {
    writeln!(out, r#"{{ "type": "suite", "event": "discovery" }}"#)?;
    let (mut count, mut ignored) = (0, 0);
    for test in tests {
        count += 1;
        ignored += usize::from(test.ignore);
        let ([start_line, start_col], [end_line, end_col]) = (test.source.start, test.source.end);
        writeln!(
            out,
            r#"{{ "type": "test", "event": "discovered", "name": "{}", "ignore": {}, "ignore_message": "", "source_path": "{}", "start_line": {start_line}, "start_col": {start_col}, "end_line": {end_line}, "end_col": {end_col} }}"#,
            Escaped(test.name),
            test.ignore,
            Escaped(&test.source.path),
        )?;
    }
    writeln!(
        out,
        r#"{{ "type": "suite", "event": "completed", "tests": {count}, "benchmarks": 0, "total": {count}, "ignored": {ignored} }}"#
    )?;
    out.flush()
}

/// Text inside a JSON string as libtest escapes it: `"` and `\`, and the control characters (the C0 ones and DEL;
/// backspace, tab, line feed, form feed and carriage return by their letters, the others as `\u00XX`).
struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut plain = 0;
        for (at, byte) in self.0.bytes().enumerate() {
            let letter = match byte {
                b'"' => '"',
                b'\\' => '\\',
                b'\x08' => 'b',
                b'\t' => 't',
                b'\n' => 'n',
                b'\x0c' => 'f',
                b'\r' => 'r',
                0..0x20 | 0x7f => '\0',
                _ => continue,
            };
            f.write_str(&self.0[plain..at])?;
            match letter {
                '\0' => write!(f, "\\u{byte:04x}")?,
                letter => write!(f, "\\{letter}")?,
            }
            plain = at + 1;
        }
        f.write_str(&self.0[plain..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(tests: &[(&str, bool, SourceSpan)]) -> String {
        let mut out = Vec::new();
        let tests = tests.iter().map(|(name, ignore, source)| Discovered { name, ignore: *ignore, source });
        write_list(&mut out, tests).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_list_is_libtests() {
        let source = |line| SourceSpan { path: "src/lib.rs".into(), start: [line, 4], end: [line, 8] };
        assert_eq!(
            listed(&[("adds", false, source(3)), ("warp::late", true, source(12))]),
            concat!(
                r#"{ "type": "suite", "event": "discovery" }"#,
                "\n",
                r#"{ "type": "test", "event": "discovered", "name": "adds", "ignore": false, "ignore_message": "", "source_path": "src/lib.rs", "start_line": 3, "start_col": 4, "end_line": 3, "end_col": 8 }"#,
                "\n",
                r#"{ "type": "test", "event": "discovered", "name": "warp::late", "ignore": true, "ignore_message": "", "source_path": "src/lib.rs", "start_line": 12, "start_col": 4, "end_line": 12, "end_col": 8 }"#,
                "\n",
                r#"{ "type": "suite", "event": "completed", "tests": 2, "benchmarks": 0, "total": 2, "ignored": 1 }"#,
                "\n",
            )
        );
        assert_eq!(
            listed(&[]),
            "{ \"type\": \"suite\", \"event\": \"discovery\" }\n{ \"type\": \"suite\", \"event\": \"completed\", \
             \"tests\": 0, \"benchmarks\": 0, \"total\": 0, \"ignored\": 0 }\n"
        );
    }

    #[test]
    fn strings_are_escaped_as_libtest_escapes_them() {
        let escaped = |text: &str| Escaped(text).to_string();
        assert_eq!(escaped("src/lib.rs"), "src/lib.rs");
        assert_eq!(escaped(r#"C:\a "b".rs"#), r#"C:\\a \"b\".rs"#);
        assert_eq!(escaped("\x08\t\n\x0c\r"), r"\b\t\n\f\r");
        assert_eq!(escaped("\0\x0b\x1f\x7f é"), r"\u0000\u000b\u001f\u007f é");
    }
}
