//! The C functions of the printf family, over a C `va_list`: `target_runtime!` exports `printf`, `fprintf`,
//! `snprintf`, `sprintf` and their `v` forms as thin wrappers of these.
//!
//! `printf` formats on the device, into the chunks of one message ([`crate::libc::io`]): the host receives finished text,
//! written whole however many threads print at once.

use core::ffi::{VaList, c_char, c_double, c_int, c_uint, c_ulonglong, c_void};

use super::output::Output;
use super::{Arguments, BufferOutput, Error};
use crate::gpu::Gpu;
use crate::libc::errno;
use crate::libc::io::{self, Chunks, Destination, Stream};
use crate::libc::stdio::{ERROR, File};
use crate::rpc::Client;

/// A C `va_list` as printf's [`Arguments`].
pub struct VaArgs<'f> {
    list: VaList<'f>,
}

impl<'f> VaArgs<'f> {
    /// # Safety
    /// The arguments left in `list` must be of the kinds the format's conversions read, in order (C's rule for
    /// `printf`). C leaves a missing argument undefined; here it reads whatever the caller's argument buffer holds
    /// next (on NVIDIA and AMD, `va_list` points into a buffer the caller filled: past its end lies the caller's
    /// stack), so the conversion prints garbage, or faults if that is not readable or a `%s` dereferences it.
    #[inline]
    pub unsafe fn new(list: VaList<'f>) -> Self {
        Self { list }
    }
}

impl Arguments for VaArgs<'_> {
    #[inline]
    fn next_u32(&mut self) -> u32 {
        // SAFETY: the format says the next argument is an `int` or `unsigned int` (`new`'s contract).
        unsafe { self.list.next_arg::<c_uint>() }
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        // SAFETY: the format says the next argument is a 64-bit integer (`new`'s contract).
        unsafe { self.list.next_arg::<c_ulonglong>() }
    }

    #[inline]
    fn next_f64(&mut self) -> f64 {
        // SAFETY: the format says the next argument is a `double` (`new`'s contract).
        unsafe { self.list.next_arg::<c_double>() }
    }

    #[inline]
    fn next_pointer(&mut self) -> *const c_void {
        // SAFETY: the format says the next argument is a pointer (`new`'s contract).
        unsafe { self.list.next_arg::<*const c_void>() }
    }
}

/// Formats `format` with `args` and sends the text to `destination` as one message, in chunks of
/// [`io::PRINT_BUFFER`] bytes; returns the number of bytes. On an error the text before the failing conversion is
/// still sent.
///
/// # Safety
/// As [`super::format`].
pub unsafe fn print<G: Gpu>(
    client: &Client<G>,
    destination: Destination,
    format: &[u8],
    args: &mut dyn Arguments,
) -> Result<usize, Error> {
    let mut chunks = Chunks::new(client, destination);
    // SAFETY: the caller's guarantees, passed on.
    let result = unsafe { super::format(format, args, &mut chunks) };
    let written = chunks.finish();
    let count = result?;
    written.map_err(Error::Write)?;
    Ok(count)
}

/// C's `vfprintf` on any stream open for writing: the number of bytes written, or -1 (with `errno` set) for a stream
/// that cannot be written, a failed conversion, or a file the host could not write (which also sets the stream's
/// error indicator).
///
/// # Safety
/// `format` is a C string and `args` holds its arguments, as C's `vfprintf` requires.
pub unsafe fn vfprintf<G: Gpu>(client: &Client<G>, file: *mut File, format: *const c_char, args: VaList<'_>) -> c_int {
    let Some((file, destination)) = crate::libc::stdio::functions::output_of::<G>(file) else { return -1 };
    // SAFETY: the caller passes a C string and its arguments.
    let result = unsafe { print(client, destination, io::c_string_bytes(format), &mut VaArgs::new(args)) };
    if let Err(Error::Write(error)) = result {
        file.set(ERROR);
        errno::set::<G>(error);
    }
    c_result(result)
}

/// C's `vprintf`, on `stream`.
///
/// # Safety
/// `format` is a C string and `args` holds its arguments, as C's `vprintf` requires.
pub unsafe fn vprint<G: Gpu>(client: &Client<G>, stream: Stream, format: *const c_char, args: VaList<'_>) -> c_int {
    let destination = Destination::Stream(stream);
    // SAFETY: the caller passes a C string and its arguments.
    unsafe { c_result(print(client, destination, io::c_string_bytes(format), &mut VaArgs::new(args))) }
}

/// C's `vsnprintf`: at most `size - 1` bytes and a NUL into `buffer` (nothing when `size` is 0); returns the length
/// the whole text has, or -1.
///
/// # Safety
/// `buffer` has `size` writable bytes (or `size` is 0), `format` is a C string and `args` holds its arguments.
pub unsafe fn vsnprintf(buffer: *mut c_char, size: usize, format: *const c_char, args: VaList<'_>) -> c_int {
    let buffer: &mut [u8] = if size == 0 || buffer.is_null() {
        &mut []
    } else {
        // SAFETY: the caller guarantees `size` writable bytes.
        unsafe { core::slice::from_raw_parts_mut(buffer.cast::<u8>(), size) }
    };
    let mut output = BufferOutput::new(buffer);
    // SAFETY: the caller passes a C string and its arguments.
    let result = unsafe { super::format(io::c_string_bytes(format), &mut VaArgs::new(args), &mut output) };
    output.finish();
    c_result(result)
}

/// C's `vsprintf`: the text and a NUL into `buffer`, which must be large enough; returns the length, or -1.
///
/// # Safety
/// `buffer` has room for the whole text and its NUL, `format` is a C string and `args` holds its arguments.
pub unsafe fn vsprintf(buffer: *mut c_char, format: *const c_char, args: VaList<'_>) -> c_int {
    let mut output = UnboundedOutput { next: buffer.cast() };
    // SAFETY: the caller passes a C string and its arguments, and a buffer large enough for the text.
    let result = unsafe { super::format(io::c_string_bytes(format), &mut VaArgs::new(args), &mut output) };
    // SAFETY: there is room for the NUL after the text (caller's guarantee).
    unsafe { output.next.write(0) };
    c_result(result)
}

fn c_result(result: Result<usize, Error>) -> c_int {
    // `format` never produces more than `MAX_OUTPUT` (`INT_MAX`) bytes.
    result.map_or(-1, |count| count as c_int)
}

impl<G: Gpu> Output for Chunks<'_, G> {
    fn write(&mut self, bytes: &[u8]) {
        self.push(bytes);
    }

    fn repeat(&mut self, byte: u8, count: usize) {
        self.fill(byte, count);
    }
}

/// `sprintf`'s destination: memory that its caller promises is large enough.
struct UnboundedOutput {
    next: *mut u8,
}

impl Output for UnboundedOutput {
    fn write(&mut self, bytes: &[u8]) {
        // SAFETY: `vsprintf`'s caller guarantees room for the whole text, of which these bytes are part.
        unsafe {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.next, bytes.len());
            self.next = self.next.add(bytes.len());
        }
    }

    fn repeat(&mut self, byte: u8, count: usize) {
        // SAFETY: as in `write`.
        unsafe {
            self.next.write_bytes(byte, count);
            self.next = self.next.add(count);
        }
    }
}
