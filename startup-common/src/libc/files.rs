//! Files and stdin over RPC: the device's side of each file operation, for C's `FILE *` streams
//! ([`crate::libc::stdio`]) and Rust's `gpu_startup::fs`. The messages are the contract's
//! (`gpu_startup_protocol::messages`).
//!
//! The host keeps a table of the files a run opened and gives each a *handle*, a number it checks on every use: a
//! handle that was never given, or was closed, is an error ([`errno::EBADF`]) returned to the device, never a host
//! failure. Paths are the loader's: the host opens them as its own process would, a relative path from the loader's
//! working directory. Every operation returns an error number ([`crate::libc::errno`]) on failure.
//!
//! Every function here is called by a lane group together, each lane with its own arguments (its own handle, path,
//! buffer), as any RPC call; the host serves the lanes of one message in lane order.

use core::ffi::c_int;

use gpu_startup_protocol::messages::{
    CloseRequest, CurrentDirectoryReplyHead, FileReply, FlushRequest, MakeDirectoryHead, OpenHead, ReadReplyHead,
    ReadRequest, RemoveHead, RenameHead, SeekRequest, StatHead, StatReply,
};
use gpu_startup_protocol::opcode;

use crate::gpu::Gpu;
use crate::libc::errno;
use crate::libc::io::{self, Destination};
use crate::rpc::{Client, Port};

/// The values the messages carry and the limits both sides keep: the contract's.
pub use gpu_startup_protocol::files::{
    DIRECTORY_ENTRY_HEAD, DirectoryEntry, FIRST_FILE_HANDLE, FileKind, FileStatus, MAX_OPEN_FILES, MAX_PATH, MAX_READ,
    OpenFlags, ReadMode, RemoveKind, STDIN_HANDLE, StatTarget, Whence,
};

/// Waits for the [`FileReply`] of the message on `port`, closes it, and returns the reply.
fn reply_on<G: Gpu>(mut port: Port<'_, G>) -> Result<u64, c_int> {
    let mut answer = [0; 2];
    port.recv(|packet| answer = packet.get_words());
    port.close();
    FileReply::decode(answer).0
}

/// Sends one packet of `words` (a request's encoding) with `opcode` and returns the reply.
fn request<G: Gpu, const N: usize>(client: &Client<G>, opcode: u32, words: [u64; N]) -> Result<u64, c_int> {
    if !client.is_ready() {
        return Err(errno::ENOSYS);
    }
    let mut port = client.open(opcode);
    port.send(|packet| packet.set_words(words));
    reply_on(port)
}

/// Sends `paths` as streams with `opcode`, `head` (a head's encoding) before the first, and returns the reply. The
/// paths are checked here first: the host would refuse a longer one too, but only after receiving it.
fn request_with_paths<G: Gpu>(client: &Client<G>, opcode: u32, head: [u64; 1], paths: &[&[u8]]) -> Result<u64, c_int> {
    if !client.is_ready() {
        return Err(errno::ENOSYS);
    }
    if paths.iter().any(|path| path.len() >= MAX_PATH) {
        return Err(errno::ENAMETOOLONG);
    }
    let mut port = client.open(opcode);
    for (index, path) in paths.iter().enumerate() {
        if index == 0 {
            port.send_n_with(head, path);
        } else {
            port.send_n(path);
        }
    }
    reply_on(port)
}

/// Opens the file at `path` (without a NUL) as `flags` say; its handle.
pub fn open<G: Gpu>(client: &Client<G>, path: &[u8], flags: OpenFlags) -> Result<u64, c_int> {
    request_with_paths(client, opcode::FILE_OPEN, OpenHead { flags }.encode(), &[path])
}

/// Closes the file `handle` names, after writing out what the host holds for it; its write error, if any, comes
/// back here (the handle is closed either way).
pub fn close<G: Gpu>(client: &Client<G>, handle: u64) -> Result<(), c_int> {
    request(client, opcode::FILE_CLOSE, CloseRequest { handle }.encode()).map(drop)
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
        port.send(|packet| packet.set_words(ReadRequest { handle, max: len as u64, mode }.encode()));
        let (head, received) = port.recv_n_with::<1>(buffer);
        port.close();
        match ReadReplyHead::decode(head).error {
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

/// The loader's working directory, which relative paths start from, into `path`; its length. `ERANGE` when `path`
/// is too short for it.
pub fn current_directory<G: Gpu>(client: &Client<G>, path: &mut [u8]) -> Result<usize, c_int> {
    if !client.is_ready() {
        return Err(errno::ENOSYS);
    }
    let mut port = client.open(opcode::CURRENT_DIRECTORY);
    port.send(|_| {});
    let (head, length) = port.recv_n_with::<1>(path);
    port.close();
    match CurrentDirectoryReplyHead::decode(head).error {
        // `length` is the whole path's, of which only what fits was kept.
        0 if length <= path.len() => Ok(length),
        0 => Err(errno::ERANGE),
        error => Err(error as c_int),
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
    request(client, opcode::FILE_SEEK, SeekRequest { handle, offset, whence }.encode())
}

/// Writes out what the host holds for the file `handle` names; a write error since the last flush comes back here.
pub fn flush<G: Gpu>(client: &Client<G>, handle: u64) -> Result<(), c_int> {
    request(client, opcode::FILE_FLUSH, FlushRequest { handle }.encode()).map(drop)
}

/// Removes the file at `path`, or, for C's `remove`, an empty directory too, or (POSIX's `rmdir`) only an empty
/// directory, as `kind` says.
pub fn remove<G: Gpu>(client: &Client<G>, path: &[u8], kind: RemoveKind) -> Result<(), c_int> {
    request_with_paths(client, opcode::FILE_REMOVE, RemoveHead { kind }.encode(), &[path]).map(drop)
}

/// Creates the directory `path`; its parent must exist.
pub fn make_directory<G: Gpu>(client: &Client<G>, path: &[u8]) -> Result<(), c_int> {
    request_with_paths(client, opcode::MAKE_DIRECTORY, MakeDirectoryHead.encode(), &[path]).map(drop)
}

/// Renames `from` to `to`, replacing `to` if it is a file, as the host's `rename` does.
pub fn rename<G: Gpu>(client: &Client<G>, from: &[u8], to: &[u8]) -> Result<(), c_int> {
    request_with_paths(client, opcode::FILE_RENAME, RenameHead.encode(), &[from, to]).map(drop)
}

/// What a file is: the one at `path` (following symbolic links or not, as `target` says), or the open file of a
/// [`StatTarget::Open`] handle (`path` empty then).
pub fn stat<G: Gpu>(client: &Client<G>, target: StatTarget, path: &[u8]) -> Result<FileStatus, c_int> {
    if !client.is_ready() {
        return Err(errno::ENOSYS);
    }
    if path.len() >= MAX_PATH {
        return Err(errno::ENAMETOOLONG);
    }
    let mut port = client.open(opcode::FILE_STAT);
    port.send_n_with(StatHead { target }.encode(), path);
    let mut words = [0; 8];
    port.recv(|packet| words = packet.get_words());
    port.close();
    StatReply::decode(words).0
}
