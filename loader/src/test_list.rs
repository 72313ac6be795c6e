//! The tests of a test binary, read from its image alone (no GPU): the `__gpu_test_meta_*` globals' bytes, decoded
//! with `gpu_startup_protocol::test_table`, each paired with its `__gpu_test_entry_*` global.

use std::collections::HashSet;
use std::time::Duration;

use gpu_startup_protocol::test_table::{self, ENTRY_PREFIX, META_PREFIX};

use crate::error::{LoaderError, Result};
use crate::image::Image;

/// One test of a test binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestCase {
    /// libtest's name: module path without the crate, then the function.
    pub name: String,
    pub ignore: bool,
    pub should_panic: bool,
    /// With `should_panic`: text the panic's message must contain.
    pub expected: Option<String>,
    /// Threads per block, if the test gives them.
    pub threads: Option<[u32; 3]>,
    /// Blocks, if the test gives them.
    pub blocks: Option<[u32; 3]>,
    /// The test's own timeout, if it gives one.
    pub timeout: Option<Duration>,
    /// The global that holds the test's trampoline; `_start` gets its address.
    pub entry_symbol: String,
    /// Where the test is in its source, as libtest's `--list --format json` gives it.
    pub source: SourceSpan,
}

/// Where a test function's name is in its source: the file as the compiler named it, and the 1-based line and
/// column (in characters) where the name starts and just past where it ends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceSpan {
    pub path: String,
    pub start: [u32; 2],
    pub end: [u32; 2],
}

/// Whether `image`, with `tests` its table, is a test binary: it has tests, or no `main` of its own (the startup's
/// weak one only), as a test build without tests has (`#[gpu_startup::main]` leaves `main` out of test builds).
pub fn is_test_binary(image: &Image, tests: &[TestCase]) -> Result<bool> {
    Ok(!tests.is_empty() || image.lacks_own_main()?)
}

/// The image's tests, sorted by name (as libtest runs them); empty for an image that is not a test binary. A
/// table that does not hold together is an error naming the global at fault.
pub fn read(image: &Image) -> Result<Vec<TestCase>> {
    let corrupt = |problem: String| LoaderError::BadImage {
        path: image.path.clone(),
        problem: format!("has a corrupt test table: {problem}"),
    };
    let metadata = image.initialized_globals(META_PREFIX)?;
    let symbols = image.global_symbols();
    // Sets, not lists: a table of tens of thousands of tests is matched in linear time.
    let entries: HashSet<&str> =
        symbols.iter().map(String::as_str).filter(|name| name.starts_with(ENTRY_PREFIX)).collect();
    let mut tests = Vec::with_capacity(metadata.len());
    for (symbol, bytes) in &metadata {
        let bytes = bytes.as_ref().map_err(|problem| corrupt(problem.clone()))?;
        let spec = test_table::decode(bytes).map_err(|error| corrupt(format!("`{symbol}`: {error}")))?;
        let id = &symbol[META_PREFIX.len()..];
        let entry_symbol = format!("{ENTRY_PREFIX}{id}");
        if !entries.contains(entry_symbol.as_str()) {
            return Err(corrupt(format!("`{symbol}` has no entry global `{entry_symbol}`")));
        }
        let shape = |counts: [u32; 3]| (counts != [0; 3]).then_some(counts);
        tests.push(TestCase {
            name: spec.name.to_owned(),
            ignore: spec.ignore,
            should_panic: spec.should_panic,
            expected: spec.expected.map(str::to_owned),
            threads: shape(spec.threads),
            blocks: shape(spec.blocks),
            timeout: (spec.timeout_ms > 0).then(|| Duration::from_millis(spec.timeout_ms.into())),
            entry_symbol,
            source: SourceSpan { path: spec.source.path.to_owned(), start: spec.source.start, end: spec.source.end },
        });
    }
    let described: HashSet<&str> = tests.iter().map(|test| test.entry_symbol.as_str()).collect();
    let undescribed = symbols.iter().find(|name| name.starts_with(ENTRY_PREFIX) && !described.contains(name.as_str()));
    if let Some(entry) = undescribed {
        let meta = format!("{META_PREFIX}{}", &entry[ENTRY_PREFIX.len()..]);
        return Err(corrupt(format!("`{entry}` has no metadata global `{meta}`")));
    }
    tests.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = tests.windows(2).find(|pair| pair[0].name == pair[1].name) {
        return Err(corrupt(format!("two tests are named `{}`", pair[0].name)));
    }
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use gpu_startup_protocol::test_table::{HEADER_LEN, TestSpec};

    use super::*;

    /// PTX with the startup's kernels and one `.visible` entry and metadata global per `(id, spec bytes)`.
    fn ptx(tests: &[(&str, Vec<u8>)]) -> String {
        let mut text = String::from(".version 7.8\n.target sm_90\n.address_size 64\n");
        for (id, bytes) in tests {
            let list: Vec<String> = bytes.iter().map(u8::to_string).collect();
            text += &format!(".visible .global .align 8 .u64 __gpu_test_entry_{id} = trampoline_{id};\n");
            text += &format!(
                ".visible .global .align 1 .b8 __gpu_test_meta_{id}[{}] = {{{}}};\n",
                bytes.len(),
                list.join(", ")
            );
        }
        text + ".visible .entry _begin(\n\t.param .align 8 .b8 _begin_param_0[40]\n)\n{\n\tret;\n}\n"
    }

    fn encode<const N: usize>(spec: TestSpec<'static>) -> Vec<u8> {
        spec.encode::<N>().to_vec()
    }

    fn read_ptx(text: &str) -> Result<Vec<TestCase>> {
        read(&Image::from_bytes(Path::new("t.ptx"), text.as_bytes().to_vec())?)
    }

    #[test]
    fn tests_are_read_sorted_with_their_options() {
        let text = ptx(&[
            ("b_1_1", encode::<{ HEADER_LEN + 12 }>(TestSpec::new("c::m::warp_test").threads(32).timeout(5))),
            (
                "a_2_1",
                encode::<{ HEADER_LEN + 3 + 4 + 6 }>(
                    TestSpec::new("c::ign").ignore().should_panic_with("boom").source("a/b.rs", 3, 4, 3, 7),
                ),
            ),
        ]);
        let tests = read_ptx(&text).unwrap();
        assert_eq!(tests.len(), 2);
        assert_eq!(
            tests[0],
            TestCase {
                name: "ign".into(),
                ignore: true,
                should_panic: true,
                expected: Some("boom".into()),
                threads: None,
                blocks: None,
                timeout: None,
                entry_symbol: "__gpu_test_entry_a_2_1".into(),
                source: SourceSpan { path: "a/b.rs".into(), start: [3, 4], end: [3, 7] },
            }
        );
        assert_eq!(tests[1].name, "m::warp_test");
        assert_eq!((tests[1].threads, tests[1].blocks), (Some([32, 1, 1]), None));
        assert_eq!(tests[1].timeout, Some(Duration::from_secs(5)));
    }

    #[test]
    fn an_image_without_tests_has_an_empty_list() {
        assert!(read_ptx(&ptx(&[])).unwrap().is_empty());
    }

    #[test]
    fn a_corrupt_table_is_refused_naming_the_global() {
        let good = encode::<{ HEADER_LEN + 1 }>(TestSpec::new("c::t"));
        let mut bad_version = good.clone();
        bad_version[0] = 7;
        let cases = [
            (ptx(&[("x", bad_version)]), "`__gpu_test_meta_x`: encoding version 7"),
            (ptx(&[("x", good[..30].to_vec())]), "`__gpu_test_meta_x`: 30 bytes, fewer than the 52-byte header"),
            (ptx(&[("x", good.clone())]).replace("__gpu_test_entry_x", "other"), "has no entry global"),
            (
                ptx(&[("x", good.clone())]).replace(".b8 __gpu_test_meta_x", ".b8 unrelated"),
                "`__gpu_test_entry_x` has no metadata global `__gpu_test_meta_x`",
            ),
            (ptx(&[("x", good.clone()), ("y", good.clone())]), "two tests are named `t`"),
            (ptx(&[("x", good.clone())]).replace("[53]", "[54]"), "is 54 bytes, but its initializer has 53"),
            (ptx(&[("x", good.clone())]).replace("{2, ", "{256, "), "an initializer element that is not a byte"),
            (ptx(&[("x", good.clone())]).replace(" = {2, 0", ";\n// = {2, 0"), "has no initializer"),
            (
                ptx(&[("x", good.clone())]).replace(".b8 __gpu_test_meta_x", ".u32 __gpu_test_meta_x"),
                "not a byte array",
            ),
        ];
        for (text, message) in cases {
            let error = read_ptx(&text).unwrap_err().to_string();
            assert!(error.starts_with("t.ptx: "), "{error}");
            assert!(error.contains(message), "{error} lacks {message:?}");
            assert!(!error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn fifty_thousand_tests_are_listed() {
        const COUNT: usize = 50_000;
        let template = encode::<{ HEADER_LEN + 6 }>(TestSpec::new("c::t00000"));
        let table: Vec<(String, Vec<u8>)> = (0..COUNT)
            .rev()
            .map(|i| {
                let mut bytes = template.clone();
                bytes[HEADER_LEN..].copy_from_slice(format!("t{i:05}").as_bytes());
                (format!("t{i}"), bytes)
            })
            .collect();
        let table: Vec<(&str, Vec<u8>)> = table.iter().map(|(id, bytes)| (id.as_str(), bytes.clone())).collect();
        let tests = read_ptx(&ptx(&table)).unwrap();
        assert_eq!(tests.len(), COUNT);
        assert_eq!((tests[0].name.as_str(), tests[COUNT - 1].name.as_str()), ("t00000", "t49999"));
    }

    #[test]
    fn a_name_with_a_line_break_is_refused_in_one_line() {
        let good = encode::<{ HEADER_LEN + 6 }>(TestSpec::new("c::listed"));
        for (name, shown) in
            [("a\nb: t", "'\\n' at byte 1"), ("ab\rcde", "'\\r' at byte 2"), ("a\u{2028}bc", "'\\u{2028}'")]
        {
            let mut bytes = good.clone();
            bytes[HEADER_LEN..].copy_from_slice(name.as_bytes());
            let error = read_ptx(&ptx(&[("x", bytes)])).unwrap_err().to_string();
            assert!(
                error.starts_with("t.ptx: has a corrupt test table: `__gpu_test_meta_x`: its name holds "),
                "{error}"
            );
            assert!(error.contains(shown), "{error} lacks {shown:?}");
            assert!(!error.contains(['\n', '\r', '\u{2028}']), "{error}");
        }
    }

    #[test]
    fn initializers_may_span_lines_and_use_hex() {
        let good = encode::<{ HEADER_LEN + 1 }>(TestSpec::new("c::t"));
        let text = ptx(&[("x", good)]).replacen("{2, 0, ", "{0x02,\n\t0x0,\n ", 1);
        assert_eq!(read_ptx(&text).unwrap()[0].name, "t");
    }
}
