//! Every thread of a grid 16 times larger than an H200 holds at once (132 SMs x 2048 threads x 16) prints one line
//! with its own number; the suite checks that every line arrives whole, once. LLVM libc's first design, one kernel
//! whose threads meet at a global barrier, would deadlock on a grid this large.
#![no_std]
#![no_main]

use gpu_startup::{block, println, thread};

#[gpu_startup::main]
fn main() {
    let (x, block_x) = (thread::id()[0], block::id()[0]);
    let id = u64::from(x) + 1024 * u64::from(block_x);
    println!("line {id} from thread {x} of block {block_x}");
}
