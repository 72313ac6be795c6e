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
#[cfg(any(test, feature = "host"))]
mod host;
#[cfg(any(test, feature = "host"))]
mod host_calls;
mod lock;
mod port;
mod server;
mod setup;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

pub use call::{HostCall, Pod, ReservedOpcode, UserOpcode, Zeroable};
pub use client::Client;
#[cfg(any(test, feature = "host"))]
pub use host::{HostBlockMemory, HostRegion, Received, StreamTooLong};
#[cfg(any(test, feature = "host"))]
pub use host_calls::{AlreadyRegistered, HostCallError, HostCalls};
pub use port::Port;
pub use server::{Server, ServerPort, StreamPiece};

use crate::gpu::ThreadIds;
use crate::sync::AtomicU64;

/// The most ports a region may hold (the client's lock bits are sized for this many).
pub const MAX_PORTS: u32 = 4096;

/// The port count the loader uses unless told otherwise: enough for every warp of a large GPU to find a free port
/// quickly, small enough that the server's scan over all mailboxes stays well under a microsecond.
pub const DEFAULT_PORT_COUNT: u32 = 1024;

/// The most lanes in a group (AMD's wavefront); lane masks are `u64`.
pub const MAX_LANES: u32 = 64;

/// 64-bit words in one lane's packet buffer: a packet moves 64 bytes per lane.
pub const PACKET_WORDS: usize = 8;

/// Bytes in one lane's packet.
pub const PACKET_BYTES: usize = PACKET_WORDS * 8;

/// The numbered operations. The host keeps a handler per opcode; new operations take new numbers and change nothing
/// in the protocol. Opcodes below [`opcode::FIRST_USER`] are the startup's own; the rest are for host calls of one's
/// own ([`UserOpcode`], [`HostCall`]). `docs/rpc.md` has the table with each message's packets.
pub mod opcode {
    /// Write bytes to stdout or stderr: a stream with a 2-word [`WriteHead`](super::WriteHead); replied with one
    /// packet (word 0: bytes accepted).
    pub const WRITE: u32 = 1;
    // 2 and 3 are unassigned: a program reports its end in the loader's control block, not by a message
    // (`abi::ProgramEnd`).
    /// Open a file ([`crate::files`]): a stream with 1 head word (`files::OpenFlags`) and the path; replied with one
    /// packet (word 0: the handle, word 1: the error number, 0 on success), as every file operation but a read.
    pub const FILE_OPEN: u32 = 4;
    /// Close a file: one packet, word 0 = the handle.
    pub const FILE_CLOSE: u32 = 5;
    /// Read: one packet, words 0–2 = handle (`files::STDIN_HANDLE` for stdin), most bytes, `files::ReadMode`;
    /// replied with a stream with 1 head word (the error number; `EAGAIN` when there is nothing yet) and the bytes.
    pub const FILE_READ: u32 = 6;
    /// Write to a file: a stream with 3 head words (the handle, then a [`WriteHead`](super::WriteHead) whose stream is
    /// 0) and the bytes; chunks marked `MORE` are held by the host and written with the last, as for `WRITE`.
    pub const FILE_WRITE: u32 = 7;
    /// Seek: one packet, words 0–2 = handle, offset (`i64`), `files::Whence`; the reply's word 0 is the new position.
    pub const FILE_SEEK: u32 = 8;
    /// Write out what the host holds for a file: one packet, word 0 = the handle.
    pub const FILE_FLUSH: u32 = 9;
    /// Remove a file (or an empty directory): a stream with 1 head word (`files::RemoveKind`) and the path.
    pub const FILE_REMOVE: u32 = 10;
    /// Rename: two streams, the old path (with 1 head word, 0) and the new.
    pub const FILE_RENAME: u32 = 11;
    /// The first opcode of the users' range: below it, the startup's own operations (reserved, whether defined yet
    /// or not); from it on, host calls that a program and the host program embedding the loader define.
    pub const FIRST_USER: u32 = 0x1_0000;

    /// Whether `opcode` is reserved for the startup's own operations.
    pub const fn is_reserved(opcode: u32) -> bool {
        opcode < FIRST_USER
    }

    /// The name of one of the startup's operations, for messages about it.
    pub const fn name(opcode: u32) -> Option<&'static str> {
        Some(match opcode {
            WRITE => "WRITE",
            FILE_OPEN => "FILE_OPEN",
            FILE_CLOSE => "FILE_CLOSE",
            FILE_READ => "FILE_READ",
            FILE_WRITE => "FILE_WRITE",
            FILE_SEEK => "FILE_SEEK",
            FILE_FLUSH => "FILE_FLUSH",
            FILE_REMOVE => "FILE_REMOVE",
            FILE_RENAME => "FILE_RENAME",
            _ => return None,
        })
    }
}

/// The 2 head words of a [`opcode::WRITE`] stream: which stream, whether more chunks of the same message follow, and
/// the key of the writing thread, under which the host reassembles chunks so each message is written whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteHead {
    /// [`crate::io::Stream`] as a number: 1 stdout, 2 stderr.
    pub stream: u8,
    /// [`WriteHead::MORE`] and [`WriteHead::NEWLINE`].
    pub flags: u8,
    /// Identifies the writing thread: with [`WriteHead::group`], unique among the threads running at once.
    pub thread: u64,
    /// The writing thread's block, packed (or, on the host, a per-OS-thread number).
    pub group: u64,
}

impl WriteHead {
    /// Words this head takes in the first packet.
    pub const WORDS: usize = 2;
    /// More chunks of this message follow: the host holds the bytes until the last chunk.
    pub const MORE: u8 = 1;
    /// The host appends `'\n'` after the bytes (and after any chunks held before them).
    pub const NEWLINE: u8 = 2;

    /// The head as it travels: word 0 = stream | flags << 8 | (thread & 2^48-1) << 16, word 1 = group.
    pub const fn encode(&self) -> [u64; 2] {
        [self.stream as u64 | (self.flags as u64) << 8 | (self.thread & 0xffff_ffff_ffff) << 16, self.group]
    }

    pub const fn decode(words: [u64; 2]) -> Self {
        Self { stream: words[0] as u8, flags: (words[0] >> 8) as u8, thread: words[0] >> 16, group: words[1] }
    }

    /// The head of a chunk that the thread at `ids` writes: `thread` packs x, y, z in 16 bits each, `group` the block
    /// as x | y << 32 | z << 48 (y and z in 16 bits).
    pub const fn for_thread(stream: u8, flags: u8, ids: ThreadIds) -> Self {
        let [tx, ty, tz] = ids.thread;
        let [bx, by, bz] = ids.block;
        let thread = (tx & 0xffff) as u64 | ((ty & 0xffff) as u64) << 16 | ((tz & 0xffff) as u64) << 32;
        let group = bx as u64 | ((by & 0xffff) as u64) << 32 | ((bz & 0xffff) as u64) << 48;
        Self { stream, flags, thread, group }
    }

    /// The writing thread's coordinates as [`WriteHead::for_thread`] packed them (the bits it kept), for reports.
    pub fn writer(&self) -> ThreadIds {
        let field = |word: u64, shift: u32| ((word >> shift) & 0xffff) as u32;
        ThreadIds {
            thread: [field(self.thread, 0), field(self.thread, 16), field(self.thread, 32)],
            block: [self.group as u32, field(self.group, 32), field(self.group, 48)],
        }
    }
}

/// Where everything lives in the region, for `port_count` ports of `lane_size` lanes. All offsets are in 64-bit
/// words from the region's start; the region must be zeroed and 64-byte aligned (pinned allocations are page
/// aligned).
///
/// ```text
/// word 0                       client outbox of port 0, 1, ..., P-1   (device writes, host reads)
/// word S = round_up(P, 8)      server outbox of port 0, 1, ..., P-1   (host writes, device reads)
/// word 2S + p * (8 + 8L)       port p: header line [opcode, lane mask, 6 reserved words]
///      ... + 8 + w * L + l     port p: packet word w (0..8) of lane l (lanes interleaved, so a warp's
///                              stores of one word are one contiguous 8L-byte block)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    port_count: u32,
    lane_size: u32,
}

impl Layout {
    /// Required alignment of the region, in bytes.
    pub const ALIGN: usize = 64;

    /// The layout for `port_count` ports (1 to [`MAX_PORTS`]) of `lane_size` lanes (1 to [`MAX_LANES`]).
    ///
    /// # Panics
    /// When either count is out of range; [`Layout::checked`] returns `None` instead.
    pub const fn new(port_count: u32, lane_size: u32) -> Self {
        assert!(port_count >= 1 && port_count <= MAX_PORTS, "port count out of range");
        assert!(lane_size >= 1 && lane_size <= MAX_LANES, "lane size out of range");
        Self { port_count, lane_size }
    }

    /// The layout for `port_count` ports of `lane_size` lanes, or `None` when either count is out of range.
    pub const fn checked(port_count: u32, lane_size: u32) -> Option<Self> {
        if port_count >= 1 && port_count <= MAX_PORTS && lane_size >= 1 && lane_size <= MAX_LANES {
            Some(Self { port_count, lane_size })
        } else {
            None
        }
    }

    pub const fn port_count(&self) -> u32 {
        self.port_count
    }

    pub const fn lane_size(&self) -> u32 {
        self.lane_size
    }

    const fn mailbox_words(&self) -> usize {
        (self.port_count as usize).next_multiple_of(8)
    }

    const fn port_words(&self) -> usize {
        8 + PACKET_WORDS * self.lane_size as usize
    }

    /// Size of the region in 64-bit words.
    pub const fn words(&self) -> usize {
        2 * self.mailbox_words() + self.port_count as usize * self.port_words()
    }

    /// Size of the region in bytes: what the loader allocates (host-pinned, device-mapped, zeroed).
    pub const fn size(&self) -> usize {
        self.words() * 8
    }

    /// Word index of port `port`'s client outbox.
    pub const fn client_outbox(&self, port: u32) -> usize {
        port as usize
    }

    /// Word index of port `port`'s server outbox.
    pub const fn server_outbox(&self, port: u32) -> usize {
        self.mailbox_words() + port as usize
    }

    /// Word index of port `port`'s header line: word 0 opcode, word 1 lane mask.
    pub const fn header(&self, port: u32) -> usize {
        2 * self.mailbox_words() + port as usize * self.port_words()
    }

    /// Word index of packet word `word` of lane `lane` in port `port`.
    pub const fn packet_word(&self, port: u32, word: usize, lane: u32) -> usize {
        self.header(port) + 8 + word * self.lane_size as usize + lane as usize
    }
}

/// The region size in bytes for `port_count` ports of `lane_size` lanes; see [`Layout`].
pub const fn region_size(port_count: u32, lane_size: u32) -> usize {
    Layout::new(port_count, lane_size).size()
}

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
        assert!(index < PACKET_WORDS);
        self.region
            .word(self.first + index * self.region.layout.lane_size as usize)
            .load(core::sync::atomic::Ordering::Relaxed)
    }

    /// Sets word `index` (below [`PACKET_WORDS`]).
    #[inline(always)]
    pub fn set(&self, index: usize, value: u64) {
        assert!(index < PACKET_WORDS);
        self.region
            .word(self.first + index * self.region.layout.lane_size as usize)
            .store(value, core::sync::atomic::Ordering::Relaxed)
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

/// The one reading of a mailbox word: its lowest bit. A side only ever stores 0 or 1, but the region is device-writable
/// memory that a buggy program can scribble over; reading every other value the same way everywhere (the server's
/// scan, its open, its waits, and the client's) keeps a corrupt word from looking handed over to one reader and not to
/// another.
#[inline(always)]
pub const fn mailbox_bit(word: u64) -> u64 {
    word & 1
}

/// Up to 8 bytes of `bytes` from `offset`, little-endian, zero-padded; 0 past the end.
#[inline(always)]
pub(crate) fn gather(bytes: &[u8], offset: usize) -> u64 {
    match bytes.get(offset..) {
        Some(rest) if rest.len() >= 8 => {
            u64::from_le_bytes([rest[0], rest[1], rest[2], rest[3], rest[4], rest[5], rest[6], rest[7]])
        }
        Some(rest) => {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(word)
        }
        None => 0,
    }
}

/// Stores the bytes of `word` at `offset` of `out`, as many as fit below `limit` and `out.len()`.
#[inline(always)]
pub(crate) fn scatter(out: &mut [u8], offset: usize, limit: usize, word: u64) {
    let end = limit.min(out.len());
    if offset < end {
        let n = (end - offset).min(8);
        out[offset..offset + n].copy_from_slice(&word.to_le_bytes()[..n]);
    }
}

/// Bytes the first packet of a stream carries for each lane, after the length word and `head_words` head words.
pub const fn first_packet_bytes(head_words: usize) -> usize {
    (PACKET_WORDS - 1 - head_words) * 8
}

/// Packets a stream of `len` bytes per lane takes with `head_words` head words: at least 1.
pub const fn stream_packets(len: u64, head_words: usize) -> u64 {
    let first = first_packet_bytes(head_words) as u64;
    if len <= first { 1 } else { 1 + (len - first).div_ceil(PACKET_BYTES as u64) }
}

/// The lanes set in `mask`, lowest first.
pub fn lanes(mut mask: u64) -> impl Iterator<Item = u32> {
    core::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let lane = mask.trailing_zeros();
        mask &= mask - 1;
        Some(lane)
    })
}
