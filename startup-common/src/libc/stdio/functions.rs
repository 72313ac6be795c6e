//! The bodies of C's stream functions, `getenv`, `perror` and `strerror`: `target_runtime!` exports each as a thin
//! C-linkage wrapper. Each failure sets the calling thread's `errno` ([`crate::libc::errno`]) and returns what C says.

use core::ffi::{c_char, c_int, c_long, c_void};

use super::{END_OF_FILE, ERROR, File, READABLE, Target, WRITABLE};
use crate::gpu::Gpu;
use crate::libc::errno;
use crate::libc::files::{self, OpenFlags, ReadMode, RemoveKind, Whence};
use crate::libc::io::{self, Destination, c_string_bytes};
use crate::rpc::Client;

/// C's `EOF`.
pub const EOF: c_int = -1;

/// Sets `errno` to `error` and returns `value`: how each function fails.
fn fail<G: Gpu, T>(error: c_int, value: T) -> T {
    errno::set::<G>(error);
    value
}

/// C's `fopen`: the stream, or null with `errno` set (`EINVAL` for a mode C does not define, `EMFILE` when
/// [`files::MAX_OPEN_FILES`] are open, or the host's error: `ENOENT`, `EISDIR`, `EACCES`, ...).
///
/// # Safety
/// `path` and `mode` are C strings.
pub unsafe fn fopen<G: Gpu>(client: &Client<G>, path: *const c_char, mode: *const c_char) -> *mut File {
    // SAFETY: the caller passes C strings.
    let (path, mode) = unsafe { (c_string_bytes(path), c_string_bytes(mode)) };
    let Some(flags) = OpenFlags::from_c_mode(mode) else { return fail::<G, _>(errno::EINVAL, core::ptr::null_mut()) };
    let Some(file) = File::claim() else { return fail::<G, _>(errno::EMFILE, core::ptr::null_mut()) };
    match files::open(client, path, flags) {
        Ok(handle) => {
            let readable = if flags.contains(OpenFlags::READ) { READABLE } else { 0 };
            let writable = if flags.contains(OpenFlags::WRITE) { WRITABLE } else { 0 };
            file.open(handle, readable | writable);
            core::ptr::from_ref(file).cast_mut()
        }
        Err(error) => {
            file.release();
            fail::<G, _>(error, core::ptr::null_mut())
        }
    }
}

/// C's `fclose`: 0, or `EOF` with `errno` set (the host's write error; the stream is closed either way). Closing a
/// standard stream does nothing and returns 0.
pub fn fclose<G: Gpu>(client: &Client<G>, file: *mut File) -> c_int {
    let Some(file) = File::resolve(file) else { return fail::<G, _>(errno::EBADF, EOF) };
    if file.target().is_ok_and(|target| !matches!(target, Target::File(_))) {
        return 0;
    }
    let Some(handle) = file.begin_close() else { return fail::<G, _>(errno::EBADF, EOF) };
    let closed = files::close(client, handle);
    file.release();
    match closed {
        Ok(()) => 0,
        Err(error) => fail::<G, _>(error, EOF),
    }
}

/// The stream behind `file` if it may be used as `access` (`READABLE` or `WRITABLE`) says; otherwise sets `errno`
/// (and the stream's error indicator, for a stream used the wrong way).
fn usable<G: Gpu>(file: *mut File, access: u32) -> Option<(&'static File, Target)> {
    match File::target_of(file) {
        Ok((file, target)) if file.has(access) => Some((file, target)),
        Ok((file, _)) => {
            file.set(ERROR);
            fail::<G, _>(errno::EBADF, None)
        }
        Err(error) => fail::<G, _>(error, None),
    }
}

/// Reads into `buffer` from `handle` until it is full, a line ends (in [`ReadMode::Line`]), or the stream ends or
/// fails, setting the stream's indicators and `errno`; the number of bytes read, and whether a read failed.
fn read_fully<G: Gpu>(
    client: &Client<G>,
    file: &File,
    handle: u64,
    buffer: &mut [u8],
    mode: ReadMode,
) -> (usize, bool) {
    let mut done = 0;
    while done < buffer.len() {
        match files::read(client, handle, &mut buffer[done..], mode) {
            Ok(0) => {
                file.set(END_OF_FILE);
                break;
            }
            Ok(n) => {
                done += n;
                if mode == ReadMode::Line && buffer[done - 1] == b'\n' {
                    break;
                }
            }
            Err(error) => {
                file.set(ERROR);
                return (done, fail::<G, _>(error, true));
            }
        }
    }
    (done, false)
}

/// The bytes of `count` items of `size`, for `fread` and `fwrite`: `None` when there are none (nothing to do) or
/// more than memory holds (`errno` `EINVAL`).
fn item_bytes<G: Gpu>(size: usize, count: usize) -> Option<usize> {
    match size.checked_mul(count) {
        Some(0) => None,
        Some(total) => Some(total),
        None => fail::<G, _>(errno::EINVAL, None),
    }
}

/// C's `fread`: reads `count` items of `size` bytes; the number of whole items read, fewer at the end of the stream
/// (`feof`) or on an error (`ferror`, `errno`).
///
/// # Safety
/// `data` has room for `size * count` bytes.
pub unsafe fn fread<G: Gpu>(
    client: &Client<G>,
    data: *mut c_void,
    size: usize,
    count: usize,
    file: *mut File,
) -> usize {
    let Some(total) = item_bytes::<G>(size, count) else { return 0 };
    let Some((file, target)) = usable::<G>(file, READABLE) else { return 0 };
    let Some(handle) = target.read_handle() else { return 0 };
    // SAFETY: the caller guarantees room for `size * count` bytes at `data`.
    let buffer = unsafe { core::slice::from_raw_parts_mut(data.cast::<u8>(), total) };
    read_fully(client, file, handle, buffer, ReadMode::Bytes).0 / size
}

/// The stream behind `file` and where what is written to it goes, if it may be written; otherwise sets `errno`.
pub(crate) fn output_of<G: Gpu>(file: *mut File) -> Option<(&'static File, Destination)> {
    let (file, target) = usable::<G>(file, WRITABLE)?;
    match target {
        Target::Output(stream) => Some((file, Destination::Stream(stream))),
        Target::File(handle) => Some((file, Destination::File(handle))),
        Target::Stdin => fail::<G, _>(errno::EBADF, None),
    }
}

/// Writes `bytes` to the stream as one piece; whether the host took them (otherwise the error indicator and `errno`
/// are set).
fn write_bytes<G: Gpu>(client: &Client<G>, file: *mut File, bytes: &[u8]) -> bool {
    let Some((file, destination)) = output_of::<G>(file) else { return false };
    match io::write_to(client, destination, bytes) {
        Ok(()) => true,
        Err(error) => {
            file.set(ERROR);
            fail::<G, _>(error, false)
        }
    }
}

/// C's `fwrite`: writes `count` items of `size` bytes as one piece; `count`, or 0 on an error (`ferror`, `errno`).
///
/// # Safety
/// `data` points to `size * count` readable bytes.
pub unsafe fn fwrite<G: Gpu>(
    client: &Client<G>,
    data: *const c_void,
    size: usize,
    count: usize,
    file: *mut File,
) -> usize {
    let Some(total) = item_bytes::<G>(size, count) else { return 0 };
    // SAFETY: the caller guarantees `size * count` readable bytes at `data`.
    let bytes = unsafe { core::slice::from_raw_parts(data.cast::<u8>(), total) };
    if write_bytes(client, file, bytes) { count } else { 0 }
}

/// C's `fputs`: the string as one piece; 0, or `EOF` on an error.
///
/// # Safety
/// `text` is a C string.
pub unsafe fn fputs<G: Gpu>(client: &Client<G>, text: *const c_char, file: *mut File) -> c_int {
    // SAFETY: the caller passes a C string.
    let text = unsafe { c_string_bytes(text) };
    if write_bytes(client, file, text) { 0 } else { EOF }
}

/// C's `fputc` (and `putc`, `putchar`): the character, as an `unsigned char`, or `EOF` on an error.
pub fn fputc<G: Gpu>(client: &Client<G>, character: c_int, file: *mut File) -> c_int {
    let byte = character as u8;
    if write_bytes(client, file, &[byte]) { c_int::from(byte) } else { EOF }
}

/// C's `fgetc` (and `getc`, `getchar`): the next byte as an `unsigned char`, or `EOF` at the end of the stream
/// (`feof`) or on an error (`ferror`, `errno`).
pub fn fgetc<G: Gpu>(client: &Client<G>, file: *mut File) -> c_int {
    let Some((file, target)) = usable::<G>(file, READABLE) else { return EOF };
    let Some(handle) = target.read_handle() else { return EOF };
    let mut byte = [0];
    match read_fully(client, file, handle, &mut byte, ReadMode::Bytes) {
        (1, _) => c_int::from(byte[0]),
        _ => EOF,
    }
}

/// C's `fgets`: reads one line, up to and including its `\n`, at most `size - 1` bytes, and a NUL after them;
/// `buffer`, or null when the stream ended before any byte (`feof`) or failed (`ferror`, `errno`). Threads reading
/// lines of one stream at once each get whole lines.
///
/// # Safety
/// `buffer` has room for `size` bytes.
pub unsafe fn fgets<G: Gpu>(client: &Client<G>, buffer: *mut c_char, size: c_int, file: *mut File) -> *mut c_char {
    let Ok(size) = usize::try_from(size) else { return fail::<G, _>(errno::EINVAL, core::ptr::null_mut()) };
    if size == 0 {
        return fail::<G, _>(errno::EINVAL, core::ptr::null_mut());
    }
    let Some((file, target)) = usable::<G>(file, READABLE) else { return core::ptr::null_mut() };
    let Some(handle) = target.read_handle() else { return core::ptr::null_mut() };
    // SAFETY: the caller guarantees room for `size` bytes.
    let line = unsafe { core::slice::from_raw_parts_mut(buffer.cast::<u8>(), size) };
    if size == 1 {
        line[0] = 0;
        return buffer;
    }
    let (len, failed) = read_fully(client, file, handle, &mut line[..size - 1], ReadMode::Line);
    line[len] = 0;
    if len == 0 || failed { core::ptr::null_mut() } else { buffer }
}

/// C's `fflush`: writes out what the host holds for the stream (for every open file when `file` is null); 0, or
/// `EOF` on an error. stdout and stderr have nothing held on the device: 0.
pub fn fflush<G: Gpu>(client: &Client<G>, file: *mut File) -> c_int {
    if file.is_null() {
        let mut result = 0;
        for file in &super::OPEN_FILES {
            if let Ok(Target::File(_)) = file.target()
                && file.has(WRITABLE)
                && fflush(client, core::ptr::from_ref(file).cast_mut()) != 0
            {
                result = EOF;
            }
        }
        return result;
    }
    let (file, target) = match File::target_of(file) {
        Ok(found) => found,
        Err(error) => return fail::<G, _>(error, EOF),
    };
    let Target::File(handle) = target else { return 0 };
    match files::flush(client, handle) {
        Ok(()) => 0,
        Err(error) => {
            file.set(ERROR);
            fail::<G, _>(error, EOF)
        }
    }
}

/// C's `feof`: non-zero once a read met the end of the stream (until `clearerr`, `fseek` or `rewind`).
pub fn feof<G: Gpu>(file: *mut File) -> c_int {
    match File::resolve(file) {
        Some(file) => c_int::from(file.has(END_OF_FILE)),
        None => fail::<G, _>(errno::EBADF, 0),
    }
}

/// C's `ferror`: non-zero once a call on the stream failed (until `clearerr` or `rewind`).
pub fn ferror<G: Gpu>(file: *mut File) -> c_int {
    match File::resolve(file) {
        Some(file) => c_int::from(file.has(ERROR)),
        None => fail::<G, _>(errno::EBADF, 0),
    }
}

/// C's `clearerr`: clears both indicators.
pub fn clearerr<G: Gpu>(file: *mut File) {
    match File::resolve(file) {
        Some(file) => file.clear(END_OF_FILE | ERROR),
        None => errno::set::<G>(errno::EBADF),
    }
}

/// The handle behind a stream that can seek: a file's. stdin, stdout and stderr cannot ([`errno::ESPIPE`]).
fn seekable<G: Gpu>(file: *mut File) -> Option<(&'static File, u64)> {
    match File::target_of(file) {
        Ok((file, Target::File(handle))) => Some((file, handle)),
        Ok(_) => fail::<G, _>(errno::ESPIPE, None),
        Err(error) => fail::<G, _>(error, None),
    }
}

/// C's `fseek`: 0, or -1 with `errno` set; a seek that succeeds clears the end-of-file indicator.
pub fn fseek<G: Gpu>(client: &Client<G>, file: *mut File, offset: c_long, whence: c_int) -> c_int {
    let Some(whence) = u64::try_from(whence).ok().and_then(Whence::from_number) else {
        return fail::<G, _>(errno::EINVAL, -1);
    };
    let Some((file, handle)) = seekable::<G>(file) else { return -1 };
    match files::seek(client, handle, offset, whence) {
        Ok(_) => {
            file.clear(END_OF_FILE);
            0
        }
        Err(error) => fail::<G, _>(error, -1),
    }
}

/// C's `ftell`: the position, or -1 with `errno` set.
pub fn ftell<G: Gpu>(client: &Client<G>, file: *mut File) -> c_long {
    let Some((_, handle)) = seekable::<G>(file) else { return -1 };
    match files::seek(client, handle, 0, Whence::Current) {
        Ok(position) => c_long::try_from(position).unwrap_or_else(|_| fail::<G, _>(errno::EOVERFLOW, -1)),
        Err(error) => fail::<G, _>(error, -1),
    }
}

/// C's `rewind`: back to the start, both indicators cleared.
pub fn rewind<G: Gpu>(client: &Client<G>, file: *mut File) {
    if fseek(client, file, 0, Whence::Start as c_int) == 0
        && let Some(file) = File::resolve(file)
    {
        file.clear(ERROR);
    }
}

/// C's `remove`: removes a file or an empty directory; 0, or -1 with `errno` set.
///
/// # Safety
/// `path` is a C string.
pub unsafe fn remove<G: Gpu>(client: &Client<G>, path: *const c_char) -> c_int {
    // SAFETY: the caller passes a C string.
    let path = unsafe { c_string_bytes(path) };
    match files::remove(client, path, RemoveKind::FileOrEmptyDirectory) {
        Ok(()) => 0,
        Err(error) => fail::<G, _>(error, -1),
    }
}

/// C's `rename`: 0, or -1 with `errno` set.
///
/// # Safety
/// `from` and `to` are C strings.
pub unsafe fn rename<G: Gpu>(client: &Client<G>, from: *const c_char, to: *const c_char) -> c_int {
    // SAFETY: the caller passes C strings.
    let (from, to) = unsafe { (c_string_bytes(from), c_string_bytes(to)) };
    match files::rename(client, from, to) {
        Ok(()) => 0,
        Err(error) => fail::<G, _>(error, -1),
    }
}

/// C's `getenv`: the value of `name` in the loader's environment (the program's `envp`, [`Runtime::envp`]), or null.
/// Nothing goes to the host: `envp` is the program's.
///
/// [`Runtime::envp`]: crate::Runtime::envp
///
/// # Safety
/// `name` is a C string, and every entry of `envp` a C string that lives as long as the program.
pub unsafe fn getenv(envp: &[*mut c_char], name: *const c_char) -> *mut c_char {
    // SAFETY: the caller passes a C string, and an environment of C strings that live as long as the program.
    unsafe { value_in(envp, c_string_bytes(name)) }
}

/// The value of `name` among the `NAME=value` C strings of `envp`, as C's `getenv` finds it: null for a name that is
/// empty or holds `=`.
///
/// # Safety
/// Every entry of `envp` is a C string that lives as long as the returned pointer is used.
unsafe fn value_in(envp: &[*mut c_char], name: &[u8]) -> *mut c_char {
    if name.is_empty() || name.contains(&b'=') {
        return core::ptr::null_mut();
    }
    for &entry in envp {
        // SAFETY: the caller's guarantee.
        let bytes = unsafe { c_string_bytes(entry) };
        // Compared byte by byte: slice equality calls `memcmp`, which nothing defines for a C program on AMD.
        if bytes.len() > name.len() && bytes.iter().zip(name).all(|(a, b)| a == b) && bytes[name.len()] == b'=' {
            // SAFETY: the value starts after the `=`, inside the same string.
            return unsafe { entry.add(name.len() + 1) };
        }
    }
    core::ptr::null_mut()
}

/// C's `perror`: `prefix: ` (when `prefix` is neither null nor empty) and the message of `errno`, and a newline, on
/// stderr as one line.
///
/// # Safety
/// `prefix` is null or a C string.
pub unsafe fn perror<G: Gpu>(client: &Client<G>, prefix: *const c_char) {
    let mut buffer = [0; 32];
    let message = errno::describe(errno::get::<G>(), &mut buffer);
    // SAFETY: the caller passes null or a C string.
    let prefix = if prefix.is_null() { &[][..] } else { unsafe { c_string_bytes(prefix) } };
    let mut line = io::Chunks::new(client, Destination::Stream(io::Stream::Stderr));
    if !prefix.is_empty() {
        line.push(prefix);
        line.push(b": ");
    }
    line.push(message.as_bytes());
    line.push(b"\n");
    // Output to stderr cannot fail on the device's side.
    let _ = line.finish();
}

/// C's `strerror`: the message of `number` (`"Unknown error"` for a number [`errno`] does not name). The string is
/// constant; the program must not write it.
pub fn strerror(number: c_int) -> *mut c_char {
    errno::c_message(number).unwrap_or(c"Unknown error").as_ptr().cast_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getenv_finds_a_name_followed_by_its_equals_sign() {
        let entries = [c"PATHS=1", c"PATH=/bin", c"EMPTY=", c"A=b=c", c"=odd", c"NOEQUALS"];
        let envp: std::vec::Vec<*mut c_char> = entries.iter().map(|entry| entry.as_ptr().cast_mut()).collect();
        let value = |name: &[u8]| {
            // SAFETY: the entries are static C strings.
            let found = unsafe { value_in(&envp, name) };
            // SAFETY: a non-null result points into one of them.
            (!found.is_null()).then(|| unsafe { core::ffi::CStr::from_ptr(found) }.to_bytes())
        };
        assert_eq!(value(b"PATH"), Some(&b"/bin"[..]));
        assert_eq!(value(b"PATHS"), Some(&b"1"[..]));
        assert_eq!(value(b"EMPTY"), Some(&b""[..]));
        assert_eq!(value(b"A"), Some(&b"b=c"[..]));
        for missing in [&b"PAT"[..], b"NOEQUALS", b"", b"A=b", b"="] {
            assert_eq!(value(missing), None, "{missing:?}");
        }
    }
}
