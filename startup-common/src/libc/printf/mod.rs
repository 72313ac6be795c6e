//! C's `printf` family: a formatting engine for the C99 conversions, run on the device.
//!
//! [`format`] reads a C format string and writes the text to an [`Output`], taking its arguments from an
//! [`Arguments`]: on the GPU a C `va_list` ([`VaArgs`]), in the host tests a vector. The C functions (`printf`,
//! `fprintf`, `snprintf`, ...) that `target_runtime!` exports are thin wrappers over [`stdio`].
//!
//! What is provided, and how it differs from glibc (whose output the host tests compare with byte for byte):
//! - conversions `d i u o x X b B c s p f F e E g G a A %`, with flags `- + space # 0 '` (`'` groups nothing: the
//!   only locale is C), width and precision as numbers or `*`, length modifiers `hh h l ll j z t L` (`L` on an
//!   integer means `ll`, as in glibc; on a floating-point conversion it means `double`, which is what `long double`
//!   is on both GPU targets); `%lc`/`%ls` (and `%C`/`%S`) write UTF-8;
//! - floating point is exact and correctly rounded (to nearest, ties to even on the exact binary value) at any
//!   precision; digits past the value's exact expansion are zeros, written as padding, so the work is bounded by
//!   the expansion (at most 767 significant digits) whatever the precision;
//! - `%n` is refused: nothing is written through its pointer and the call fails (see [`Error::WriteCount`]);
//! - an unknown conversion is written as it stands in the format (`%y` prints `%y`) and consumes no argument;
//!   glibc prints it too but drops its length modifier;
//! - positional arguments (`%1$d`) are not supported: the call fails at that point;
//! - a wide character that is not a Unicode scalar value fails the call (glibc encodes values past U+10FFFF);
//! - `%#g` keeps its zeros when rounding adds a digit, as C says (`%#g` of 999999.99999999 is `1.00000e+06`; glibc
//!   prints `1.e+06`).
//!
//! A call that fails has written what came before the failing conversion, and returns -1 in C.

mod decimal;
mod float;
mod integer;
mod output;
mod spec;
pub mod stdio;
mod text;

#[cfg(test)]
mod tests;

pub use output::{BufferOutput, Output};
pub use stdio::VaArgs;

use output::Sink;
use spec::{Conversion, Spec};

/// Where [`format`] takes its arguments from, in order. C's default argument promotions apply: `char` and `short`
/// arrive as `int`, `float` as `double`. On both GPU targets `long`, `size_t`, `intmax_t`, `ptrdiff_t` and pointers
/// are 64 bits.
pub trait Arguments {
    /// The next `int` or `unsigned int`, as its 32 bits.
    fn next_u32(&mut self) -> u32;
    /// The next `long`, `long long`, `size_t`, `intmax_t` or `ptrdiff_t`, as its 64 bits.
    fn next_u64(&mut self) -> u64;
    /// The next `double`.
    fn next_f64(&mut self) -> f64;
    /// The next pointer.
    fn next_pointer(&mut self) -> *const core::ffi::c_void;
}

/// Why a call failed; C's functions return -1 for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The format ends inside a conversion specification (`"abc%"`, `"%5"`).
    Incomplete,
    /// `%n`: writing the count through a pointer from the arguments is refused (a format string that reaches
    /// `printf` from data would otherwise write memory), so the call stops there.
    WriteCount,
    /// A positional argument (`%1$d`), which this printf does not support.
    Positional,
    /// A width or precision over `INT_MAX`, or output longer than `INT_MAX` bytes, which C's `int` result cannot
    /// count.
    Overflow,
    /// `%lc` or `%ls` of a value that is not a Unicode scalar value.
    WideChar,
    /// The host could not take the text: a file's error number ([`crate::libc::errno`]).
    Write(core::ffi::c_int),
}

/// The most bytes a call may produce: its count is returned as a C `int`.
pub const MAX_OUTPUT: usize = i32::MAX as usize;

/// Formats `format` (a C format string without its NUL) with `args` into `output`; returns the number of bytes
/// produced. On an error, `output` has received what came before the failing conversion.
///
/// # Safety
/// Every `%s` argument must be null or point to bytes readable up to a NUL or up to the precision, whichever comes
/// first, and every `%ls` argument likewise to 32-bit wide characters; `args` must hold an argument of the right
/// kind for each conversion (C's rules), or say what happens otherwise.
pub unsafe fn format(format: &[u8], args: &mut dyn Arguments, output: &mut dyn Output) -> Result<usize, Error> {
    let mut sink = Sink::new(output);
    let mut rest = format;
    loop {
        let Some(percent) = rest.iter().position(|&byte| byte == b'%') else {
            sink.write(rest)?;
            return Ok(sink.count());
        };
        sink.write(&rest[..percent])?;
        let (spec, length) = Spec::parse(&rest[percent + 1..], args)?;
        let text = &rest[percent..percent + 1 + length];
        rest = &rest[percent + 1 + length..];
        match spec.conversion {
            Conversion::Percent => sink.write(b"%")?,
            Conversion::Signed | Conversion::Unsigned(_) => integer::write(&mut sink, &spec, args)?,
            Conversion::Pointer => integer::write_pointer(&mut sink, &spec, args.next_pointer())?,
            Conversion::Float(style) => float::write(&mut sink, &spec, style, args.next_f64())?,
            Conversion::Char => text::write_char(&mut sink, &spec, args.next_u32())?,
            // SAFETY: the caller guarantees that a `%s`/`%ls` argument is null or a readable string.
            Conversion::String => unsafe { text::write_string(&mut sink, &spec, args.next_pointer())? },
            Conversion::WriteCount => return Err(Error::WriteCount),
            Conversion::Unknown => sink.write(text)?,
        }
    }
}
