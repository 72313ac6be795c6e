//! Host-only helpers: a region in ordinary memory for tests (and loom models), and owned stream reception.

use core::ffi::c_void;
use core::ptr::NonNull;
use std::boxed::Box;
use std::vec::Vec;

use gpu_startup_protocol::region::Layout;

use super::ServerPort;
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

/// One lane's whole stream, from [`ServerPort::recv_n_vec`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received<const H: usize> {
    pub lane: u32,
    pub head: [u64; H],
    pub data: Vec<u8>,
}

/// A lane announced a stream longer than [`ServerPort::recv_n_vec`] was told to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamTooLong {
    pub lane: u32,
    /// The length the lane announced.
    pub len: u64,
    /// The most bytes per lane the receiver holds.
    pub limit: u64,
}

impl core::fmt::Display for StreamTooLong {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "lane {} announced a stream of {} bytes, over the limit of {} a lane",
            self.lane, self.len, self.limit
        )
    }
}

impl core::error::Error for StreamTooLong {}

impl ServerPort<'_> {
    /// Receives a stream sent by `send_n_with::<H>` whole: one entry per lane, lowest lane first. A lane that announces
    /// more than `limit` bytes is refused at its first packet, before anything is held for it, and the message
    /// [abandoned](ServerPort::abandon): the client's lengths are untrusted.
    pub fn recv_n_vec<const H: usize>(&mut self, limit: u64) -> Result<Vec<Received<H>>, StreamTooLong> {
        let mut received: Vec<Received<H>> = Vec::new();
        self.recv_n_with::<H, _>(|piece| {
            if piece.offset == 0 {
                if piece.total > limit {
                    return Err(StreamTooLong { lane: piece.lane, len: piece.total, limit });
                }
                let mut data = Vec::new();
                data.extend_from_slice(piece.bytes);
                received.push(Received { lane: piece.lane, head: *piece.head, data });
            } else if let Some(entry) = received.iter_mut().find(|entry| entry.lane == piece.lane) {
                entry.data.extend_from_slice(piece.bytes);
            }
            Ok(())
        })?;
        Ok(received)
    }
}
