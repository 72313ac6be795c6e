//! `abort()` from one thread after it printed: the line arrives, no `atexit` handler runs, and the loader exits
//! with 134.
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::{Gpu, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

extern "C" fn must_not_run() {
    println!("atexit handler ran after abort");
}

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    if ids.thread == [0; 3] && ids.block == [0; 3] {
        startup_common::atexit(must_not_run);
        println!("about to abort");
        startup_common::abort();
    }
    0
}
