//! A test that takes arguments fails to compile.
#![no_std]
#![no_main]

#[gpu_startup::test]
fn adds(left: u32, right: u32) {
    assert_eq!(left + right, 3);
}
