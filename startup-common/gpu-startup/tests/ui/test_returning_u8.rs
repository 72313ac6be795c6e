//! A test that returns a `u8` fails to compile: a test returns `()` or a `Result`.
#![no_std]
#![no_main]

#[gpu_startup::test]
fn counts() -> u8 {
    0
}
