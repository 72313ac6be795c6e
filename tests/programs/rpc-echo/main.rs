//! Byte streams of divergent lengths echoed through RPC (32 threads x 8 blocks), as LLVM libc's
//! rpc_stream_test does: each thread sends a different length, 0 and several packets included, and checks every
//! byte that comes back.
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
    let id = ids.thread[0] + 32 * ids.block[0];
    let len = ((id * 37) % 300) as usize;
    let mut input = [0u8; 300];
    for (i, byte) in input.iter_mut().enumerate() {
        *byte = (i as u32 * 7 + id) as u8;
    }
    let mut output = [0u8; 300];
    let echoed = rt::RUNTIME.client().test_echo(&input[..len], &mut output);
    if echoed != len || input[..len] != output[..len] { 1 } else { 0 }
}
