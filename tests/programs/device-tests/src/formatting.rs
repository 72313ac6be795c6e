//! Formatting on the device, as printing uses it: `core::fmt` (what `print!` and a panic's message go through), and
//! C's `printf` family (the startup's formatting engine, through `snprintf`), each against the host's text: Rust's
//! own for `core::fmt`, glibc's for `printf`. Many threads format at once; each has its own buffer.

use core::ffi::{CStr, c_char, c_int};
use core::fmt::Write;

/// Text formatted into a buffer of its own.
struct Text {
    bytes: [u8; 512],
    len: usize,
}

impl Text {
    fn of(args: core::fmt::Arguments<'_>) -> Self {
        let mut text = Text { bytes: [0; 512], len: 0 };
        text.write_fmt(args).expect("the text fits its buffer");
        text
    }

    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).expect("core::fmt writes UTF-8")
    }
}

impl Write for Text {
    fn write_str(&mut self, part: &str) -> core::fmt::Result {
        let end = self.len + part.len();
        self.bytes.get_mut(self.len..end).ok_or(core::fmt::Error)?.copy_from_slice(part.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Checks that `args` formats as `expected`, in a buffer on the thread's stack (one at a time: a GPU thread has a
/// few KiB of stack).
fn check(args: core::fmt::Arguments<'_>, expected: &str) {
    assert_eq!(Text::of(args).as_str(), expected);
}

#[gpu_startup::test(threads = 64)]
fn core_fmt_writes_what_it_writes_on_the_host() {
    check(format_args!("{:>6}|{:<4}|{:^7}|{:+}", 42, 7, "mid", 3), "    42|7   |  mid  |+3");
    check(
        format_args!("{:#x} {:#b} {:o} {:08.3} {:e}", 255u32, 5u8, 64u16, -3.14159f64, 1234.5f32),
        "0xff 0b101 100 -003.142 1.2345e3",
    );
    check(format_args!("{} {}", u128::MAX, i64::MIN), "340282366920938463463374607431768211455 -9223372036854775808");
    check(
        format_args!("{:?} {:?} {:?}", "tab\there \"q\"", (1, 'x', [2.5f32, -0.0]), Some(Err::<(), _>(7u8))),
        r#""tab\there \"q\"" (1, 'x', [2.5, -0.0]) Some(Err(7))"#,
    );
    check(
        format_args!("{} {} {} {}", 0.1f64 + 0.2, 1e21f64, f32::MIN_POSITIVE, f64::NAN),
        "0.30000000000000004 1000000000000000000000 0.000000000000000000000000000000000000011754944 NaN",
    );
}

unsafe extern "C" {
    /// The startup's `snprintf` (`startup_common::target_runtime!`).
    fn snprintf(buffer: *mut c_char, size: usize, format: *const c_char, ...) -> c_int;
}

/// What `snprintf` wrote into a buffer of 256 bytes, and the length it reported.
struct CText {
    bytes: [c_char; 256],
    len: c_int,
}

impl CText {
    fn as_str(&self) -> &str {
        // SAFETY: `snprintf` ends what it writes with a NUL, within the buffer.
        unsafe { CStr::from_ptr(self.bytes.as_ptr()) }.to_str().expect("ASCII")
    }
}

/// `snprintf(FORMAT, ARGUMENTS...)` into a [`CText`].
macro_rules! c_format {
    ($format:literal $(, $argument:expr)* $(,)?) => {{
        let mut text = CText { bytes: [0; 256], len: 0 };
        // SAFETY: the format is a C string whose conversions match the arguments' types, and the buffer has the size
        // given.
        text.len = unsafe { snprintf(text.bytes.as_mut_ptr(), text.bytes.len(), $format.as_ptr() $(, $argument)*) };
        text
    }};
}

#[gpu_startup::test(threads = 64)]
fn printf_writes_what_glibc_writes() {
    // One at a time: a GPU thread has a few KiB of stack.
    let check =
        |text: CText, expected: &str| assert_eq!((text.as_str(), text.len), (expected, expected.len() as c_int));
    check(c_format!(c"%d %i %u", -42 as c_int, 7 as c_int, 4_000_000_000u32), "-42 7 4000000000");
    check(
        c_format!(c"%5.2f|%-10.3e|%g|%g", 3.14159f64, 12345.678f64, 0.0001f64, 1e-5f64),
        " 3.14|1.235e+04 |0.0001|1e-05",
    );
    check(c_format!(c"%x %X %#o %08.3x %#x", 255u32, 3054u32, 8u32, 42u32, 0u32), "ff BEE 010      02a 0");
    check(
        c_format!(c"%s|%10s|%-4s|%.2s|", c"gpu".as_ptr(), c"right".as_ptr(), c"l".as_ptr(), c"cut".as_ptr()),
        "gpu|     right|l   |cu|",
    );
    check(c_format!(c"%c%c%%", b'G' as c_int, b'o' as c_int), "Go%");
    check(c_format!(c"%lld %llu %zu", i64::MIN, u64::MAX, 42usize), "-9223372036854775808 18446744073709551615 42");
    check(c_format!(c"%+d % d %05d", 5 as c_int, 5 as c_int, -42 as c_int), "+5  5 -0042");
    check(c_format!(c"%.0f %.1f %.3f", 2.5f64, 0.05f64, -0.0f64), "2 0.1 -0.000");
    // Cut to the buffer, with the length the whole text would have.
    let mut small = [0 as c_char; 8];
    // SAFETY: as in `c_format!`, with a buffer of 8 bytes.
    let len = unsafe { snprintf(small.as_mut_ptr(), small.len(), c"%s".as_ptr(), c"truncated text".as_ptr()) };
    // SAFETY: `snprintf` ends what it writes with a NUL, within the buffer.
    assert_eq!((unsafe { CStr::from_ptr(small.as_ptr()) }.to_bytes(), len), (&b"truncat"[..], 14));
}
