//! A destructor that returns a value fails to compile.
#![no_std]
#![no_main]

#[gpu_startup::destructor]
fn teardown() -> i32 {
    0
}

#[gpu_startup::main]
fn main() {}
