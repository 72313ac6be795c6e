//! One thread of 100,352 panics while the others return normally: its message arrives, once, and the run ends
//! with 101.
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::Gpu;
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    if ids.thread[0] == 200 && ids.block[0] == 333 {
        panic!("one thread in 100,352 fails");
    }
    0
}
