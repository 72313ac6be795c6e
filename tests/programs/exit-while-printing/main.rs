//! One thread exits while every other thread keeps printing: once the host has the exit code it stops serving, and
//! the threads still printing can never finish their RPC. The loader must end the run at once with the exit code,
//! not wait for them. With the argument `no-exit` nobody exits: the loader, busy serving output, must still stop the
//! program at `--timeout` (variant `timeout`). With `trap`, the lines are long (several packets each) and the thread
//! traps after 50 of its own instead of exiting: the host, in the middle of some thread's line when the grid dies,
//! must not wait for the rest of it, and ends the run as a device fault (variant `trap`).
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::{Gpu, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(argc: c_int, argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    // SAFETY: the loader passes `argc` C strings.
    let mode = if argc > 1 { unsafe { core::ffi::CStr::from_ptr(*argv.add(1)) }.to_bytes() } else { b"" };
    let trap = mode == b"trap";
    let ids = rt::Target::thread_ids();
    let stopper = ids.thread[0] == 0 && ids.block[0] == 1 && mode != b"no-exit";
    // With `trap`, 168 dots make each line four packets, and the grid dies while the host is busy with such lines.
    let (dots, stop_at) = if trap { (168, 50) } else { (0, 0) };
    let mut line = 0u64;
    loop {
        if stopper && line == stop_at {
            // Acknowledged by the host before `exit` (or the trap): this line must be in the output.
            println!("exiting");
            if trap {
                rt::Target::trap();
            }
            startup_common::exit(5);
        }
        println!("thread {} of block {} line {line}{:.<dots$}", ids.thread[0], ids.block[0], "");
        line += 1;
    }
}
