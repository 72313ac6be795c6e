//! A test marked `ignore` both in `#[gpu_startup::test]` and by `#[ignore]` fails to compile.
#![no_std]
#![no_main]

#[gpu_startup::test(ignore)]
#[ignore]
fn not_ready() {}
