//! The messages of the file operations (`FILE_OPEN` to `MAKE_DIRECTORY`, and `CURRENT_DIRECTORY`), as the rest of
//! [`super`]'s: each encodes itself into the words it travels in and decodes itself from them.

use core::ffi::c_int;

use super::WriteHead;
#[cfg(doc)]
use super::opcode;
use crate::files::{FileKind, FileStatus, OpenFlags, ReadMode, RemoveKind, StatTarget, Whence};

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
