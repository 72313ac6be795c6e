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
        .should_panic_with("sum was 17");
    const_assert_len(&spec);
    let bytes: [u8; 36 + 10 + 10] = spec.encode();
    assert_eq!(decode(&bytes), Ok(TestSpec { name: "m::reduces", ..spec }));
    let plain = TestSpec::new("c::plain");
    let bytes: [u8; 36 + 5] = plain.encode();
    let decoded = decode(&bytes).unwrap();
    assert_eq!(decoded, TestSpec { name: "plain", ..plain });
    assert_eq!((decoded.threads, decoded.blocks, decoded.timeout_ms), ([0; 3], [0; 3], 0));
    assert_eq!(TestSpec::new("c::t").timeout(5).timeout_ms, 5000);
}

fn const_assert_len(spec: &TestSpec<'_>) {
    assert_eq!(spec.encoded_len(), HEADER_LEN + spec.name.len() + spec.expected.map_or(0, str::len));
}

/// The layout in the module's table, byte by byte: the loader of another version must read the same.
#[test]
fn the_layout_is_the_documented_one() {
    let bytes: [u8; 36 + 1 + 2] =
        TestSpec::new("c::t").threads(32).blocks_xyz(2, 3, 4).timeout_ms(0x01020304).should_panic_with("ab").encode();
    assert_eq!(bytes[..8], [VERSION, FLAG_SHOULD_PANIC, 1, 0, 2, 0, 0, 0]);
    assert_eq!(bytes[8..20], [32, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(bytes[20..32], [2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]);
    assert_eq!(bytes[32..36], [4, 3, 2, 1]);
    assert_eq!(&bytes[36..], b"tab");
}

#[test]
fn corrupt_metadata_is_refused_with_its_reason() {
    let good: [u8; 36 + 1] = TestSpec::new("c::t").threads(2).encode();
    let corrupt = |at: usize, value: u8| {
        let mut bytes = good.to_vec();
        bytes[at] = value;
        decode(&bytes).unwrap_err()
    };
    assert_eq!(decode(&good[..20]), Err(DecodeError::Truncated { len: 20 }));
    assert_eq!(corrupt(0, 9), DecodeError::Version(9));
    assert_eq!(corrupt(1, 0x80), DecodeError::Flags(0x80));
    assert_eq!(corrupt(2, 5), DecodeError::Length { header_says: 41, actual: 37 });
    assert_eq!(corrupt(6, 1), DecodeError::Inconsistent("its reserved bytes are not zero"));
    assert_eq!(corrupt(12, 0), DecodeError::Shape { what: "threads", counts: [2, 0, 1] });
    assert_eq!(corrupt(36, 0xff), DecodeError::NotUtf8("name"));
    let mut longer = good.to_vec();
    longer.push(b'x');
    assert_eq!(decode(&longer), Err(DecodeError::Length { header_says: 37, actual: 38 }));
    longer[4] = 1;
    assert!(matches!(decode(&longer), Err(DecodeError::Inconsistent(_))));
    let mut nameless = good[..36].to_vec();
    nameless[2] = 0;
    assert_eq!(decode(&nameless), Err(DecodeError::EmptyName));
    for error in [corrupt(0, 9), corrupt(2, 5), corrupt(12, 0), corrupt(36, 0xff)] {
        assert!(!error.to_string().contains('\n'), "{error}");
    }
}

#[test]
fn a_name_that_would_break_a_line_of_the_list_is_refused() {
    let good: [u8; 36 + 3] = TestSpec::new("c::abc").encode();
    let with_name = |name: &str| {
        let mut bytes = good.to_vec();
        bytes[36..].copy_from_slice(name.as_bytes());
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
    let _: [u8; 36 + 3] = TestSpec::new("c::a\nb").encode();
}

#[test]
fn every_table_global_has_the_common_prefix() {
    assert!(ENTRY_PREFIX.starts_with(PREFIX) && META_PREFIX.starts_with(PREFIX));
}
