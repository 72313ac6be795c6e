//! One thread of 100,352 panics while the others return normally: its message arrives, once, and the run ends
//! with 101.
#![no_std]
#![no_main]

use gpu_startup::{block, thread};

#[gpu_startup::main]
fn main() {
    if thread::id()[0] == 200 && block::id()[0] == 333 {
        panic!("one thread in 100,352 fails");
    }
}
