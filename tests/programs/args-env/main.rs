//! Arguments and environment, as LLVM libc's args_test checks: run with `1 2 3` and `FRANCE=Paris`,
//! `GERMANY=Berlin` in the environment; every thread checks them and the results are ORed.
#![no_std]

use core::ffi::{CStr, c_char, c_int};

fn arg(list: *mut *mut c_char, index: usize) -> &'static [u8] {
    // SAFETY: the loader passes NULL-terminated arrays of C strings; callers stay below the count.
    unsafe { CStr::from_ptr(*list.add(index)).to_bytes() }
}

fn env_has(envp: *mut *mut c_char, wanted: &[u8]) -> bool {
    (0..).map_while(|i| {
        // SAFETY: the array ends with NULL, where iteration stops.
        let entry = unsafe { *envp.add(i) };
        (!entry.is_null()).then(|| arg(envp, i))
    })
    .any(|entry| entry == wanted)
}

#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as _;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as _;

#[unsafe(no_mangle)]
pub extern "C" fn main(argc: c_int, argv: *mut *mut c_char, envp: *mut *mut c_char) -> c_int {
    let mut failures = 0;
    if argc != 4 {
        failures |= 1;
    }
    if argc == 4 && (arg(argv, 1) != b"1" || arg(argv, 2) != b"2" || arg(argv, 3) != b"3") {
        failures |= 2;
    }
    // SAFETY: argv ends with NULL after argc entries.
    if unsafe { !(*argv.add(argc as usize)).is_null() } {
        failures |= 4;
    }
    if !env_has(envp, b"FRANCE=Paris") || !env_has(envp, b"GERMANY=Berlin") {
        failures |= 8;
    }
    failures
}
