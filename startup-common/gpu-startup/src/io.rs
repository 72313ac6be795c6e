//! Reading and writing, as in `std::io`: the [`Read`], [`Write`] and [`Seek`] traits (core has none), [`Error`],
//! and the loader's stdin ([`stdin`]).
//!
//! A program's files ([`crate::fs`]) and its stdin live on the host; each call is a message to `gpu-loader`, which
//! reads and writes for it (`docs/rpc.md`). Errors carry the host's error number, as `std::io::Error`'s "os error"
//! does.
//!
//! ```no_run
//! #![no_std]
//! #![no_main]
//!
//! #[gpu_startup::main]
//! fn main() -> i32 {
//!     // Each thread takes one line of the loader's stdin (whole lines, each once).
//!     let mut line = [0; 256];
//!     match gpu_startup::io::stdin().read_line_bytes(&mut line) {
//!         Ok(0) => 0,
//!         Ok(n) => {
//!             let text = core::str::from_utf8(&line[..n]).unwrap_or("(not UTF-8)\n");
//!             gpu_startup::print!("thread {} got {text}", gpu_startup::thread::index());
//!             0
//!         }
//!         Err(error) => {
//!             gpu_startup::eprintln!("stdin: {error}");
//!             1
//!         }
//!     }
//! }
//! ```

use core::fmt;

use startup_common::libc::errno;
use startup_common::libc::files::{self, ReadMode, STDIN_HANDLE};

use crate::arch::RUNTIME;

/// The result of an I/O operation.
pub type Result<T> = core::result::Result<T, Error>;

/// Why an I/O operation failed: the host's error number ([`Error::raw_os_error`]), or an error of this crate's own
/// (a short read where a whole buffer was wanted, text that is not UTF-8).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Error(Repr);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Repr {
    Os(i32),
    Simple(ErrorKind, &'static str),
}

/// What kind of error an [`Error`] is, as `std::io::ErrorKind` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    NotFound,
    PermissionDenied,
    AlreadyExists,
    WouldBlock,
    NotADirectory,
    IsADirectory,
    DirectoryNotEmpty,
    ReadOnlyFilesystem,
    StorageFull,
    NotSeekable,
    FileTooLarge,
    ResourceBusy,
    CrossesDevices,
    InvalidInput,
    InvalidData,
    InvalidFilename,
    Interrupted,
    Unsupported,
    UnexpectedEof,
    OutOfMemory,
    WriteZero,
    Other,
}

impl ErrorKind {
    /// The kind of the host's error `number`.
    fn of_os_error(number: i32) -> Self {
        match number {
            errno::ENOENT => Self::NotFound,
            errno::EPERM | errno::EACCES => Self::PermissionDenied,
            errno::EEXIST => Self::AlreadyExists,
            errno::EAGAIN => Self::WouldBlock,
            errno::ENOTDIR => Self::NotADirectory,
            errno::EISDIR => Self::IsADirectory,
            errno::ENOTEMPTY => Self::DirectoryNotEmpty,
            errno::EROFS => Self::ReadOnlyFilesystem,
            errno::ENOSPC | errno::EDQUOT => Self::StorageFull,
            errno::ESPIPE => Self::NotSeekable,
            errno::EFBIG => Self::FileTooLarge,
            errno::EBUSY => Self::ResourceBusy,
            errno::EXDEV => Self::CrossesDevices,
            errno::EINVAL => Self::InvalidInput,
            errno::ENAMETOOLONG => Self::InvalidFilename,
            errno::EINTR => Self::Interrupted,
            errno::ENOSYS | errno::EOPNOTSUPP => Self::Unsupported,
            errno::ENOMEM => Self::OutOfMemory,
            _ => Self::Other,
        }
    }
}

impl Error {
    /// The error of the host's error `code` (`docs/c-programs.md` lists the common ones).
    pub const fn from_raw_os_error(code: i32) -> Self {
        Self(Repr::Os(code))
    }

    /// An error of `kind` with a fixed message.
    pub const fn new(kind: ErrorKind, message: &'static str) -> Self {
        Self(Repr::Simple(kind, message))
    }

    /// The host's error number, for an error the host reported.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self.0 {
            Repr::Os(code) => Some(code),
            Repr::Simple(..) => None,
        }
    }

    pub fn kind(&self) -> ErrorKind {
        match self.0 {
            Repr::Os(code) => ErrorKind::of_os_error(code),
            Repr::Simple(kind, _) => kind,
        }
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Self::new(kind, "an I/O error")
    }
}

impl fmt::Display for Error {
    /// As `std::io::Error` shows it: `No such file or directory (os error 2)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Repr::Os(code) => {
                let mut buffer = [0; 32];
                write!(f, "{} (os error {code})", errno::describe(code, &mut buffer))
            }
            Repr::Simple(_, message) => f.write_str(message),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Repr::Os(code) => {
                let mut buffer = [0; 32];
                f.debug_struct("Os")
                    .field("code", &code)
                    .field("kind", &self.kind())
                    .field("message", &errno::describe(code, &mut buffer))
                    .finish()
            }
            Repr::Simple(kind, message) => {
                f.debug_struct("Error").field("kind", &kind).field("message", &message).finish()
            }
        }
    }
}

impl core::error::Error for Error {}

/// The result of a file operation of `startup_common::libc::files` as an [`Error`].
pub(crate) fn os<T>(result: core::result::Result<T, i32>) -> Result<T> {
    result.map_err(Error::from_raw_os_error)
}

/// Reads bytes, as `std::io::Read`.
pub trait Read {
    /// Reads into `buffer`: the number of bytes, 0 at the end (or for an empty buffer). A read may return fewer
    /// bytes than asked for (at most `startup_common::libc::files::MAX_READ` at once).
    fn read(&mut self, buffer: &mut [u8]) -> Result<usize>;

    /// Fills `buffer`, or fails with [`ErrorKind::UnexpectedEof`] at an end before it is full.
    fn read_exact(&mut self, mut buffer: &mut [u8]) -> Result<()> {
        while !buffer.is_empty() {
            match self.read(buffer) {
                Ok(0) => return Err(Error::new(ErrorKind::UnexpectedEof, "failed to fill whole buffer")),
                Ok(n) => buffer = &mut buffer[n..],
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Reads to the end, after what `buffer` holds: the number of bytes read.
    #[cfg(feature = "alloc")]
    fn read_to_end(&mut self, buffer: &mut alloc::vec::Vec<u8>) -> Result<usize> {
        let start = buffer.len();
        let mut chunk = [0; 4096];
        loop {
            match self.read(&mut chunk) {
                Ok(0) => return Ok(buffer.len() - start),
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// Reads to the end as UTF-8 text, after what `buffer` holds: the number of bytes read. Text that is not UTF-8
    /// is [`ErrorKind::InvalidData`], and `buffer` is left as it was.
    #[cfg(feature = "alloc")]
    fn read_to_string(&mut self, buffer: &mut alloc::string::String) -> Result<usize> {
        let mut bytes = alloc::vec::Vec::new();
        self.read_to_end(&mut bytes)?;
        let text = core::str::from_utf8(&bytes).map_err(|_| invalid_utf8())?;
        buffer.push_str(text);
        Ok(bytes.len())
    }
}

#[cfg(feature = "alloc")]
fn invalid_utf8() -> Error {
    Error::new(ErrorKind::InvalidData, "stream did not contain valid UTF-8")
}

/// Writes bytes, as `std::io::Write`.
pub trait Write {
    /// Writes `bytes`: how many were taken.
    fn write(&mut self, bytes: &[u8]) -> Result<usize>;

    /// Has what was written reach its destination (for a file, the host writes out what it holds for it).
    fn flush(&mut self) -> Result<()>;

    /// Writes all of `bytes`, or fails with [`ErrorKind::WriteZero`] if a write takes none.
    fn write_all(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            match self.write(bytes) {
                Ok(0) => return Err(Error::new(ErrorKind::WriteZero, "failed to write whole buffer")),
                Ok(n) => bytes = &bytes[n..],
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Writes formatted text, for `write!` and `writeln!`.
    fn write_fmt(&mut self, args: fmt::Arguments<'_>) -> Result<()> {
        /// Passes each piece on, keeping the first error (`fmt` itself only knows that one happened).
        struct Adapter<'a, W: ?Sized> {
            inner: &'a mut W,
            error: Option<Error>,
        }
        impl<W: Write + ?Sized> fmt::Write for Adapter<'_, W> {
            fn write_str(&mut self, text: &str) -> fmt::Result {
                self.inner.write_all(text.as_bytes()).map_err(|error| {
                    self.error = Some(error);
                    fmt::Error
                })
            }
        }
        let mut adapter = Adapter { inner: self, error: None };
        match fmt::write(&mut adapter, args) {
            Ok(()) => Ok(()),
            Err(_) => Err(adapter.error.unwrap_or(Error::new(ErrorKind::Other, "formatter error"))),
        }
    }
}

/// Where a seek counts from, as `std::io::SeekFrom`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeekFrom {
    Start(u64),
    End(i64),
    Current(i64),
}

/// Moves a position, as `std::io::Seek`.
pub trait Seek {
    /// Moves to `position`: the new position from the start.
    fn seek(&mut self, position: SeekFrom) -> Result<u64>;

    /// Back to the start.
    fn rewind(&mut self) -> Result<()> {
        self.seek(SeekFrom::Start(0)).map(drop)
    }

    /// The position from the start.
    fn stream_position(&mut self) -> Result<u64> {
        self.seek(SeekFrom::Current(0))
    }
}

/// The loader's stdin, as `gpu-loader` reads it: see [`stdin`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Stdin {
    _private: (),
}

/// The loader's stdin. A read waits until the loader has input (the loader never stops serving other threads
/// meanwhile; `--timeout` still ends a run that waits for ever) and returns what there is. Threads that read lines
/// at once ([`Stdin::read_line_bytes`], and with the `alloc` feature `read_line` and `lines`) each get whole lines,
/// each line once; which thread gets which is not defined. A line longer than 64 KiB comes in pieces, between which
/// other threads' reads may come.
pub fn stdin() -> Stdin {
    Stdin { _private: () }
}

/// Reads one line through `handle` into `buffer`: up to and including its `\n`, or as much of it as fits (the rest
/// comes with the next call), or the last line without its `\n`; 0 at the end.
pub(crate) fn read_line_bytes(handle: u64, buffer: &mut [u8]) -> Result<usize> {
    os(files::read(RUNTIME.client(), handle, buffer, ReadMode::Line))
}

/// Reads one whole line through `handle` after what `line` holds, however long: the number of bytes, 0 at the end.
#[cfg(feature = "alloc")]
pub(crate) fn read_line(handle: u64, line: &mut alloc::string::String) -> Result<usize> {
    let mut bytes = alloc::vec::Vec::new();
    let mut piece = [0; 1024];
    loop {
        let n = read_line_bytes(handle, &mut piece)?;
        bytes.extend_from_slice(&piece[..n]);
        if n == 0 || piece[n - 1] == b'\n' {
            break;
        }
    }
    line.push_str(core::str::from_utf8(&bytes).map_err(|_| invalid_utf8())?);
    Ok(bytes.len())
}

impl Stdin {
    /// Reads one line into `buffer`, up to and including its `\n`: the number of bytes, 0 at the end of stdin. A
    /// line longer than `buffer` comes in pieces, one a call.
    pub fn read_line_bytes(&self, buffer: &mut [u8]) -> Result<usize> {
        read_line_bytes(STDIN_HANDLE, buffer)
    }

    /// Reads one line, with its `\n`, after what `line` holds: the number of bytes, 0 at the end of stdin.
    #[cfg(feature = "alloc")]
    pub fn read_line(&self, line: &mut alloc::string::String) -> Result<usize> {
        read_line(STDIN_HANDLE, line)
    }

    /// The lines of stdin, without their `\n` (or `\r\n`), until its end.
    #[cfg(feature = "alloc")]
    pub fn lines(self) -> Lines {
        Lines { stdin: self }
    }
}

/// The iterator of [`Stdin::lines`].
#[cfg(feature = "alloc")]
#[derive(Debug)]
pub struct Lines {
    stdin: Stdin,
}

#[cfg(feature = "alloc")]
impl Iterator for Lines {
    type Item = Result<alloc::string::String>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut line = alloc::string::String::new();
        match self.stdin.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => {
                if line.ends_with('\n') {
                    line.pop();
                    if line.ends_with('\r') {
                        line.pop();
                    }
                }
                Some(Ok(line))
            }
            Err(error) => Some(Err(error)),
        }
    }
}

impl Read for Stdin {
    fn read(&mut self, buffer: &mut [u8]) -> Result<usize> {
        os(files::read(RUNTIME.client(), STDIN_HANDLE, buffer, ReadMode::Bytes))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;

    #[test]
    fn errors_show_as_std_shows_them() {
        let missing = Error::from_raw_os_error(errno::ENOENT);
        assert_eq!(missing.to_string(), "No such file or directory (os error 2)");
        assert_eq!(missing.kind(), ErrorKind::NotFound);
        assert_eq!(missing.raw_os_error(), Some(2));
        assert_eq!(
            std::format!("{missing:?}"),
            "Os { code: 2, kind: NotFound, message: \"No such file or directory\" }"
        );
        assert_eq!(Error::from_raw_os_error(4242).to_string(), "Unknown error 4242 (os error 4242)");
        assert_eq!(Error::from_raw_os_error(4242).kind(), ErrorKind::Other);
        let short = Error::new(ErrorKind::UnexpectedEof, "failed to fill whole buffer");
        assert_eq!(short.to_string(), "failed to fill whole buffer");
        assert_eq!(short.raw_os_error(), None);
        for (number, kind) in [
            (errno::EISDIR, ErrorKind::IsADirectory),
            (errno::EACCES, ErrorKind::PermissionDenied),
            (errno::EBADF, ErrorKind::Other),
            (errno::ESPIPE, ErrorKind::NotSeekable),
            (errno::ENOSYS, ErrorKind::Unsupported),
        ] {
            assert_eq!(Error::from_raw_os_error(number).kind(), kind);
        }
    }

    /// Gives its bytes a few at a time, as the host's reads may.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buffer: &mut [u8]) -> Result<usize> {
            let n = self.0.len().min(buffer.len()).min(3);
            buffer[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn read_exact_gathers_short_reads_and_fails_at_an_early_end() {
        let mut buffer = [0; 7];
        Trickle(b"abcdefghij").read_exact(&mut buffer).unwrap();
        assert_eq!(&buffer, b"abcdefg");
        assert_eq!(Trickle(b"abc").read_exact(&mut buffer).unwrap_err().kind(), ErrorKind::UnexpectedEof);
    }

    /// Takes at most 2 bytes a write, then none once `room` is spent.
    struct Narrow {
        written: std::vec::Vec<u8>,
        room: usize,
    }

    impl Write for Narrow {
        fn write(&mut self, bytes: &[u8]) -> Result<usize> {
            let n = bytes.len().min(2).min(self.room);
            self.written.extend_from_slice(&bytes[..n]);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_all_and_write_fmt_go_on_until_done_or_stuck() {
        let mut narrow = Narrow { written: std::vec::Vec::new(), room: 100 };
        let word = "three";
        write!(narrow, "{}-{word}", 12).unwrap();
        assert_eq!(narrow.written, b"12-three");
        let mut full = Narrow { written: std::vec::Vec::new(), room: 3 };
        assert_eq!(full.write_all(b"abcdef").unwrap_err().kind(), ErrorKind::WriteZero);
        assert_eq!(write!(full, "{}", 1).unwrap_err().kind(), ErrorKind::WriteZero, "the writer's error, not fmt's");
    }

    #[test]
    fn without_a_host_reads_fail_as_unsupported() {
        let mut buffer = [0; 4];
        assert_eq!(stdin().read(&mut buffer).unwrap_err().raw_os_error(), Some(errno::ENOSYS));
        assert_eq!(stdin().read_line_bytes(&mut buffer).unwrap_err().kind(), ErrorKind::Unsupported);
    }
}
