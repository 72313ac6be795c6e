//! Files and stdin over RPC: the operations' messages (`docs/rpc.md` has their packets) and the device's side of
//! each, for C's `FILE *` streams ([`crate::stdio`]) and Rust's `gpu_startup::fs`.
//!
//! The host keeps a table of the files a run opened and gives each a *handle*, a number it checks on every use: a
//! handle that was never given, or was closed, is an error ([`errno::EBADF`]) returned to the device, never a host
//! failure. Paths are the loader's: the host opens them as its own process would, a relative path from the loader's
//! working directory. Every operation returns an error number ([`crate::errno`]) on failure.
//!
//! Every function here is called by a lane group together, each lane with its own arguments (its own handle, path,
//! buffer), as any RPC call; the host serves the lanes of one message in lane order.

use core::ffi::c_int;

use crate::errno;
use crate::gpu::Gpu;
use crate::io::{self, Destination};
use crate::rpc::{Client, opcode};

/// The handle that names the loader's stdin: it can only be read.
pub const STDIN_HANDLE: u64 = 0;

/// The first handle the host gives a file; the next file gets the next number, and no number is given twice in a
/// run.
pub const FIRST_FILE_HANDLE: u64 = 3;

/// The most files a run may have open at once (C's `FOPEN_MAX`); one more is [`errno::EMFILE`].
pub const MAX_OPEN_FILES: usize = 256;

/// The most bytes one lane reads in one message: the host holds what it sends. A longer read returns this many
/// (a short read, as `read` may return); C's `fread` and Rust's `read_exact` go on with the rest.
pub const MAX_READ: usize = 64 << 10;

/// The longest path, in bytes (Linux's `PATH_MAX` with its NUL); a longer one is [`errno::ENAMETOOLONG`].
pub const MAX_PATH: usize = 4096;

/// How a file is opened: the head word of [`opcode::FILE_OPEN`]. The meanings are those of Rust's `OpenOptions`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFlags(pub u64);

impl OpenFlags {
    pub const READ: u64 = 1;
    pub const WRITE: u64 = 2;
    /// Every write goes to the end of the file.
    pub const APPEND: u64 = 4;
    /// An existing file is emptied.
    pub const TRUNCATE: u64 = 8;
    /// A missing file is created.
    pub const CREATE: u64 = 16;
    /// The file must not exist: it is created, or the open fails with [`errno::EEXIST`].
    pub const CREATE_NEW: u64 = 32;
    /// Every flag there is; a head word with another bit set is [`errno::EINVAL`].
    pub const ALL: u64 = 63;

    pub const fn contains(self, flags: u64) -> bool {
        self.0 & flags == flags
    }

    /// The flags of C's `fopen` mode (`"r"`, `"w"`, `"a"`, each with `+`, and `b` and C11's `x` anywhere after the
    /// first letter), or `None` for a mode C does not define.
    pub fn from_c_mode(mode: &[u8]) -> Option<Self> {
        let (&first, rest) = mode.split_first()?;
        let mut plus = false;
        let mut exclusive = false;
        for &letter in rest {
            match letter {
                b'+' if !plus => plus = true,
                b'x' if !exclusive => exclusive = true,
                b'b' => {}
                _ => return None,
            }
        }
        let read_too = if plus { Self::READ } else { 0 };
        let flags = match first {
            b'r' if !exclusive => Self::READ | if plus { Self::WRITE } else { 0 },
            b'w' => Self::WRITE | read_too | if exclusive { Self::CREATE_NEW } else { Self::CREATE | Self::TRUNCATE },
            b'a' if !exclusive => Self::APPEND | Self::WRITE | Self::CREATE | read_too,
            _ => return None,
        };
        Some(Self(flags))
    }
}

/// Where a seek's offset counts from: word 2 of [`opcode::FILE_SEEK`], C's `SEEK_SET`, `SEEK_CUR`, `SEEK_END`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Whence {
    Start = 0,
    Current = 1,
    End = 2,
}

impl Whence {
    pub const fn from_number(number: u64) -> Option<Self> {
        match number {
            0 => Some(Self::Start),
            1 => Some(Self::Current),
            2 => Some(Self::End),
            _ => None,
        }
    }
}

/// How much a read takes: word 2 of [`opcode::FILE_READ`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum ReadMode {
    /// Whatever is there, up to the length asked for (at least one byte unless at the end).
    Bytes = 0,
    /// One line: up to and including its `\n`, or up to the length asked for, or up to the end of the file. Many
    /// threads reading lines of one stream each get whole lines.
    Line = 1,
}

impl ReadMode {
    pub const fn from_number(number: u64) -> Option<Self> {
        match number {
            0 => Some(Self::Bytes),
            1 => Some(Self::Line),
            _ => None,
        }
    }
}

/// What [`opcode::FILE_REMOVE`] removes: its head word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum RemoveKind {
    /// Only a file (Rust's `remove_file`): a directory is [`errno::EISDIR`].
    File = 0,
    /// A file or an empty directory (C's `remove`).
    FileOrEmptyDirectory = 1,
}

impl RemoveKind {
    pub const fn from_number(number: u64) -> Option<Self> {
        match number {
            0 => Some(Self::File),
            1 => Some(Self::FileOrEmptyDirectory),
            _ => None,
        }
    }
}

/// The reply of every file operation but a read: one packet, word 0 the value (a handle, a position), word 1 the
/// error number, 0 on success.
fn reply(words: [u64; 2]) -> Result<u64, c_int> {
    match words[1] {
        0 => Ok(words[0]),
        error => Err(error as c_int),
    }
}

/// Waits for the reply packet of the message on `port`, closes it, and returns the reply.
fn reply_on<G: Gpu>(mut port: crate::rpc::Port<'_, G>) -> Result<u64, c_int> {
    let mut answer = [0; 2];
    port.recv(|packet| answer = [packet.get(0), packet.get(1)]);
    port.close();
    reply(answer)
}

/// Sends one packet of `words` with `opcode` and returns the reply.
fn request<G: Gpu>(client: &Client<G>, opcode: u32, words: [u64; 3]) -> Result<u64, c_int> {
    if !client.is_ready() {
        return Err(errno::ENOSYS);
    }
    let mut port = client.open(opcode);
    port.send(|packet| words.iter().enumerate().for_each(|(index, &word)| packet.set(index, word)));
    reply_on(port)
}

/// Sends `paths` as streams with `opcode`, `head` before the first, and returns the reply. The paths are checked
/// here first: the host would refuse a longer one too, but only after receiving it.
fn request_with_paths<G: Gpu>(client: &Client<G>, opcode: u32, head: u64, paths: &[&[u8]]) -> Result<u64, c_int> {
    if !client.is_ready() {
        return Err(errno::ENOSYS);
    }
    if paths.iter().any(|path| path.len() >= MAX_PATH) {
        return Err(errno::ENAMETOOLONG);
    }
    let mut port = client.open(opcode);
    for (index, path) in paths.iter().enumerate() {
        if index == 0 {
            port.send_n_with([head], path);
        } else {
            port.send_n(path);
        }
    }
    reply_on(port)
}

/// Opens the file at `path` (without a NUL) as `flags` say; its handle.
pub fn open<G: Gpu>(client: &Client<G>, path: &[u8], flags: OpenFlags) -> Result<u64, c_int> {
    request_with_paths(client, opcode::FILE_OPEN, flags.0, &[path])
}

/// Closes the file `handle` names, after writing out what the host holds for it; its write error, if any, comes
/// back here (the handle is closed either way).
pub fn close<G: Gpu>(client: &Client<G>, handle: u64) -> Result<(), c_int> {
    request(client, opcode::FILE_CLOSE, [handle, 0, 0]).map(drop)
}

/// Reads from `handle` (a file, or [`STDIN_HANDLE`]) into `buffer`, at most [`MAX_READ`] bytes, as `mode` says;
/// the number of bytes, 0 at the end of the file (or for an empty buffer). Waits while the host has nothing yet
/// (stdin, or a terminal, with no input so far): the host never blocks, so it answers [`errno::EAGAIN`] and this
/// asks again, pausing longer each time up to about a quarter of a millisecond.
pub fn read<G: Gpu>(client: &Client<G>, handle: u64, buffer: &mut [u8], mode: ReadMode) -> Result<usize, c_int> {
    /// The longest pause between two asks, in `Gpu::sleep_briefly` calls.
    const MOST_PAUSES: u32 = 4096;
    if !client.is_ready() {
        return Err(errno::ENOSYS);
    }
    let len = buffer.len().min(MAX_READ);
    if len == 0 {
        return Ok(0);
    }
    let buffer = &mut buffer[..len];
    let mut pauses = 1;
    loop {
        let mut port = client.open(opcode::FILE_READ);
        port.send(|packet| {
            packet.set(0, handle);
            packet.set(1, len as u64);
            packet.set(2, mode as u64);
        });
        let ([status], received) = port.recv_n_with::<1>(buffer);
        port.close();
        match status {
            0 => return Ok(received.min(len)),
            status if status == errno::EAGAIN as u64 => {
                for _ in 0..pauses {
                    G::sleep_briefly();
                }
                pauses = (pauses * 2).min(MOST_PAUSES);
            }
            error => return Err(error as c_int),
        }
    }
}

/// Writes `bytes` to the file `handle` names, as one piece: other threads' writes to the same file come before or
/// after it, never inside (up to the host's caps on what it holds, `docs/failures.md`).
pub fn write<G: Gpu>(client: &Client<G>, handle: u64, bytes: &[u8]) -> Result<(), c_int> {
    io::write_to(client, Destination::File(handle), bytes)
}

/// Moves the position of the file `handle` names, as C's `fseek` and Rust's `seek`; the new position from the
/// start. `seek(handle, 0, Whence::Current)` tells the position without moving it.
pub fn seek<G: Gpu>(client: &Client<G>, handle: u64, offset: i64, whence: Whence) -> Result<u64, c_int> {
    request(client, opcode::FILE_SEEK, [handle, offset as u64, whence as u64])
}

/// Writes out what the host holds for the file `handle` names; a write error since the last flush comes back here.
pub fn flush<G: Gpu>(client: &Client<G>, handle: u64) -> Result<(), c_int> {
    request(client, opcode::FILE_FLUSH, [handle, 0, 0]).map(drop)
}

/// Removes the file at `path`, or, for C's `remove`, an empty directory too.
pub fn remove<G: Gpu>(client: &Client<G>, path: &[u8], kind: RemoveKind) -> Result<(), c_int> {
    request_with_paths(client, opcode::FILE_REMOVE, kind as u64, &[path]).map(drop)
}

/// Renames `from` to `to`, replacing `to` if it is a file, as the host's `rename` does.
pub fn rename<G: Gpu>(client: &Client<G>, from: &[u8], to: &[u8]) -> Result<(), c_int> {
    request_with_paths(client, opcode::FILE_RENAME, 0, &[from, to]).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_modes_become_open_flags() {
        let flags = |mode: &str| OpenFlags::from_c_mode(mode.as_bytes()).map(|flags| flags.0);
        let (r, w, a, t, c, n) = (
            OpenFlags::READ,
            OpenFlags::WRITE,
            OpenFlags::APPEND,
            OpenFlags::TRUNCATE,
            OpenFlags::CREATE,
            OpenFlags::CREATE_NEW,
        );
        assert_eq!(flags("r"), Some(r));
        assert_eq!(flags("rb"), Some(r));
        assert_eq!(flags("r+"), Some(r | w));
        assert_eq!(flags("rb+"), Some(r | w));
        assert_eq!(flags("r+b"), Some(r | w));
        assert_eq!(flags("w"), Some(w | c | t));
        assert_eq!(flags("w+"), Some(r | w | c | t));
        assert_eq!(flags("wx"), Some(w | n));
        assert_eq!(flags("w+bx"), Some(r | w | n));
        assert_eq!(flags("a"), Some(a | w | c));
        assert_eq!(flags("a+"), Some(r | a | w | c));
        for bad in ["", "x", "rw", "r++", "rx", "ax", "wxx", "z", "r,ccs=UTF-8", "R"] {
            assert_eq!(flags(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_reply_is_a_value_or_an_error_number() {
        assert_eq!(reply([7, 0]), Ok(7));
        assert_eq!(reply([0, errno::ENOENT as u64]), Err(errno::ENOENT));
    }
}
