//! The opcode list and every message of the startup's own operations, as typed values: each request and reply (or
//! a stream's head words) encodes itself into the packet words it travels in and decodes itself from them, here and
//! nowhere else. The device's wrappers (`startup_common::libc::io`, `startup_common::libc::files`) encode requests and decode
//! replies; the loader's handlers (`loader/src/server/`) decode requests and encode replies. `docs/rpc.md` has the
//! table of messages.
//!
//! Values are plain words copied into packets (`[u64; N]`): encoding costs the stores of the words themselves. A
//! decoder of a field whose numbers are not all meaningful (a mode, an origin) returns `None` for one it does not
//! know: the device's to choose, the host's handler answers it with `EINVAL`.

use crate::abi::ThreadIds;

/// Declares the opcodes, with the list of them and their names.
macro_rules! opcodes {
    ($($(#[$meta:meta])* $name:ident = $number:literal,)*) => {
        $($(#[$meta])* pub const $name: u32 = $number;)*

        /// Every one of the startup's operations, in number order.
        pub const ALL: &[u32] = &[$($name),*];

        /// The name of one of the startup's operations, for messages about it.
        pub const fn name(opcode: u32) -> Option<&'static str> {
            Some(match opcode {
                $($name => stringify!($name),)*
                _ => return None,
            })
        }
    };
}

/// The numbered operations: the one list. The host keeps a handler per opcode; new operations take new numbers and
/// change nothing in the protocol. Opcodes below [`FIRST_USER`](opcode::FIRST_USER) are the startup's own; the rest
/// are for host calls of one's own (`startup_common::rpc::HostCall`). Each message's request and reply are the
/// types of this module that name the opcode.
pub mod opcode {
    opcodes! {
        /// Write bytes to stdout or stderr: a stream with a [`WriteHead`](super::WriteHead); replied with a
        /// [`WriteAck`](super::WriteAck).
        WRITE = 1,
        // 2 and 3 are unassigned: a program reports its end in the loader's control block, not by a message
        // (`abi::ProgramEnd`).
        /// Open a file: a stream with an [`OpenHead`](super::OpenHead) and the path; replied with a
        /// [`FileReply`](super::FileReply) (the handle), as every file operation but a read and a write.
        FILE_OPEN = 4,
        /// Close a file: a [`CloseRequest`](super::CloseRequest).
        FILE_CLOSE = 5,
        /// Read: a [`ReadRequest`](super::ReadRequest); replied with a stream with a
        /// [`ReadReplyHead`](super::ReadReplyHead) and the bytes.
        FILE_READ = 6,
        /// Write to a file: a stream with a [`FileWriteHead`](super::FileWriteHead) and the bytes; chunks marked
        /// `MORE` are held by the host and written with the last, as for `WRITE`. Replied with a
        /// [`FileWriteReply`](super::FileWriteReply).
        FILE_WRITE = 7,
        /// Seek: a [`SeekRequest`](super::SeekRequest); the reply's value is the new position.
        FILE_SEEK = 8,
        /// Write out what the host holds for a file: a [`FlushRequest`](super::FlushRequest).
        FILE_FLUSH = 9,
        /// Remove a file (or an empty directory): a stream with a [`RemoveHead`](super::RemoveHead) and the path.
        FILE_REMOVE = 10,
        /// Rename: two streams, the old path (with a [`RenameHead`](super::RenameHead)) and the new.
        FILE_RENAME = 11,
        /// Tell what a file is (`stat`, `lstat`, `fstat`): a stream with a [`StatHead`](super::StatHead) and the
        /// path (empty for an open file); replied with a [`StatReply`](super::StatReply).
        FILE_STAT = 12,
        /// Create a directory: a stream with a [`MakeDirectoryHead`](super::MakeDirectoryHead) and the path.
        MAKE_DIRECTORY = 13,
        /// The host's real-time clock: one empty packet; replied with a [`RealtimeReply`](super::RealtimeReply).
        CLOCK_REALTIME = 14,
        /// The loader's working directory, which relative paths start from: one empty packet; replied with a stream
        /// with a [`CurrentDirectoryReplyHead`](super::CurrentDirectoryReplyHead) and the path.
        CURRENT_DIRECTORY = 15,
        /// A panic's message, after its [`PANIC_LOCATION`]: a stream with a [`WriteHead`](super::WriteHead) whose
        /// stream is 0 and the message's bytes, in chunks as for `WRITE`; replied with a
        /// [`WriteAck`](super::WriteAck). The host goes on with the panic's line on stderr and ends it with the
        /// thread's coordinates from the head, and keeps the run's first message for the test runner, which compares
        /// it with a `should_panic` test's expected text.
        PANIC_MESSAGE = 16,
        /// Where a panic happened: a stream with a [`PanicLocationHead`](super::PanicLocationHead) and the source
        /// file's path; replied with a [`WriteAck`](super::WriteAck). The host starts the thread's line on stderr
        /// with `panicked at FILE:LINE:COLUMN: `; the [`PANIC_MESSAGE`] that follows goes on with it. The host, not
        /// the device, formats the numbers: it keeps that code out of every image that can panic.
        PANIC_LOCATION = 17,
    }

    /// The first opcode of the users' range: below it, the startup's own operations (reserved, whether defined yet
    /// or not); from it on, host calls that a program and the host program embedding the loader define.
    pub const FIRST_USER: u32 = 0x1_0000;

    /// Whether `opcode` is reserved for the startup's own operations.
    pub const fn is_reserved(opcode: u32) -> bool {
        opcode < FIRST_USER
    }
}

/// The two output streams, numbered as a [`WriteHead`] carries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum Stream {
    Stdout = 1,
    Stderr = 2,
}

impl Stream {
    /// The stream with this number (as in [`WriteHead::stream`]).
    pub const fn from_number(number: u32) -> Option<Self> {
        match number {
            1 => Some(Self::Stdout),
            2 => Some(Self::Stderr),
            _ => None,
        }
    }
}

/// Where output goes: one of the program's two streams, or a file the host opened (its handle). The device's output
/// path sends to one; the host holds each writer's unfinished message per destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Destination {
    Stream(Stream),
    File(u64),
}

/// The 2 head words of a [`opcode::WRITE`] stream: which stream, whether more chunks of the same message follow, and
/// the key of the writing thread, under which the host reassembles chunks so each message is written whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteHead {
    /// [`Stream`] as a number: 1 stdout, 2 stderr (0 in a [`FileWriteHead`]).
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
    #[inline(always)]
    pub const fn encode(&self) -> [u64; 2] {
        [self.stream as u64 | (self.flags as u64) << 8 | (self.thread & 0xffff_ffff_ffff) << 16, self.group]
    }

    #[inline(always)]
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

/// The reply to a [`opcode::WRITE`] chunk: one packet, word 0 = 0. It says only that the host holds the chunk, so the
/// thread's next chunk comes after it; the device does not read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteAck;

impl WriteAck {
    pub const fn encode(&self) -> [u64; 1] {
        [0]
    }
}

/// The 3 head words of a [`opcode::PANIC_LOCATION`] stream: a [`WriteHead`] whose stream is 0 (the thread's), then
/// the line and the column, 1-based; line 0 says the location is unknown and the path is not one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PanicLocationHead {
    pub write: WriteHead,
    pub line: u32,
    pub column: u32,
}

impl PanicLocationHead {
    /// Words this head takes in the first packet.
    pub const WORDS: usize = WriteHead::WORDS + 1;

    #[inline(always)]
    pub const fn encode(&self) -> [u64; 3] {
        let [word0, word1] = self.write.encode();
        [word0, word1, self.line as u64 | (self.column as u64) << 32]
    }

    pub const fn decode(words: [u64; 3]) -> Self {
        let write = WriteHead::decode([words[0], words[1]]);
        Self { write, line: words[2] as u32, column: (words[2] >> 32) as u32 }
    }
}

/// The reply to [`opcode::CLOCK_REALTIME`], one packet: word 0 = the host's real time, nanoseconds since the Unix
/// epoch (negative before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RealtimeReply {
    pub nanoseconds: i64,
}

impl RealtimeReply {
    pub const fn encode(&self) -> [u64; 1] {
        [self.nanoseconds as u64]
    }

    pub const fn decode(words: [u64; 1]) -> Self {
        Self { nanoseconds: words[0] as i64 }
    }
}

mod file_operations;
pub use file_operations::*;

#[cfg(test)]
mod tests;
