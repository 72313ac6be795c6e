//! One thread makes `argv[1]` RPC round trips (default 1000): the channel's latency, as the benchmarks measure it;
//! every other thread returns at once. Each carries a number each way (test increment, checked), or nothing (test
//! noop) when `argv[2]` is `empty`.
#![no_std]

use core::ffi::{CStr, c_char, c_int};

use startup_common::Gpu;
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(argc: c_int, argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    if ids.thread != [0; 3] || ids.block != [0; 3] {
        return 0;
    }
    let rounds: u64 = if argc > 1 {
        // SAFETY: the loader passes `argc` C strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(1)) };
        match arg.to_str().ok().and_then(|s| s.parse().ok()) {
            Some(n) => n,
            None => return 2,
        }
    } else {
        1000
    };
    // SAFETY: as above; a second argument is optional.
    let empty = argc > 2 && unsafe { CStr::from_ptr(*argv.add(2)) }.to_bytes() == b"empty";
    if empty {
        for _ in 0..rounds {
            rt::RUNTIME.client().test_noop();
        }
        return 0;
    }
    let mut value = 0;
    for _ in 0..rounds {
        value = rt::RUNTIME.client().test_increment(value);
    }
    if value == rounds { 0 } else { 1 }
}
