//! Thread 0 waits `argv[1]` milliseconds (default 1000) without using the RPC channel: what the host's RPC server
//! costs while a kernel runs and asks nothing of it.
#![no_std]
#![no_main]

use core::time::Duration;

use gpu_startup::thread;

#[gpu_startup::main]
fn main() -> i32 {
    if !thread::is_first() {
        return 0;
    }
    let millis = match gpu_startup::env::args().nth(1).map(str::parse) {
        None => 1000,
        Some(Ok(millis)) => millis,
        Some(Err(_)) => return 2,
    };
    thread::sleep(Duration::from_millis(millis));
    0
}
