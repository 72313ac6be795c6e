//! A panic inside a constructor, before `main`: its message reaches stderr and the run ends with 101; `main` never
//! runs.
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::{constructor, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as _;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as _;

extern "C" fn failing(argc: c_int, _: *mut *mut c_char, _: *mut *mut c_char) {
    println!("constructor runs");
    if argc > 0 {
        panic!("the constructor cannot go on");
    }
}
constructor!(101, failing);

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    println!("main must not run");
    0
}
