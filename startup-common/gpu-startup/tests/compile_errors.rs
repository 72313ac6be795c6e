//! A wrong signature under the attributes is a compile error that names the expected one.

#[test]
fn wrong_signatures_name_the_expected_ones() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
