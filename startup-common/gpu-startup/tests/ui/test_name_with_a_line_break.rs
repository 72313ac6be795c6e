//! A test name with a line break fails to compile where its table entry is encoded.
#![no_std]
#![no_main]

// `#[gpu_startup::test]` names a test after `module_path!()` and its function, which hold no line break; a name
// given to the table any other way meets the same check when its bytes are encoded.
use startup_common::rust::test_table::TestSpec;

const SPEC: TestSpec<'static> = TestSpec::new("my_crate::adds\nforged: test");
const META: [u8; SPEC.encoded_len()] = SPEC.encode();
