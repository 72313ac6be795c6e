//! A kernel that never ends: `--timeout 2` stops it, the loader says so and exits with 124, promptly, and what was
//! printed before arrives.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;

use gpu_startup::{println, thread};

static NEVER: AtomicBool = AtomicBool::new(false);

#[gpu_startup::main]
fn main() {
    if thread::is_first() {
        println!("looping forever");
    }
    while !NEVER.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_micros(1));
    }
}
