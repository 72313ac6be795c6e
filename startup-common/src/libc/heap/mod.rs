//! The device heap: C's `malloc` family and Rust's global allocator, from a pool of device memory that the loader
//! reserves (`gpu-loader --heap-size`) and hands to `_begin` (`abi::BeginArgs`). `docs/heap.md` has the design.
//!
//! - Requests of up to [`MAX_CHUNK`] bytes, aligned to at most that, are *chunks* of one of 32 size classes. A chunk
//!   comes from a 64 KiB *slab* of its class: a bitmap with a bit per chunk, and a counter of the chunks that are free
//!   and not yet reserved. The lanes of a warp that ask for the same class at once are served together: one lane
//!   reserves chunks for all of them with one atomic on the counter and takes their bits with one atomic per bitmap
//!   word (`slabs.rs`). Nothing on this path waits for another thread.
//! - Bigger requests, and slabs themselves, are runs of 4 KiB pages from a page allocator under a lock (`pages.rs`).
//! - All the heap's state lives in the pool: metadata words first, then the data area (`geometry.rs`). `_begin`
//!   resets a few header words; the rest of the metadata is set up as the page allocator first hands out the pages it
//!   describes, so a reset costs the same for any pool size.
//!
//! Every function is called by any number of threads of the grid at once. The allocating ones combine the calling
//! lanes of a warp ([`Gpu::lane_mask`]); freeing is per lane.

mod counter;
mod geometry;
#[cfg(any(test, feature = "host-threads"))]
mod host;
mod pages;
mod slabs;
#[cfg(test)]
mod tests;

use core::cell::UnsafeCell;
use core::marker::PhantomData;

use crate::gpu::Gpu;
use crate::sync::AtomicU64;

pub use geometry::{MAX_CHUNK, MIN_CHUNK, PAGE_BYTES, SLAB_BYTES};
#[cfg(any(test, feature = "host-threads"))]
pub use host::HostPool;

use geometry::{Geometry, header};
use pages::PageUse;

/// The alignment of every block `malloc` returns (the most any C type needs on these targets).
pub const MALLOC_ALIGN: usize = MIN_CHUNK;

/// Why a pointer handed to `free` or `realloc` was refused. The heap changes nothing when it refuses one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapError {
    /// The pointer is not in the heap's data area.
    OutsideHeap,
    /// The pointer is in the heap, but not at the start of any block (the middle of one, or memory that no block
    /// has used).
    NotABlock,
    /// The pointer is the start of a block that is not allocated: it was freed already (a double free), or never
    /// allocated.
    NotAllocated,
}

impl core::fmt::Display for HeapError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            HeapError::OutsideHeap => "not a pointer from the heap (it lies outside the heap)",
            HeapError::NotABlock => "not a pointer from the heap (it is not the start of a block)",
            HeapError::NotAllocated => "double free (the block is not allocated: freed already, or never allocated)",
        })
    }
}

/// The heap of one program. A target crate holds exactly one, in its `Runtime`.
pub struct Heap<G: Gpu> {
    setup: UnsafeCell<Setup>,
    _gpu: PhantomData<fn() -> G>,
}

/// Where the pool's pieces are. Only [`Heap::reset`] writes it, and no other thread uses the heap meanwhile (on the
/// GPU it runs in `_begin`), so every call reads it with plain loads, which the device caches.
#[derive(Clone, Copy)]
struct Setup {
    /// The metadata words: [`Geometry`] says what is where.
    meta: *const AtomicU64,
    /// The data area: page `p` starts at `data + p * PAGE_BYTES`, slab `s` at `data + s * SLAB_BYTES`.
    data: *mut u8,
    geometry: Geometry,
}

// SAFETY: the heap's state is the pool's metadata, accessed only atomically, and `setup`, which only `reset` writes,
// under a contract that keeps every other use of the heap away meanwhile.
unsafe impl<G: Gpu> Sync for Heap<G> {}
// SAFETY: as for `Sync`: nothing in the heap belongs to one thread.
unsafe impl<G: Gpu> Send for Heap<G> {}

impl<G: Gpu> Default for Heap<G> {
    fn default() -> Self {
        Self::new()
    }
}

/// A block, as the pointer to its start names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    /// Chunk `index` of slab `slab`, of class `class`.
    Chunk { slab: u32, class: u32, index: u32 },
    /// A run of `count` pages from page `first`.
    Pages { first: u32, count: u32 },
}

impl Block {
    fn size(self) -> usize {
        match self {
            Block::Chunk { class, .. } => geometry::chunk_size(class) as usize,
            Block::Pages { count, .. } => count as usize * PAGE_BYTES,
        }
    }
}

impl<G: Gpu> Heap<G> {
    /// A heap without a pool: every allocation fails until [`Heap::reset`].
    pub const fn new() -> Self {
        Self {
            setup: UnsafeCell::new(Setup {
                meta: core::ptr::null(),
                data: core::ptr::null_mut(),
                geometry: Geometry::NONE,
            }),
            _gpu: PhantomData,
        }
    }

    /// Makes the `size` bytes at `pool` the heap, empty. A pool too small for one slab and its metadata (about
    /// 130 KiB, less with a pool aligned to 64 KiB), or a null one, leaves the heap without memory: every
    /// allocation fails.
    ///
    /// # Safety
    /// The pool must be `size` bytes of memory that only the heap uses while it is the heap's, 8-byte aligned. No
    /// other thread may use the heap while this runs, and what it writes must reach every thread that uses the heap
    /// later (a kernel boundary does that). Blocks from an earlier pool or run are invalid afterwards.
    #[cfg(not(loom))]
    pub unsafe fn reset(&self, pool: *mut core::ffi::c_void, size: u64) {
        let pool = pool.cast::<u8>();
        let carved = if pool.is_null() { None } else { Geometry::for_pool(pool as usize, size as usize) };
        match carved {
            // SAFETY: `for_pool` places the metadata words and the data area inside the pool, apart; the caller
            // guarantees the rest.
            Some((geometry, meta, data)) => unsafe {
                self.reset_parts(pool.add(meta).cast::<AtomicU64>(), pool.add(data), geometry)
            },
            // SAFETY: no pool: nothing is ever read through these.
            None => unsafe { self.reset_parts(core::ptr::null(), core::ptr::null_mut(), Geometry::NONE) },
        }
    }

    /// [`Heap::reset`] from the pieces: `geometry.words` metadata words at `meta`, and `geometry.data_bytes()` bytes
    /// of data at `data`, aligned to [`SLAB_BYTES`]. (Host tests keep the two apart; loom's atomics cannot live in raw
    /// memory.)
    ///
    /// # Safety
    /// As for [`Heap::reset`], for both pieces; with no slabs, the pointers are never used.
    unsafe fn reset_parts(&self, meta: *const AtomicU64, data: *mut u8, geometry: Geometry) {
        // SAFETY: the caller guarantees that no other thread uses the heap now.
        unsafe { self.setup.get().write(Setup { meta, data, geometry }) };
        if geometry.slabs == 0 {
            return;
        }
        // The lock, the free-page hint and the slab-making flags start clear, and no page has metadata yet: the page
        // allocator sets up each page's metadata when it first hands the page out.
        for index in 0..header::WORDS {
            // Through `meta` rather than `self.word`: the setup, read back after each store (which might alias it),
            // would cost a load per word.
            // SAFETY: the caller's `geometry.words` live words at `meta`, of which the header is the first.
            unsafe { &*meta.add(index) }.store(0, core::sync::atomic::Ordering::Relaxed);
        }
    }

    fn setup(&self) -> Setup {
        // SAFETY: only `reset` writes `setup`, and its contract keeps every other use of the heap away meanwhile.
        unsafe { *self.setup.get() }
    }

    /// Whether the heap has memory to hand out.
    pub fn is_ready(&self) -> bool {
        self.setup().geometry.slabs > 0
    }

    /// Metadata word `index` (below `geometry.words`).
    fn word(&self, index: usize) -> &AtomicU64 {
        let setup = self.setup();
        debug_assert!(index < setup.geometry.words as usize);
        // SAFETY: `reset` was given `geometry.words` live metadata words at `meta`, and callers index by the
        // geometry.
        unsafe { &*setup.meta.add(index) }
    }

    /// `size` bytes aligned to `align` (a power of two; anything else fails), or null when the heap cannot provide
    /// them. A request for 0 bytes gets a block of its own. Lanes of a warp that call it together are served together.
    pub fn allocate(&self, size: usize, align: usize) -> *mut u8 {
        if !align.is_power_of_two() || !self.is_ready() {
            return core::ptr::null_mut();
        }
        match geometry::class_of(size, align) {
            Some(class) => self.allocate_chunk(class),
            None => self.allocate_pages_for(size, align),
        }
    }

    /// Frees the block that `ptr` starts (nothing for null). Refuses, changing nothing, a pointer that is not the
    /// start of an allocated block.
    ///
    /// # Safety
    /// Nothing may use the block once it is freed. (The heap refuses what it can tell is not an allocated block; the
    /// start of a block that another owner still uses it cannot tell apart.)
    // Out of line, as `usable_size` and `reallocate` are: inlined, every call of `free` or `realloc` carried its own
    // copy of the block lookup, and a call costs little next to the atomics behind it.
    #[inline(never)]
    pub unsafe fn deallocate(&self, ptr: *mut u8) -> Result<(), HeapError> {
        if ptr.is_null() {
            return Ok(());
        }
        match self.locate(ptr)? {
            Block::Chunk { slab, index, .. } => self.free_chunk(slab, index),
            Block::Pages { first, .. } => self.free_pages_of(first),
        }
    }

    /// The bytes usable at `ptr`, the start of an allocated block: at least what was asked for.
    #[inline(never)]
    pub fn usable_size(&self, ptr: *mut u8) -> Result<usize, HeapError> {
        Ok(self.locate_allocated(ptr)?.size())
    }

    /// C's `realloc` of a block `ptr` starts (or of nothing, for null) to `size` bytes aligned to `align`. The block
    /// stays where it is when `size` rounds to its size; otherwise its contents move to a new block. `Ok(null)` when
    /// there is no memory for the new block: the old one is left as it was.
    ///
    /// # Safety
    /// As for [`Heap::deallocate`]: unless the result is null or `ptr`, nothing may use the old block afterwards,
    /// and no other thread may write it meanwhile.
    #[inline(never)]
    pub unsafe fn reallocate(&self, ptr: *mut u8, size: usize, align: usize) -> Result<*mut u8, HeapError> {
        if ptr.is_null() {
            return Ok(self.allocate(size, align));
        }
        let block = self.locate_allocated(ptr)?;
        let same_size = match (block, geometry::class_of(size, align)) {
            (Block::Chunk { class, .. }, Some(wanted)) => class == wanted,
            (Block::Pages { count, .. }, None) => size.div_ceil(PAGE_BYTES) == count as usize,
            _ => false,
        };
        if same_size && (ptr as usize).is_multiple_of(align.max(1)) {
            return Ok(ptr);
        }
        let moved = self.allocate(size, align);
        if !moved.is_null() {
            // SAFETY: both blocks are allocated, hence apart, and at least this long; the caller keeps other threads
            // from writing the old one, and from using it after it is freed here.
            unsafe {
                core::ptr::copy_nonoverlapping(ptr, moved, block.size().min(size));
                self.deallocate(ptr)?;
            }
        }
        Ok(moved)
    }

    /// The block `ptr` starts, if it is allocated.
    fn locate_allocated(&self, ptr: *mut u8) -> Result<Block, HeapError> {
        let block = self.locate(ptr)?;
        if let Block::Chunk { slab, index, .. } = block {
            let bits = self.word(self.setup().geometry.bitmap_word(slab, index / 64));
            if G::device_load(bits, core::sync::atomic::Ordering::Relaxed) & 1 << (index % 64) == 0 {
                return Err(HeapError::NotAllocated);
            }
        }
        Ok(block)
    }

    /// The block `ptr` is the start of, by the page map. A chunk's bit and a large block's page map entry may change
    /// meanwhile; the freeing paths check them again atomically.
    fn locate(&self, ptr: *mut u8) -> Result<Block, HeapError> {
        use core::sync::atomic::Ordering::Relaxed;
        let Setup { data, geometry, .. } = self.setup();
        let offset = (ptr as usize).wrapping_sub(data as usize);
        if geometry.slabs == 0 || (ptr as usize) < data as usize || offset >= geometry.data_bytes() {
            return Err(HeapError::OutsideHeap);
        }
        let page = (offset / PAGE_BYTES) as u32;
        // The pages from the top up have no metadata of this run. (Relaxed: a pointer from this run's heap reached
        // this thread after its page did, and the top only grows.)
        if page >= G::device_load(self.word(header::TOP), Relaxed) as u32 {
            return Err(HeapError::NotABlock);
        }
        match PageUse::decode(G::device_load(self.word(geometry.page_map_word(page)), Relaxed)) {
            PageUse::Slab { class } => {
                let slab = page / geometry::PAGES_PER_SLAB;
                let within = (offset - slab as usize * SLAB_BYTES) as u32;
                let chunk = geometry::chunk_size(class);
                if !within.is_multiple_of(chunk) || within / chunk >= geometry::capacity(class) {
                    return Err(HeapError::NotABlock);
                }
                Ok(Block::Chunk { slab, class, index: within / chunk })
            }
            PageUse::Large { pages } if offset.is_multiple_of(PAGE_BYTES) => {
                Ok(Block::Pages { first: page, count: pages })
            }
            PageUse::Large { .. } => Err(HeapError::NotABlock),
            PageUse::Free if self.page_in_use(page) => Err(HeapError::NotABlock),
            PageUse::Free => Err(HeapError::NotAllocated),
        }
    }
}
