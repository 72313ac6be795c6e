//! The printf engine against the host C library's `snprintf` (glibc on the build machines): a table of edge cases
//! ([`cases`]) and thousands of generated ones ([`generated`]), byte for byte, plus the cases where this printf
//! chooses differently on purpose.

mod cases;
mod generated;

use std::ffi::{CString, c_char, c_int, c_void};
use std::vec::Vec;

use super::{Arguments, BufferOutput, Error};

/// One argument, as the caller of a C variadic function passes it after the default promotions.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    Int(i32),
    Long(i64),
    Double(f64),
    Pointer(*const c_void),
}

/// Arguments from a vector; reading one of the wrong kind, or one past the end, fails the test.
struct VecArgs<'a> {
    args: &'a [Arg],
    next: usize,
}

impl VecArgs<'_> {
    fn take(&mut self) -> Arg {
        let arg = *self
            .args
            .get(self.next)
            .unwrap_or_else(|| panic!("argument {} read, but there are only {}", self.next, self.args.len()));
        self.next += 1;
        arg
    }
}

impl Arguments for VecArgs<'_> {
    fn next_u32(&mut self) -> u32 {
        match self.take() {
            Arg::Int(value) => value as u32,
            other => panic!("an int was read where {other:?} was passed"),
        }
    }

    fn next_u64(&mut self) -> u64 {
        match self.take() {
            Arg::Long(value) => value as u64,
            other => panic!("a 64-bit integer was read where {other:?} was passed"),
        }
    }

    fn next_f64(&mut self) -> f64 {
        match self.take() {
            Arg::Double(value) => value,
            other => panic!("a double was read where {other:?} was passed"),
        }
    }

    fn next_pointer(&mut self) -> *const c_void {
        match self.take() {
            Arg::Pointer(value) => value,
            other => panic!("a pointer was read where {other:?} was passed"),
        }
    }
}

/// What a call produced: its result (C's return value, -1 for an error) and the bytes in the buffer before the NUL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Formatted {
    pub result: i32,
    pub text: Vec<u8>,
}

impl Formatted {
    fn show(&self) -> std::string::String {
        std::format!("{} {:?}", self.result, std::string::String::from_utf8_lossy(&self.text))
    }
}

/// Our engine into a buffer of `capacity` bytes, as `snprintf` would; also returns the error, if any. Every argument
/// must be read, and only those.
pub fn ours(format: &str, args: &[Arg], capacity: usize) -> (Formatted, Option<Error>) {
    let mut buffer = std::vec![0xaau8; capacity];
    let mut output = BufferOutput::new(&mut buffer);
    let mut vec_args = VecArgs { args, next: 0 };
    // SAFETY: every pointer argument of the tests is null or points to a NUL-terminated string.
    let result = unsafe { super::format(format.as_bytes(), &mut vec_args, &mut output) };
    let len = output.finish();
    if result.is_ok() {
        assert_eq!(vec_args.next, args.len(), "{format:?} read {} of its {} arguments", vec_args.next, args.len());
    }
    if capacity > 0 {
        assert_eq!(buffer[len], 0, "{format:?}: no NUL after the text");
    }
    buffer.truncate(len);
    let formatted = Formatted { result: result.map_or(-1, |n| n as i32), text: buffer };
    (formatted, result.err())
}

/// The host C library's `snprintf` into a buffer of `capacity` bytes.
///
/// Arguments go through one fixed prototype: the integers and pointers first, in order, then the doubles, in order.
/// The x86-64 System V ABI passes the two kinds in separate registers and `va_arg` reads each kind in its own order
/// (integers past the sixth register from the stack, which holds nothing else while there are at most eight
/// doubles), so the callee sees exactly the interleaved list a C caller would pass.
pub fn glibc(format: &str, args: &[Arg], capacity: usize) -> Formatted {
    const INTEGERS: usize = 12;
    const DOUBLES: usize = 8;
    let mut integers = [0i64; INTEGERS];
    let mut doubles = [0f64; DOUBLES];
    let (mut i, mut d) = (0, 0);
    for arg in args {
        match *arg {
            Arg::Int(value) => (integers[i], i) = (i64::from(value), i + 1),
            Arg::Long(value) => (integers[i], i) = (value, i + 1),
            Arg::Pointer(value) => (integers[i], i) = (value as i64, i + 1),
            Arg::Double(value) => (doubles[d], d) = (value, d + 1),
        }
    }
    let format = CString::new(format).unwrap();
    let mut buffer = std::vec![0xaau8; capacity];
    let [a, b, c, e, f, g, h, j, k, l, m, n] = integers;
    let [p, q, r, s, t, u, v, w] = doubles;
    // SAFETY: the buffer has `capacity` bytes; the arguments are of the kinds the format reads (see above), and each
    // pointer that a `%s` reads is null or a NUL-terminated string.
    let result = unsafe {
        libc::snprintf(
            buffer.as_mut_ptr().cast::<c_char>(),
            capacity,
            format.as_ptr(),
            a,
            b,
            c,
            e,
            f,
            g,
            h,
            j,
            k,
            l,
            m,
            n,
            p,
            q,
            r,
            s,
            t,
            u,
            v,
            w,
        )
    };
    let len = if result < 0 {
        buffer.iter().position(|&b| b == 0).unwrap_or(0)
    } else {
        (result as usize).min(capacity.saturating_sub(1))
    };
    buffer.truncate(if capacity == 0 { 0 } else { len });
    Formatted { result, text: buffer }
}

/// Asserts that our engine and glibc agree on `format` with `args`, with a buffer large enough and with a
/// truncating one of `short` bytes.
pub fn assert_same(format: &str, args: &[Arg], short: usize) {
    assert_same_as(format, args, (format, args), short);
}

/// Asserts that our engine's output for `format` with `args` is glibc's for `reference` (a format C defines to print
/// the same), with a buffer large enough and with a truncating one of `short` bytes.
pub fn assert_same_as(format: &str, args: &[Arg], reference: (&str, &[Arg]), short: usize) {
    for capacity in [1 << 16, short] {
        let (ours, _) = ours(format, args, capacity);
        let theirs = glibc(reference.0, reference.1, capacity);
        assert!(
            ours == theirs,
            "{format:?} {args:?} (buffer of {capacity}; glibc given {reference:?}):\n  ours:  {}\n  glibc: {}",
            ours.show(),
            theirs.show()
        );
    }
}

/// The thread's C library locale as C.UTF-8, so that glibc writes wide characters as UTF-8, as we do (per thread:
/// the tests run in parallel).
pub fn use_utf8_locale() {
    // SAFETY: plain libc calls; the locale object lives as long as the thread uses it (leaked on purpose).
    unsafe {
        let locale = libc::newlocale(libc::LC_ALL_MASK, c"C.UTF-8".as_ptr(), std::ptr::null_mut());
        assert!(!locale.is_null(), "the C library has no C.UTF-8 locale");
        libc::uselocale(locale);
    }
}

/// A C-variadic function over our `vsnprintf`, to test the `va_list` path on the host.
///
/// # Safety
/// As C's `snprintf`.
pub unsafe extern "C" fn our_snprintf(buffer: *mut c_char, size: usize, format: *const c_char, args: ...) -> c_int {
    // SAFETY: the caller's guarantees, passed on.
    unsafe { super::stdio::vsnprintf(buffer, size, format, args) }
}
