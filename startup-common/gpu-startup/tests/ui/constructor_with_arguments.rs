//! A constructor that takes an argument fails to compile: it says where `main`'s arguments are.
#![no_std]
#![no_main]

#[gpu_startup::constructor(priority = 101)]
fn setup(argc: i32) {
    let _ = argc;
}

#[gpu_startup::main]
fn main() {}
