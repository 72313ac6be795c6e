//! A `main` that takes arguments fails to compile: it says where they are.
#![no_std]
#![no_main]

#[gpu_startup::main]
fn main(argc: i32) -> i32 {
    argc
}
