//! Alternating sends and receives on one port, and lane ids on a port a whole warp shares (LLVM libc's
//! rpc_interface_test): every thread of 4 blocks × 96 threads runs a different number of rounds per warp, and each
//! packet must arrive in its own lane's slot. Its `expect.toml` gives the loader 5 RPC ports for the grid's 12 warps,
//! so warps share ports and contend for them (the other RPC tests have a port per warp).
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
    // The same round count for a whole warp (or wavefront), different between them.
    let warp = ids.thread[0] / <rt::Target as Gpu>::LANE_SIZE + 8 * ids.block[0];
    if rt::RUNTIME.client().test_interface(warp % 7 + 1) { 0 } else { 1 }
}
