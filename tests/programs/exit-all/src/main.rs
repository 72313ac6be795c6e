//! Every thread of a 100,352-thread grid calls `exit(3)` at once: the exit sequence runs exactly once (its handler
//! prints one line) and the loader exits with 3.
#![no_std]
#![no_main]

use gpu_startup::{println, process};

fn once() {
    println!("exit sequence ran");
}

#[gpu_startup::constructor]
fn register() {
    process::atexit(once).expect("room for a handler");
}

#[gpu_startup::main]
fn main() -> ! {
    process::exit(3)
}
