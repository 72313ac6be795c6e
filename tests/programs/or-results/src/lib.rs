//! `main`'s results are ORed over the grid: thread t of the first blocks returns 1 << (t % 5), and the last block's
//! threads return 32 after a pause, so the program exits with 63. The pause keeps `_start` running well after the
//! other blocks ended: `_end`, which the loader may launch while `_start` still runs, must wait for all of it.
#![no_std]

use core::time::Duration;

use gpu_startup::{block, grid, thread};

#[gpu_startup::main]
fn main() -> i32 {
    if block::index() + 1 == grid::block_count() {
        thread::sleep(Duration::from_micros(200));
        return 32;
    }
    1 << (thread::id()[0] % 5)
}
