//! std's files and standard streams: Hermit's descriptor calls over the runtime's file operations
//! ([`crate::libc::files`]). A descriptor is the host's handle itself: 0 is stdin ([`STDIN_HANDLE`]), 1 and 2 are
//! the output streams, and files get the host's handles from [`FIRST_FILE_HANDLE`] on. So the device keeps no table,
//! and the host's check of every handle (one never given, or closed, is `EBADF`) covers every descriptor.
//!
//! Each function returns what Hermit's does: a count or 0, or a negated error number.

use core::ffi::c_int;

use super::Timespec;
use crate::gpu::Gpu;
use crate::libc::errno;
use crate::libc::files::{
    self, DirectoryEntry, FIRST_FILE_HANDLE, FileKind, FileStatus, OpenFlags, ReadMode, RemoveKind, STDIN_HANDLE,
    StatTarget, Whence,
};
use crate::libc::io::{self, Destination, Stream};
use crate::rpc::Client;

/// Hermit's `iovec`: one piece of a vectored read or write.
#[repr(C)]
pub struct IoVec {
    pub base: *mut u8,
    pub len: usize,
}

/// What a descriptor names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Descriptor {
    Stdin,
    Output(Stream),
    File(u64),
}

impl Descriptor {
    /// The descriptor `fd` as a name; a negative one is `EBADF`. A number that was never a handle is left to the host,
    /// which refuses it.
    fn of(fd: c_int) -> Result<Self, c_int> {
        match fd {
            0 => Ok(Self::Stdin),
            1 => Ok(Self::Output(Stream::Stdout)),
            2 => Ok(Self::Output(Stream::Stderr)),
            fd if fd >= FIRST_FILE_HANDLE as c_int => Ok(Self::File(fd as u64)),
            _ => Err(errno::EBADF),
        }
    }
}

/// A result as Hermit returns it: the value, or the negated error number.
fn hermit_result(result: Result<usize, c_int>) -> isize {
    match result {
        Ok(value) => value as isize,
        Err(error) => -(error as isize),
    }
}

/// `sys_open`: opens the file at `path` (without its NUL) as the POSIX `flags` say; the descriptor. The mode (the new
/// file's permissions) is the host's default: the host creates files as its own process would. `O_DIRECTORY` opens
/// a directory for [`read_directory`]; without it a directory is `EISDIR`. An unknown flag is `EINVAL`.
pub fn open<G: Gpu>(client: &Client<G>, path: &[u8], flags: i32) -> i32 {
    let Some(flags) = OpenFlags::from_posix(flags) else { return -errno::EINVAL };
    match files::open(client, path, flags) {
        Ok(handle) => match c_int::try_from(handle) {
            Ok(fd) => fd,
            Err(_) => {
                // Handles are never reused, so a run that opened two billion files has none left that fit.
                let _ = files::close(client, handle);
                -errno::EMFILE
            }
        },
        Err(error) => -error,
    }
}

/// `sys_read`: up to `buffer.len()` bytes from stdin or a file (at most [`files::MAX_READ`] at a time, a short read
/// as POSIX allows); 0 at the end. Reading stdin waits for input as the runtime's `read` does.
pub fn read<G: Gpu>(client: &Client<G>, fd: c_int, buffer: &mut [u8]) -> isize {
    let handle = match Descriptor::of(fd) {
        Ok(Descriptor::Stdin) => STDIN_HANDLE,
        Ok(Descriptor::File(handle)) => handle,
        Ok(Descriptor::Output(_)) => return -(errno::EBADF as isize),
        Err(error) => return -(error as isize),
    };
    hermit_result(files::read(client, handle, buffer, ReadMode::Bytes))
}

/// `sys_readv`: fills the pieces in order, stopping after a short read; the bytes read in all.
///
/// # Safety
/// Each piece must be `len` writable bytes at `base`.
pub unsafe fn read_vectored<G: Gpu>(client: &Client<G>, fd: c_int, pieces: &[IoVec]) -> isize {
    let mut total = 0;
    for piece in pieces.iter().filter(|piece| piece.len > 0) {
        // SAFETY: the caller's piece.
        let buffer = unsafe { core::slice::from_raw_parts_mut(piece.base, piece.len) };
        let count = read(client, fd, buffer);
        if count < 0 {
            // An error after some bytes were read reports the bytes; the error comes back on the next call.
            return if total > 0 { total } else { count };
        }
        total += count;
        if (count as usize) < piece.len {
            break;
        }
    }
    total
}

/// `sys_write`: `bytes`, whole, to an output stream or a file, as one message; the count.
pub fn write<G: Gpu>(client: &Client<G>, fd: c_int, bytes: &[u8]) -> isize {
    write_pieces(client, fd, [bytes])
}

/// `sys_writev`: the pieces together as one message, as `write` of their concatenation.
///
/// # Safety
/// Each piece must be `len` readable bytes at `base`.
pub unsafe fn write_vectored<G: Gpu>(client: &Client<G>, fd: c_int, pieces: &[IoVec]) -> isize {
    // SAFETY: the caller's pieces.
    write_pieces(client, fd, pieces.iter().map(|piece| unsafe { core::slice::from_raw_parts(piece.base, piece.len) }))
}

fn write_pieces<'a, G: Gpu>(
    client: &Client<G>,
    fd: c_int,
    pieces: impl IntoIterator<Item = &'a [u8]> + Clone,
) -> isize {
    let destination = match Descriptor::of(fd) {
        Ok(Descriptor::Output(stream)) => Destination::Stream(stream),
        Ok(Descriptor::File(handle)) => Destination::File(handle),
        Ok(Descriptor::Stdin) => return -(errno::EBADF as isize),
        Err(error) => return -(error as isize),
    };
    let total = pieces.clone().into_iter().map(<[u8]>::len).sum();
    hermit_result(io::write_pieces_to(client, destination, pieces).map(|()| total))
}

/// `sys_lseek`: moves a file's position as `whence` (`SEEK_SET`, `SEEK_CUR`, `SEEK_END`) says; the new position.
/// The standard streams cannot seek (`ESPIPE`).
pub fn seek<G: Gpu>(client: &Client<G>, fd: c_int, offset: isize, whence: c_int) -> isize {
    let handle = match Descriptor::of(fd) {
        Ok(Descriptor::File(handle)) => handle,
        Ok(_) => return -(errno::ESPIPE as isize),
        Err(error) => return -(error as isize),
    };
    let Some(whence) = u64::try_from(whence).ok().and_then(Whence::from_number) else {
        return -(errno::EINVAL as isize);
    };
    hermit_result(files::seek(client, handle, offset as i64, whence).map(|position| position as usize))
}

/// `__gpu_startup_getcwd` (for `loader/setup/std-patches/0007-gpu-current-directory.patch`): the loader's working
/// directory, which relative paths start from, into `path`; its length, `-ERANGE` when `path` is too short (std asks
/// again with more room), or another negated error number.
pub fn current_directory<G: Gpu>(client: &Client<G>, path: &mut [u8]) -> isize {
    files::current_directory(client, path).map_or_else(|error| -(error as isize), |length| length as isize)
}

/// `sys_close`: closes a file, after the host wrote out what it holds for it (its write error comes back here, the
/// file closed either way). Closing a standard stream does nothing: they stay open for the rest of the run, for
/// every thread.
pub fn close<G: Gpu>(client: &Client<G>, fd: c_int) -> c_int {
    match Descriptor::of(fd) {
        Ok(Descriptor::File(handle)) => files::close(client, handle).map_or_else(|error| -error, |()| 0),
        Ok(_) => 0,
        Err(error) => -error,
    }
}

/// `sys_unlink`: removes the file at `path` (a directory is `EISDIR`).
pub fn unlink<G: Gpu>(client: &Client<G>, path: &[u8]) -> c_int {
    files::remove(client, path, RemoveKind::File).map_or_else(|error| -error, |()| 0)
}

/// `sys_mkdir`: creates the directory `path` (its parent must exist); the mode is the host's default.
pub fn make_directory<G: Gpu>(client: &Client<G>, path: &[u8]) -> c_int {
    files::make_directory(client, path).map_or_else(|error| -error, |()| 0)
}

/// `sys_rmdir`: removes the empty directory `path` (a file is `ENOTDIR`).
pub fn remove_directory<G: Gpu>(client: &Client<G>, path: &[u8]) -> c_int {
    files::remove(client, path, RemoveKind::Directory).map_or_else(|error| -error, |()| 0)
}

/// Bytes of Hermit's `dirent64` before the name: inode, offset of the next, record length, type.
const DIRENT_HEAD: usize = 19;

/// `sys_getdents64`: every entry of the directory `fd` names (opened with `O_DIRECTORY`), from its start, as
/// Hermit's `dirent64` records in `buffer`; the bytes they take, or `-EINVAL` when they do not all fit (std's
/// `read_dir` then asks again with a larger buffer, which is why each call starts over). A descriptor that is not a
/// directory is `ENOTDIR`.
pub fn read_directory<G: Gpu>(client: &Client<G>, fd: c_int, buffer: &mut [u8]) -> i64 {
    let handle = match Descriptor::of(fd) {
        Ok(Descriptor::File(handle)) => handle,
        Ok(_) => return -i64::from(errno::ENOTDIR),
        Err(error) => return -i64::from(error),
    };
    match files::stat(client, StatTarget::Open(handle), &[]) {
        Ok(status) if status.kind == FileKind::Directory => {}
        Ok(_) => return -i64::from(errno::ENOTDIR),
        Err(error) => return -i64::from(error),
    }
    if let Err(error) = files::seek(client, handle, 0, Whence::Start) {
        return -i64::from(error);
    }
    // Entries arrive as the host's records, cut anywhere: whole ones are turned into `dirent64`s, the rest waits for
    // the next read. One record takes at most 265 bytes.
    let mut chunk = [0u8; 512];
    let (mut held, mut written) = (0, 0);
    loop {
        let mut used = 0;
        while let Some((entry, length)) = DirectoryEntry::decode(&chunk[used..held]) {
            let record = (DIRENT_HEAD + entry.name.len() + 1).next_multiple_of(8);
            let Some(out) = buffer.get_mut(written..written + record) else { return -i64::from(errno::EINVAL) };
            out.fill(0);
            out[..8].copy_from_slice(&entry.inode.to_ne_bytes());
            out[8..16].copy_from_slice(&((written + record) as i64).to_ne_bytes());
            out[16..18].copy_from_slice(&(record as u16).to_ne_bytes());
            out[18] = match entry.kind {
                FileKind::File => 8,
                FileKind::Directory => 4,
                FileKind::SymbolicLink => 10,
                FileKind::Other => 0,
            };
            out[DIRENT_HEAD..DIRENT_HEAD + entry.name.len()].copy_from_slice(entry.name);
            written += record;
            used += length;
        }
        chunk.copy_within(used..held, 0);
        held -= used;
        match files::read(client, handle, &mut chunk[held..], ReadMode::Bytes) {
            // The end: a record cut short would be the host's fault.
            Ok(0) => return if held == 0 { written as i64 } else { -i64::from(errno::EIO) },
            Ok(count) => held += count,
            Err(error) => return -i64::from(error),
        }
    }
}

/// Hermit's `stat`, what `sys_stat`, `sys_lstat` and `sys_fstat` fill.
#[repr(C)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    /// The kind's `S_IF*` bits and the permissions.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: i64,
    pub blksize: i64,
    pub blocks: i64,
    pub accessed: Timespec,
    pub modified: Timespec,
    pub changed: Timespec,
}

impl Stat {
    /// Hermit's `stat` of `status`. What the host does not send (device, inode, owner) is 0, one link.
    fn of(status: &FileStatus) -> Self {
        let time = |(seconds, nanoseconds): (i64, u32)| Timespec { seconds, nanoseconds: nanoseconds as i32 };
        Self {
            dev: 0,
            ino: 0,
            nlink: 1,
            mode: status.kind.posix_mode() | status.permissions,
            uid: 0,
            gid: 0,
            rdev: 0,
            size: status.size.min(i64::MAX as u64) as i64,
            blksize: 4096,
            blocks: status.size.div_ceil(512).min(i64::MAX as u64) as i64,
            accessed: time(status.accessed),
            modified: time(status.modified),
            changed: time(status.changed),
        }
    }
}

/// The status of a standard stream: a character device of no size, as a terminal's.
const STREAM_STATUS: FileStatus = FileStatus {
    kind: FileKind::Other,
    permissions: 0o620,
    size: 0,
    modified: (0, 0),
    accessed: (0, 0),
    changed: (0, 0),
};

/// `sys_stat` (`follow_links`) and `sys_lstat`: fills `stat` for the file at `path`.
pub fn stat_path<G: Gpu>(client: &Client<G>, path: &[u8], follow_links: bool, stat: &mut Stat) -> c_int {
    let target = if follow_links { StatTarget::Path } else { StatTarget::Link };
    fill(files::stat(client, target, path), stat)
}

/// `sys_fstat`: fills `stat` for the open file `fd` names.
pub fn stat_open<G: Gpu>(client: &Client<G>, fd: c_int, stat: &mut Stat) -> c_int {
    let status = match Descriptor::of(fd) {
        Ok(Descriptor::File(handle)) => files::stat(client, StatTarget::Open(handle), &[]),
        Ok(_) => Ok(STREAM_STATUS),
        Err(error) => Err(error),
    };
    fill(status, stat)
}

fn fill(status: Result<FileStatus, c_int>, stat: &mut Stat) -> c_int {
    match status {
        Ok(status) => {
            *stat = Stat::of(&status);
            0
        }
        Err(error) => -error,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn descriptors_name_the_streams_and_the_hosts_handles() {
        assert_eq!(Descriptor::of(0), Ok(Descriptor::Stdin));
        assert_eq!(Descriptor::of(1), Ok(Descriptor::Output(Stream::Stdout)));
        assert_eq!(Descriptor::of(2), Ok(Descriptor::Output(Stream::Stderr)));
        assert_eq!(Descriptor::of(3), Ok(Descriptor::File(3)));
        assert_eq!(Descriptor::of(c_int::MAX), Ok(Descriptor::File(c_int::MAX as u64)));
        assert_eq!(Descriptor::of(-1), Err(errno::EBADF));
    }

    #[test]
    fn stat_is_laid_out_as_hermits() {
        use core::mem::{offset_of, size_of};
        // hermit-abi 0.5's `stat`: three u64, three u32, then u64 and i64 fields and three 16-byte timespecs.
        assert_eq!((offset_of!(Stat, mode), offset_of!(Stat, gid), offset_of!(Stat, rdev)), (24, 32, 40));
        assert_eq!((offset_of!(Stat, size), offset_of!(Stat, blocks), offset_of!(Stat, accessed)), (48, 64, 72));
        assert_eq!((offset_of!(Stat, modified), offset_of!(Stat, changed), size_of::<Stat>()), (88, 104, 120));
    }
}
