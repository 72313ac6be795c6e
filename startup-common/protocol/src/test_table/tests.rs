//! The test table's tests: a test's metadata encodes in a `const fn` and decodes to the same.

use super::*;
use std::string::ToString;

#[test]
fn the_name_leaves_out_the_crate() {
    assert_eq!(TestSpec::new("my_crate::tests::adds").name, "tests::adds");
    assert_eq!(TestSpec::new("my_crate::adds").name, "adds");
    assert_eq!(TestSpec::new("adds").name, "adds");
}

#[test]
fn every_field_round_trips() {
    let spec = TestSpec::new("c::m::reduces")
        .threads_xyz(32, 2, 1)
        .blocks(4)
        .timeout_ms(1500)
        .ignore()
        .should_panic_with("sum was 17")
        .source("src/lib.rs", 3, 4, 3, 11);
    const_assert_len(&spec);
    let bytes: [u8; HEADER_LEN + 10 + 10 + 10] = spec.encode();
    assert_eq!(decode(&bytes), Ok(TestSpec { name: "m::reduces", ..spec }));
    assert_eq!(decode(&bytes).unwrap().source, SourceSpan { path: "src/lib.rs", start: [3, 4], end: [3, 11] });
    let plain = TestSpec::new("c::plain");
    let bytes: [u8; HEADER_LEN + 5] = plain.encode();
    let decoded = decode(&bytes).unwrap();
    assert_eq!(decoded, TestSpec { name: "plain", ..plain });
    assert_eq!((decoded.threads, decoded.blocks, decoded.timeout_ms), ([0; 3], [0; 3], 0));
    assert_eq!(decoded.source, SourceSpan { path: "", start: [0; 2], end: [0; 2] });
    assert_eq!(TestSpec::new("c::t").timeout(5).timeout_ms, 5000);
}

fn const_assert_len(spec: &TestSpec<'_>) {
    assert_eq!(
        spec.encoded_len(),
        HEADER_LEN + spec.name.len() + spec.expected.map_or(0, str::len) + spec.source.path.len()
    );
}

/// The layout in the module's table, byte by byte: the loader of another version must read the same.
#[test]
fn the_layout_is_the_documented_one() {
    let bytes: [u8; 52 + 1 + 2 + 4] = TestSpec::new("c::t")
        .threads(32)
        .blocks_xyz(2, 3, 4)
        .timeout_ms(0x01020304)
        .should_panic_with("ab")
        .source("a.rs", 7, 4, 0x10203, 5)
        .encode();
    assert_eq!(bytes[..8], [2, FLAG_SHOULD_PANIC, 1, 0, 2, 0, 4, 0]);
    assert_eq!(bytes[8..20], [32, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(bytes[20..32], [2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]);
    assert_eq!(bytes[32..36], [4, 3, 2, 1]);
    assert_eq!(bytes[36..52], [7, 0, 0, 0, 4, 0, 0, 0, 3, 2, 1, 0, 5, 0, 0, 0]);
    assert_eq!(&bytes[52..], b"taba.rs");
}

#[test]
fn corrupt_metadata_is_refused_with_its_reason() {
    let good: [u8; HEADER_LEN + 1 + 4] = TestSpec::new("c::t").threads(2).source("a.rs", 1, 4, 1, 5).encode();
    let corrupt = |at: usize, value: u8| {
        let mut bytes = good.to_vec();
        bytes[at] = value;
        decode(&bytes).unwrap_err()
    };
    assert_eq!(decode(&good[..20]), Err(DecodeError::Truncated { len: 20 }));
    assert_eq!(corrupt(0, 9), DecodeError::Version(9));
    assert_eq!(corrupt(1, 0x80), DecodeError::Flags(0x80));
    assert_eq!(corrupt(2, 5), DecodeError::Length { header_says: 61, actual: 57 });
    assert_eq!(corrupt(6, 5), DecodeError::Length { header_says: 58, actual: 57 });
    assert_eq!(corrupt(12, 0), DecodeError::Shape { what: "threads", counts: [2, 0, 1] });
    assert_eq!(corrupt(52, 0xff), DecodeError::NotUtf8("name"));
    assert_eq!(corrupt(53, 0xff), DecodeError::NotUtf8("source path"));
    let mut longer = good.to_vec();
    longer.push(b'x');
    assert_eq!(decode(&longer), Err(DecodeError::Length { header_says: 57, actual: 58 }));
    longer[4] = 1;
    assert!(matches!(decode(&longer), Err(DecodeError::Inconsistent(_))));
    let mut nameless = good[..HEADER_LEN].to_vec();
    nameless[2] = 0;
    nameless[6] = 0;
    assert_eq!(decode(&nameless), Err(DecodeError::EmptyName));
    // Any line and column decode: they are only reported.
    let mut far = good.to_vec();
    far[36..52].fill(0xff);
    assert_eq!(decode(&far).unwrap().source.end, [u32::MAX; 2]);
    for error in [corrupt(0, 9), corrupt(2, 5), corrupt(12, 0), corrupt(52, 0xff)] {
        assert!(!error.to_string().contains('\n'), "{error}");
    }
}

#[test]
fn a_name_that_would_break_a_line_of_the_list_is_refused() {
    let good: [u8; HEADER_LEN + 3] = TestSpec::new("c::abc").encode();
    let with_name = |name: &str| {
        let mut bytes = good.to_vec();
        bytes[HEADER_LEN..].copy_from_slice(name.as_bytes());
        decode(&bytes).map(|spec| spec.name.to_string())
    };
    assert_eq!(with_name("a\nb"), Err(DecodeError::LineBreakInName { at: 1, character: '\n' }));
    assert_eq!(with_name("ab\r"), Err(DecodeError::LineBreakInName { at: 2, character: '\r' }));
    assert_eq!(with_name("\u{85}b"), Err(DecodeError::LineBreakInName { at: 0, character: '\u{85}' }));
    assert_eq!(with_name("\u{2028}"), Err(DecodeError::LineBreakInName { at: 0, character: '\u{2028}' }));
    assert_eq!(with_name("a\u{a0}"), Ok("a\u{a0}".to_string()));
    let error = with_name("\n\u{85}").unwrap_err().to_string();
    assert_eq!(
        error,
        "its name holds '\\n' at byte 0: a control character or line break would forge lines of the test list"
    );
}

/// The byte-wise check finds exactly the control characters and the two separators, wherever they are.
#[test]
fn line_breaking_characters_are_the_control_characters_and_separators() {
    for character in (0..=char::MAX as u32).filter_map(char::from_u32) {
        let mut name = std::string::String::from("m::");
        name.push(character);
        name.push('x');
        let breaks = character.is_control() || matches!(character, '\u{2028}' | '\u{2029}');
        assert_eq!(line_breaking_character(&name), breaks.then_some((3, character)), "{character:?}");
    }
}

#[test]
#[should_panic(expected = "a test's name cannot hold a control character or a line break")]
fn encoding_a_name_with_a_line_break_panics() {
    let _: [u8; HEADER_LEN + 3] = TestSpec::new("c::a\nb").encode();
}

#[test]
fn every_table_global_has_the_common_prefix() {
    assert!(ENTRY_PREFIX.starts_with(PREFIX) && META_PREFIX.starts_with(PREFIX));
}
