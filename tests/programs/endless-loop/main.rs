//! A kernel that never ends: `--timeout 2` stops it, the loader says so and exits with 124, promptly, and what was
//! printed before arrives.
#![no_std]

use core::ffi::{c_char, c_int};
use core::sync::atomic::{AtomicBool, Ordering};

use startup_common::{Gpu, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

static NEVER: AtomicBool = AtomicBool::new(false);

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    if ids.thread == [0; 3] && ids.block == [0; 3] {
        println!("looping forever");
    }
    while !NEVER.load(Ordering::Relaxed) {
        rt::Target::sleep_briefly();
    }
    0
}
