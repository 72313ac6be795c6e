//! The operating system Rust's std runs on, on the GPU: the functions of Hermit's ABI that std's Hermit layer calls
//! (`docs/std.md`), over this runtime: output through the RPC channel, the device heap, waits that poll, and each
//! GPU thread's thread-locals. `target_runtime!` exports them as C functions in a program built for the std target
//! (`target_os = "hermit"`).

use core::ffi::c_int;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use crate::gpu::Gpu;
// Hermit's error numbers, which these functions return negated, are Linux's, as the contract's are.
use crate::libc::errno;
use crate::libc::heap::Heap;
use crate::libc::io::{self, Stream};
use crate::rpc::Client;

/// `sys_write`: `bytes` to standard output (1) or standard error (2), whole; `-EBADF` for any other descriptor.
pub fn write<G: Gpu>(client: &Client<G>, fd: c_int, bytes: &[u8]) -> isize {
    let stream = match fd {
        1 => Stream::Stdout,
        2 => Stream::Stderr,
        _ => return -(errno::EBADF as isize),
    };
    io::write(client, stream, bytes);
    bytes.len() as isize
}

/// Hermit's `timespec`, a relative timeout for [`futex_wait`].
#[repr(C)]
pub struct Timespec {
    pub seconds: i64,
    pub nanoseconds: i32,
}

/// How many pauses a futex wait polls before it returns as woken: the caller checks its condition again and waits
/// again, as after a spurious wake-up, which futexes allow.
const FUTEX_POLLS: u32 = 64;

/// `sys_futex_wait`: waits while the word at `address` holds `expected`, at most until the relative `timeout` (none:
/// no limit). There is no queue to sleep in: the wait polls the word, pausing between reads, and returns 0 once it
/// changed or after [`FUTEX_POLLS`] pauses (a spurious wake-up), `-EAGAIN` when it did not hold `expected` to begin
/// with, `-ETIMEDOUT` when the timeout passed. std changes a futex's word before it wakes its waiters, so a poll
/// sees every wake-up that matters.
///
/// # Safety
/// `address` must be a live, aligned word, and `timeout` null or a live `Timespec`.
pub unsafe fn futex_wait<G: Gpu>(address: *mut u32, expected: u32, timeout: *const Timespec) -> i32 {
    if address.is_null() {
        return -errno::EINVAL;
    }
    // SAFETY: the caller passes a live, aligned word, which other threads change only atomically (std's futexes are
    // atomics).
    let word = unsafe { AtomicU32::from_ptr(address) };
    // SAFETY: the caller passes null or a live `Timespec`.
    let deadline = unsafe { timeout.as_ref() }.map(|timeout| {
        let nanoseconds = i128::from(timeout.seconds) * 1_000_000_000 + i128::from(timeout.nanoseconds);
        G::nanoseconds().saturating_add(u64::try_from(nanoseconds.max(0)).unwrap_or(u64::MAX))
    });
    if word.load(Ordering::Acquire) != expected {
        return -errno::EAGAIN;
    }
    for _ in 0..FUTEX_POLLS {
        if deadline.is_some_and(|deadline| G::nanoseconds() >= deadline) {
            return -errno::ETIMEDOUT;
        }
        G::sleep_briefly();
        if word.load(Ordering::Acquire) != expected {
            return 0;
        }
    }
    0
}

/// `sys_futex_wake`: waiters poll ([`futex_wait`]), so there is no one to wake; none is reported woken. `-EINVAL` for
/// a null address or a negative count, as Hermit has it.
pub fn futex_wake(address: *mut u32, count: i32) -> i32 {
    if address.is_null() || count < 0 { -errno::EINVAL } else { 0 }
}

/// Calls of [`read_entropy`] so far, mixed into each: two calls of one thread in one nanosecond differ.
static ENTROPY_CALLS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// `sys_read_entropy`: `bytes` filled from the GPU's nanosecond clock, the calling thread's index in the grid and a
/// count of the calls, through SplitMix64; all of `bytes`, always. Not a cryptographic source: it makes std's
/// `RandomState` keys differ between threads and runs, which is what std asks of it on a GPU with no other one.
pub fn read_entropy<G: Gpu>(bytes: &mut [u8]) -> isize {
    let (thread, _) = thread_in_grid::<G>();
    let call = ENTROPY_CALLS.fetch_add(1, Ordering::Relaxed);
    let mut state = G::nanoseconds() ^ thread.rotate_left(32) ^ call.wrapping_mul(0xd1b5_4a32_d192_ed03);
    for chunk in bytes.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_ne_bytes()[..chunk.len()]);
    }
    bytes.len() as isize
}

/// An emulated thread-local's control variable, as LLVM's `lower-emutls` lays it out (libgcc's `__emutls_object`).
#[repr(C)]
pub struct EmutlsControl {
    pub size: usize,
    pub align: usize,
    /// The thread-local's index among the program's, 1 and up, given at its first use; 0 before.
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
    /// The next thread-local's index. Kept across runs, as the indices the control variables hold are.
    next_index: AtomicUsize,
}

/// One thread's copies: `capacity` pointers after the header, by thread-local index (the 0th unused).
#[repr(C)]
struct Table {
    capacity: usize,
}

impl ThreadLocals {
    pub const fn new() -> Self {
        Self { tables: AtomicPtr::new(core::ptr::null_mut()), next_index: AtomicUsize::new(1) }
    }

    /// Forgets the last run's copies, whose blocks went with its heap. `_begin` calls it, on the program's only
    /// thread.
    pub fn reset(&self) {
        self.tables.store(core::ptr::null_mut(), Ordering::Relaxed);
    }

    /// `__emutls_get_address`: the copy of `control`'s thread-local that belongs to thread `thread` of a grid of
    /// `threads`, made from its initial value at the thread's first use. Null when the heap has no room for it, which
    /// std then reports as an allocation failure.
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
        let index = self.index_of(control);
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

    /// The thread-local's index, given at its first use by any thread.
    fn index_of(&self, control: &EmutlsControl) -> usize {
        let index = control.index.load(Ordering::Acquire);
        if index != 0 {
            return index;
        }
        let new = self.next_index.fetch_add(1, Ordering::Relaxed);
        match control.index.compare_exchange(0, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => new,
            // Another thread gave it one first (`new` stays unused).
            Err(given) => given,
        }
    }

    /// Where thread `thread`'s table pointer lives; `None` when the heap has no room for the tables. The tables are
    /// made at the first call of a run, and made anew, empty, for a kernel with more threads than they hold: the
    /// threads of `_begin` and `_start` are not the same threads.
    fn table_slot<G: Gpu>(&self, heap: &Heap<G>, thread: u64, threads: u64) -> Option<&AtomicPtr<Table>> {
        if thread >= threads {
            return None;
        }
        loop {
            let tables = self.tables.load(Ordering::Acquire);
            // SAFETY: published tables are a heap block of this run: a `Tables` header and its `count` pointers.
            let count = if tables.is_null() { 0 } else { unsafe { (*tables).count } };
            if threads <= count as u64 {
                // SAFETY: `thread` is below `threads`, which is at most the tables' count.
                return Some(unsafe { &*tables.add(1).cast::<AtomicPtr<Table>>().add(thread as usize) });
            }
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
            if self.tables.compare_exchange(tables, new, Ordering::AcqRel, Ordering::Acquire).is_err() {
                // Another thread of the kernel published its tables first: they are the ones.
                // SAFETY: `new` was never shared.
                let _ = unsafe { heap.deallocate(new.cast()) };
            }
        }
    }
}

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

/// The calling GPU thread's index in the grid and the grid's thread count (saturating: host threads, which stand in
/// for GPU threads in the host tests, report a grid of `u32::MAX` blocks in each dimension).
pub fn thread_in_grid<G: Gpu>() -> (u64, u64) {
    let ids = G::thread_ids();
    let shape = G::launch_shape();
    let [bx, by, bz] = ids.block.map(u64::from);
    let [nx, ny, nz] = shape.blocks.map(u64::from);
    let block = bx.saturating_add(nx.saturating_mul(by.saturating_add(ny.saturating_mul(bz))));
    let per_block = u64::from(shape.threads_per_block());
    let thread = block.saturating_mul(per_block).saturating_add(u64::from(shape.linear_thread_in_block(ids.thread)));
    (thread, nx.saturating_mul(ny).saturating_mul(nz).saturating_mul(per_block))
}

/// The functions of Hermit's ABI that Rust's std calls, for a program built for the std target (`target_os =
/// "hermit"`; [`std_os`](crate::runtime::std_os)), and `__emutls_get_address`, which the bitcode linker routes every
/// thread-local access through. `target_runtime!` adds them there.
#[doc(hidden)]
#[macro_export]
macro_rules! std_os_runtime {
    ($gpu:ty) => {
        /// Hermit's `sys_write`: standard output and error, through the RPC channel.
        ///
        /// # Safety
        /// `bytes` must be `len` readable bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_write(fd: i32, bytes: *const u8, len: usize) -> isize {
            // SAFETY: std passes a buffer of `len` bytes.
            let bytes = unsafe { ::core::slice::from_raw_parts(bytes, len) };
            $crate::runtime::std_os::write(RUNTIME.client(), fd, bytes)
        }

        /// Hermit's `sys_malloc`: `size` bytes aligned to `align` on the device heap, or null.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_malloc(size: usize, align: usize) -> *mut u8 {
            RUNTIME.heap().allocate(size, align)
        }

        /// Hermit's `sys_realloc`: the block at `pointer` (of `size` bytes, aligned to `align`) grown or shrunk to
        /// `new_size`, or null with the block left as it was.
        ///
        /// # Safety
        /// `pointer` must be a block of `size` bytes from `sys_malloc` with `align`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_realloc(pointer: *mut u8, size: usize, align: usize, new_size: usize) -> *mut u8 {
            let Ok(layout) = ::core::alloc::Layout::from_size_align(size, align) else {
                return ::core::ptr::null_mut();
            };
            // SAFETY: the caller's block and layout, as `GlobalAlloc::realloc` requires.
            unsafe { ::core::alloc::GlobalAlloc::realloc(&ALLOCATOR, pointer, layout, new_size) }
        }

        /// Hermit's `sys_free`.
        ///
        /// # Safety
        /// `pointer` must be a block from `sys_malloc` that nothing uses any more.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_free(pointer: *mut u8, _size: usize, _align: usize) {
            // SAFETY: the caller's block, as C's `free` requires.
            unsafe { ALLOCATOR.free(pointer.cast()) }
        }

        /// Hermit's `sys_exit`: the program ends with `status`, as C's `exit`.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_exit(status: i32) -> ! {
            RUNTIME.exit(status)
        }

        /// Hermit's `sys_abort`: as C's `abort`.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_abort() -> ! {
            RUNTIME.abort()
        }

        /// Hermit's `sys_futex_wait` ([`std_os::futex_wait`]($crate::runtime::std_os::futex_wait)).
        ///
        /// # Safety
        /// `address` must be a live word, `timeout` null or a live `timespec`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_futex_wait(
            address: *mut u32,
            expected: u32,
            timeout: *const $crate::runtime::std_os::Timespec,
            _flags: u32,
        ) -> i32 {
            // SAFETY: the caller's word and timeout.
            unsafe { $crate::runtime::std_os::futex_wait::<$gpu>(address, expected, timeout) }
        }

        /// Hermit's `sys_futex_wake` ([`std_os::futex_wake`]($crate::runtime::std_os::futex_wake)).
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_futex_wake(address: *mut u32, count: i32) -> i32 {
            $crate::runtime::std_os::futex_wake(address, count)
        }

        /// Hermit's `sys_read_entropy` ([`std_os::read_entropy`]($crate::runtime::std_os::read_entropy)).
        ///
        /// # Safety
        /// `bytes` must be `len` writable bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_read_entropy(bytes: *mut u8, len: usize, _flags: u32) -> isize {
            // SAFETY: std passes a buffer of `len` bytes.
            let bytes = unsafe { ::core::slice::from_raw_parts_mut(bytes, len) };
            $crate::runtime::std_os::read_entropy::<$gpu>(bytes)
        }

        /// The calling GPU thread's copy of a thread-local, by its control variable (libgcc's and compiler-rt's
        /// `__emutls_get_address`).
        ///
        /// # Safety
        /// `control` must be a control variable that LLVM's `lower-emutls` made.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn __emutls_get_address(control: *mut $crate::runtime::std_os::EmutlsControl) -> *mut u8 {
            // SAFETY: the linker passes the thread-local's control variable.
            unsafe { RUNTIME.thread_local(&*control) }
        }
    };
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
    fn threads_running_at_once_each_get_their_own_copies() {
        let (_pool, heap) = heap();
        let locals = ThreadLocals::new();
        let controls: Vec<_> = (0..3)
            .map(|_| EmutlsControl { size: 8, align: 8, index: AtomicUsize::new(0), initial: core::ptr::null() })
            .collect();
        let copies: Vec<Vec<usize>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..8u64)
                .map(|thread| {
                    let (heap, locals, controls) = (&heap, &locals, &controls);
                    scope.spawn(move || {
                        controls
                            .iter()
                            .map(|control| {
                                // SAFETY: each host thread plays its own GPU thread of a grid of 8.
                                let copy = unsafe { locals.address(heap, control, thread, 8) }.cast::<u64>();
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
        assert_eq!(all.len(), 24, "every thread's every copy is its own");
        let mut indices: Vec<_> = controls.iter().map(|control| control.index.load(Ordering::Relaxed)).collect();
        indices.sort();
        indices.dedup();
        assert_eq!(indices.len(), 3, "each thread-local has one index");
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

    #[test]
    fn entropy_fills_every_byte_and_differs_between_calls() {
        let (mut first, mut second) = ([0u8; 13], [0u8; 13]);
        assert_eq!(read_entropy::<HostThread>(&mut first), 13);
        assert_eq!(read_entropy::<HostThread>(&mut second), 13);
        assert_ne!(first, second);
        assert_ne!(first, [0; 13]);
    }

    #[test]
    fn a_futex_wait_returns_at_once_when_the_word_changed_and_times_out() {
        let word = AtomicU32::new(5);
        // SAFETY: a live word and timespec.
        unsafe {
            assert_eq!(futex_wait::<HostThread>(word.as_ptr(), 4, core::ptr::null()), -errno::EAGAIN);
            let zero = Timespec { seconds: 0, nanoseconds: 0 };
            assert_eq!(futex_wait::<HostThread>(word.as_ptr(), 5, &zero), -errno::ETIMEDOUT);
            assert_eq!(futex_wait::<HostThread>(core::ptr::null_mut(), 5, core::ptr::null()), -errno::EINVAL);
        }
        assert_eq!(futex_wake(word.as_ptr(), 1), 0);
        assert_eq!(futex_wake(word.as_ptr(), -1), -errno::EINVAL);
    }
}
