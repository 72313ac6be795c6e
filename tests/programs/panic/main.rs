//! A panic in one thread: the message with its location and thread reaches stderr, and the run ends with 101.
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::Gpu;
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    if ids.thread == [3, 0, 0] && ids.block == [2, 0, 0] {
        panic!("thread 3 of block 2 gives up (argc {argc})");
    }
    0
}
