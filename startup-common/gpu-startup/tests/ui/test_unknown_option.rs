//! A test option `#[gpu_startup::test]` does not know fails to compile: it lists the options.
#![no_std]
#![no_main]

#[gpu_startup::test(repeat = 10)]
fn flaky() {}
