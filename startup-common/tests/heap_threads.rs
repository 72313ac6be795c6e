//! The heap with many real threads at once: host threads as one-lane groups, and simulated warps whose lanes
//! allocate together (the combined path: lanes grouped by class, one reservation and one bitmap update for several
//! lanes). Every block is filled with a pattern of its owner's and checked before it is freed.

mod common;

use std::sync::{Arc, Barrier};

use common::{Rng, SIM_LANES, SimGroup, SimLaunch, SimWarp, become_lane, scaled};
use startup_common::gpu::{Gpu, HostThread};
use startup_common::libc::heap::{Heap, HeapError, HostPool, MALLOC_ALIGN, PAGE_BYTES, SLAB_BYTES};

/// The pattern byte `i` of a block of owner `seed` holds.
fn pattern(seed: u64, i: usize) -> u8 {
    (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8 ^ i as u8
}

fn fill(block: *mut u8, len: usize, seed: u64) {
    for i in 0..len {
        // SAFETY: the caller's block has at least `len` bytes.
        unsafe { block.add(i).write(pattern(seed, i)) };
    }
}

/// Whether the block still holds its owner's pattern: another owner's writes would show.
fn holds(block: *mut u8, len: usize, seed: u64) -> bool {
    // SAFETY: the caller's block has at least `len` bytes.
    (0..len).all(|i| unsafe { block.add(i).read() } == pattern(seed, i))
}

/// Frees `block` ([`Heap::deallocate`]).
fn free<G: Gpu>(heap: &Heap<G>, block: *mut u8) -> Result<(), HeapError> {
    // SAFETY: the tests free a block once its owner is done with it (or free one twice on purpose, which the heap
    // must refuse).
    unsafe { heap.deallocate(block) }
}

/// A heap over a fresh host pool of `slabs` slabs.
fn heap<G: Gpu>(slabs: u32) -> (HostPool, Heap<G>) {
    let pool = HostPool::new(slabs);
    let heap = Heap::new();
    // SAFETY: a fresh pool, kept beside the heap for the whole test; no thread uses the heap yet.
    unsafe { pool.attach(&heap) };
    (pool, heap)
}

/// A block's address, to hand to another thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Block(*mut u8);

// SAFETY: a block of the heap may be used and freed by any thread; the tests hand each over whole.
unsafe impl Send for Block {}

/// A size for a random request: mostly small, sometimes up to the largest chunk, now and then a run of pages.
fn random_size(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..=79 => 1 + rng.below(512) as usize,
        80..=97 => 1 + rng.below(8192) as usize,
        _ => 8193 + rng.below(5 * PAGE_BYTES as u64) as usize,
    }
}

#[test]
fn many_threads_allocate_fill_check_and_free() {
    let (pool, heap) = heap::<HostThread>(scaled(256, 32) as u32);
    let (threads, rounds) = (scaled(16, 3), scaled(4000, 30));
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let (pool, heap) = (&pool, &heap);
            scope.spawn(move || {
                let mut rng = Rng(thread as u64 + 1);
                let mut live: Vec<(*mut u8, usize, u64)> = Vec::new();
                for round in 0..rounds {
                    if live.len() < 16 && rng.below(3) != 0 {
                        let size = random_size(&mut rng);
                        let align = if rng.below(8) == 0 { 1 << rng.below(13) } else { MALLOC_ALIGN };
                        let block = heap.allocate(size, align);
                        assert!(!block.is_null(), "thread {thread}: {size} bytes");
                        assert!(pool.data_range().contains(&(block as usize)));
                        assert_eq!(block as usize % align, 0, "{size} bytes aligned to {align}");
                        let seed = (thread * rounds + round) as u64;
                        fill(block, size, seed);
                        live.push((block, size, seed));
                    } else if !live.is_empty() {
                        let (block, size, seed) = live.swap_remove(rng.below(live.len() as u64) as usize);
                        assert!(holds(block, size, seed), "thread {thread}: a block of {size} bytes was overwritten");
                        free(heap, block).unwrap();
                    }
                }
                for (block, size, seed) in live {
                    assert!(holds(block, size, seed));
                    free(heap, block).unwrap();
                }
            });
        }
    });
    // Every block was freed, so every slab is empty: the page allocator takes them back for one block of all pages.
    let whole = heap.allocate(pool.data_range().len(), 1);
    assert!(!whole.is_null(), "memory was lost");
    free(&heap, whole).unwrap();
}

/// Threads take blocks of one size (1 KiB; 8 KiB under Miri) until the heap is out of memory: together they get
/// exactly its chunks, each once. After they free them all, the same again. (Each block's first bytes carry its
/// thread's pattern: distinct addresses a block apart already show that no two overlap.)
#[test]
fn threads_running_out_together_share_every_chunk_once() {
    const SLABS: u32 = 8;
    let (pool, heap) = heap::<HostThread>(SLABS);
    let (threads, size) = (scaled(8, 3), scaled(1024, 8192));
    let chunks = SLABS as usize * SLAB_BYTES / size;
    for _ in 0..2 {
        let barrier = Barrier::new(threads);
        let mut taken: Vec<Block> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|thread| {
                    let (heap, barrier) = (&heap, &barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        let mut mine = Vec::new();
                        loop {
                            let block = heap.allocate(size, MALLOC_ALIGN);
                            if block.is_null() {
                                break;
                            }
                            fill(block, 64, thread as u64);
                            mine.push(Block(block));
                        }
                        for &Block(block) in &mine {
                            assert!(holds(block, 64, thread as u64));
                        }
                        mine
                    })
                })
                .collect();
            workers.into_iter().flat_map(|worker| worker.join().unwrap()).collect()
        });
        taken.sort();
        taken.dedup();
        assert_eq!(taken.len(), chunks, "every chunk, each to one thread");
        assert!(taken.iter().all(|&Block(block)| pool.data_range().contains(&(block as usize))));
        for Block(block) in taken {
            free(&heap, block).unwrap();
        }
    }
}

/// Two threads free the same block at once: one succeeds, the other is told it is a double free.
#[test]
fn a_double_free_from_two_threads_is_refused_once() {
    let (_pool, heap) = heap::<HostThread>(4);
    for _ in 0..scaled(200, 5) {
        let block = Block(heap.allocate(48, MALLOC_ALIGN));
        let results: Vec<Result<(), HeapError>> = std::thread::scope(|scope| {
            let frees: Vec<_> = (0..2)
                .map(|_| {
                    let heap = &heap;
                    scope.spawn(move || free(heap, { block }.0))
                })
                .collect();
            frees.into_iter().map(|free| free.join().unwrap()).collect()
        });
        assert!(results.contains(&Ok(())) && results.contains(&Err(HeapError::NotAllocated)), "{results:?}");
    }
}

/// Simulated warps of four lanes, each lane a thread, allocate together from one call: lanes that want the same
/// class are served by one reservation, the others by the next. Every lane gets a block of its own, aligned, that
/// keeps its pattern while the other lanes write theirs.
#[test]
fn lanes_of_a_warp_allocate_together() {
    const WARPS: u32 = 2;
    let (pool, heap) = heap::<SimWarp>(32);
    let (pool, heap) = (Arc::new(pool), Arc::new(heap));
    let rounds = scaled(300, 2);
    let launch = SimLaunch::new(WARPS, false);
    let mut lanes = Vec::new();
    for warp in 0..WARPS {
        let group = SimGroup::new((1 << SIM_LANES) - 1);
        for lane in 0..SIM_LANES {
            let (pool, heap, group, launch) = (pool.clone(), heap.clone(), group.clone(), launch.clone());
            lanes.push(std::thread::spawn(move || {
                become_lane(group, lane, warp, launch);
                let mask = SimWarp::lane_mask();
                let seed = u64::from(warp * SIM_LANES + lane);
                for round in 0..rounds as u32 {
                    // Sizes by lane and round: some lanes of a warp share a class, some do not; all chunks (up to
                    // 8 KiB), so that every lane takes the combined path.
                    let size = [24, 30, 200, 5000, 8192, 1][((lane + round) % 3 + round % 4) as usize % 6];
                    let block = heap.allocate(size, MALLOC_ALIGN);
                    assert!(!block.is_null() && pool.data_range().contains(&(block as usize)));
                    assert_eq!(block as usize % MALLOC_ALIGN, 0);
                    fill(block, size, seed + u64::from(round));
                    SimWarp::sync_lanes(mask);
                    assert!(holds(block, size, seed + u64::from(round)), "warp {warp} lane {lane} round {round}");
                    SimWarp::sync_lanes(mask);
                    free(&heap, block).unwrap();
                }
            }));
        }
    }
    for lane in lanes {
        lane.join().unwrap();
    }
}
