//! A trap in one thread after it printed: the loader names the kernel and the driver's error, exits with 139, and
//! the line printed before the fault still arrives.
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::{Gpu, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    if rt::Target::thread_ids().thread[0] == 7 {
        println!("before the trap");
        rt::Target::trap();
    }
    0
}
