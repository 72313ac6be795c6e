#![no_std]
#![no_main]

#[gpu_startup::test]
#[test]
fn adds() {}
