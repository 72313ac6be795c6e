//! `abort()` from one thread after it printed: the line arrives, no `atexit` handler runs, and the loader exits
//! with 134.
#![no_std]
#![no_main]

use gpu_startup::{println, process, thread};

fn must_not_run() {
    println!("atexit handler ran after abort");
}

#[gpu_startup::main]
fn main() {
    if thread::is_first() {
        process::atexit(must_not_run).expect("room for a handler");
        println!("about to abort");
        process::abort();
    }
}
