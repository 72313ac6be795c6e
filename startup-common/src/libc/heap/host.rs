//! A pool in ordinary host memory, for tests of the heap with host threads, under Miri and under loom.

use core::ptr::NonNull;
use std::boxed::Box;

use super::Heap;
use super::geometry::{Geometry, SLAB_BYTES};
use crate::gpu::Gpu;
use crate::sync::AtomicU64;

/// The metadata words and the data area of a heap of `slabs` slabs, apart: under loom the words are loom's atomics,
/// which cannot live in raw memory. The metadata starts as garbage, as device memory left by an earlier run would be,
/// so the tests check that the heap sets up what it reads.
pub struct HostPool {
    /// Held through a raw pointer, not a `Box`, so that moving the pool does not invalidate the addresses the heap
    /// holds (a moved `Box` asserts unique access, which Miri would report).
    meta: NonNull<[AtomicU64]>,
    data: NonNull<u8>,
    geometry: Geometry,
}

// SAFETY: the metadata is an array of atomics; the data area is plain memory that the heap hands out, and whoever
// holds a block owns its bytes.
unsafe impl Send for HostPool {}
// SAFETY: as above.
unsafe impl Sync for HostPool {}

impl HostPool {
    /// Garbage that a run before this one might have left in the metadata: every page in use, every slab marked.
    const GARBAGE: u64 = 0xa5a5_a5a5_a5a5_a5a5;

    pub fn new(slabs: u32) -> Self {
        let geometry = Geometry::with_slabs(slabs);
        let meta: Box<[AtomicU64]> = (0..geometry.words).map(|_| AtomicU64::new(Self::GARBAGE)).collect();
        // SAFETY: a non-zero size (at least one slab), with the alignment the heap requires of its data area.
        let data = unsafe { std::alloc::alloc(Self::data_layout(geometry)) };
        let data = NonNull::new(data).unwrap_or_else(|| std::alloc::handle_alloc_error(Self::data_layout(geometry)));
        Self { meta: NonNull::from(Box::leak(meta)), data, geometry }
    }

    fn data_layout(geometry: Geometry) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(geometry.data_bytes().max(1), SLAB_BYTES).expect("a valid layout")
    }

    /// Makes this pool `heap`'s, empty: what `_begin` does with the loader's pool.
    ///
    /// # Safety
    /// As for [`Heap::reset`]: no other thread uses the heap meanwhile; the pool outlives the heap's use of it, and
    /// blocks from before are invalid afterwards.
    pub unsafe fn attach<G: Gpu>(&self, heap: &Heap<G>) {
        // SAFETY: the words and the data area are this pool's, laid out by its geometry; the caller guarantees the
        // rest.
        unsafe { heap.reset_parts(self.meta.as_ptr().cast::<AtomicU64>(), self.data.as_ptr(), self.geometry) };
    }

    /// The addresses of the data area, where every block lies.
    pub fn data_range(&self) -> core::ops::Range<usize> {
        let start = self.data.as_ptr() as usize;
        start..start + self.geometry.data_bytes()
    }
}

impl Drop for HostPool {
    fn drop(&mut self) {
        // SAFETY: `meta` came from `Box::leak` and `data` from `alloc` with this layout in `new`; freed only here.
        unsafe {
            drop(Box::from_raw(self.meta.as_ptr()));
            std::alloc::dealloc(self.data.as_ptr(), Self::data_layout(self.geometry));
        }
    }
}
