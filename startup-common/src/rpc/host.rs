//! Host threads' stand-ins for GPU memory (feature `host-threads`): an RPC region and block memory in ordinary memory,
//! for the tests, loom models, benches and fuzzing in which host threads act as clients; never in `gpu-loader`.

use core::ffi::c_void;
use core::ptr::NonNull;
use std::boxed::Box;

use gpu_startup_protocol::region::Layout;

use crate::sync::AtomicU64;

/// Block memory in ordinary host memory, for host models of a block with `N` lane groups: it starts as garbage, as
/// on a GPU (all bits set: every lock word looks taken), until the block's threads call `Client::prepare_block`.
/// Laid out as `block::BlockLayout` with `N` locks.
#[repr(C)]
pub struct HostBlockMemory<const N: usize> {
    setup: super::setup::BlockSetup,
    locks: [super::lock::GroupLock; N],
}

impl<const N: usize> Default for HostBlockMemory<N> {
    fn default() -> Self {
        Self {
            setup: super::setup::BlockSetup::garbage(),
            locks: core::array::from_fn(|_| super::lock::GroupLock::garbage()),
        }
    }
}

impl<const N: usize> HostBlockMemory<N> {
    /// The memory as [`Gpu::block_memory`](crate::Gpu::block_memory) returns it; valid while `self` lives.
    pub fn as_block_memory(&self) -> NonNull<crate::BlockMemory> {
        NonNull::from(self).cast()
    }
}

/// A zeroed region in ordinary host memory, laid out like the pinned one, for tests where host threads act as
/// clients. Under loom its words are loom atomics, so the models check the real protocol code.
///
/// The words are held through a raw pointer, not a `Box`, so that moving the `HostRegion` does not invalidate the
/// addresses that clients and servers hold (a moved `Box` asserts unique access, which Miri would report).
pub struct HostRegion {
    words: NonNull<[AtomicU64]>,
    layout: Layout,
}

// SAFETY: the region is an array of atomics, which may be shared and sent between threads like `Box<[AtomicU64]>`.
unsafe impl Send for HostRegion {}
// SAFETY: as above: all access to the words is atomic.
unsafe impl Sync for HostRegion {}

impl Drop for HostRegion {
    fn drop(&mut self) {
        // SAFETY: `words` came from `Box::into_raw` in `new` and is freed only here.
        drop(unsafe { Box::from_raw(self.words.as_ptr()) });
    }
}

impl HostRegion {
    pub fn new(layout: Layout) -> Self {
        let words: Box<[AtomicU64]> = (0..layout.words()).map(|_| AtomicU64::new(0)).collect();
        Self { words: NonNull::from(Box::leak(words)), layout }
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The region's address, for `Client::reset` and `Server::new`. Valid while `self` lives.
    pub fn as_ptr(&self) -> *mut c_void {
        self.words.as_ptr().cast()
    }
}
