//! The calling block's memory ([`Gpu::block_memory`]) as the RPC client lays it out: a copy of the client's setup,
//! then the locks of the block's lane groups.

use core::marker::PhantomData;
use core::ptr::NonNull;

use super::lock::GroupLock;
use super::setup::BlockSetup;
use crate::BlockMemory;
use crate::gpu::Gpu;

/// The calling block's memory, as the client lays it out: a copy of the client's setup ([`BlockSetup`]), then one
/// [`GroupLock`] per lane group of the block.
pub(super) struct Block<G: Gpu> {
    base: NonNull<BlockMemory>,
    _gpu: PhantomData<fn() -> G>,
}

impl<G: Gpu> Block<G> {
    pub(super) fn get() -> Option<Self> {
        Some(Self { base: G::block_memory()?, _gpu: PhantomData })
    }

    /// The block's copy of the setup.
    pub(super) fn setup<'k>(&self) -> &'k BlockSetup {
        // SAFETY: the launch gave the block `abi::block_memory_bytes`, which start with `BLOCK_MEMORY_HEADER` bytes
        // for this, 8-byte aligned. They live while the kernel runs.
        unsafe { self.base.cast::<BlockSetup>().as_ref() }
    }

    /// The lock of lane group `group` of the block, for as long as the caller uses it within this kernel.
    pub(super) fn lock<'k>(&self, group: u32) -> &'k GroupLock {
        // SAFETY: the launch gave the block `abi::block_memory_bytes`: after the header, a lock per lane group, and
        // `group` is a lane group of the block (callers compute it from the thread's place in it). The words live
        // while the kernel runs, longer than any port opened in it.
        unsafe {
            let locks = self.base.cast::<u8>().add(core::mem::offset_of!(BlockLayout, locks)).cast::<GroupLock>();
            locks.add(group as usize).as_ref()
        }
    }
}

/// How the client lays out block memory: the setup, then the locks of as many lane groups as the block has.
#[repr(C)]
struct BlockLayout {
    setup: BlockSetup,
    locks: [GroupLock; 0],
}

// The loader sizes block memory by these (loom's atomics are larger, and live in host memory only).
#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::offset_of!(BlockLayout, locks) as u32 == crate::abi::BLOCK_MEMORY_HEADER);
    assert!(size_of::<GroupLock>() as u32 == crate::abi::BLOCK_MEMORY_PER_GROUP);
};
