//! Host-only helpers: a region in ordinary memory for tests (and loom models), and owned stream reception.

use core::ffi::c_void;
use std::boxed::Box;
use std::vec::Vec;

use super::sync::AtomicU64;
use super::{Layout, ServerPort};

/// A zeroed region in ordinary host memory, laid out like the pinned one, for tests where host threads act as
/// clients. Under loom its words are loom atomics, so the models check the real protocol code.
pub struct HostRegion {
    words: Box<[AtomicU64]>,
    layout: Layout,
}

impl HostRegion {
    pub fn new(layout: Layout) -> Self {
        Self { words: (0..layout.words()).map(|_| AtomicU64::new(0)).collect(), layout }
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The region's address, for `Client::reset` and `Server::new`. Valid while `self` lives.
    pub fn as_ptr(&self) -> *mut c_void {
        self.words.as_ptr().cast_mut().cast()
    }
}

/// One lane's whole stream, from [`ServerPort::recv_n_vec`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received<const H: usize> {
    pub lane: u32,
    pub head: [u64; H],
    pub data: Vec<u8>,
}

impl ServerPort<'_> {
    /// Receives a stream sent by `send_n_with::<H>` whole: one entry per lane, lowest lane first.
    pub fn recv_n_vec<const H: usize>(&mut self) -> Vec<Received<H>> {
        let mut received: Vec<Received<H>> = Vec::new();
        self.recv_n_with::<H>(|piece| {
            if piece.offset == 0 {
                let mut data = Vec::new();
                data.extend_from_slice(piece.bytes);
                received.push(Received { lane: piece.lane, head: *piece.head, data });
            } else if let Some(entry) = received.iter_mut().find(|entry| entry.lane == piece.lane) {
                entry.data.extend_from_slice(piece.bytes);
            }
        });
        received
    }
}
