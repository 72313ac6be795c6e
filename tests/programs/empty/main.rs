//! `main` does nothing: the startup's own cost, as the benchmarks measure it.
#![no_std]

use core::ffi::{c_char, c_int};

#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as _;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as _;

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    0
}
