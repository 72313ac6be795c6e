//! Thread 0 waits `argv[1]` milliseconds (default 1000) without using the RPC channel: what the host's RPC server
//! costs while a kernel runs and asks nothing of it.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch))]
#![cfg_attr(target_arch = "amdgpu", feature(link_llvm_intrinsics), allow(internal_features))]

use core::ffi::{CStr, c_char, c_int};

use startup_common::Gpu;
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

/// Nanoseconds from the GPU's global timer.
#[cfg(target_arch = "nvptx64")]
fn now_ns() -> u64 {
    let t: u64;
    // SAFETY: reads a special register.
    unsafe { core::arch::asm!("mov.u64 {}, %globaltimer;", out(reg64) t, options(nomem, nostack)) };
    t
}

/// Nanoseconds from the 100 MHz real-time counter.
#[cfg(target_arch = "amdgpu")]
fn now_ns() -> u64 {
    unsafe extern "C" {
        #[link_name = "llvm.amdgcn.s.memrealtime"]
        fn memrealtime() -> u64;
    }
    // SAFETY: reads a free-running counter.
    unsafe { memrealtime() * 10 }
}

#[unsafe(no_mangle)]
pub extern "C" fn main(argc: c_int, argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    if ids.thread != [0; 3] || ids.block != [0; 3] {
        return 0;
    }
    let millis: u64 = if argc > 1 {
        // SAFETY: the loader passes `argc` C strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(1)) };
        match arg.to_str().ok().and_then(|s| s.parse().ok()) {
            Some(n) => n,
            None => return 2,
        }
    } else {
        1000
    };
    let start = now_ns();
    while now_ns() - start < millis * 1_000_000 {
        rt::Target::sleep_briefly();
    }
    0
}
