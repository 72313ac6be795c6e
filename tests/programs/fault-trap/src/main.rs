//! A trap in one thread after it printed: the loader names the kernel and the driver's error, exits with 139, and
//! the line printed before the fault still arrives.
#![no_std]
#![no_main]

use gpu_startup::{println, process, thread};

#[gpu_startup::main]
fn main() {
    if thread::id()[0] == 7 {
        println!("before the trap");
        process::trap();
    }
}
