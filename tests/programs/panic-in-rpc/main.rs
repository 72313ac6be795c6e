//! One thread panics inside a port operation, while its group holds its warp's own port (4 warps, 1024 ports: every
//! warp has a port of its own): the report, itself a message, must take another port rather than wait for the one
//! its own group holds, and the run ends with 101.
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::Gpu;
use startup_common::rpc::opcode;
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    if ids.thread[0] != 37 || ids.block[0] != 1 {
        return 0;
    }
    let mut port = rt::RUNTIME.client().open(opcode::TEST_INCREMENT);
    port.send(|_| panic!("lane 5 of warp 1 fails while its group holds a port"));
    1
}
