//! One thread exits while every other thread keeps printing: once the host has the exit code it stops serving, and
//! the threads still printing can never finish their RPC. The loader must end the run at once with the exit code,
//! not wait for them. With the argument `no-exit` nobody exits: the loader, busy serving output, must still stop the
//! program at `--timeout` (variant `timeout`). With `trap`, the lines are long (several packets each) and the thread
//! traps after 50 of its own instead of exiting: the host, in the middle of some thread's line when the grid dies,
//! must not wait for the rest of it, and ends the run as a device fault (variant `trap`).
#![no_std]
#![no_main]

use gpu_startup::{block, println, process, thread};

#[gpu_startup::main]
fn main() -> ! {
    let mode = gpu_startup::env::args().nth(1).unwrap_or("");
    let trap = mode == "trap";
    let (x, block_x) = (thread::id()[0], block::id()[0]);
    let stopper = x == 0 && block_x == 1 && mode != "no-exit";
    // With `trap`, 168 dots make each line four packets, and the grid dies while the host is busy with such lines.
    let (dots, stop_at) = if trap { (168, 50) } else { (0, 0) };
    let mut line = 0u64;
    loop {
        if stopper && line == stop_at {
            // Acknowledged by the host before `exit` (or the trap): this line must be in the output.
            println!("exiting");
            if trap {
                process::trap();
            }
            process::exit(5);
        }
        println!("thread {x} of block {block_x} line {line}{:.<dots$}", "");
        line += 1;
    }
}
