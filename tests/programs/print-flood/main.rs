//! Every thread of a grid 16 times larger than an H200 holds at once (132 SMs x 2048 threads x 16) prints one line
//! with its own number; the suite checks that every line arrives whole, once. LLVM libc's first design, one kernel
//! whose threads meet at a global barrier, would deadlock on a grid this large.
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::{Gpu, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    let id = u64::from(ids.thread[0]) + 1024 * u64::from(ids.block[0]);
    println!("line {id} from thread {} of block {}", ids.thread[0], ids.block[0]);
    0
}
