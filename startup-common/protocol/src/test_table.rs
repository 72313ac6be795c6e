//! The test table: how a test binary tells the loader which tests it holds, without running anything.
//!
//! Each test that `startup_common`'s `gpu_test!` registers (what `#[gpu_startup::test]` expands to) is two exported
//! globals with the same `<id>`:
//!
//! - `__gpu_test_entry_<id>`: the address of the test's trampoline, a function with `main`'s exact prototype
//!   ([`MainFn`](crate::abi::MainFn)): PTX calls through a function pointer only with the callee's prototype. The loader
//!   passes the global's address to `_start` ([`StartArgs::test`](crate::abi::StartArgs::test)), which calls the
//!   function it holds instead of `main`.
//! - `__gpu_test_meta_<id>`: the test's description as plain bytes ([`encode`]), in the image's initialized data
//!   (PTX: `.visible .global .b8 NAME[N] = {...}`; cubin and AMD code object: the symbol's bytes), so that the
//!   loader lists and filters tests from the image alone, on a machine without a GPU, and says where each is in the
//!   source, as libtest's `--list --format json` does.
//!
//! The encoding is defined here once: [`TestSpec::encode`] is a `const fn` (the bytes are the static's
//! initializer), [`decode`] reads them back on the host. Layout, version 2, little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | version, [`VERSION`] |
//! | 1 | 1 | flags: [`FLAG_IGNORE`], [`FLAG_SHOULD_PANIC`] |
//! | 2 | 2 | name length `N` |
//! | 4 | 2 | expected panic text length `E` |
//! | 6 | 2 | source path length `P` |
//! | 8 | 12 | threads per block, x y z (all 0: the runner's default) |
//! | 20 | 12 | blocks, x y z (all 0: the runner's default) |
//! | 32 | 4 | timeout in milliseconds (0: the runner's default) |
//! | 36 | 16 | where the test function's name is in its source: start line, start column, end line, end column (1-based; columns count characters, the end's is just past the name), as libtest gives them |
//! | 52 | `N` | the test's name, UTF-8 |
//! | 52 + `N` | `E` | the text a `should_panic` test's panic message must contain, UTF-8 |
//! | 52 + `N` + `E` | `P` | the source file's path as the compiler names it (relative to the workspace), UTF-8 |

/// The prefix of every test-table global; the bitcode linker keeps globals with it visible.
pub const PREFIX: &str = "__gpu_test_";
/// The prefix of a test's entry global: the address of its trampoline.
pub const ENTRY_PREFIX: &str = crate::__gpu_test_entry_prefix!();
/// The prefix of a test's metadata global: [`encode`]d bytes.
pub const META_PREFIX: &str = crate::__gpu_test_meta_prefix!();

/// [`ENTRY_PREFIX`] as a literal, for `concat!` in `startup_common`'s `gpu_test!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __gpu_test_entry_prefix {
    () => {
        "__gpu_test_entry_"
    };
}

/// [`META_PREFIX`] as a literal, for `concat!` in `startup_common`'s `gpu_test!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __gpu_test_meta_prefix {
    () => {
        "__gpu_test_meta_"
    };
}

/// The encoding's version, its first byte.
pub const VERSION: u8 = 2;
/// Flag: the test is ignored unless the runner is asked for ignored tests.
pub const FLAG_IGNORE: u8 = 1;
/// Flag: the test passes only if a thread panics.
pub const FLAG_SHOULD_PANIC: u8 = 2;
/// Bytes before the name.
pub const HEADER_LEN: usize = 52;

/// Where a test function's name is in its source, as libtest's `--list --format json` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceSpan<'a> {
    /// The source file's path as the compiler names it: relative to the workspace the crate is built in.
    pub path: &'a str,
    /// 1-based line and column (in characters) of the name's first character.
    pub start: [u32; 2],
    /// 1-based line and column just past the name's last character.
    pub end: [u32; 2],
}

/// A test's description: what `startup_common`'s `gpu_test!` registers and the loader reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestSpec<'a> {
    /// The test's name as libtest spells it: its module path without the crate, then the function
    /// (`tests::adds`; `adds` at the crate's root).
    pub name: &'a str,
    pub ignore: bool,
    pub should_panic: bool,
    /// With `should_panic`: text the panic's message must contain.
    pub expected: Option<&'a str>,
    /// Threads per block; `[0; 3]`: the runner's default.
    pub threads: [u32; 3],
    /// Blocks; `[0; 3]`: the runner's default.
    pub blocks: [u32; 3],
    /// Milliseconds; 0: the runner's default.
    pub timeout_ms: u32,
    /// Where the test is in its source.
    pub source: SourceSpan<'a>,
}

impl TestSpec<'static> {
    /// A test with every option at its default, named from `path`, `<module_path!()>::<function>`: the crate's name,
    /// the path's first component, is left out, as libtest leaves it out.
    pub const fn new(path: &'static str) -> Self {
        Self {
            name: without_crate(path),
            ignore: false,
            should_panic: false,
            expected: None,
            threads: [0; 3],
            blocks: [0; 3],
            timeout_ms: 0,
            source: SourceSpan { path: "", start: [0; 2], end: [0; 2] },
        }
    }
}

impl<'a> TestSpec<'a> {
    /// Skip the test unless the runner is asked for ignored tests (`--ignored`, `--include-ignored`).
    pub const fn ignore(mut self) -> Self {
        self.ignore = true;
        self
    }

    /// The test passes only if a thread panics.
    pub const fn should_panic(mut self) -> Self {
        self.should_panic = true;
        self
    }

    /// The test passes only if a thread panics and the panic's message contains `text`.
    pub const fn should_panic_with(mut self, text: &'a str) -> Self {
        self.should_panic = true;
        self.expected = Some(text);
        self
    }

    /// Threads per block in x (y and z: 1).
    pub const fn threads(self, x: u32) -> Self {
        self.threads_xyz(x, 1, 1)
    }

    /// Threads per block in x, y and z.
    pub const fn threads_xyz(mut self, x: u32, y: u32, z: u32) -> Self {
        assert!(x > 0 && y > 0 && z > 0, "a test's thread counts must be at least 1");
        self.threads = [x, y, z];
        self
    }

    /// Blocks in x (y and z: 1).
    pub const fn blocks(self, x: u32) -> Self {
        self.blocks_xyz(x, 1, 1)
    }

    /// Blocks in x, y and z.
    pub const fn blocks_xyz(mut self, x: u32, y: u32, z: u32) -> Self {
        assert!(x > 0 && y > 0 && z > 0, "a test's block counts must be at least 1");
        self.blocks = [x, y, z];
        self
    }

    /// Stop the test after `seconds` and fail it.
    pub const fn timeout(self, seconds: u32) -> Self {
        assert!(seconds > 0 && seconds <= u32::MAX / 1000, "a test's timeout is 1 to 4294967 seconds");
        self.timeout_ms(seconds * 1000)
    }

    /// Stop the test after `milliseconds` and fail it.
    pub const fn timeout_ms(mut self, milliseconds: u32) -> Self {
        assert!(milliseconds > 0, "a test's timeout must be positive");
        self.timeout_ms = milliseconds;
        self
    }

    /// Where the test is: the function's name spans from `start_line`:`start_column` to just before
    /// `end_line`:`end_column` of `path` (1-based, columns in characters).
    pub const fn source(
        mut self,
        path: &'a str,
        start_line: u32,
        start_column: u32,
        end_line: u32,
        end_column: u32,
    ) -> Self {
        self.source = SourceSpan { path, start: [start_line, start_column], end: [end_line, end_column] };
        self
    }

    /// The length of [`encode`](Self::encode)'s output.
    pub const fn encoded_len(&self) -> usize {
        HEADER_LEN + self.name.len() + expected_len(self) + self.source.path.len()
    }

    /// The bytes of the metadata global; `N` must be [`encoded_len`](Self::encoded_len).
    pub const fn encode<const N: usize>(&self) -> [u8; N] {
        assert!(N == self.encoded_len(), "N must be the spec's encoded length");
        assert!(self.name.len() <= u16::MAX as usize, "a test's name is at most 65535 bytes");
        assert!(expected_len(self) <= u16::MAX as usize, "the expected panic text is at most 65535 bytes");
        assert!(self.source.path.len() <= u16::MAX as usize, "a test's source path is at most 65535 bytes");
        assert!(
            line_breaking_character(self.name).is_none(),
            "a test's name cannot hold a control character or a line break: it would forge lines of `--list`"
        );
        let mut bytes = [0u8; N];
        bytes[0] = VERSION;
        bytes[1] = if self.ignore { FLAG_IGNORE } else { 0 } | if self.should_panic { FLAG_SHOULD_PANIC } else { 0 };
        put_u16(&mut bytes, 2, self.name.len() as u16);
        put_u16(&mut bytes, 4, expected_len(self) as u16);
        put_u16(&mut bytes, 6, self.source.path.len() as u16);
        let mut axis = 0;
        while axis < 3 {
            put_u32(&mut bytes, 8 + 4 * axis, self.threads[axis]);
            put_u32(&mut bytes, 20 + 4 * axis, self.blocks[axis]);
            axis += 1;
        }
        put_u32(&mut bytes, 32, self.timeout_ms);
        put_u32(&mut bytes, 36, self.source.start[0]);
        put_u32(&mut bytes, 40, self.source.start[1]);
        put_u32(&mut bytes, 44, self.source.end[0]);
        put_u32(&mut bytes, 48, self.source.end[1]);
        copy(&mut bytes, HEADER_LEN, self.name.as_bytes());
        if let Some(expected) = self.expected {
            copy(&mut bytes, HEADER_LEN + self.name.len(), expected.as_bytes());
        }
        copy(&mut bytes, HEADER_LEN + self.name.len() + expected_len(self), self.source.path.as_bytes());
        bytes
    }
}

const fn expected_len(spec: &TestSpec<'_>) -> usize {
    match spec.expected {
        Some(text) => text.len(),
        None => 0,
    }
}

/// The first character of `name` that would break a line of a test list, with its byte offset: a control character
/// (C0, DEL or C1: `\n`, `\r` and NEL among them) or a line or paragraph separator (U+2028, U+2029). A `const fn`,
/// so that [`TestSpec::encode`] refuses such a name at compile time; it matches their UTF-8 bytes, as a `const fn`
/// cannot iterate `char`s (in valid UTF-8 these byte sequences are found only where these characters are).
pub const fn line_breaking_character(name: &str) -> Option<(usize, char)> {
    let bytes = name.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if byte < 0x20 || byte == 0x7f {
            return Some((at, byte as char));
        }
        // U+0080..=U+009F: 0xc2, then 0x80..=0x9f (Latin-1, so the continuation byte is the code point).
        if byte == 0xc2 && at + 1 < bytes.len() && bytes[at + 1] <= 0x9f {
            return Some((at, bytes[at + 1] as char));
        }
        // U+2028 and U+2029: 0xe2 0x80 0xa8 and 0xe2 0x80 0xa9.
        if byte == 0xe2 && at + 2 < bytes.len() && bytes[at + 1] == 0x80 {
            match bytes[at + 2] {
                0xa8 => return Some((at, '\u{2028}')),
                0xa9 => return Some((at, '\u{2029}')),
                _ => {}
            }
        }
        at += 1;
    }
    None
}

/// `path` after its first `::`, or all of it if it has none.
const fn without_crate(path: &'static str) -> &'static str {
    let bytes = path.as_bytes();
    let mut at = 0;
    while at + 1 < bytes.len() {
        if bytes[at] == b':' && bytes[at + 1] == b':' {
            return path.split_at(at + 2).1;
        }
        at += 1;
    }
    path
}

const fn put_u16(bytes: &mut [u8], at: usize, value: u16) {
    let le = value.to_le_bytes();
    bytes[at] = le[0];
    bytes[at + 1] = le[1];
}

const fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    let le = value.to_le_bytes();
    let mut i = 0;
    while i < 4 {
        bytes[at + i] = le[i];
        i += 1;
    }
}

const fn copy(bytes: &mut [u8], at: usize, source: &[u8]) {
    let mut i = 0;
    while i < source.len() {
        bytes[at + i] = source[i];
        i += 1;
    }
}

/// Why a test's metadata cannot be read. Each names the problem in one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header.
    Truncated { len: usize },
    /// A version this loader does not know.
    Version(u8),
    /// Flags beyond the known ones.
    Flags(u8),
    /// The header's lengths do not add up to the size.
    Length { header_says: usize, actual: usize },
    /// Some but not all of a shape's counts are zero.
    Shape { what: &'static str, counts: [u32; 3] },
    /// Expected panic text on a test that does not expect a panic.
    Inconsistent(&'static str),
    /// The name, the expected text or the source path is not UTF-8.
    NotUtf8(&'static str),
    /// The name is empty.
    EmptyName,
    /// The name holds a character that would break a line of a test list ([`line_breaking_character`]).
    LineBreakInName { at: usize, character: char },
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Truncated { len } => write!(f, "{len} bytes, fewer than the {HEADER_LEN}-byte header"),
            Self::Version(version) => {
                write!(f, "encoding version {version}, but this loader reads version {VERSION}")
            }
            Self::Flags(flags) => write!(f, "unknown flags {flags:#04x}"),
            Self::Length { header_says, actual } => {
                write!(f, "{actual} bytes, but its header describes {header_says}")
            }
            Self::Shape { what, counts } => write!(f, "{what} {counts:?} mix zero and non-zero counts"),
            Self::Inconsistent(what) => f.write_str(what),
            Self::NotUtf8(what) => write!(f, "its {what} is not UTF-8"),
            Self::EmptyName => f.write_str("its name is empty"),
            Self::LineBreakInName { at, character } => write!(
                f,
                "its name holds {character:?} at byte {at}: a control character or line break would forge lines of \
                 the test list"
            ),
        }
    }
}

/// Reads a test's metadata, checking every field: the bytes come from an image, which may be corrupt.
pub fn decode(bytes: &[u8]) -> Result<TestSpec<'_>, DecodeError> {
    if bytes.len() < HEADER_LEN {
        return Err(DecodeError::Truncated { len: bytes.len() });
    }
    if bytes[0] != VERSION {
        return Err(DecodeError::Version(bytes[0]));
    }
    let flags = bytes[1];
    if flags & !(FLAG_IGNORE | FLAG_SHOULD_PANIC) != 0 {
        return Err(DecodeError::Flags(flags));
    }
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
    let u32_at = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let (name_len, expected_len, path_len) = (u16_at(2), u16_at(4), u16_at(6));
    let header_says = HEADER_LEN + name_len + expected_len + path_len;
    if bytes.len() != header_says {
        return Err(DecodeError::Length { header_says, actual: bytes.len() });
    }
    let shape = |what, at: usize| {
        let counts = [u32_at(at), u32_at(at + 4), u32_at(at + 8)];
        match counts.iter().filter(|&&n| n == 0).count() {
            0 | 3 => Ok(counts),
            _ => Err(DecodeError::Shape { what, counts }),
        }
    };
    let threads = shape("threads", 8)?;
    let blocks = shape("blocks", 20)?;
    let should_panic = flags & FLAG_SHOULD_PANIC != 0;
    if expected_len > 0 && !should_panic {
        return Err(DecodeError::Inconsistent("it has expected panic text but does not expect a panic"));
    }
    let name =
        core::str::from_utf8(&bytes[HEADER_LEN..HEADER_LEN + name_len]).map_err(|_| DecodeError::NotUtf8("name"))?;
    if name.is_empty() {
        return Err(DecodeError::EmptyName);
    }
    if let Some((at, character)) = line_breaking_character(name) {
        return Err(DecodeError::LineBreakInName { at, character });
    }
    let expected_at = HEADER_LEN + name_len;
    let expected = match expected_len {
        0 => None,
        _ => Some(
            core::str::from_utf8(&bytes[expected_at..expected_at + expected_len])
                .map_err(|_| DecodeError::NotUtf8("expected panic text"))?,
        ),
    };
    let path =
        core::str::from_utf8(&bytes[expected_at + expected_len..]).map_err(|_| DecodeError::NotUtf8("source path"))?;
    Ok(TestSpec {
        name,
        ignore: flags & FLAG_IGNORE != 0,
        should_panic,
        expected,
        threads,
        blocks,
        timeout_ms: u32_at(32),
        source: SourceSpan { path, start: [u32_at(36), u32_at(40)], end: [u32_at(44), u32_at(48)] },
    })
}

#[cfg(test)]
mod tests;
