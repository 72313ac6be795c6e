//! The device heap as programs see it: C's `malloc`, `free`, `calloc`, `realloc`, `aligned_alloc` and
//! `posix_memalign` (which `target_runtime!` exports), and Rust's global allocator.
//!
//! Running out of memory is a null pointer (Rust then calls `handle_alloc_error`, whose message the startup's panic
//! handler prints), but for C++'s `operator new`, which must not return one: with exceptions off it ends the program
//! with a message, as a `std::bad_alloc` that nothing catches would. A pointer that `free` or `realloc` cannot take (a double free, or one the heap never returned)
//! ends the program with a message naming the call and the pointer, like glibc's `free(): double free detected`, and
//! the loader exits with 134, as for `abort`.

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::{c_int, c_void};

use crate::gpu::Gpu;
use crate::libc::heap::MALLOC_ALIGN;
use crate::runtime::startup::Runtime;

/// `posix_memalign`'s error for an alignment it does not take (Linux's `EINVAL`).
pub const EINVAL: c_int = 22;
/// `posix_memalign`'s error for a lack of memory (Linux's `ENOMEM`).
pub const ENOMEM: c_int = 12;

/// The allocation functions of a program, over its runtime's heap. A target crate holds one in a `static`; with its
/// `global-allocator` feature that static is also Rust's `#[global_allocator]`.
pub struct Allocator<G: Gpu> {
    runtime: &'static Runtime<G>,
}

impl<G: Gpu> Allocator<G> {
    pub const fn new(runtime: &'static Runtime<G>) -> Self {
        Self { runtime }
    }

    /// C's `malloc`: `size` bytes aligned to [`MALLOC_ALIGN`], or null. A request for 0 bytes gets a block of its
    /// own.
    pub fn malloc(&self, size: usize) -> *mut c_void {
        self.runtime.heap().allocate(size, MALLOC_ALIGN).cast()
    }

    /// C's `free`: nothing for null; a pointer that is not the start of an allocated block ends the program.
    ///
    /// # Safety
    /// Nothing may use the block once it is freed.
    pub unsafe fn free(&self, pointer: *mut c_void) {
        // SAFETY: the caller's guarantee.
        unsafe { self.free_as("free", pointer) }
    }

    /// [`Allocator::free`] for a function that `call` names in the message about a bad pointer: C++'s
    /// `operator delete` in every form.
    ///
    /// # Safety
    /// As for [`Allocator::free`].
    pub unsafe fn free_as(&self, call: &str, pointer: *mut c_void) {
        // SAFETY: the caller's guarantee.
        if let Err(error) = unsafe { self.runtime.heap().deallocate(pointer.cast()) } {
            self.runtime.heap_error(call, pointer.cast(), error)
        }
    }

    /// C's `calloc`: `count * size` zeroed bytes, or null (also when the product overflows).
    pub fn calloc(&self, count: usize, size: usize) -> *mut c_void {
        let Some(bytes) = count.checked_mul(size) else { return core::ptr::null_mut() };
        let block = self.malloc(bytes);
        if !block.is_null() {
            // SAFETY: the block has at least `bytes` bytes, all this thread's.
            unsafe { block.cast::<u8>().write_bytes(0, bytes) };
        }
        block
    }

    /// C's `realloc`, as glibc does it: null is `malloc(size)`; a size of 0 frees the block and returns null;
    /// otherwise the contents move to a block of `size` bytes (or stay, when the block has that size already), and
    /// null with the old block untouched when there is no room.
    ///
    /// # Safety
    /// Unless the result is null or `pointer`, nothing may use the old block afterwards; no other thread may write it
    /// meanwhile.
    pub unsafe fn realloc(&self, pointer: *mut c_void, size: usize) -> *mut c_void {
        if size == 0 && !pointer.is_null() {
            // SAFETY: the caller's guarantee: `realloc(p, 0)` frees `p`.
            unsafe { self.free(pointer) };
            return core::ptr::null_mut();
        }
        // SAFETY: the caller's guarantee.
        match unsafe { self.runtime.heap().reallocate(pointer.cast(), size, MALLOC_ALIGN) } {
            Ok(block) => block.cast(),
            Err(error) => self.runtime.heap_error("realloc", pointer.cast(), error),
        }
    }

    /// C's `aligned_alloc`: `size` bytes aligned to `alignment`, which must be a power of two (null otherwise).
    pub fn aligned_alloc(&self, alignment: usize, size: usize) -> *mut c_void {
        if !alignment.is_power_of_two() {
            return core::ptr::null_mut();
        }
        self.runtime.heap().allocate(size, alignment.max(MALLOC_ALIGN)).cast()
    }

    /// POSIX's `posix_memalign`: 0 with the block in `*out`, [`EINVAL`] for an alignment that is not a power of two
    /// times the size of a pointer, [`ENOMEM`] when there is no room (`*out` untouched then).
    ///
    /// # Safety
    /// `out` must be valid for a pointer's write.
    pub unsafe fn posix_memalign(&self, out: *mut *mut c_void, alignment: usize, size: usize) -> c_int {
        if !alignment.is_power_of_two() || !alignment.is_multiple_of(size_of::<*mut c_void>()) {
            return EINVAL;
        }
        let block = self.aligned_alloc(alignment, size);
        if block.is_null() {
            return ENOMEM;
        }
        // SAFETY: the caller guarantees `out`.
        unsafe { out.write(block) };
        0
    }
}

impl<G: Gpu> Allocator<G> {
    /// C++'s `operator new` (`call` names the form, `"operator new[]"` for instance), with `alignment` for the forms
    /// that take a `std::align_val_t`: a block of `size` bytes (a block of its own for 0). Never null: when the heap
    /// has no room, or the alignment is not a power of two, the program ends with a message naming the call (exit
    /// 134).
    pub fn operator_new(&self, call: &str, size: usize, alignment: Option<usize>) -> *mut c_void {
        let block = self.operator_new_nothrow(size, alignment);
        if block.is_null() {
            let problem = match alignment {
                Some(alignment) if !alignment.is_power_of_two() => "the alignment is not a power of two",
                _ => "the device heap has no room (gpu-loader --heap-size sets its size)",
            };
            match alignment {
                Some(alignment) => {
                    self.runtime.fatal(format_args!("{call}({size}, std::align_val_t({alignment})): {problem}"))
                }
                None => self.runtime.fatal(format_args!("{call}({size}): {problem}")),
            }
        }
        block
    }

    /// The `std::nothrow` forms of C++'s `operator new`: null where [`Allocator::operator_new`] would end the
    /// program.
    pub fn operator_new_nothrow(&self, size: usize, alignment: Option<usize>) -> *mut c_void {
        match alignment {
            Some(alignment) => self.aligned_alloc(alignment, size),
            None => self.malloc(size),
        }
    }
}

// SAFETY: the heap returns blocks of at least the layout's size and alignment, apart from every other allocated
// block, until they are freed; `dealloc` and `realloc` take only its blocks (anything else ends the program).
unsafe impl<G: Gpu> GlobalAlloc for Allocator<G> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.runtime.heap().allocate(layout.size(), layout.align())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let block = self.runtime.heap().allocate(layout.size(), layout.align());
        if !block.is_null() {
            // SAFETY: the block has at least `layout.size()` bytes, all this thread's.
            unsafe { block.write_bytes(0, layout.size()) };
        }
        block
    }

    unsafe fn dealloc(&self, pointer: *mut u8, _layout: Layout) {
        // SAFETY: `GlobalAlloc`'s contract: the block is not used after this.
        if let Err(error) = unsafe { self.runtime.heap().deallocate(pointer) } {
            self.runtime.heap_error("dealloc", pointer, error)
        }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        // SAFETY: `GlobalAlloc`'s contract: the block is the caller's, and not used through `pointer` after a move.
        match unsafe { self.runtime.heap().reallocate(pointer, size, layout.align()) } {
            Ok(block) => block,
            Err(error) => self.runtime.heap_error("realloc", pointer, error),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::gpu::HostThread;
    use crate::libc::heap::HostPool;
    use std::boxed::Box;

    /// Runs `test` with an allocator over a runtime of its own, whose heap is a host pool of 8 slabs.
    fn with_allocator(test: impl FnOnce(&Allocator<HostThread>)) {
        let runtime: &'static Runtime<HostThread> = Box::leak(Box::new(Runtime::new()));
        let pool = HostPool::new(8);
        // SAFETY: a fresh pool that outlives the test; no other thread uses this runtime's heap.
        unsafe { pool.attach(runtime.heap()) };
        test(&Allocator::new(runtime));
    }

    #[test]
    fn calloc_zeroes_a_reused_block_and_refuses_an_overflowing_product() {
        with_allocator(|allocator| {
            // Every block of the heap dirtied and freed: whatever calloc gets was one of them.
            let blocks: std::vec::Vec<*mut u8> =
                core::iter::from_fn(|| Some(allocator.malloc(8192).cast::<u8>()).filter(|b| !b.is_null())).collect();
            assert_eq!(blocks.len(), 64);
            for &block in &blocks {
                // SAFETY: the block has 8,192 bytes; freed once.
                unsafe {
                    block.write_bytes(0xff, 8192);
                    allocator.free(block.cast());
                }
            }
            let zeroed = allocator.calloc(2048, 4).cast::<u8>();
            assert!(blocks.contains(&zeroed));
            // SAFETY: the block has 8,192 bytes.
            assert!((0..8192).all(|i| unsafe { zeroed.add(i).read() } == 0));
            assert!(allocator.calloc(usize::MAX / 2, 3).is_null());
            assert!(!allocator.malloc(0).is_null(), "malloc(0) gets a block of its own");
        });
    }

    #[test]
    fn realloc_follows_glibc_at_the_edges() {
        with_allocator(|allocator| {
            // SAFETY: each block is used only while allocated.
            unsafe {
                let block = allocator.realloc(core::ptr::null_mut(), 40);
                assert!(!block.is_null(), "realloc(NULL, n) is malloc(n)");
                assert!(allocator.realloc(block, 0).is_null(), "realloc(p, 0) frees p");
                assert!(allocator.runtime.heap().usable_size(block.cast()).is_err(), "p was freed");
                let kept = allocator.malloc(64);
                assert!(allocator.realloc(kept, 1 << 30).is_null(), "no room");
                assert_eq!(allocator.runtime.heap().usable_size(kept.cast()), Ok(64), "the old block stays");
            }
        });
    }

    #[test]
    fn aligned_allocations_check_their_alignment() {
        with_allocator(|allocator| {
            assert!(allocator.aligned_alloc(3, 8).is_null());
            assert_eq!(allocator.aligned_alloc(4096, 10) as usize % 4096, 0);
            let mut out = core::ptr::dangling_mut::<c_void>();
            let before = out;
            // SAFETY: `out` is a local, writable pointer.
            unsafe {
                assert_eq!(allocator.posix_memalign(&mut out, 24, 8), EINVAL);
                assert_eq!(allocator.posix_memalign(&mut out, 4, 8), EINVAL, "less than a pointer's size");
                assert_eq!(allocator.posix_memalign(&mut out, 64, 1 << 40), ENOMEM);
                assert_eq!(out, before, "untouched on failure");
                assert_eq!(allocator.posix_memalign(&mut out, 256, 1000), 0);
            }
            assert_eq!(out as usize % 256, 0);
        });
    }

    #[test]
    fn the_global_allocator_honours_layouts() {
        with_allocator(|allocator| {
            let layout = Layout::from_size_align(600, 512).unwrap();
            // SAFETY: a non-zero size; every block is used only while allocated, with its layout.
            unsafe {
                let block = allocator.alloc_zeroed(layout);
                assert_eq!(block as usize % 512, 0);
                assert!((0..600).all(|i| block.add(i).read() == 0));
                block.write_bytes(7, 600);
                let grown = GlobalAlloc::realloc(allocator, block, layout, 20_000);
                assert_eq!(grown as usize % 512, 0);
                assert!((0..600).all(|i| grown.add(i).read() == 7));
                allocator.dealloc(grown, Layout::from_size_align(20_000, 512).unwrap());
            }
        });
    }
}
