//! A store to an address no allocation covers: the loader reports an illegal address in `_start` and exits with
//! 139; the line printed before it arrives.
#![no_std]
#![no_main]

use gpu_startup::{println, thread};

#[gpu_startup::main]
fn main() {
    if thread::id()[0] == 0 {
        println!("before the bad store");
        // SAFETY: not sound, on purpose: this test checks how the loader reports the fault.
        unsafe { core::ptr::with_exposed_provenance_mut::<u32>(0x10).write_volatile(1) };
    }
}
