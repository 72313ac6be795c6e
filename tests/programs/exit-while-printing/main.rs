//! One thread exits while every other thread keeps printing: once the host has the exit code it stops serving, and
//! the threads still printing can never finish their RPC. The loader must end the run at once with the exit code,
//! not wait for them. With the argument `no-exit` nobody exits: the loader, busy serving output, must still stop the
//! program at `--timeout` (variant `timeout`).
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
    let no_exit = argc > 1 && unsafe { core::ffi::CStr::from_ptr(*argv.add(1)) }.to_bytes() == b"no-exit";
    let ids = rt::Target::thread_ids();
    if ids.thread[0] == 0 && ids.block[0] == 1 && !no_exit {
        // Acknowledged by the host before `exit` is sent: this line must be in the output.
        println!("exiting");
        startup_common::exit(5);
    }
    let mut line = 0u64;
    loop {
        println!("thread {} of block {} line {line}", ids.thread[0], ids.block[0]);
        line += 1;
    }
}
