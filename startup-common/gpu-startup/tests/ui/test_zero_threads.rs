//! A test of zero threads fails to compile.
#![no_std]
#![no_main]

#[gpu_startup::test(threads = 0)]
fn reduces() {}
