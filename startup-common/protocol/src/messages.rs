//! The opcode list and every message of the startup's own operations, as typed values: each request and reply (or
//! a stream's head words) encodes itself into the packet words it travels in and decodes itself from them, here and
//! nowhere else. The device's wrappers (`startup_common::libc::io`, `startup_common::libc::files`) encode requests and decode
//! replies; the loader's handlers (`loader/src/server/`) decode requests and encode replies. `docs/rpc.md` has the
//! table of messages.
//!
//! Values are plain words copied into packets (`[u64; N]`): encoding costs the stores of the words themselves. A
//! decoder of a field whose numbers are not all meaningful (a mode, an origin) returns `None` for one it does not
//! know: the device's to choose, the host's handler answers it with `EINVAL`.

use core::ffi::c_int;

use crate::abi::ThreadIds;
use crate::files::{FileKind, FileStatus, OpenFlags, ReadMode, RemoveKind, StatTarget, Whence};

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
        /// The message of the run's first panic, without the location and thread that its line on stderr adds: a
        /// stream with a [`WriteHead`](super::WriteHead) whose stream is 0 and the message's bytes, in chunks as for
        /// `WRITE`; replied with a [`WriteAck`](super::WriteAck). The host keeps it for the test runner, which
        /// compares it with a `should_panic` test's expected text, and prints nothing.
        PANIC_MESSAGE = 16,
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

/// The head word of a [`opcode::FILE_OPEN`] stream, before the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenHead {
    pub flags: OpenFlags,
}

impl OpenHead {
    pub const fn encode(&self) -> [u64; 1] {
        [self.flags.0]
    }

    /// The flags as sent; the host refuses unknown bits when it opens.
    pub const fn decode(words: [u64; 1]) -> Self {
        Self { flags: OpenFlags(words[0]) }
    }
}

/// The reply of every file operation but a read and a write: one packet, word 0 the value (a handle, a position, 0
/// for none), word 1 the error number, 0 on success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileReply(pub Result<u64, c_int>);

impl FileReply {
    pub const fn encode(&self) -> [u64; 2] {
        match self.0 {
            Ok(value) => [value, 0],
            Err(error) => [0, error as u64],
        }
    }

    pub const fn decode(words: [u64; 2]) -> Self {
        Self(match words[1] {
            0 => Ok(words[0]),
            error => Err(error as c_int),
        })
    }
}

/// [`opcode::FILE_CLOSE`]: one packet, word 0 = the handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloseRequest {
    pub handle: u64,
}

impl CloseRequest {
    pub const fn encode(&self) -> [u64; 1] {
        [self.handle]
    }

    pub const fn decode(words: [u64; 1]) -> Self {
        Self { handle: words[0] }
    }
}

/// [`opcode::FILE_FLUSH`]: one packet, word 0 = the handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushRequest {
    pub handle: u64,
}

impl FlushRequest {
    pub const fn encode(&self) -> [u64; 1] {
        [self.handle]
    }

    pub const fn decode(words: [u64; 1]) -> Self {
        Self { handle: words[0] }
    }
}

/// [`opcode::FILE_READ`]: one packet, words 0–2 = the handle (`files::STDIN_HANDLE` for stdin), the most bytes, the
/// [`ReadMode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    pub handle: u64,
    pub max: u64,
    pub mode: ReadMode,
}

impl ReadRequest {
    pub const fn encode(&self) -> [u64; 3] {
        [self.handle, self.max, self.mode as u64]
    }

    /// `None` for a mode that does not exist.
    pub const fn decode(words: [u64; 3]) -> Option<Self> {
        match ReadMode::from_number(words[2]) {
            Some(mode) => Some(Self { handle: words[0], max: words[1], mode }),
            None => None,
        }
    }
}

/// The head word of the stream that answers a [`ReadRequest`], before the bytes (none: the end of the file): the
/// error number, 0 on success, `EAGAIN` when there is nothing yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadReplyHead {
    pub error: u64,
}

impl ReadReplyHead {
    pub const fn encode(&self) -> [u64; 1] {
        [self.error]
    }

    pub const fn decode(words: [u64; 1]) -> Self {
        Self { error: words[0] }
    }
}

/// The 3 head words of a [`opcode::FILE_WRITE`] stream: the handle, then a [`WriteHead`] whose stream is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileWriteHead {
    pub handle: u64,
    pub write: WriteHead,
}

impl FileWriteHead {
    /// Words this head takes in the first packet.
    pub const WORDS: usize = 1 + WriteHead::WORDS;

    #[inline(always)]
    pub const fn encode(&self) -> [u64; 3] {
        let [word0, word1] = self.write.encode();
        [self.handle, word0, word1]
    }

    pub const fn decode(words: [u64; 3]) -> Self {
        Self { handle: words[0], write: WriteHead::decode([words[1], words[2]]) }
    }
}

/// The reply to a [`opcode::FILE_WRITE`] chunk: one packet, word 0 = the error number, 0 on success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileWriteReply {
    pub error: u64,
}

impl FileWriteReply {
    pub const fn encode(&self) -> [u64; 1] {
        [self.error]
    }

    pub const fn decode(words: [u64; 1]) -> Self {
        Self { error: words[0] }
    }
}

/// [`opcode::FILE_SEEK`]: one packet, words 0–2 = the handle, the offset (`i64`), the [`Whence`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeekRequest {
    pub handle: u64,
    pub offset: i64,
    pub whence: Whence,
}

impl SeekRequest {
    pub const fn encode(&self) -> [u64; 3] {
        [self.handle, self.offset as u64, self.whence as u64]
    }

    /// `None` for an origin that does not exist.
    pub const fn decode(words: [u64; 3]) -> Option<Self> {
        match Whence::from_number(words[2]) {
            Some(whence) => Some(Self { handle: words[0], offset: words[1] as i64, whence }),
            None => None,
        }
    }
}

/// The head word of a [`opcode::FILE_REMOVE`] stream, before the path: the [`RemoveKind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoveHead {
    pub kind: RemoveKind,
}

impl RemoveHead {
    pub const fn encode(&self) -> [u64; 1] {
        [self.kind as u64]
    }

    /// `None` for a kind that does not exist.
    pub const fn decode(words: [u64; 1]) -> Option<Self> {
        match RemoveKind::from_number(words[0]) {
            Some(kind) => Some(Self { kind }),
            None => None,
        }
    }
}

/// The head word of the first of [`opcode::FILE_RENAME`]'s two streams (the old path; the new one has no head): 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenameHead;

impl RenameHead {
    pub const fn encode(&self) -> [u64; 1] {
        [0]
    }
}

/// The head word of a [`opcode::MAKE_DIRECTORY`] stream, before the path: 0 (the host gives the directory the
/// permissions its own process would).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MakeDirectoryHead;

impl MakeDirectoryHead {
    pub const fn encode(&self) -> [u64; 1] {
        [0]
    }
}

/// The head word of the stream that answers [`opcode::CURRENT_DIRECTORY`], before the path's bytes: the error number,
/// 0 on success (`EACCES` where the loader gives no file system).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CurrentDirectoryReplyHead {
    pub error: u64,
}

impl CurrentDirectoryReplyHead {
    pub const fn encode(&self) -> [u64; 1] {
        [self.error]
    }

    pub const fn decode(words: [u64; 1]) -> Self {
        Self { error: words[0] }
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

/// The 2 head words of a [`opcode::FILE_STAT`] stream, before the path: word 0 = what to tell of (0 the path,
/// following symbolic links; 1 the path itself; 2 the open file whose handle is word 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatHead {
    pub target: StatTarget,
}

impl StatHead {
    pub const fn encode(&self) -> [u64; 2] {
        match self.target {
            StatTarget::Path => [0, 0],
            StatTarget::Link => [1, 0],
            StatTarget::Open(handle) => [2, handle],
        }
    }

    /// `None` for a target that does not exist.
    pub const fn decode(words: [u64; 2]) -> Option<Self> {
        let target = match words[0] {
            0 => StatTarget::Path,
            1 => StatTarget::Link,
            2 => StatTarget::Open(words[1]),
            _ => return None,
        };
        Some(Self { target })
    }
}

/// The reply to [`opcode::FILE_STAT`], one packet: word 0 = the error number (0: the status follows), word 1 = the
/// kind | permissions << 8, word 2 = the size, words 3 to 5 = the seconds of the last modification, access and status
/// change, word 6 = their nanoseconds of modification | of access << 32, word 7 = of the status change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatReply(pub Result<FileStatus, c_int>);

impl StatReply {
    pub const fn encode(&self) -> [u64; 8] {
        match self.0 {
            Err(error) => [error as u64, 0, 0, 0, 0, 0, 0, 0],
            Ok(status) => [
                0,
                status.kind as u64 | (status.permissions as u64) << 8,
                status.size,
                status.modified.0 as u64,
                status.accessed.0 as u64,
                status.changed.0 as u64,
                status.modified.1 as u64 | (status.accessed.1 as u64) << 32,
                status.changed.1 as u64,
            ],
        }
    }

    pub const fn decode(words: [u64; 8]) -> Self {
        if words[0] != 0 {
            return Self(Err(words[0] as c_int));
        }
        Self(Ok(FileStatus {
            kind: FileKind::from_number(words[1] as u8),
            permissions: (words[1] >> 8) as u32 & 0o7777,
            size: words[2],
            modified: (words[3] as i64, words[6] as u32),
            accessed: (words[4] as i64, (words[6] >> 32) as u32),
            changed: (words[5] as i64, words[7] as u32),
        }))
    }
}

#[cfg(test)]
mod tests;
