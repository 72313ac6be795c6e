#![no_std]
#![no_main]

#[gpu_startup::test(repeat = 10)]
fn flaky() {}
