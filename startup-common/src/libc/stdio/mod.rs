//! C's `<stdio.h>` streams: `FILE`, the three standard streams, the table of the files a program opened, and the
//! bodies of the C functions on them ([`functions`]), which `target_runtime!` exports.
//!
//! A `FILE` is unbuffered on the device: every call is one RPC message (or a few), and the host buffers what is
//! written to a file until it is flushed, closed, read, sought, or the run ends ([`crate::libc::files`]). stdout and stderr
//! keep the output path of `puts` and `printf` ([`crate::libc::io`]).
//!
//! A `FILE *` from the program is checked before it is used: it must be one of the three standard streams or an
//! entry of the table, open. Anything else (a null pointer, a pointer to elsewhere, a stream already closed) fails
//! the call with [`errno::EBADF`](crate::libc::errno::EBADF) rather than reading memory through it. A table entry is used
//! again by a later `fopen` (as late as can be: `fopen` looks for a free entry after the one it took last), so a
//! `FILE *` kept after `fclose` may then name another file, as in any C library.

pub mod functions;

use core::ffi::c_int;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::libc::errno;
use crate::libc::files::{MAX_OPEN_FILES, STDIN_HANDLE};
use crate::libc::io::Stream;

/// What C's `FILE *` points at.
#[repr(C)]
pub struct File {
    kind: Kind,
    /// [`FREE`], [`BUSY`] or [`OPEN`]: a table entry goes from free to busy to open in `fopen`, from open to busy to
    /// free in `fclose`. The standard streams are always open.
    slot: AtomicU32,
    /// [`END_OF_FILE`], [`ERROR`], [`READABLE`], [`WRITABLE`].
    flags: AtomicU32,
    /// The host's handle of an open table entry.
    handle: AtomicU64,
}

/// Which stream a [`File`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
enum Kind {
    Stdin,
    Stdout,
    Stderr,
    /// An entry of [`OPEN_FILES`].
    Opened,
}

const FREE: u32 = 0;
const BUSY: u32 = 1;
const OPEN: u32 = 2;

/// C's end-of-file indicator (`feof`).
pub const END_OF_FILE: u32 = 1;
/// C's error indicator (`ferror`).
pub const ERROR: u32 = 2;
/// The stream may be read.
pub const READABLE: u32 = 4;
/// The stream may be written.
pub const WRITABLE: u32 = 8;

/// C's `*stdin`.
pub static STDIN: File = File::standard(Kind::Stdin, READABLE);
/// C's `*stdout`.
pub static STDOUT: File = File::standard(Kind::Stdout, WRITABLE);
/// C's `*stderr`.
pub static STDERR: File = File::standard(Kind::Stderr, WRITABLE);

/// The files a program has open through `fopen`: as many as the host lets a run open.
pub static OPEN_FILES: [File; MAX_OPEN_FILES] = [const { File::free() }; MAX_OPEN_FILES];

/// Where `fopen` starts looking for a free entry: after the last one taken.
static NEXT_ENTRY: AtomicU32 = AtomicU32::new(0);

/// What a stream reads from or writes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The loader's stdin.
    Stdin,
    /// stdout or stderr, through the output path of `printf`.
    Output(Stream),
    /// A file the host opened: its handle.
    File(u64),
}

impl Target {
    /// The host's handle to read through: stdin's or a file's.
    pub fn read_handle(self) -> Option<u64> {
        match self {
            Target::Stdin => Some(STDIN_HANDLE),
            Target::File(handle) => Some(handle),
            Target::Output(_) => None,
        }
    }
}

impl File {
    const fn standard(kind: Kind, flags: u32) -> Self {
        Self { kind, slot: AtomicU32::new(OPEN), flags: AtomicU32::new(flags), handle: AtomicU64::new(0) }
    }

    const fn free() -> Self {
        Self { kind: Kind::Opened, slot: AtomicU32::new(FREE), flags: AtomicU32::new(0), handle: AtomicU64::new(0) }
    }

    /// The stream `file` points at, if it is a standard stream or an entry of [`OPEN_FILES`] (compared by address;
    /// nothing is read through any other pointer).
    pub fn resolve(file: *mut File) -> Option<&'static File> {
        let address = file.cast_const();
        if let Some(standard) = [&STDIN, &STDOUT, &STDERR].into_iter().find(|known| core::ptr::eq(*known, address)) {
            return Some(standard);
        }
        let offset = (address as usize).wrapping_sub(OPEN_FILES.as_ptr() as usize);
        let index = offset / size_of::<File>();
        offset.is_multiple_of(size_of::<File>()).then(|| OPEN_FILES.get(index)).flatten()
    }

    /// The stream `file` points at, and what it is connected to: [`errno::EBADF`] for a pointer that is no stream or
    /// a stream not open.
    pub fn target_of(file: *mut File) -> Result<(&'static File, Target), c_int> {
        let file = Self::resolve(file).ok_or(errno::EBADF)?;
        Ok((file, file.target()?))
    }

    /// What the stream is connected to; [`errno::EBADF`] when it is not open.
    pub fn target(&self) -> Result<Target, c_int> {
        Ok(match self.kind {
            Kind::Stdin => Target::Stdin,
            Kind::Stdout => Target::Output(Stream::Stdout),
            Kind::Stderr => Target::Output(Stream::Stderr),
            Kind::Opened => {
                if self.slot.load(Ordering::Acquire) != OPEN {
                    return Err(errno::EBADF);
                }
                Target::File(self.handle.load(Ordering::Relaxed))
            }
        })
    }

    /// Whether all of `flags` are set.
    pub fn has(&self, flags: u32) -> bool {
        self.flags.load(Ordering::Relaxed) & flags == flags
    }

    /// Sets `flags` (the end-of-file or error indicator).
    pub fn set(&self, flags: u32) {
        self.flags.fetch_or(flags, Ordering::Relaxed);
    }

    /// Clears `flags`.
    pub fn clear(&self, flags: u32) {
        self.flags.fetch_and(!flags, Ordering::Relaxed);
    }

    /// Takes a free table entry for `fopen`, or `None` when all are in use. The search starts after the entry taken
    /// last, so that an entry just closed is taken again as late as can be.
    fn claim() -> Option<&'static File> {
        let start = NEXT_ENTRY.load(Ordering::Relaxed) as usize % MAX_OPEN_FILES;
        let (index, file) =
            (start..MAX_OPEN_FILES).chain(0..start).map(|index| (index, &OPEN_FILES[index])).find(|(_, file)| {
                file.slot.load(Ordering::Relaxed) == FREE
                    && file.slot.compare_exchange(FREE, BUSY, Ordering::Acquire, Ordering::Relaxed).is_ok()
            })?;
        NEXT_ENTRY.store(index as u32 + 1, Ordering::Relaxed);
        Some(file)
    }

    /// Makes a claimed entry the open stream of `handle`, with the `READABLE`/`WRITABLE` bits of `access`.
    fn open(&self, handle: u64, access: u32) {
        self.handle.store(handle, Ordering::Relaxed);
        self.flags.store(access, Ordering::Relaxed);
        self.slot.store(OPEN, Ordering::Release);
    }

    /// Takes an open table entry for `fclose`: its handle, or `None` when it is not open (or another thread is
    /// closing it).
    fn begin_close(&self) -> Option<u64> {
        if self.kind != Kind::Opened {
            return None;
        }
        self.slot.compare_exchange(OPEN, BUSY, Ordering::Acquire, Ordering::Relaxed).ok()?;
        Some(self.handle.load(Ordering::Relaxed))
    }

    /// Frees a claimed entry.
    fn release(&self) {
        self.flags.store(0, Ordering::Relaxed);
        self.slot.store(FREE, Ordering::Release);
    }
}

/// Forgets every open file and clears the standard streams' indicators: a new run starts with none open (the host
/// closed them when the last run ended). Called by `_begin`, before any other thread runs.
pub fn reset() {
    for file in &OPEN_FILES {
        file.release();
    }
    NEXT_ENTRY.store(0, Ordering::Relaxed);
    // One call each rather than a loop over an array of the three, which the compiler keeps in local memory.
    STDIN.clear(END_OF_FILE | ERROR);
    STDOUT.clear(END_OF_FILE | ERROR);
    STDERR.clear(END_OF_FILE | ERROR);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_streams_and_table_entries_resolve() {
        let pointer = |file: &File| file as *const File as *mut File;
        assert!(core::ptr::eq(File::resolve(pointer(&STDOUT)).unwrap(), &STDOUT));
        assert!(core::ptr::eq(File::resolve(pointer(&OPEN_FILES[7])).unwrap(), &OPEN_FILES[7]));
        assert!(File::resolve(pointer(&OPEN_FILES[MAX_OPEN_FILES - 1])).is_some());
        assert!(File::resolve(core::ptr::null_mut()).is_none());
        let inside = pointer(&OPEN_FILES[3]).cast::<u8>().wrapping_add(4).cast::<File>();
        assert!(File::resolve(inside).is_none(), "a pointer into an entry is not a stream");
        // The standard streams may lie right after or before the table: those addresses are theirs.
        let in_table = |file: *mut File| File::resolve(file).is_some_and(|found| found.kind == Kind::Opened);
        assert!(!in_table(pointer(&OPEN_FILES[MAX_OPEN_FILES - 1]).wrapping_add(1)));
        assert!(!in_table(pointer(&OPEN_FILES[0]).wrapping_sub(1)));
        let elsewhere = File::free();
        assert!(File::resolve(pointer(&elsewhere)).is_none());
    }

    #[test]
    fn a_table_entry_is_a_stream_only_while_open() {
        let file = File::free();
        assert_eq!(file.target(), Err(errno::EBADF));
        file.open(42, READABLE);
        assert_eq!(file.target(), Ok(Target::File(42)));
        assert!(file.has(READABLE) && !file.has(WRITABLE));
        assert_eq!(file.begin_close(), Some(42));
        assert_eq!(file.begin_close(), None, "a second close finds it closing");
        assert_eq!(file.target(), Err(errno::EBADF));
        file.release();
        assert_eq!(file.target(), Err(errno::EBADF));
        assert_eq!(STDIN.target(), Ok(Target::Stdin));
    }

    #[test]
    fn an_entry_closed_is_taken_again_only_after_the_others() {
        let first = File::claim().unwrap();
        first.release();
        let second = File::claim().unwrap();
        assert!(!core::ptr::eq(first, second), "the next entry, not the one just freed");
        second.release();
        assert_eq!(STDERR.begin_close(), None, "the standard streams are not table entries");
    }
}
