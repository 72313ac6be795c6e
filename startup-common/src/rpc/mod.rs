//! The RPC channel between GPU threads (clients) and the host (server), one protocol for both sides.
//!
//! The channel is a region of host-pinned, device-mapped memory divided into *ports*. A port carries one message at
//! a time between one lane group (a warp or wavefront, or the lanes of one that are active together) and the host.
//! Each port has two mailbox words, one written only by the client (its outbox, the server's inbox) and one written
//! only by the server; the side whose turn it is owns the port's header and packet buffers:
//!
//! - the client owns the buffers while `client_out == server_out`,
//! - the server owns them while `client_out != server_out`.
//!
//! A side hands the buffers over by toggling its own mailbox with a release store, and takes them by observing the
//! other side's toggle with an acquire load, so every buffer word is written by exactly one side between two
//! hand-offs. Client lane groups serialize on a port through a lock bit kept in device memory (inside [`Client`]);
//! the server is a single host thread and needs no lock. `docs/rpc.md` gives the layout, the state machine and the
//! argument for why it is correct.
//!
//! Every word of the region is accessed atomically (relaxed for payload, acquire/release for the mailboxes), so the
//! protocol has no data race in Rust's model, runs under Miri, and is modelled under loom with the same source
//! (`--cfg loom` swaps the atomic types).

mod block;
mod call;
mod client;
#[cfg(any(test, feature = "host-threads"))]
mod host;
#[cfg(any(test, feature = "host"))]
mod host_calls;
mod lock;
mod port;
#[cfg(any(test, feature = "host"))]
mod received;
mod server;
mod setup;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

pub use call::{HostCall, Pod, ReservedOpcode, UserOpcode, Zeroable};
pub use client::Client;
#[cfg(any(test, feature = "host-threads"))]
pub use host::{HostBlockMemory, HostRegion};
#[cfg(any(test, feature = "host"))]
pub use host_calls::{AlreadyRegistered, HostCallError, HostCallHandler, HostCalls};
pub use port::Port;
#[cfg(any(test, feature = "host"))]
pub use received::{Received, StreamTooLong};
pub use server::{Server, ServerPort, StreamPiece};

use gpu_startup_protocol::region::{Layout, PACKET_WORDS, mailbox_bit};

use crate::sync::AtomicU64;

/// The opcode list, which a host call of one's own must stay clear of (`opcode::FIRST_USER`).
pub use gpu_startup_protocol::opcode;

/// A view of a region: its first word and its layout. Every accessor returns an atomic in the region.
#[derive(Clone, Copy)]
pub(crate) struct Region {
    base: *const AtomicU64,
    layout: Layout,
}

impl Region {
    /// # Safety
    /// `base` must point to `layout.size()` bytes, 8-byte aligned, that hold `AtomicU64`s (zeroed memory does; under
    /// loom they must be loom atomics, see [`HostRegion`]) and stay valid, accessed only atomically, for as long as
    /// any copy of the returned view is used.
    pub(crate) const unsafe fn new(base: *const AtomicU64, layout: Layout) -> Self {
        Self { base, layout }
    }

    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    #[inline(always)]
    fn word(&self, index: usize) -> &AtomicU64 {
        debug_assert!(index < self.layout.words());
        // SAFETY: `new`'s contract makes every word below `layout.words()` a live atomic for as long as `self` is
        // used, and all callers compute `index` from the layout of a valid port and lane.
        unsafe { &*self.base.add(index) }
    }

    /// Port `port`'s client outbox, read as [`mailbox_bit`] reads it.
    #[inline(always)]
    pub(crate) fn client_bit(&self, port: u32, order: core::sync::atomic::Ordering) -> u64 {
        mailbox_bit(self.word(self.layout.client_outbox(port)).load(order))
    }

    /// Port `port`'s server outbox, read as [`mailbox_bit`] reads it.
    #[inline(always)]
    pub(crate) fn server_bit(&self, port: u32, order: core::sync::atomic::Ordering) -> u64 {
        mailbox_bit(self.word(self.layout.server_outbox(port)).load(order))
    }

    /// Sets port `port`'s client outbox (the client's hand-off).
    #[inline(always)]
    pub(crate) fn set_client_outbox(&self, port: u32, value: u64, order: core::sync::atomic::Ordering) {
        self.word(self.layout.client_outbox(port)).store(value, order)
    }

    /// Sets port `port`'s server outbox (the server's hand-off).
    #[inline(always)]
    pub(crate) fn set_server_outbox(&self, port: u32, value: u64, order: core::sync::atomic::Ordering) {
        self.word(self.layout.server_outbox(port)).store(value, order)
    }

    #[inline(always)]
    pub(crate) fn opcode(&self, port: u32) -> &AtomicU64 {
        self.word(self.layout.header(port))
    }

    #[inline(always)]
    pub(crate) fn mask(&self, port: u32) -> &AtomicU64 {
        self.word(self.layout.header(port) + 1)
    }

    #[inline(always)]
    pub(crate) fn packet(&self, port: u32, lane: u32) -> Packet<'_> {
        Packet { region: self, first: self.layout.packet_word(port, 0, lane) }
    }
}

/// `index` as a word of a packet: below [`PACKET_WORDS`] (a power of two), whatever it is. Every caller's index is
/// one already; the mask keeps the packet's words in its buffer without an assertion, whose panic would link the
/// panic machinery into every image that prints.
#[inline(always)]
fn word_in_packet(index: usize) -> usize {
    debug_assert!(index < PACKET_WORDS);
    const { assert!(PACKET_WORDS.is_power_of_two()) };
    index & (PACKET_WORDS - 1)
}

/// One lane's packet buffer in a port: [`PACKET_WORDS`] words. Only the side that owns the port touches it.
#[derive(Clone, Copy)]
pub struct Packet<'a> {
    region: &'a Region,
    first: usize,
}

impl Packet<'_> {
    /// Word `index` (below [`PACKET_WORDS`]).
    #[inline(always)]
    pub fn get(&self, index: usize) -> u64 {
        self.region
            .word(self.first + word_in_packet(index) * self.region.layout.lane_size() as usize)
            .load(core::sync::atomic::Ordering::Relaxed)
    }

    /// Sets word `index` (below [`PACKET_WORDS`]).
    #[inline(always)]
    pub fn set(&self, index: usize, value: u64) {
        self.region
            .word(self.first + word_in_packet(index) * self.region.layout.lane_size() as usize)
            .store(value, core::sync::atomic::Ordering::Relaxed)
    }

    /// Sets the first `N` words to `words`: a message's encoding (`gpu_startup_protocol::messages`), word by word.
    #[inline(always)]
    pub fn set_words<const N: usize>(&self, words: [u64; N]) {
        const { assert!(N <= PACKET_WORDS, "a packet holds 8 words") };
        for (index, word) in words.into_iter().enumerate() {
            self.set(index, word);
        }
    }

    /// The first `N` words, as a message's decoder takes them.
    #[inline(always)]
    pub fn get_words<const N: usize>(&self) -> [u64; N] {
        const { assert!(N <= PACKET_WORDS, "a packet holds 8 words") };
        core::array::from_fn(|index| self.get(index))
    }
}

/// A message written into a region word by word, bypassing the protocol, as a program that writes over its RPC region
/// does: for tests of how the host copes (the loader's, and `tests/programs/rpc-scribble` on the GPU).
#[cfg(any(test, feature = "testing"))]
#[derive(Clone, Copy, Debug)]
pub struct Scribble<'a> {
    pub port: u32,
    /// Header word 0.
    pub opcode: u64,
    /// Header word 1.
    pub mask: u64,
    /// The first words of every lane's packet.
    pub packet: &'a [u64],
    /// Written into the client outbox last: its lowest bit hands the port over when it differs from the server's.
    pub client_word: u64,
}

#[cfg(any(test, feature = "testing"))]
impl Scribble<'_> {
    /// Writes the message into a region laid out by `layout`, through `set(word index, value)`.
    pub fn write(&self, layout: &Layout, mut set: impl FnMut(usize, u64)) {
        set(layout.header(self.port), self.opcode);
        set(layout.header(self.port) + 1, self.mask);
        for lane in 0..layout.lane_size() {
            for (word, &value) in self.packet.iter().enumerate() {
                set(layout.packet_word(self.port, word, lane), value);
            }
        }
        set(layout.client_outbox(self.port), self.client_word);
    }
}
