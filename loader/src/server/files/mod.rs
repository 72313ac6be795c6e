//! The files a run opened, and its stdin: the host's side of `startup_common::libc::files`.
//!
//! Every handle the device sends is checked against the table: a handle never given, closed, or not open for what is
//! asked is [`errno::EBADF`] for the device, never a host failure. What the table holds is bounded: at most
//! [`MAX_OPEN_FILES`] files, each with at most [`READ_AHEAD`] bytes read ahead and [`WRITE_BUFFER`] bytes waiting to
//! be written, and the path it was opened with (at most `MAX_PATH` bytes). Files are opened without blocking
//! (`O_NONBLOCK`, so a terminal that has no input yet answers at once and the device asks again); a FIFO or a socket
//! is refused ([`errno::ENXIO`]): reading one without blocking cannot tell "no writer yet" from its end.

pub(super) mod handlers;
mod read_ahead;
mod stdin;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::ffi::{OsStr, c_int};
use std::fs::{self, OpenOptions};
use std::io::{self, ErrorKind, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use gpu_startup_protocol::errno;
use gpu_startup_protocol::files::{
    DirectoryEntry, FIRST_FILE_HANDLE, FileKind, FileStatus, OpenFlags, ReadMode, RemoveKind, StatTarget, Whence,
};

pub use gpu_startup_protocol::files::{MAX_OPEN_FILES, MAX_PATH, MAX_READ};
pub use read_ahead::READ_AHEAD;
use read_ahead::ReadAhead;
pub use stdin::{STDIN_HELD, StdinSource};

/// The most bytes written to a file that the host holds before writing them out.
pub const WRITE_BUFFER: usize = 64 << 10;

/// The error number the device gets for `error`: the operating system's, or the nearest for an error std made.
pub fn error_number(error: &io::Error) -> c_int {
    if let Some(number) = error.raw_os_error() {
        return number;
    }
    match error.kind() {
        ErrorKind::NotFound => errno::ENOENT,
        ErrorKind::PermissionDenied => errno::EACCES,
        ErrorKind::AlreadyExists => errno::EEXIST,
        ErrorKind::WouldBlock => errno::EAGAIN,
        ErrorKind::InvalidInput | ErrorKind::InvalidData => errno::EINVAL,
        ErrorKind::IsADirectory => errno::EISDIR,
        ErrorKind::NotADirectory => errno::ENOTDIR,
        ErrorKind::StorageFull => errno::ENOSPC,
        ErrorKind::OutOfMemory => errno::ENOMEM,
        ErrorKind::Unsupported => errno::EOPNOTSUPP,
        ErrorKind::UnexpectedEof | ErrorKind::WriteZero => errno::EIO,
        _ => errno::EIO,
    }
}

/// A path from the device: bytes, as Unix paths are; relative ones from the loader's working directory.
fn device_path(bytes: &[u8]) -> Result<&Path, c_int> {
    if bytes.len() >= MAX_PATH {
        return Err(errno::ENAMETOOLONG);
    }
    if bytes.contains(&0) {
        return Err(errno::EINVAL);
    }
    Ok(Path::new(OsStr::from_bytes(bytes)))
}

/// The run's open files and its stdin.
pub struct Files {
    open: HashMap<u64, OpenFile>,
    next_handle: u64,
    stdin: StdinSource,
    stdin_ahead: ReadAhead,
    /// Whether the program may open, remove and rename files ([`Files::deny_file_system`]).
    file_system: bool,
}

/// A file the device opened.
struct OpenFile {
    file: fs::File,
    path: PathBuf,
    readable: bool,
    writable: bool,
    read_ahead: ReadAhead,
    /// Bytes the device wrote that are not in the file yet.
    pending: Vec<u8>,
    /// An error writing `pending` out that the device has not been told of: the next flush or close returns it.
    deferred_error: Option<io::Error>,
    /// Opened with [`OpenFlags::UNBUFFERED`]: writes go to the file as they come, their errors with them.
    unbuffered: bool,
    /// For a directory opened with [`OpenFlags::DIRECTORY`]: its entries, which reads give instead of `file`'s bytes.
    listing: Option<Listing>,
}

impl Files {
    /// No file open; the device's stdin reads come from `stdin`.
    pub fn new(stdin: StdinSource) -> Self {
        Self {
            open: HashMap::new(),
            next_handle: FIRST_FILE_HANDLE,
            stdin,
            stdin_ahead: ReadAhead::default(),
            file_system: true,
        }
    }

    /// Reads the device's stdin from `stdin` from now on; what was read ahead of the old one is dropped.
    pub fn set_stdin(&mut self, stdin: StdinSource) {
        self.stdin = stdin;
        self.stdin_ahead.discard();
    }

    /// Refuses from now on every request that names a path (open, remove, rename) with [`errno::EACCES`], after
    /// checking it as usual: for a program that must not touch the host's files. stdin still reads.
    pub fn deny_file_system(&mut self) {
        self.file_system = false;
    }

    /// `path` as a path of the host's, if the program may use it.
    fn host_path<'p>(&self, path: &'p [u8]) -> Result<&'p Path, c_int> {
        let path = device_path(path)?;
        if self.file_system { Ok(path) } else { Err(errno::EACCES) }
    }

    /// How many files are open.
    pub fn open_count(&self) -> usize {
        self.open.len()
    }

    /// Opens `path` as `flags` say; the new handle.
    pub fn open(&mut self, path: &[u8], flags: OpenFlags) -> Result<u64, c_int> {
        let path = self.host_path(path)?;
        if flags.0 & !OpenFlags::ALL != 0 {
            return Err(errno::EINVAL);
        }
        if self.open.len() >= MAX_OPEN_FILES {
            return Err(errno::EMFILE);
        }
        if flags.contains(OpenFlags::DIRECTORY) {
            return self.open_directory(path, flags);
        }
        let file = OpenOptions::new()
            .read(flags.contains(OpenFlags::READ))
            .write(flags.contains(OpenFlags::WRITE))
            .append(flags.contains(OpenFlags::APPEND))
            .truncate(flags.contains(OpenFlags::TRUNCATE))
            .create(flags.contains(OpenFlags::CREATE))
            .create_new(flags.contains(OpenFlags::CREATE_NEW))
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(|error| error_number(&error))?;
        let kind = file.metadata().map_err(|error| error_number(&error))?.file_type();
        if kind.is_dir() {
            return Err(errno::EISDIR);
        }
        if kind.is_fifo() || kind.is_socket() {
            return Err(errno::ENXIO);
        }
        let open = OpenFile {
            file,
            path: path.to_owned(),
            readable: flags.contains(OpenFlags::READ),
            writable: flags.contains(OpenFlags::WRITE) || flags.contains(OpenFlags::APPEND),
            read_ahead: ReadAhead::default(),
            pending: Vec::new(),
            deferred_error: None,
            unbuffered: flags.contains(OpenFlags::UNBUFFERED),
            listing: None,
        };
        Ok(self.insert(open))
    }

    /// Opens the directory at `path` to read its entries: for reading only (`EINVAL` otherwise), and only a directory
    /// (`ENOTDIR`).
    fn open_directory(&mut self, path: &Path, flags: OpenFlags) -> Result<u64, c_int> {
        if flags.0 & !OpenFlags::UNBUFFERED != OpenFlags::READ | OpenFlags::DIRECTORY {
            return Err(errno::EINVAL);
        }
        // `O_DIRECTORY` refuses anything else (`ENOTDIR`) before opening it, so a FIFO cannot block the host here.
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(|error| error_number(&error))?;
        let listing = Listing::new(path.to_owned()).map_err(|error| error_number(&error))?;
        let open = OpenFile {
            file,
            path: path.to_owned(),
            readable: true,
            writable: false,
            read_ahead: ReadAhead::default(),
            pending: Vec::new(),
            deferred_error: None,
            unbuffered: true,
            listing: Some(listing),
        };
        Ok(self.insert(open))
    }

    /// A new handle for `open`.
    fn insert(&mut self, open: OpenFile) -> u64 {
        let handle = self.next_handle;
        self.next_handle += 1;
        self.open.insert(handle, open);
        handle
    }

    fn file(&mut self, handle: u64) -> Result<&mut OpenFile, c_int> {
        self.open.get_mut(&handle).ok_or(errno::EBADF)
    }

    /// Closes `handle`, writing out what it holds; the write error, if any (it is closed either way).
    pub fn close(&mut self, handle: u64) -> Result<(), c_int> {
        let mut file = self.open.remove(&handle).ok_or(errno::EBADF)?;
        file.flush()
    }

    /// Reads for the device from `handle` (or stdin) into `out`, as [`ReadAhead::take`] says; `EAGAIN` when there is
    /// nothing yet.
    pub fn read(&mut self, handle: u64, max: usize, mode: ReadMode, out: &mut Vec<u8>) -> Result<(), c_int> {
        let max = max.min(MAX_READ);
        let taken = if handle == gpu_startup_protocol::files::STDIN_HANDLE {
            self.stdin_ahead.take(&mut self.stdin, max, mode, out)
        } else {
            let file = self.file(handle)?;
            if !file.readable {
                return Err(errno::EBADF);
            }
            file.write_out().map_err(|error| error_number(&error))?;
            match &mut file.listing {
                Some(listing) => file.read_ahead.take(listing, max, mode, out),
                None => file.read_ahead.take(&mut file.file, max, mode, out),
            }
        };
        taken.map_err(|error| error_number(&error))
    }

    /// Whether `handle` is open for writing: `EBADF` if not.
    pub fn check_writable(&mut self, handle: u64) -> Result<(), c_int> {
        if self.file(handle)?.writable { Ok(()) } else { Err(errno::EBADF) }
    }

    /// Writes `bytes` to `handle`, holding them until [`WRITE_BUFFER`] bytes are waiting.
    pub fn write(&mut self, handle: u64, bytes: &[u8]) -> Result<(), c_int> {
        self.check_writable(handle)?;
        self.file(handle)?.write(bytes).map_err(|error| error_number(&error))
    }

    /// Writes `bytes` to `handle` if it is open, keeping an error for its next flush or close: for output whose writer
    /// is gone (a message cut short), which nobody could be told of now.
    pub fn write_or_defer(&mut self, handle: u64, bytes: &[u8]) {
        if let Ok(file) = self.file(handle)
            && file.writable
            && let Err(error) = file.write(bytes)
        {
            file.deferred_error.get_or_insert(error);
        }
    }

    /// Moves `handle`'s position; the new one.
    pub fn seek(&mut self, handle: u64, offset: i64, whence: Whence) -> Result<u64, c_int> {
        if handle == gpu_startup_protocol::files::STDIN_HANDLE {
            return Err(errno::ESPIPE);
        }
        self.file(handle)?.seek(offset, whence).map_err(|error| error_number(&error))
    }

    /// Writes out what `handle` holds; the first write error since the device last heard of one.
    pub fn flush(&mut self, handle: u64) -> Result<(), c_int> {
        self.file(handle)?.flush()
    }

    /// Removes `path`: a file, an empty directory too for [`RemoveKind::FileOrEmptyDirectory`], or only an empty
    /// directory for [`RemoveKind::Directory`].
    pub fn remove(&self, path: &[u8], kind: RemoveKind) -> Result<(), c_int> {
        let path = self.host_path(path)?;
        if kind == RemoveKind::Directory {
            return fs::remove_dir(path).map_err(|error| error_number(&error));
        }
        let removed = match fs::remove_file(path) {
            Err(error) if kind == RemoveKind::FileOrEmptyDirectory && path.is_dir() => {
                fs::remove_dir(path).map_err(|_| error)
            }
            removed => removed,
        };
        removed.map_err(|error| error_number(&error))
    }

    /// Creates the directory `path` (its parent must exist), with the permissions the loader's process gives.
    pub fn make_directory(&self, path: &[u8]) -> Result<(), c_int> {
        fs::create_dir(self.host_path(path)?).map_err(|error| error_number(&error))
    }

    /// The loader's working directory, which relative paths start from (`EACCES` without a file system).
    pub fn current_directory(&self) -> Result<Vec<u8>, c_int> {
        if !self.file_system {
            return Err(errno::EACCES);
        }
        let path = std::env::current_dir().map_err(|error| error_number(&error))?;
        Ok(path.into_os_string().into_encoded_bytes())
    }

    /// Renames `from` to `to`.
    pub fn rename(&self, from: &[u8], to: &[u8]) -> Result<(), c_int> {
        fs::rename(self.host_path(from)?, self.host_path(to)?).map_err(|error| error_number(&error))
    }

    /// What `target` is: the file at `path` (following links, or not) or the open file `handle` names, whose size
    /// counts what it holds (written out first).
    pub fn stat(&mut self, target: StatTarget, path: &[u8]) -> Result<FileStatus, c_int> {
        let metadata = match target {
            StatTarget::Path => fs::metadata(self.host_path(path)?),
            StatTarget::Link => fs::symlink_metadata(self.host_path(path)?),
            StatTarget::Open(handle) => {
                let file = self.file(handle)?;
                file.write_out().map_err(|error| error_number(&error))?;
                file.file.metadata()
            }
        };
        metadata.map(|metadata| file_status(&metadata)).map_err(|error| error_number(&error))
    }

    /// Closes every file, writing out what each holds, as the run ends: the paths whose last writes failed, with
    /// the error.
    pub fn close_all(&mut self) -> Vec<(PathBuf, c_int)> {
        let mut handles: Vec<u64> = self.open.keys().copied().collect();
        handles.sort_unstable();
        let mut failed = Vec::new();
        for handle in handles {
            if let Some(mut file) = self.open.remove(&handle)
                && let Err(error) = file.flush()
            {
                failed.push((std::mem::take(&mut file.path), error));
            }
        }
        failed
    }
}

impl OpenFile {
    /// Writes `bytes` after what is waiting, writing it all out once more than [`WRITE_BUFFER`] would wait.
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.read_ahead.unread() > 0 {
            // The file's position is past what the device has read: writes go where it is.
            self.file.seek(SeekFrom::Current(-(self.read_ahead.unread() as i64)))?;
            self.read_ahead.discard();
        }
        if self.unbuffered {
            // Nothing waits in `pending` for an unbuffered file: every write went out as it came.
            return self.file.write_all(bytes);
        }
        if self.pending.len() + bytes.len() > WRITE_BUFFER {
            self.write_out()?;
            if bytes.len() >= WRITE_BUFFER {
                return self.file.write_all(bytes);
            }
        }
        self.pending.extend_from_slice(bytes);
        Ok(())
    }

    /// Writes out what is waiting. What was waiting is dropped even when this fails, as C's streams drop their buffer.
    fn write_out(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let written = self.file.write_all(&self.pending);
        self.pending.clear();
        written
    }

    /// Writes out what is waiting; this failure or an earlier deferred one.
    fn flush(&mut self) -> Result<(), c_int> {
        let written = self.write_out();
        if let Some(error) = self.deferred_error.take() {
            return Err(error_number(&error));
        }
        written.map_err(|error| error_number(&error))
    }

    /// Moves the position, after writing out what waits; `Current` counts from where the device is, behind what was
    /// read ahead. Telling the position (0 from `Current`) keeps what was read ahead.
    fn seek(&mut self, offset: i64, whence: Whence) -> io::Result<u64> {
        if let Some(listing) = &mut self.listing {
            // A directory's entries can only be read again from the start (POSIX's `rewinddir`).
            if (offset, whence) != (0, Whence::Start) {
                return Err(io::Error::from_raw_os_error(errno::EINVAL));
            }
            *listing = Listing::new(listing.path.clone())?;
            self.read_ahead.discard();
            return Ok(0);
        }
        self.write_out()?;
        let unread = self.read_ahead.unread() as u64;
        if whence == Whence::Current && offset == 0 {
            return Ok(self.file.stream_position()? - unread);
        }
        let target = match whence {
            Whence::Start => {
                SeekFrom::Start(u64::try_from(offset).map_err(|_| io::Error::from_raw_os_error(errno::EINVAL))?)
            }
            Whence::Current => SeekFrom::Current(
                offset.checked_sub(unread as i64).ok_or_else(|| io::Error::from_raw_os_error(errno::EOVERFLOW))?,
            ),
            Whence::End => SeekFrom::End(offset),
        };
        let position = self.file.seek(target)?;
        self.read_ahead.discard();
        Ok(position)
    }
}

/// The kind of file the device is told of (a symbolic link itself, where `file_type` is a link's).
fn file_kind(file_type: fs::FileType) -> FileKind {
    if file_type.is_symlink() {
        FileKind::SymbolicLink
    } else if file_type.is_dir() {
        FileKind::Directory
    } else if file_type.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    }
}

/// The status the device is told of a file with `metadata`.
fn file_status(metadata: &fs::Metadata) -> FileStatus {
    use std::os::unix::fs::MetadataExt;
    // A nanosecond count outside 0..1e9 would be a broken file system's; clamp rather than send it on.
    let time = |seconds: i64, nanoseconds: i64| (seconds, nanoseconds.clamp(0, 999_999_999) as u32);
    FileStatus {
        kind: file_kind(metadata.file_type()),
        permissions: metadata.mode() & 0o7777,
        size: metadata.len(),
        modified: time(metadata.mtime(), metadata.mtime_nsec()),
        accessed: time(metadata.atime(), metadata.atime_nsec()),
        changed: time(metadata.ctime(), metadata.ctime_nsec()),
    }
}

/// A directory's entries as the device reads them: [`DirectoryEntry`] after entry, made as they are read, so a large
/// directory costs no more than one entry and what the read asks for.
struct Listing {
    path: PathBuf,
    entries: fs::ReadDir,
    /// The entry being read and how much of it was.
    entry: Vec<u8>,
    taken: usize,
}

impl Listing {
    fn new(path: PathBuf) -> io::Result<Self> {
        let entries = fs::read_dir(&path)?;
        Ok(Self { path, entries, entry: Vec::new(), taken: 0 })
    }

    /// Makes the next entry the one being read; false at the end.
    fn next_entry(&mut self) -> io::Result<bool> {
        use std::os::unix::fs::DirEntryExt;
        if let Some(entry) = self.entries.next() {
            let entry = entry?;
            let kind = file_kind(entry.file_type()?);
            let name = entry.file_name();
            let name = name.as_bytes();
            let Some(head) = (DirectoryEntry { inode: entry.ino(), kind, name }).head() else {
                return Err(io::Error::from_raw_os_error(errno::ENAMETOOLONG));
            };
            self.entry.clear();
            self.entry.extend_from_slice(&head);
            self.entry.extend_from_slice(name);
            self.taken = 0;
            return Ok(true);
        }
        Ok(false)
    }
}

impl io::Read for Listing {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        if self.taken == self.entry.len() && !self.next_entry()? {
            return Ok(0);
        }
        let count = buffer.len().min(self.entry.len() - self.taken);
        buffer[..count].copy_from_slice(&self.entry[self.taken..self.taken + count]);
        self.taken += count;
        Ok(count)
    }
}
