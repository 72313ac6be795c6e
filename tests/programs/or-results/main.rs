//! `main`'s results are ORed over the grid: thread t returns 1 << (t % 5), so the program exits with 31.
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::Gpu;
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    1 << (rt::Target::thread_ids().thread[0] % 5)
}
