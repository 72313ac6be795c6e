#![no_std]
#![no_main]

#[gpu_startup::test(ignore)]
#[ignore]
fn not_ready() {}
