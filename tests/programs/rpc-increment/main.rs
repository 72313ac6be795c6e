//! RPC round trips from every thread of a 3-D grid (2x2x2 blocks of 4x4x4 threads), each thread doing a different
//! number of them, as LLVM libc's rpc_test does: the host adds one each time, so each thread ends at its count.
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
    let [x, y, z] = ids.thread;
    let [bx, by, bz] = ids.block;
    let flat = x + 4 * (y + 4 * z) + 64 * (bx + 2 * (by + 2 * bz));
    let rounds = u64::from(flat % 17 + 1);
    let mut value = 0;
    for _ in 0..rounds {
        value = rt::RUNTIME.client().test_increment(value);
    }
    if value == rounds { 0 } else { 1 }
}
