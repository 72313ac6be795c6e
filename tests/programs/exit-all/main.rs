//! Every thread of a 100,352-thread grid calls `exit(3)` at once: the exit sequence runs exactly once (its handler
//! prints one line) and the loader exits with 3.
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::println;
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as _;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as _;

extern "C" fn once() {
    println!("exit sequence ran");
}

extern "C" fn register(_: c_int, _: *mut *mut c_char, _: *mut *mut c_char) {
    startup_common::atexit(once);
}
startup_common::constructor!(register);

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    startup_common::exit(3)
}
