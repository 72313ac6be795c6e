//! Constructors by priority, `main`, then `atexit` handlers (latest first) before destructors (highest priority
//! first), as LLVM libc's init_fini_array_test checks, plus the values constructors leave for `main`.
#![no_std]

use core::ffi::{c_char, c_int};
use core::sync::atomic::{AtomicU32, Ordering};

use startup_common::{constructor, destructor, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as _;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as _;

static CONSTRUCTED: AtomicU32 = AtomicU32::new(0);

extern "C" fn first(argc: c_int, _: *mut *mut c_char, _: *mut *mut c_char) {
    println!("constructor 101 (argc {argc})");
    CONSTRUCTED.store(CONSTRUCTED.load(Ordering::Relaxed) * 10 + 1, Ordering::Relaxed);
    startup_common::atexit(registered_by_constructor);
}
extern "C" fn second(_: c_int, _: *mut *mut c_char, _: *mut *mut c_char) {
    println!("constructor 200");
    CONSTRUCTED.store(CONSTRUCTED.load(Ordering::Relaxed) * 10 + 2, Ordering::Relaxed);
}
extern "C" fn last(_: c_int, _: *mut *mut c_char, _: *mut *mut c_char) {
    println!("constructor default");
    CONSTRUCTED.store(CONSTRUCTED.load(Ordering::Relaxed) * 10 + 3, Ordering::Relaxed);
}
extern "C" fn registered_by_constructor() {
    println!("atexit from constructor");
}
extern "C" fn registered_by_main() {
    println!("atexit from main");
}
extern "C" fn destructor_low() {
    println!("destructor 101");
}
extern "C" fn destructor_high() {
    println!("destructor 300");
}

// Registered out of order on purpose: the priority decides.
constructor!(last);
constructor!(200, second);
constructor!(101, first);
destructor!(101, destructor_low);
destructor!(300, destructor_high);

#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    println!("main sees {}", CONSTRUCTED.load(Ordering::Relaxed));
    startup_common::atexit(registered_by_main);
    if CONSTRUCTED.load(Ordering::Relaxed) == 123 { 0 } else { 1 }
}
