//! The README's first program: every thread says hello, and the program prints its arguments.
#![no_std]

use core::ffi::{CStr, c_char, c_int};

use startup_common::{Gpu, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(argc: c_int, argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    println!("hello from thread {} of block {}", ids.thread[0], ids.block[0]);
    if ids.thread == [0; 3] && ids.block == [0; 3] {
        for i in 0..argc as usize {
            // SAFETY: the loader passes `argc` NUL-terminated strings.
            let arg = unsafe { CStr::from_ptr(*argv.add(i)) };
            println!("argv[{i}] = {}", arg.to_str().unwrap_or("<not UTF-8>"));
        }
    }
    0
}
