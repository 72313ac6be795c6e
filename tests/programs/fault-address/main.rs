//! A store to an address no allocation covers: the loader reports an illegal address in `_start` and exits with
//! 139; the line printed before it arrives.
#![no_std]

use core::ffi::{c_char, c_int};

use startup_common::{Gpu, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    if rt::Target::thread_ids().thread[0] == 0 {
        println!("before the bad store");
        // SAFETY: not sound, on purpose: this test checks how the loader reports the fault.
        unsafe { core::ptr::with_exposed_provenance_mut::<u32>(0x10).write_volatile(1) };
    }
    0
}
