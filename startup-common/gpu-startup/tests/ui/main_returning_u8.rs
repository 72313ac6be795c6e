//! A `main` that returns a `u8` fails to compile: the exit status is an `i32`.
#![no_std]
#![no_main]

#[gpu_startup::main]
fn main() -> u8 {
    0
}
