//! One thread of many calls `exit(7)` while the others spin waiting: the exit sequence runs once, its handler
//! prints, and the loader exits with 7 although the other threads never return.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;

use gpu_startup::{block, println, process, thread};

static NEVER: AtomicBool = AtomicBool::new(false);

fn handler() {
    println!("atexit handler ran");
}

#[gpu_startup::main]
fn main() {
    if thread::id() == [5, 0, 0] && block::id() == [1, 0, 0] {
        process::atexit(handler).expect("room for a handler");
        process::exit(7);
    }
    while !NEVER.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_micros(1));
    }
}
