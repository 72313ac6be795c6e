//! Tests of the heap with host threads: one at a time here, many at once in `tests/heap_threads.rs`; the loom models
//! of its lock-free parts at the end.

use super::*;
use crate::gpu::HostThread;

/// Frees `block` ([`Heap::deallocate`]).
fn free(heap: &Heap<HostThread>, block: *mut u8) -> Result<(), HeapError> {
    // SAFETY: the tests free a block once they are done with it, or hand the heap pointers that it must refuse.
    unsafe { heap.deallocate(block) }
}

/// Reallocates `block` ([`Heap::reallocate`]).
#[cfg(not(loom))]
fn realloc(heap: &Heap<HostThread>, block: *mut u8, size: usize, align: usize) -> Result<*mut u8, HeapError> {
    // SAFETY: as for `free`; no other thread uses the test's blocks.
    unsafe { heap.reallocate(block, size, align) }
}

/// A heap of `slabs` slabs of host memory.
fn heap(slabs: u32) -> (HostPool, Heap<HostThread>) {
    let pool = HostPool::new(slabs);
    let heap = Heap::new();
    // SAFETY: a fresh pool, kept next to the heap for the whole test; no other thread uses the heap yet.
    unsafe { pool.attach(&heap) };
    (pool, heap)
}

#[cfg(not(loom))]
mod single_thread {
    use super::*;
    use std::vec::Vec;

    /// Scales a count down under Miri, where every step is slow.
    fn scaled(normal: usize, miri: usize) -> usize {
        if cfg!(miri) { miri } else { normal }
    }

    /// Fills `len` bytes at `block` with a pattern of `seed`.
    fn fill(block: *mut u8, len: usize, seed: u8) {
        for i in 0..len {
            // SAFETY: the block has at least `len` bytes.
            unsafe { block.add(i).write(seed.wrapping_add(i as u8)) };
        }
    }

    fn holds(block: *mut u8, len: usize, seed: u8) -> bool {
        // SAFETY: the block has at least `len` bytes.
        (0..len).all(|i| unsafe { block.add(i).read() } == seed.wrapping_add(i as u8))
    }

    #[test]
    fn blocks_of_every_small_size_are_apart_aligned_and_keep_their_bytes() {
        let (pool, heap) = heap(64);
        let sizes = (0..=600).step_by(scaled(1, 7)).chain([1000, 4095, 4096, 4097, 8192, 8193, 20_000, 70_000]);
        let blocks: Vec<(*mut u8, usize)> = sizes.map(|size| (heap.allocate(size, MALLOC_ALIGN), size)).collect();
        for &(block, size) in &blocks {
            assert!(pool.data_range().contains(&(block as usize)), "size {size}");
            assert_eq!(block as usize % MALLOC_ALIGN, 0);
            assert!(heap.usable_size(block).unwrap() >= size);
        }
        // Under Miri, the first 600 bytes of each block: its steps are slow.
        let blocks: Vec<(*mut u8, usize)> =
            blocks.into_iter().map(|(block, size)| (block, size.min(scaled(usize::MAX, 600)))).collect();
        for (n, &(block, size)) in blocks.iter().enumerate() {
            fill(block, size, n as u8);
        }
        let mut spans: Vec<(usize, usize)> =
            blocks.iter().map(|&(block, _)| (block as usize, heap.usable_size(block).unwrap())).collect();
        spans.sort();
        assert!(spans.windows(2).all(|pair| pair[0].0 + pair[0].1 <= pair[1].0), "blocks overlap");
        for (n, &(block, size)) in blocks.iter().enumerate() {
            assert!(holds(block, size, n as u8), "block {n} of {size} bytes");
            free(&heap, block).unwrap();
        }
    }

    #[test]
    fn every_alignment_up_to_a_megabyte_is_honoured() {
        let (_pool, heap) = heap(64);
        for shift in 0..=20 {
            let align = 1usize << shift;
            for size in [1, 24, 100, 3000, 9000, 100_000] {
                let block = heap.allocate(size, align);
                assert!(!block.is_null(), "size {size} align {align}");
                assert_eq!(block as usize % align, 0, "size {size} align {align}");
                // The first and the last bytes: the whole block is written elsewhere.
                // SAFETY: the block has `size` bytes.
                unsafe { (block.write(1), block.add(size - 1).write(2)) };
                free(&heap, block).unwrap();
            }
        }
        assert!(heap.allocate(16, 3).is_null(), "an alignment that is not a power of two");
        assert!(heap.allocate(16, 0).is_null());
    }

    #[test]
    fn running_out_gives_null_and_freeing_gives_the_memory_back() {
        let (_pool, heap) = heap(8);
        assert!(heap.allocate(8 * SLAB_BYTES + 1, 1).is_null(), "more than the pool");
        assert!(heap.allocate(usize::MAX, 1).is_null());
        assert!(heap.allocate(1, 1 << 40).is_null());
        // All of it in chunks of one size: 8 slabs of 4096 chunks of 16 bytes (of 256 under Miri).
        let chunk = scaled(16, 256);
        let mut small = Vec::new();
        loop {
            let block = heap.allocate(chunk, 16);
            if block.is_null() {
                break;
            }
            small.push(block);
        }
        assert_eq!(small.len(), 8 * SLAB_BYTES / chunk);
        assert!(heap.allocate(64 * 1024, 1).is_null(), "no page left");
        for block in small.drain(..) {
            free(&heap, block).unwrap();
        }
        // The empty slabs go back to the page allocator, for blocks of other sizes.
        let large: Vec<*mut u8> = (0..8).map(|_| heap.allocate(SLAB_BYTES, PAGE_BYTES)).collect();
        assert!(large.iter().all(|block| !block.is_null()), "{large:?}");
        assert!(heap.allocate(4096, 1).is_null());
        for block in large {
            free(&heap, block).unwrap();
        }
        let whole = heap.allocate(8 * SLAB_BYTES, 1);
        assert!(!whole.is_null(), "the freed runs merge");
        free(&heap, whole).unwrap();
    }

    #[test]
    fn large_blocks_go_to_the_first_hole_they_fit_past_full_words_and_smaller_holes() {
        let (_pool, heap) = heap(64);
        let run = 3 * PAGE_BYTES;
        let blocks: Vec<*mut u8> = (0..200).map(|_| heap.allocate(run, 1)).collect();
        let base = blocks[0];
        let page = |block: *mut u8| (block as usize - base as usize) / PAGE_BYTES;
        assert!(blocks.iter().enumerate().all(|(i, &block)| page(block) == 3 * i), "packed from the first page");
        free(&heap, blocks[10]).unwrap();
        free(&heap, blocks[100]).unwrap();
        // Two holes of three pages, far apart: four pages fit only after the last block.
        assert_eq!(page(heap.allocate(4 * PAGE_BYTES, 1)), 600);
        assert_eq!(page(heap.allocate(run, 1)), 30, "the lowest hole that fits");
        assert_eq!(page(heap.allocate(run, 1)), 300);
        assert_eq!(page(heap.allocate(2 * PAGE_BYTES + 1, 1)), 604, "past every used page");
        free(&heap, blocks[0]).unwrap();
        assert_eq!(page(heap.allocate(run, 1)), 0, "a freed run lowers the search's start");
        let aligned = heap.allocate(run, 64 * PAGE_BYTES);
        assert_eq!(aligned as usize % (64 * PAGE_BYTES), 0);
        assert!((607..607 + 64).contains(&page(aligned)), "the first aligned page past the used ones");
    }

    #[test]
    fn a_full_class_makes_new_slabs_and_reuses_freed_chunks() {
        let (_pool, heap) = heap(16);
        let class_size = 1000; // class of 1024: 64 chunks a slab
        let blocks: Vec<*mut u8> = (0..640).map(|_| heap.allocate(class_size, 16)).collect();
        assert!(blocks.iter().all(|block| !block.is_null()));
        for &block in blocks.iter().step_by(2) {
            free(&heap, block).unwrap();
        }
        // The freed half is found again: no new slab is needed for it.
        let again: Vec<*mut u8> = (0..320).map(|_| heap.allocate(class_size, 16)).collect();
        let mut reused: Vec<*mut u8> = blocks.iter().step_by(2).copied().collect();
        let mut got = again.clone();
        reused.sort();
        got.sort();
        assert_eq!(got, reused);
    }

    #[test]
    fn bad_pointers_are_refused_and_change_nothing() {
        let (pool, heap) = heap(8);
        let chunk = heap.allocate(100, 16);
        let large = heap.allocate(3 * PAGE_BYTES, 16);
        let mut outside = 0u64;
        assert_eq!(free(&heap, (&raw mut outside).cast()), Err(HeapError::OutsideHeap));
        assert_eq!(free(&heap, chunk.wrapping_add(16)), Err(HeapError::NotABlock));
        assert_eq!(free(&heap, large.wrapping_add(PAGE_BYTES)), Err(HeapError::NotABlock));
        assert_eq!(free(&heap, large.wrapping_add(8)), Err(HeapError::NotABlock));
        let unused = chunk.wrapping_add(pool.data_range().end - PAGE_BYTES - chunk as usize);
        assert_eq!(free(&heap, unused), Err(HeapError::NotABlock), "a page no block has used");
        assert_eq!(free(&heap, core::ptr::null_mut()), Ok(()));
        // The refusals left both blocks allocated.
        assert_eq!(heap.usable_size(chunk), Ok(112));
        assert_eq!(heap.usable_size(large), Ok(3 * PAGE_BYTES));
        free(&heap, chunk).unwrap();
        free(&heap, large).unwrap();
        assert_eq!(free(&heap, chunk), Err(HeapError::NotAllocated));
        assert_eq!(free(&heap, large), Err(HeapError::NotAllocated));
        assert_eq!(realloc(&heap, chunk, 10, 16), Err(HeapError::NotAllocated));
        assert_eq!(heap.usable_size(large), Err(HeapError::NotAllocated));
        // A neighbour of the freed chunk was never allocated.
        assert_eq!(free(&heap, chunk.wrapping_add(112)), Err(HeapError::NotAllocated));
    }

    #[test]
    fn reallocation_keeps_the_contents() {
        let (_pool, heap) = heap(16);
        let block = heap.allocate(20, 16);
        fill(block, 20, 3);
        assert_eq!(realloc(&heap, block, 30, 16), Ok(block), "20 and 30 bytes share a class");
        let grown = realloc(&heap, block, 5000, 16).unwrap();
        assert_ne!(grown, block);
        assert!(holds(grown, 20, 3));
        assert_eq!(free(&heap, block), Err(HeapError::NotAllocated), "the old block was freed");
        fill(grown, 5000, 9);
        let large = realloc(&heap, grown, 100_000, 16).unwrap();
        assert!(holds(large, 5000, 9));
        let shrunk = realloc(&heap, large, 10, 16).unwrap();
        assert!(holds(shrunk, 10, 9));
        assert_eq!(heap.usable_size(shrunk), Ok(16));
        // No room to move: the old block is left as it was.
        assert_eq!(realloc(&heap, shrunk, 1 << 30, 16), Ok(core::ptr::null_mut()));
        assert!(holds(shrunk, 10, 9));
        let fresh = realloc(&heap, core::ptr::null_mut(), 64, 16).unwrap();
        assert_eq!(heap.usable_size(fresh), Ok(64));
    }

    #[test]
    fn a_reset_starts_an_empty_heap_over_the_last_runs_metadata() {
        let (pool, heap) = heap(8);
        let blocks: Vec<*mut u8> = (0..100).map(|n| heap.allocate(16 + n % 3 * 100, 16)).collect();
        assert!(blocks.iter().all(|block| !block.is_null()));
        // SAFETY: the pool is still alive; this thread is the only user. The blocks are invalid from here on.
        unsafe { pool.attach(&heap) };
        assert_eq!(free(&heap, blocks[50]), Err(HeapError::NotABlock), "a block of the last run");
        let whole = heap.allocate(8 * SLAB_BYTES, 1);
        assert!(!whole.is_null(), "the whole pool is free again");
    }

    #[test]
    fn a_heap_without_a_pool_hands_out_nothing() {
        let heap: Heap<HostThread> = Heap::new();
        assert!(!heap.is_ready());
        assert!(heap.allocate(16, 16).is_null());
        let mut word = 0u64;
        assert_eq!(free(&heap, (&raw mut word).cast()), Err(HeapError::OutsideHeap));
        // SAFETY: no pool: the heap keeps none.
        unsafe { heap.reset(core::ptr::null_mut(), 1 << 20) };
        assert!(heap.allocate(16, 16).is_null());
    }

    /// The device's way: the metadata and the data carved from one pool of raw memory.
    #[test]
    fn a_raw_pool_is_carved_into_metadata_and_slabs() {
        let size = 3 * SLAB_BYTES;
        let mut memory = std::vec![0u64; size / 8];
        let heap: Heap<HostThread> = Heap::new();
        // SAFETY: the vector outlives the heap's use of it and nothing else touches it meanwhile.
        unsafe { heap.reset(memory.as_mut_ptr().cast(), size as u64) };
        assert!(heap.is_ready());
        let range = memory.as_ptr() as usize..memory.as_ptr() as usize + size;
        // The metadata and the alignment of the data area leave room for one or two slabs, by where the memory lies.
        let blocks: Vec<*mut u8> =
            core::iter::from_fn(|| Some(heap.allocate(SLAB_BYTES, 1)).filter(|block| !block.is_null())).collect();
        assert!((1..=2).contains(&blocks.len()));
        let filled = scaled(SLAB_BYTES, 1000);
        for (n, &block) in blocks.iter().enumerate() {
            assert!(range.contains(&(block as usize)) && range.contains(&(block as usize + SLAB_BYTES - 1)));
            fill(block, filled, n as u8);
        }
        for (n, &block) in blocks.iter().enumerate() {
            assert!(holds(block, filled, n as u8));
            free(&heap, block).unwrap();
        }
    }
}

/// Loom models: `RUSTFLAGS="--cfg loom" cargo test -p startup-common --release --features host --lib loom`.
///
/// They use the largest class (8 chunks a slab, one bitmap word) and pools of a few slabs, so that making a slab, a
/// full slab, the slab map and the reclaim of empty slabs all come into a model of a few dozen operations.
#[cfg(loom)]
mod loom_models {
    use super::*;
    use loom::thread;
    use std::sync::Arc;
    use std::vec::Vec;

    /// The largest class: 8 chunks of 8 KiB a slab.
    const CHUNK: usize = MAX_CHUNK;

    fn builder() -> loom::model::Builder {
        let mut builder = loom::model::Builder::new();
        if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
            builder.preemption_bound = Some(2);
        }
        builder.max_branches = 100_000;
        builder
    }

    /// A heap whose metadata is already set up over the whole pool (a large block of all of it, freed), so that
    /// the models explore the allocator's races rather than the setup of fresh pages.
    fn shared_heap(slabs: u32) -> (Arc<HostPool>, Arc<Heap<HostThread>>) {
        let (pool, heap) = heap(slabs);
        let whole = heap.allocate(slabs as usize * SLAB_BYTES, 1);
        free(&heap, whole).unwrap();
        (Arc::new(pool), Arc::new(heap))
    }

    /// Counts the chunks of class `class` that the slab map says may have room, against what the counters say.
    fn check_slab_map(heap: &Heap<HostThread>) {
        use core::sync::atomic::Ordering::SeqCst;
        let geometry = heap.setup().geometry;
        let slabs = heap.word(header::TOP).load(SeqCst) as u32 / geometry::PAGES_PER_SLAB;
        for slab in 0..slabs {
            let counter = heap.word(geometry.counter_word(slab)).load(SeqCst);
            for class in 0..geometry::CLASS_COUNT {
                let marked = heap.word(geometry.slab_map_word(class, slab / 64)).load(SeqCst) & 1 << (slab % 64) != 0;
                let has_room = counter::class_of_counter(counter) == Some(class) && counter::count(counter) > 0;
                assert!(marked || !has_room, "slab {slab} of class {class} has room but is not marked");
            }
        }
    }

    /// Two threads take chunks from one slab of 8 and free them, the second thread's last chunk going back as the
    /// first takes one: every chunk is one thread's at a time, and at the end the slab map marks the slab.
    #[test]
    fn loom_two_threads_share_a_slab() {
        builder().check(|| {
            let (pool, heap) = shared_heap(2);
            let first = heap.allocate(CHUNK, 16);
            let workers: Vec<_> = (0..2u8)
                .map(|n| {
                    let (_pool, heap) = (pool.clone(), heap.clone());
                    thread::spawn(move || {
                        let block = heap.allocate(CHUNK, 16);
                        assert!(!block.is_null());
                        // SAFETY: the block is this thread's.
                        unsafe { block.write(n) };
                        // SAFETY: as above.
                        assert_eq!(unsafe { block.read() }, n);
                        free(&heap, block).unwrap();
                    })
                })
                .collect();
            for worker in workers {
                worker.join().unwrap();
            }
            free(&heap, first).unwrap();
            check_slab_map(&heap);
        });
    }

    /// A slab with one free chunk: one thread takes it (the count goes to zero, the slab is unmarked) while the other
    /// frees a chunk (the count goes back up, the slab is marked). The slab map never forgets a slab with room.
    #[test]
    fn loom_unmarking_races_with_a_free() {
        builder().check(|| {
            let (_pool, heap) = shared_heap(2);
            let held: Vec<*mut u8> = (0..7).map(|_| heap.allocate(CHUNK, 16)).collect();
            let freed = held[0] as usize;
            let freer = {
                let heap = heap.clone();
                thread::spawn(move || free(&heap, freed as *mut u8).unwrap())
            };
            let taken = heap.allocate(CHUNK, 16);
            assert!(!taken.is_null());
            freer.join().unwrap();
            check_slab_map(&heap);
            // The chunk left free is found again, in the same slab: no new slab was made for it.
            let again = heap.allocate(CHUNK, 16);
            assert_eq!(again as usize / SLAB_BYTES, held[1] as usize / SLAB_BYTES);
        });
    }

    /// The last chunk of a one-slab pool goes from one thread to the other, the one that finds none waiting: the
    /// first thread's writes to it happen before the second's. Loom checks the chunk's bytes, kept in a loom cell per
    /// chunk, for a data race.
    #[test]
    fn loom_a_freed_chunk_is_handed_over_with_its_writes() {
        builder().check(|| {
            let (pool, heap) = shared_heap(1);
            let _held: Vec<*mut u8> = (0..7).map(|_| heap.allocate(CHUNK, 16)).collect();
            let contents: Arc<Vec<loom::cell::UnsafeCell<u64>>> =
                Arc::new((0..8).map(|_| loom::cell::UnsafeCell::new(0)).collect());
            let use_last_chunk = move |heap: &Heap<HostThread>, pool: &HostPool, value: u64| loop {
                let block = heap.allocate(CHUNK, 16);
                if block.is_null() {
                    thread::yield_now();
                    continue;
                }
                let index = (block as usize - pool.data_range().start) / CHUNK;
                // SAFETY: the chunk is this thread's until it frees it.
                contents[index].with_mut(|cell| unsafe { *cell = value });
                free(&heap, block).unwrap();
                return;
            };
            let other = {
                let (pool, heap, use_last_chunk) = (pool.clone(), heap.clone(), use_last_chunk.clone());
                thread::spawn(move || use_last_chunk(&heap, &pool, 1))
            };
            use_last_chunk(&heap, &pool, 2);
            other.join().unwrap();
        });
    }

    /// Two chunks of a full one-slab pool are freed at once, each by a thread that wrote to it first, while a third
    /// thread waits for a chunk. Its reservation may count the second free while its bitmap search finds the first
    /// chunk: then only the chunk's bit (released by the free, acquired by the allocation) orders the first thread's
    /// writes before the third's, which loom checks through the chunks' cells.
    #[test]
    fn loom_a_chunk_is_ordered_by_its_bit_not_only_by_the_counter() {
        builder().check(|| {
            let (pool, heap) = shared_heap(1);
            let held: Vec<usize> = (0..8).map(|_| heap.allocate(CHUNK, 16) as usize).collect();
            let contents: Arc<Vec<loom::cell::UnsafeCell<u64>>> =
                Arc::new((0..8).map(|_| loom::cell::UnsafeCell::new(0)).collect());
            let index_of = {
                let start = pool.data_range().start;
                move |block: usize| (block - start) / CHUNK
            };
            let freers: Vec<_> = held[..2]
                .iter()
                .map(|&block| {
                    let (heap, contents) = (heap.clone(), contents.clone());
                    thread::spawn(move || {
                        // SAFETY: the chunk is this thread's until it frees it.
                        contents[index_of(block)].with_mut(|cell| unsafe { *cell = 1 });
                        free(&heap, block as *mut u8).unwrap();
                    })
                })
                .collect();
            let block = loop {
                let block = heap.allocate(CHUNK, 16);
                if !block.is_null() {
                    break block as usize;
                }
                thread::yield_now();
            };
            // SAFETY: the chunk is this thread's now.
            contents[index_of(block)].with_mut(|cell| unsafe { *cell = 2 });
            for freer in freers {
                freer.join().unwrap();
            }
        });
    }

    /// With the pool full of one class's slabs, one thread frees a whole slab while the other asks for a large
    /// block: the page allocator takes back the empty slab (or fails before the free ends), and never a slab that
    /// still has a chunk in use.
    #[test]
    fn loom_reclaim_takes_only_empty_slabs() {
        builder().check(|| {
            let (pool, heap) = shared_heap(2);
            let blocks: Vec<usize> = (0..16).map(|_| heap.allocate(CHUNK, 16) as usize).collect();
            assert!(blocks.iter().all(|&block| block != 0));
            let freer = {
                let heap = heap.clone();
                let first_slab: Vec<usize> = blocks[..8].to_vec();
                thread::spawn(move || {
                    for block in first_slab {
                        free(&heap, block as *mut u8).unwrap();
                    }
                })
            };
            let large = heap.allocate(SLAB_BYTES, 1);
            freer.join().unwrap();
            if large.is_null() {
                // It failed before the last free; now it succeeds.
                assert!(!heap.allocate(SLAB_BYTES, 1).is_null());
            } else {
                assert!(pool.data_range().contains(&(large as usize)));
            }
            // The other slab's chunks were never taken back.
            for &block in &blocks[8..] {
                assert_eq!(free(&heap, block as *mut u8), Ok(()));
            }
        });
    }

    /// Two threads of one class find no slab with room at once: one makes a slab (the other waits for it, or makes
    /// the next), and both get distinct chunks.
    #[test]
    fn loom_two_threads_make_slabs_at_once() {
        builder().check(|| {
            let (_pool, heap) = shared_heap(3);
            let other = {
                let heap = heap.clone();
                thread::spawn(move || heap.allocate(CHUNK, 16) as usize)
            };
            let mine = heap.allocate(CHUNK, 16) as usize;
            let theirs = other.join().unwrap();
            assert!(mine != 0 && theirs != 0 && mine != theirs);
            check_slab_map(&heap);
        });
    }
}
