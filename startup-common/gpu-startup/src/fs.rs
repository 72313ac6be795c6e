//! Files on the host, as in `std::fs`: [`File`] with [`Read`], [`Write`] and [`Seek`], [`OpenOptions`],
//! [`remove_file`], [`rename`] and [`write`].
//!
//! `gpu-loader` opens and reads and writes the files for the program: paths are the loader's, so a relative path
//! is resolved from the loader's working directory. A run may have 256 files open at once
//! (`startup_common::libc::files::MAX_OPEN_FILES`); the loader closes what is left open when the run ends. Writes are
//! unbuffered here and buffered by the loader until [`Write::flush`], a read or a seek of the file, its closing, or
//! the end of the run; each write (and each `write!`) reaches the file as one piece, however many threads write to
//! it at once. Errors carry the host's error number ([`io::Error::raw_os_error`]).
//!
//! ```no_run
//! #![no_std]
//! #![no_main]
//! use gpu_startup::fs::File;
//! use gpu_startup::io::{Read, Write};
//!
//! #[gpu_startup::main]
//! fn main() -> i32 {
//!     if !gpu_startup::thread::is_first() {
//!         return 0;
//!     }
//!     let mut file = File::create("squares.txt").expect("create squares.txt");
//!     for n in 1..=3 {
//!         writeln!(file, "{n} {}", n * n).expect("write");
//!     }
//!     drop(file);
//!     let mut text = [0; 64];
//!     let n = File::open("squares.txt").and_then(|mut file| file.read(&mut text)).expect("read back");
//!     gpu_startup::print!("{}", core::str::from_utf8(&text[..n]).unwrap_or("?"));
//!     match File::open("missing.txt") {
//!         Err(error) if error.kind() == gpu_startup::io::ErrorKind::NotFound => 0,
//!         _ => 1,
//!     }
//! }
//! ```

use core::fmt;

use startup_common::libc::files::{self, OpenFlags, RemoveKind, Whence};
use startup_common::libc::io::Destination;

use crate::arch::RUNTIME;
use crate::io::{self, Read, Seek, SeekFrom, Write, os};

/// A file the loader opened for the program. Dropping it closes it (ignoring an error: [`File::close`] reports it).
#[derive(Debug)]
pub struct File {
    handle: u64,
}

/// How to open a file, as `std::fs::OpenOptions`.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOptions {
    flags: u64,
}

impl OpenOptions {
    /// No access at all: set what you need.
    pub fn new() -> Self {
        Self::default()
    }

    fn set(&mut self, flag: u64, on: bool) -> &mut Self {
        self.flags = if on { self.flags | flag } else { self.flags & !flag };
        self
    }

    pub fn read(&mut self, read: bool) -> &mut Self {
        self.set(OpenFlags::READ, read)
    }

    pub fn write(&mut self, write: bool) -> &mut Self {
        self.set(OpenFlags::WRITE, write)
    }

    /// Every write goes to the end of the file.
    pub fn append(&mut self, append: bool) -> &mut Self {
        self.set(OpenFlags::APPEND, append)
    }

    /// An existing file is emptied.
    pub fn truncate(&mut self, truncate: bool) -> &mut Self {
        self.set(OpenFlags::TRUNCATE, truncate)
    }

    /// A missing file is created.
    pub fn create(&mut self, create: bool) -> &mut Self {
        self.set(OpenFlags::CREATE, create)
    }

    /// The file is created, and must not exist ([`io::ErrorKind::AlreadyExists`] if it does).
    pub fn create_new(&mut self, create_new: bool) -> &mut Self {
        self.set(OpenFlags::CREATE_NEW, create_new)
    }

    /// Opens `path` with these options. A directory is [`io::ErrorKind::IsADirectory`]; a FIFO or a socket is
    /// refused (the loader never waits on one).
    pub fn open(&self, path: impl AsRef<[u8]>) -> io::Result<File> {
        let handle = os(files::open(RUNTIME.client(), path.as_ref(), OpenFlags(self.flags)))?;
        Ok(File { handle })
    }
}

impl File {
    /// Opens `path` for reading.
    pub fn open(path: impl AsRef<[u8]>) -> io::Result<File> {
        OpenOptions::new().read(true).open(path)
    }

    /// Opens `path` for writing, created if missing and emptied if not.
    pub fn create(path: impl AsRef<[u8]>) -> io::Result<File> {
        OpenOptions::new().write(true).create(true).truncate(true).open(path)
    }

    /// Creates `path` for writing; fails if it exists.
    pub fn create_new(path: impl AsRef<[u8]>) -> io::Result<File> {
        OpenOptions::new().write(true).create_new(true).open(path)
    }

    /// Options to open a file with.
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Reads one line into `buffer`, up to and including its `\n`: the number of bytes, 0 at the end of the file. A
    /// line longer than `buffer` comes in pieces, one a call.
    pub fn read_line_bytes(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        io::read_line_bytes(self.handle, buffer)
    }

    /// Reads one line, with its `\n`, after what `line` holds: the number of bytes, 0 at the end of the file.
    #[cfg(feature = "alloc")]
    pub fn read_line(&mut self, line: &mut alloc::string::String) -> io::Result<usize> {
        io::read_line(self.handle, line)
    }

    /// Closes the file, after the loader wrote out what it holds for it: the error of that write, if any (the file is
    /// closed either way).
    pub fn close(self) -> io::Result<()> {
        let handle = self.into_raw_handle();
        os(files::close(RUNTIME.client(), handle))
    }

    /// The loader's handle of the file.
    pub fn as_raw_handle(&self) -> u64 {
        self.handle
    }

    /// The loader's handle of the file, which the caller now owns: dropping it no longer closes the file.
    pub fn into_raw_handle(self) -> u64 {
        let handle = self.handle;
        core::mem::forget(self);
        handle
    }

    /// The file of a loader's handle, which it owns from now on. The loader checks a handle at every use, so one
    /// that names no open file is no danger: every operation fails with `EBADF`.
    pub fn from_raw_handle(handle: u64) -> File {
        File { handle }
    }

    fn read_bytes(&self, buffer: &mut [u8]) -> io::Result<usize> {
        os(files::read(RUNTIME.client(), self.handle, buffer, files::ReadMode::Bytes))
    }

    fn write_bytes(&self, bytes: &[u8]) -> io::Result<usize> {
        os(files::write(RUNTIME.client(), self.handle, bytes)).map(|()| bytes.len())
    }

    /// Formats `args` into the file as one piece, as `println!` does a line.
    fn write_formatted(&self, args: fmt::Arguments<'_>) -> io::Result<()> {
        os(startup_common::libc::io::print_to(RUNTIME.client(), Destination::File(self.handle), args))
    }

    fn flush_host(&self) -> io::Result<()> {
        os(files::flush(RUNTIME.client(), self.handle))
    }

    fn seek_to(&self, position: SeekFrom) -> io::Result<u64> {
        let (offset, whence) = match position {
            SeekFrom::Start(offset) => (
                i64::try_from(offset).map_err(|_| io::Error::from_raw_os_error(startup_common::libc::errno::EINVAL))?,
                Whence::Start,
            ),
            SeekFrom::Current(offset) => (offset, Whence::Current),
            SeekFrom::End(offset) => (offset, Whence::End),
        };
        os(files::seek(RUNTIME.client(), self.handle, offset, whence))
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = files::close(RUNTIME.client(), self.handle);
    }
}

impl Read for File {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.read_bytes(buffer)
    }
}

impl Read for &File {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.read_bytes(buffer)
    }
}

impl Write for File {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.write_bytes(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_host()
    }

    fn write_fmt(&mut self, args: fmt::Arguments<'_>) -> io::Result<()> {
        self.write_formatted(args)
    }
}

impl Write for &File {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.write_bytes(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_host()
    }

    fn write_fmt(&mut self, args: fmt::Arguments<'_>) -> io::Result<()> {
        self.write_formatted(args)
    }
}

impl Seek for File {
    fn seek(&mut self, position: SeekFrom) -> io::Result<u64> {
        self.seek_to(position)
    }
}

impl Seek for &File {
    fn seek(&mut self, position: SeekFrom) -> io::Result<u64> {
        self.seek_to(position)
    }
}

/// Removes the file at `path` (a directory is [`io::ErrorKind::IsADirectory`]).
pub fn remove_file(path: impl AsRef<[u8]>) -> io::Result<()> {
    os(files::remove(RUNTIME.client(), path.as_ref(), RemoveKind::File))
}

/// Renames `from` to `to`, replacing `to` if it is a file.
pub fn rename(from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) -> io::Result<()> {
    os(files::rename(RUNTIME.client(), from.as_ref(), to.as_ref()))
}

/// Writes `contents` to the file at `path`, created if missing and emptied if not, and closes it: the error of any
/// step, the last write out included.
pub fn write(path: impl AsRef<[u8]>, contents: impl AsRef<[u8]>) -> io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(contents.as_ref())?;
    file.close()
}

/// The whole file at `path`.
#[cfg(feature = "alloc")]
pub fn read(path: impl AsRef<[u8]>) -> io::Result<alloc::vec::Vec<u8>> {
    let mut bytes = alloc::vec::Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The whole file at `path`, as UTF-8 text.
#[cfg(feature = "alloc")]
pub fn read_to_string(path: impl AsRef<[u8]>) -> io::Result<alloc::string::String> {
    let mut text = alloc::string::String::new();
    File::open(path)?.read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_set_and_clear_their_flags() {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).append(true).append(false);
        assert_eq!(options.flags, OpenFlags::READ | OpenFlags::WRITE | OpenFlags::CREATE);
        options.truncate(true).create_new(true).read(false);
        assert_eq!(options.flags, OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::CREATE_NEW);
    }

    #[test]
    fn without_a_host_every_operation_fails_as_unsupported() {
        let unsupported = Some(startup_common::libc::errno::ENOSYS);
        assert_eq!(File::open("x").unwrap_err().raw_os_error(), unsupported);
        assert_eq!(remove_file("x").unwrap_err().raw_os_error(), unsupported);
        assert_eq!(rename("x", "y").unwrap_err().raw_os_error(), unsupported);
        assert_eq!(write("x", b"y").unwrap_err().raw_os_error(), unsupported);
        let mut file = File::from_raw_handle(3);
        assert_eq!(writeln!(file, "{}", 1).unwrap_err().raw_os_error(), unsupported);
        assert_eq!(
            file.seek(SeekFrom::Start(u64::MAX)).unwrap_err().raw_os_error(),
            Some(startup_common::libc::errno::EINVAL)
        );
    }
}
