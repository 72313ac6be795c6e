//! A function marked both `#[gpu_startup::test]` and `#[test]` fails to compile.
#![no_std]
#![no_main]

#[gpu_startup::test]
#[test]
fn adds() {}
