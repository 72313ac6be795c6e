//! A panic inside a constructor, before `main`: its message reaches stderr and the run ends with 101; `main` never
//! runs.
#![no_std]
#![no_main]

use gpu_startup::println;

#[gpu_startup::constructor(priority = 101)]
fn failing() {
    println!("constructor runs");
    if gpu_startup::env::args().len() > 0 {
        panic!("the constructor cannot go on");
    }
}

#[gpu_startup::main]
fn main() {
    println!("main must not run");
}
