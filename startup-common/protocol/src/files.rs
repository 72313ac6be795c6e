//! The values the file operations' messages carry (`docs/rpc.md`): how a file is opened, where a seek counts from,
//! how much a read takes, what a remove removes, and the limits both sides keep. Error numbers travel as the C
//! library's (`startup_common::libc::errno`).

/// The handle that names the loader's stdin: it can only be read.
pub const STDIN_HANDLE: u64 = 0;

/// The first handle the host gives a file; the next file gets the next number, and no number is given twice in a
/// run.
pub const FIRST_FILE_HANDLE: u64 = 3;

/// The most files a run may have open at once (C's `FOPEN_MAX`); one more is `EMFILE`.
pub const MAX_OPEN_FILES: usize = 256;

/// The most bytes one lane reads in one message: the host holds what it sends. A longer read returns this many
/// (a short read, as `read` may return); C's `fread` and Rust's `read_exact` go on with the rest.
pub const MAX_READ: usize = 64 << 10;

/// The longest path, in bytes (Linux's `PATH_MAX` with its NUL); a longer one is `ENAMETOOLONG`.
pub const MAX_PATH: usize = 4096;

/// How a file is opened: the head word of [`FILE_OPEN`](crate::opcode::FILE_OPEN). The meanings are those of Rust's
/// `OpenOptions`.
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
    /// The file must not exist: it is created, or the open fails with `EEXIST`.
    pub const CREATE_NEW: u64 = 32;
    /// A directory, opened to read its entries ([`DirectoryEntry`]): only with [`OpenFlags::READ`]; a path that is
    /// not a directory is `ENOTDIR`. Without this flag a directory is `EISDIR`.
    pub const DIRECTORY: u64 = 64;
    /// Every write reaches the file at once, and its error is the write's, as a POSIX descriptor's (std's `File`);
    /// without it the host holds what is written for a later write, flush or close, as C's streams buffer.
    pub const UNBUFFERED: u64 = 128;
    /// Every flag there is; a head word with another bit set is `EINVAL`.
    pub const ALL: u64 = 255;

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

impl OpenFlags {
    /// Linux's (and Hermit's) `open` flags: the access mode in the low two bits.
    pub const O_WRONLY: i32 = 0o1;
    pub const O_RDWR: i32 = 0o2;
    pub const O_CREAT: i32 = 0o100;
    pub const O_EXCL: i32 = 0o200;
    pub const O_TRUNC: i32 = 0o1000;
    pub const O_APPEND: i32 = 0o2000;
    /// Accepted and ignored: no read waits here (a read of stdin with nothing yet waits in the device's `read`).
    pub const O_NONBLOCK: i32 = 0o4000;
    pub const O_DIRECTORY: i32 = 0o200000;

    /// The flags of a POSIX `open` (Rust std's `OpenOptions` on Hermit), [`OpenFlags::UNBUFFERED`] as a descriptor's
    /// writes are, or `None` for an access mode of 3 or a flag not listed above.
    pub fn from_posix(flags: i32) -> Option<Self> {
        let known =
            3 | Self::O_CREAT | Self::O_EXCL | Self::O_TRUNC | Self::O_APPEND | Self::O_NONBLOCK | Self::O_DIRECTORY;
        if flags & !known != 0 {
            return None;
        }
        let access = match flags & 3 {
            0 => Self::READ,
            Self::O_WRONLY => Self::WRITE,
            Self::O_RDWR => Self::READ | Self::WRITE,
            _ => return None,
        };
        let has = |flag: i32| flags & flag != 0;
        // `O_EXCL` means something only with `O_CREAT`, as in POSIX.
        let create = match (has(Self::O_CREAT), has(Self::O_EXCL)) {
            (true, true) => Self::CREATE_NEW,
            (true, false) => Self::CREATE,
            (false, _) => 0,
        };
        let truncate = if has(Self::O_TRUNC) { Self::TRUNCATE } else { 0 };
        let append = if has(Self::O_APPEND) { Self::APPEND } else { 0 };
        let directory = if has(Self::O_DIRECTORY) { Self::DIRECTORY } else { 0 };
        Some(Self(access | create | truncate | append | directory | Self::UNBUFFERED))
    }
}

/// Where a seek's offset counts from: word 2 of [`FILE_SEEK`](crate::opcode::FILE_SEEK), C's `SEEK_SET`, `SEEK_CUR`,
/// `SEEK_END`.
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

/// How much a read takes: word 2 of [`FILE_READ`](crate::opcode::FILE_READ).
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

/// What [`FILE_REMOVE`](crate::opcode::FILE_REMOVE) removes: its head word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum RemoveKind {
    /// Only a file (Rust's `remove_file`): a directory is `EISDIR`.
    File = 0,
    /// A file or an empty directory (C's `remove`).
    FileOrEmptyDirectory = 1,
    /// Only an empty directory (POSIX's `rmdir`, Rust's `remove_dir`): a file is `ENOTDIR`.
    Directory = 2,
}

impl RemoveKind {
    pub const fn from_number(number: u64) -> Option<Self> {
        match number {
            0 => Some(Self::File),
            1 => Some(Self::FileOrEmptyDirectory),
            2 => Some(Self::Directory),
            _ => None,
        }
    }
}

/// What [`FILE_STAT`](crate::opcode::FILE_STAT) tells of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatTarget {
    /// The path, following symbolic links (`stat`, Rust's `fs::metadata`).
    Path,
    /// The path itself, a symbolic link included (`lstat`, `fs::symlink_metadata`).
    Link,
    /// The open file with this handle (`fstat`, `File::metadata`).
    Open(u64),
}

/// The kinds of file a [`FileStatus`] tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FileKind {
    /// A device, a FIFO, a socket: anything else.
    Other = 0,
    File = 1,
    Directory = 2,
    SymbolicLink = 3,
}

impl FileKind {
    /// The kind numbered `number`; [`FileKind::Other`] for a number that names none.
    pub const fn from_number(number: u8) -> Self {
        match number {
            1 => Self::File,
            2 => Self::Directory,
            3 => Self::SymbolicLink,
            _ => Self::Other,
        }
    }

    /// The kind's bits of a POSIX `st_mode` (`S_IFREG`, `S_IFDIR`, `S_IFLNK`; `S_IFCHR` for the others).
    pub const fn posix_mode(self) -> u32 {
        match self {
            Self::Other => 0o2_0000,
            Self::File => 0o10_0000,
            Self::Directory => 0o4_0000,
            Self::SymbolicLink => 0o12_0000,
        }
    }
}

/// What a file is, as [`FILE_STAT`](crate::opcode::FILE_STAT) tells it: the kind, the permission bits (`0o7777`),
/// the size in bytes and three times, each seconds and nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStatus {
    pub kind: FileKind,
    pub permissions: u32,
    pub size: u64,
    pub modified: (i64, u32),
    pub accessed: (i64, u32),
    pub changed: (i64, u32),
}

/// One entry of a directory, as reading a handle opened with [`OpenFlags::DIRECTORY`] gives them, one after another:
/// the inode number (8 bytes, little-endian), the [`FileKind`] (1 byte, not following a symbolic link), the name's
/// length (1 byte) and the name (without a NUL). `.` and `..` are not listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectoryEntry<'a> {
    pub inode: u64,
    pub kind: FileKind,
    pub name: &'a [u8],
}

/// Bytes of a [`DirectoryEntry`] before its name.
pub const DIRECTORY_ENTRY_HEAD: usize = 10;

impl<'a> DirectoryEntry<'a> {
    /// The longest name an entry holds (Linux's `NAME_MAX`).
    pub const MAX_NAME: usize = 255;

    /// The bytes before the name: the entry is these, then the name; `None` for a name longer than
    /// [`Self::MAX_NAME`].
    pub fn head(&self) -> Option<[u8; DIRECTORY_ENTRY_HEAD]> {
        let length = u8::try_from(self.name.len()).ok()?;
        let mut head = [0; DIRECTORY_ENTRY_HEAD];
        head[..8].copy_from_slice(&self.inode.to_le_bytes());
        head[8] = self.kind as u8;
        head[9] = length;
        Some(head)
    }

    /// The entry at the start of `bytes` and the bytes it takes, or `None` when `bytes` does not hold a whole one.
    pub fn decode(bytes: &'a [u8]) -> Option<(Self, usize)> {
        let head = bytes.get(..DIRECTORY_ENTRY_HEAD)?;
        let inode = u64::from_le_bytes(head[..8].try_into().ok()?);
        let end = DIRECTORY_ENTRY_HEAD + usize::from(head[9]);
        let name = bytes.get(DIRECTORY_ENTRY_HEAD..end)?;
        Some((Self { inode, kind: FileKind::from_number(head[8]), name }, end))
    }
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
    fn directory_entries_round_trip_and_a_cut_one_is_not_read() {
        let entry = DirectoryEntry { inode: 1 << 40 | 7, kind: FileKind::SymbolicLink, name: b"link" };
        let mut bytes = std::vec::Vec::from(entry.head().unwrap());
        bytes.extend_from_slice(entry.name);
        bytes.extend_from_slice(&[9; 3]);
        assert_eq!(DirectoryEntry::decode(&bytes), Some((entry, 14)));
        assert_eq!(DirectoryEntry::decode(&bytes[..13]), None);
        assert_eq!(DirectoryEntry::decode(&bytes[..9]), None);
        let long = [b'x'; 256];
        assert_eq!(DirectoryEntry { inode: 0, kind: FileKind::File, name: &long }.head(), None);
        assert!(DirectoryEntry { inode: 0, kind: FileKind::File, name: &long[..255] }.head().is_some());
    }

    #[test]
    fn posix_flags_become_open_flags() {
        // A descriptor's writes are unbuffered, whatever else it asks.
        let flags = |posix: i32| OpenFlags::from_posix(posix).map(|flags| flags.0 & !OpenFlags::UNBUFFERED);
        assert!(OpenFlags::from_posix(0).unwrap().contains(OpenFlags::UNBUFFERED));
        let (r, w, a, t, c, n) = (
            OpenFlags::READ,
            OpenFlags::WRITE,
            OpenFlags::APPEND,
            OpenFlags::TRUNCATE,
            OpenFlags::CREATE,
            OpenFlags::CREATE_NEW,
        );
        let (wronly, rdwr) = (OpenFlags::O_WRONLY, OpenFlags::O_RDWR);
        let (creat, excl, trunc, append) =
            (OpenFlags::O_CREAT, OpenFlags::O_EXCL, OpenFlags::O_TRUNC, OpenFlags::O_APPEND);
        assert_eq!(flags(0), Some(r));
        assert_eq!(flags(OpenFlags::O_NONBLOCK), Some(r));
        assert_eq!(flags(wronly | creat | trunc), Some(w | c | t));
        assert_eq!(flags(wronly | creat | excl), Some(w | n));
        assert_eq!(flags(wronly | excl), Some(w));
        assert_eq!(flags(rdwr | append | creat), Some(r | w | a | c));
        assert_eq!(flags(3), None);
        assert_eq!(flags(OpenFlags::O_DIRECTORY), Some(r | OpenFlags::DIRECTORY));
        assert_eq!(flags(1 << 30), None);
    }
}
