//! A constructor priority above 65535 fails to compile.
#![no_std]
#![no_main]

#[gpu_startup::constructor(priority = 70000)]
fn setup() {}

#[gpu_startup::main]
fn main() {}
