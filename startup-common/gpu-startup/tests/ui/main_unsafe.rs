//! An `unsafe fn main` fails to compile.
#![no_std]
#![no_main]

#[gpu_startup::main]
unsafe fn main() -> i32 {
    0
}
