//! Running out of heap (the suite runs it with a small `--heap-size`). By argv[1]:
//! - none: requests larger than the heap get null; then blocks of 1 KiB until an allocation fails, chained through
//!   their first word; all freed; and the same again, which must get exactly as many: freed memory comes back.
//! - `threads`: every thread takes 4 KiB blocks until one fails, each filled with its thread's number, checks them
//!   and frees them: many threads running out at once.
//! - `vec`: a `Vec` grows until the heap is out: Rust's `handle_alloc_error` ends the program through the panic
//!   handler (exit 101, "memory allocation of N bytes failed").
#![no_std]
#![no_main]

extern crate alloc;

use alloc::alloc::{Layout, alloc, dealloc};
use core::hint::black_box;

use gpu_startup::{block, println, thread};

/// Takes blocks of `size` bytes until an allocation fails, chained through their first word, each filled with
/// `fill` after that word; returns the chain and its length.
fn take_all(size: usize, fill: u8) -> (*mut u8, usize) {
    let layout = Layout::from_size_align(size, 16).unwrap();
    let (mut chain, mut count) = (core::ptr::null_mut::<u8>(), 0);
    loop {
        // SAFETY: a layout of non-zero size.
        let block = unsafe { alloc(layout) };
        if block.is_null() {
            return (chain, count);
        }
        // SAFETY: the block has `size` (at least 8) bytes, 16-byte aligned, this thread's.
        unsafe {
            block.cast::<*mut u8>().write(chain);
            block.add(8).write_bytes(fill, size - 8);
        }
        (chain, count) = (block, count + 1);
    }
}

/// Frees a chain from [`take_all`]; whether every block still held `fill`.
fn free_all(mut chain: *mut u8, size: usize, fill: u8) -> bool {
    let layout = Layout::from_size_align(size, 16).unwrap();
    let mut intact = true;
    while !chain.is_null() {
        // SAFETY: every link is a live block of `size` bytes from `take_all`, freed once.
        unsafe {
            intact &= (8..size).all(|i| chain.add(i).read() == fill);
            let next = chain.cast::<*mut u8>().read();
            dealloc(chain, layout);
            chain = next;
        }
    }
    intact
}

#[gpu_startup::main]
fn main() -> i32 {
    match gpu_startup::env::args().nth(1) {
        None => {
            // SAFETY: layouts of non-zero size; any block they got would be leaked, but they must get none. The
            // pointers go through `black_box`: an allocation whose result is only compared with null is one the
            // compiler may remove, taking the comparison for false.
            let huge = [1usize << 40, 1 << 62]
                .map(|size| black_box(unsafe { alloc(Layout::from_size_align(size, 16).unwrap()) }));
            if huge.iter().all(|block| block.is_null()) {
                println!("larger than the heap: null");
            }
            let (chain, first) = take_all(1024, 0x11);
            let intact = free_all(chain, 1024, 0x11);
            let (chain, second) = take_all(1024, 0x22);
            let intact = intact & free_all(chain, 1024, 0x22);
            if first == second && intact {
                println!("out of memory after {first} blocks of 1 KiB; after freeing them all, as many again");
                0
            } else {
                println!("out of memory after {first} blocks, then after {second} (intact: {intact})");
                1
            }
        }
        Some("threads") => {
            let fill = (thread::id()[0] ^ (block::id()[0] << 6)) as u8;
            let (chain, _) = take_all(4096, fill);
            if free_all(chain, 4096, fill) { 0 } else { 1 }
        }
        Some("vec") => {
            let mut bytes = alloc::vec::Vec::new();
            loop {
                bytes.push(1u8);
            }
        }
        Some(_) => {
            println!("usage: heap-oom [threads | vec]");
            2
        }
    }
}
