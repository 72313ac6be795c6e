//! A panic in one thread: the message with its location and thread reaches stderr, and the run ends with 101.
#![no_std]
#![no_main]

use gpu_startup::{block, thread};

#[gpu_startup::main]
fn main() {
    if thread::id() == [3, 0, 0] && block::id() == [2, 0, 0] {
        panic!("thread 3 of block 2 gives up (argc {})", gpu_startup::env::args().len());
    }
}
