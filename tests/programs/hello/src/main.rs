//! The README's first program: every thread says hello, and the first prints the program's arguments.
#![no_std]
#![no_main]

use gpu_startup::{block, println, thread};

#[gpu_startup::main]
fn main() -> i32 {
    println!("hello from thread {} of block {}", thread::id()[0], block::id()[0]);
    if thread::is_first() {
        for (i, arg) in gpu_startup::env::args().enumerate() {
            println!("argv[{i}] = {arg}");
        }
    }
    0
}
