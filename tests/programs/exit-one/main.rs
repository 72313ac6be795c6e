//! One thread of many calls `exit(7)` while the others spin waiting: the exit sequence runs once, its handler
//! prints, and the loader exits with 7 although the other threads never return.
#![no_std]

use core::ffi::{c_char, c_int};
use core::sync::atomic::{AtomicBool, Ordering};

use startup_common::{Gpu, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

static NEVER: AtomicBool = AtomicBool::new(false);

extern "C" fn handler() {
    println!("atexit handler ran");
}

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    if ids.thread == [5, 0, 0] && ids.block == [1, 0, 0] {
        startup_common::atexit(handler);
        startup_common::exit(7);
    }
    while !NEVER.load(Ordering::Relaxed) {
        rt::Target::sleep_briefly();
    }
    0
}
