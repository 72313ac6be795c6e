//! Pointers that Rust's deallocation must refuse, by argv[1]: `double` (a block deallocated twice), `interior` (a
//! pointer into the middle of a block), `outside` (a pointer to the stack), `realloc` (reallocating an interior
//! pointer). Each ends the program with a message naming the call and the pointer on stderr, and the loader exits
//! with 134 (as for `abort`); the line on stdout before it must still arrive. (`heap-bad-free-c` does the same
//! through C's `free` and `realloc`.) The pointers pass through `black_box`: the optimizer may take a deallocation
//! that cannot happen for one that does not.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::alloc::{Layout, alloc, dealloc, realloc};
use core::hint::black_box;

use gpu_startup::println;

#[gpu_startup::main]
fn main() -> i32 {
    let layout = Layout::from_size_align(100, 16).unwrap();
    // SAFETY: every call below but the first is one the heap must refuse, ending the program: that is what is tested.
    unsafe {
        let block = alloc(layout);
        match gpu_startup::env::args().nth(1) {
            Some("double") => {
                dealloc(block, layout);
                println!("deallocating {block:p} a second time");
                dealloc(black_box(block), layout);
            }
            Some("interior") => {
                println!("deallocating {:p}, 16 bytes into a block", block.add(16));
                dealloc(black_box(block.add(16)), layout);
            }
            Some("outside") => {
                let mut local = [0u8; 100];
                println!("deallocating a pointer to the stack");
                dealloc(black_box(local.as_mut_ptr()), layout);
            }
            Some("realloc") => {
                println!("reallocating {:p}, 8 bytes into a block", block.add(8));
                let _ = realloc(black_box(block.add(8)), layout, 200);
            }
            _ => {
                println!("usage: heap-bad-free double | interior | outside | realloc");
                return 2;
            }
        }
    }
    println!("the heap took it");
    1
}
