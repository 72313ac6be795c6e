//! The heap under a large grid (the suite runs 128 blocks of 1,024 threads: 131,072 threads). For ROUNDS rounds
//! (argv[1], default 8) each thread allocates five blocks with Rust's allocator: four of 1 to 1,024 bytes aligned to
//! 8 to 4,096, and, for one thread in 64, one of 20,000 bytes (a run of pages); it fills every byte of every block
//! with a pattern of its own, checks every byte once all five are filled, and frees them in another order. A block
//! that the heap gave to two threads, or that overlaps another, shows as a wrong byte: the thread prints where and
//! returns 1.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::alloc::{Layout, alloc, dealloc};

use gpu_startup::{println, thread};

const BLOCKS: usize = 5;

/// A 32-bit hash, for sizes and patterns.
fn hash(x: u32) -> u32 {
    let x = x.wrapping_mul(0x2c1b_3c6d);
    x ^ (x >> 15)
}

/// What byte `i` of block `k` of thread `t` holds in round `round`.
fn pattern(t: u32, round: u32, k: usize, i: usize) -> u8 {
    (hash(t ^ (round << 24) ^ ((k as u32) << 28)) as usize + i * 7) as u8
}

/// The layout of block `k` of thread `t` in round `round`, if it has one.
fn layout(t: u32, round: u32, k: usize) -> Option<Layout> {
    let h = hash(t.wrapping_mul(0x9e37_79b9) ^ round.wrapping_mul(0x85eb_ca6b) ^ k as u32);
    match k {
        4 if t % 64 == 0 => Layout::from_size_align(20_000, 8).ok(),
        4 => None,
        _ => Layout::from_size_align(1 + h as usize % 1024, 8 << ((h >> 28) % 10)).ok(),
    }
}

#[gpu_startup::main]
fn main() -> i32 {
    let rounds: u32 = gpu_startup::env::args().nth(1).and_then(|arg| arg.parse().ok()).unwrap_or(8);
    let t = thread::index() as u32;
    for round in 0..rounds {
        let mut blocks: [(*mut u8, Option<Layout>); BLOCKS] = [(core::ptr::null_mut(), None); BLOCKS];
        for (k, block) in blocks.iter_mut().enumerate() {
            let Some(layout) = layout(t, round, k) else { continue };
            // SAFETY: every layout here has a non-zero size.
            let pointer = unsafe { alloc(layout) };
            if pointer.is_null() {
                println!("thread {t}: round {round}: no memory for {} bytes", layout.size());
                return 1;
            }
            if pointer as usize % layout.align() != 0 {
                println!("thread {t}: {pointer:p} is not aligned to {}", layout.align());
                return 1;
            }
            for i in 0..layout.size() {
                // SAFETY: the block has `layout.size()` bytes, this thread's.
                unsafe { pointer.add(i).write_volatile(pattern(t, round, k, i)) };
            }
            *block = (pointer, Some(layout));
        }
        for (k, &(pointer, layout)) in blocks.iter().enumerate() {
            let Some(layout) = layout else { continue };
            for i in 0..layout.size() {
                // SAFETY: as above.
                let byte = unsafe { pointer.add(i).read_volatile() };
                if byte != pattern(t, round, k, i) {
                    println!(
                        "thread {t}: round {round}: byte {i} of block {k} ({pointer:p}, {} bytes) changed",
                        layout.size()
                    );
                    return 1;
                }
            }
        }
        // Freed in another order each round.
        for n in 0..BLOCKS {
            let k = (n + round as usize) % BLOCKS;
            if let (pointer, Some(layout)) = blocks[k] {
                // SAFETY: allocated above with this layout, and not freed since.
                unsafe { dealloc(pointer, layout) };
            }
        }
    }
    0
}
