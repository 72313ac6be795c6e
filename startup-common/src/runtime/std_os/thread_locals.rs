//! Each GPU thread's copies of std's thread-locals: what `__emutls_get_address` returns, for the control variables
//! that LLVM's `lower-emutls` makes (std is built with emulated thread-locals: `docs/std.md`).

use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::gpu::Gpu;
use crate::libc::heap::Heap;

/// An emulated thread-local's control variable, as LLVM's `lower-emutls` lays it out (libgcc's `__emutls_object`).
#[repr(C)]
pub struct EmutlsControl {
    pub size: usize,
    pub align: usize,
    /// The thread-local's index among the program's, 1 and up, given at its first use; 0 before, and `GIVING`
    /// while a thread gives it.
    pub index: AtomicUsize,
    /// Its initial value, `size` bytes; null: zeros.
    pub initial: *const u8,
}

// SAFETY: every thread reads `size`, `align` and the initial value, which nothing writes; `index` is an atomic.
unsafe impl Sync for EmutlsControl {}

/// Every GPU thread's thread-locals for one run: a table per thread, found by the thread's index in the grid, each
/// holding the thread's copy of every thread-local it used, by the thread-local's index.
pub struct ThreadLocals {
    /// The tables of the run's threads (null until a thread first asks): a heap block, a [`Tables`] header then one
    /// pointer per thread.
    tables: AtomicPtr<Tables>,
    /// How many thread-locals have an index (indices start at 1: 0 is "none yet"). Kept across runs, as the indices
    /// the control variables hold are. Counting from 0 keeps the runtime's static all zeros, with no initializer.
    indices_given: AtomicUsize,
}

/// One thread's copies: `capacity` pointers after the header, by thread-local index (the 0th unused).
#[repr(C)]
struct Table {
    capacity: usize,
}

impl ThreadLocals {
    pub const fn new() -> Self {
        Self { tables: AtomicPtr::new(core::ptr::null_mut()), indices_given: AtomicUsize::new(0) }
    }

    /// Forgets the last run's copies, whose blocks went with its heap. `_begin` calls it, on the program's only
    /// thread.
    pub fn reset(&self) {
        self.tables.store(core::ptr::null_mut(), Ordering::Relaxed);
    }

    /// `__emutls_get_address`: the copy of `control`'s thread-local that belongs to thread `thread` of a grid of
    /// `threads`, made from its initial value at the thread's first use. Null when the heap has no room for it.
    ///
    /// # Safety
    /// `control` must be a control variable `lower-emutls` made, and `thread` the calling thread's own index: a
    /// thread's table is its own.
    pub unsafe fn address<G: Gpu>(
        &self,
        heap: &Heap<G>,
        control: &EmutlsControl,
        thread: u64,
        threads: u64,
    ) -> *mut u8 {
        let index = self.index_of::<G>(control);
        let Some(table_slot) = self.table_slot(heap, thread, threads) else { return core::ptr::null_mut() };
        let mut table = table_slot.load(Ordering::Relaxed);
        // SAFETY: a table is only ever the calling thread's, a block of the heap with `capacity` pointers after its
        // header (or null).
        let capacity = if table.is_null() { 0 } else { unsafe { (*table).capacity } };
        if index >= capacity {
            let grown = (index + 1).next_power_of_two().max(8);
            let bytes = size_of::<Table>() + grown * size_of::<*mut u8>();
            let new = heap.allocate(bytes, align_of::<Table>()).cast::<Table>();
            if new.is_null() {
                return core::ptr::null_mut();
            }
            // SAFETY: `new` has room for its header and `grown` pointers; the old table, the thread's own, has
            // `capacity` of them.
            unsafe {
                new.write(Table { capacity: grown });
                let slots = new.add(1).cast::<*mut u8>();
                for slot in 0..grown {
                    let copy =
                        if slot < capacity { *table.add(1).cast::<*mut u8>().add(slot) } else { core::ptr::null_mut() };
                    slots.add(slot).write(copy);
                }
                if !table.is_null() {
                    let _ = heap.deallocate(table.cast());
                }
            }
            table = new;
            table_slot.store(table, Ordering::Relaxed);
        }
        // SAFETY: `index` is below the table's capacity now.
        let slot = unsafe { table.add(1).cast::<*mut u8>().add(index) };
        // SAFETY: the thread's own table.
        let copy = unsafe { *slot };
        if !copy.is_null() {
            return copy;
        }
        let copy = heap.allocate(control.size.max(1), control.align.max(1));
        if copy.is_null() {
            return copy;
        }
        // SAFETY: `copy` has `size` bytes; the initial value, when there is one, has as many.
        unsafe {
            if control.initial.is_null() {
                copy.write_bytes(0, control.size);
            } else {
                copy.copy_from_nonoverlapping(control.initial, control.size);
            }
            *slot = copy;
        }
        copy
    }

    /// The thread-local's index, given at its first use by any thread. One thread gives it while the others wait,
    /// so indices stay dense (1 to the number of thread-locals used): a thread's table has a slot per index up to
    /// the highest it uses, and numbers drawn by every thread of a large grid would make each table as large as the
    /// grid.
    fn index_of<G: Gpu>(&self, control: &EmutlsControl) -> usize {
        // The section runs inside the loop, as in `table_slot`, for AMD wavefronts that spin in lockstep.
        loop {
            match control.index.load(Ordering::Acquire) {
                GIVING => G::sleep_briefly(),
                0 => {
                    if control.index.compare_exchange(0, GIVING, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                        let index = self.indices_given.fetch_add(1, Ordering::Relaxed) + 1;
                        control.index.store(index, Ordering::Release);
                        return index;
                    }
                }
                index => return index,
            }
        }
    }

    /// Where thread `thread`'s table pointer lives; `None` when the heap has no room for the tables. The tables are
    /// made at the first call of a run, and made anew, empty, for a kernel with more threads than they hold: the
    /// threads of `_begin` and `_start` are not the same threads. One thread makes them while the others wait: the
    /// tables take 8 bytes per thread of the grid, and a copy made by every thread of a large grid would take more
    /// than the heap has.
    fn table_slot<G: Gpu>(&self, heap: &Heap<G>, thread: u64, threads: u64) -> Option<&AtomicPtr<Table>> {
        if thread >= threads {
            return None;
        }
        // The section runs inside the loop, as in the atexit registry: the lanes of an AMD wavefront that wait spin
        // in lockstep with the one that makes the tables.
        loop {
            let tables = self.tables.load(Ordering::Acquire);
            if tables == MAKING {
                G::sleep_briefly();
                continue;
            }
            // SAFETY: published tables are a heap block of this run: a `Tables` header and its `count` pointers.
            let count = if tables.is_null() { 0 } else { unsafe { (*tables).count } };
            if threads <= count as u64 {
                // SAFETY: `thread` is below `threads`, which is at most the tables' count.
                return Some(unsafe { &*tables.add(1).cast::<AtomicPtr<Table>>().add(thread as usize) });
            }
            if self.tables.compare_exchange(tables, MAKING, Ordering::Acquire, Ordering::Relaxed).is_err() {
                continue;
            }
            let made = Self::make_tables(heap, threads);
            // Null when there was no room: the next thread to look tries again.
            self.tables.store(made.unwrap_or(tables), Ordering::Release);
            made?;
        }
    }

    /// Tables for `threads` threads, every pointer null; `None` when the heap has no room.
    fn make_tables<G: Gpu>(heap: &Heap<G>, threads: u64) -> Option<*mut Tables> {
        let count = usize::try_from(threads).ok()?;
        let bytes = count.checked_mul(size_of::<AtomicPtr<Table>>())?.checked_add(size_of::<Tables>())?;
        let new = heap.allocate(bytes, align_of::<Tables>()).cast::<Tables>();
        if new.is_null() {
            return None;
        }
        // SAFETY: `new` has room for the header and `count` pointers, which null starts.
        unsafe {
            new.write(Tables { count });
            new.add(1).cast::<AtomicPtr<Table>>().write_bytes(0, count);
        }
        Some(new)
    }
}

/// An [`EmutlsControl::index`] while one thread gives it: never an index (a table could not hold it).
const GIVING: usize = usize::MAX;

/// [`ThreadLocals::tables`] while one thread makes them: never a heap block's address (blocks are aligned to 16).
const MAKING: *mut Tables = core::ptr::without_provenance_mut(1);

/// The header of a run's tables: how many threads' table pointers follow it.
#[repr(C)]
struct Tables {
    count: usize,
}

impl Default for ThreadLocals {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::gpu::HostThread;
    use crate::libc::heap::HostPool;
    use std::vec::Vec;

    fn heap() -> (HostPool, Heap<HostThread>) {
        let pool = HostPool::new(64);
        let heap = Heap::new();
        // SAFETY: a fresh pool, kept next to the heap for the whole test.
        unsafe { pool.attach(&heap) };
        (pool, heap)
    }

    #[test]
    fn each_thread_gets_its_own_copy_from_the_initial_value_and_keeps_it() {
        let (_pool, heap) = heap();
        let locals = ThreadLocals::new();
        let initial = 0x1234_5678_u64.to_ne_bytes();
        let control = EmutlsControl { size: 8, align: 8, index: AtomicUsize::new(0), initial: initial.as_ptr() };
        let zeroed = EmutlsControl { size: 24, align: 8, index: AtomicUsize::new(0), initial: core::ptr::null() };
        // SAFETY: host memory from the heap; the test plays threads 0 and 3 of a grid of 4, one at a time.
        unsafe {
            let mine = locals.address(&heap, &control, 0, 4).cast::<u64>();
            let theirs = locals.address(&heap, &control, 3, 4).cast::<u64>();
            assert_ne!(mine, theirs);
            assert_eq!((*mine, *theirs), (0x1234_5678, 0x1234_5678));
            *mine = 7;
            assert_eq!(locals.address(&heap, &control, 0, 4).cast::<u64>(), mine, "the same copy again");
            assert_eq!(*theirs, 0x1234_5678);
            let other = locals.address(&heap, &zeroed, 0, 4);
            assert_eq!(core::slice::from_raw_parts(other, 24), [0; 24]);
            assert_eq!((control.index.load(Ordering::Relaxed), zeroed.index.load(Ordering::Relaxed)), (1, 2));
            assert!(locals.address(&heap, &control, 4, 4).is_null(), "a thread outside the grid has no table");
            // A kernel of more threads gets tables of its own, its threads their own copies.
            let wider = locals.address(&heap, &control, 5, 8).cast::<u64>();
            assert_eq!(*wider, 0x1234_5678);
            assert_ne!(locals.address(&heap, &control, 0, 8).cast::<u64>(), mine);
        }
    }

    #[test]
    fn one_thread_makes_the_tables_of_a_grid_whose_tables_fit_the_heap_once() {
        // A 4 MiB heap; the tables of 400,000 threads take 3.2 MB: room for one set, not for one per thread that
        // asks first.
        let (_pool, heap) = heap();
        let locals = ThreadLocals::new();
        let control = EmutlsControl { size: 8, align: 8, index: AtomicUsize::new(0), initial: core::ptr::null() };
        let threads = 400_000;
        let copies: Vec<usize> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..32u64)
                .map(|worker| {
                    let (heap, locals, control) = (&heap, &locals, &control);
                    // SAFETY: each host thread plays its own GPU thread of the grid.
                    scope.spawn(move || unsafe { locals.address(heap, control, worker * 12_345, threads) } as usize)
                })
                .collect();
            workers.into_iter().map(|worker| worker.join().unwrap()).collect()
        });
        assert!(copies.iter().all(|&copy| copy != 0), "every thread got its copy: {copies:?}");
    }

    #[test]
    fn thread_locals_first_used_by_many_threads_at_once_get_dense_indices() {
        // Rounds of a race in which every thread finds every thread-local without an index: a way of giving them
        // that lets each thread draw a number and keeps one loses numbers here.
        for _ in 0..50 {
            let (_pool, heap) = heap();
            let locals = ThreadLocals::new();
            let controls: Vec<_> = (0..4)
                .map(|_| EmutlsControl { size: 8, align: 8, index: AtomicUsize::new(0), initial: core::ptr::null() })
                .collect();
            let start = std::sync::Barrier::new(16);
            std::thread::scope(|scope| {
                for thread in 0..16u64 {
                    let (heap, locals, controls, start) = (&heap, &locals, &controls, &start);
                    scope.spawn(move || {
                        start.wait();
                        for control in controls {
                            // SAFETY: each host thread plays its own GPU thread of a grid of 16.
                            assert!(!unsafe { locals.address(heap, control, thread, 16) }.is_null());
                        }
                    });
                }
            });
            let mut indices: Vec<_> = controls.iter().map(|control| control.index.load(Ordering::Relaxed)).collect();
            indices.sort();
            assert_eq!(indices, [1, 2, 3, 4]);
        }
    }

    #[test]
    fn threads_running_at_once_each_get_their_own_copies() {
        let (_pool, heap) = heap();
        let locals = ThreadLocals::new();
        let controls: Vec<_> = (0..3)
            .map(|_| EmutlsControl { size: 8, align: 8, index: AtomicUsize::new(0), initial: core::ptr::null() })
            .collect();
        // All at once: each thread-local's first use is a race of every thread.
        let start = std::sync::Barrier::new(32);
        let copies: Vec<Vec<usize>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..32u64)
                .map(|thread| {
                    let (heap, locals, controls, start) = (&heap, &locals, &controls, &start);
                    scope.spawn(move || {
                        start.wait();
                        controls
                            .iter()
                            .map(|control| {
                                // SAFETY: each host thread plays its own GPU thread of a grid of 32.
                                let copy = unsafe { locals.address(heap, control, thread, 32) }.cast::<u64>();
                                // SAFETY: the thread's own copy, 8 bytes.
                                unsafe { copy.write(thread) };
                                copy as usize
                            })
                            .collect()
                    })
                })
                .collect();
            workers.into_iter().map(|worker| worker.join().unwrap()).collect()
        });
        let mut all: Vec<usize> = copies.iter().flatten().copied().collect();
        for (thread, mine) in copies.iter().enumerate() {
            // SAFETY: the copies outlive the threads: the heap keeps them.
            assert!(mine.iter().all(|&copy| unsafe { *(copy as *const u64) } == thread as u64));
        }
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 96, "every thread's every copy is its own");
        let mut indices: Vec<_> = controls.iter().map(|control| control.index.load(Ordering::Relaxed)).collect();
        indices.sort();
        assert_eq!(indices, [1, 2, 3], "each thread-local has one index, and no number is lost to a race");
    }

    #[test]
    fn a_table_grows_and_keeps_the_copies_it_had() {
        let (_pool, heap) = heap();
        let locals = ThreadLocals::new();
        let controls: Vec<_> = (0..40)
            .map(|_| EmutlsControl { size: 4, align: 4, index: AtomicUsize::new(0), initial: core::ptr::null() })
            .collect();
        // SAFETY: as above, one thread of one.
        unsafe {
            let first: Vec<_> = controls.iter().map(|control| locals.address(&heap, control, 0, 1)).collect();
            let again: Vec<_> = controls.iter().map(|control| locals.address(&heap, control, 0, 1)).collect();
            assert_eq!(first, again);
            assert!(first.iter().all(|copy| !copy.is_null()));
        }
    }
}
