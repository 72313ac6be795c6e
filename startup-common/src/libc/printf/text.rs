//! `%c`, `%s` and their wide forms `%lc`, `%ls`, which write UTF-8.

use core::ffi::c_void;

use super::Error;
use super::output::{Padding, Piece, Sink};
use super::spec::{Length, Spec};

/// `%c` (the `int` argument as an `unsigned char`) or `%lc` (a `wint_t`, as UTF-8).
pub fn write_char(sink: &mut Sink<'_>, spec: &Spec, value: u32) -> Result<(), Error> {
    let mut buffer = [0u8; 4];
    let bytes: &[u8] = if spec.length == Length::Long {
        char::from_u32(value).ok_or(Error::WideChar)?.encode_utf8(&mut buffer).as_bytes()
    } else {
        buffer[0] = value as u8;
        &buffer[..1]
    };
    sink.field(spec, b"", &[Piece::Bytes(bytes)], Padding::Spaces)
}

/// `%s` or `%ls`. A null pointer prints `(null)`, or nothing when the precision is below its length, as glibc does.
///
/// # Safety
/// `pointer` is null or points to a string readable up to its NUL or up to the precision, whichever comes first:
/// bytes for `%s`, 32-bit wide characters for `%ls`.
pub unsafe fn write_string(sink: &mut Sink<'_>, spec: &Spec, pointer: *const c_void) -> Result<(), Error> {
    let limit = spec.precision.unwrap_or(usize::MAX);
    if pointer.is_null() {
        let text: &[u8] = if limit >= 6 { b"(null)" } else { b"" };
        return sink.field(spec, b"", &[Piece::Bytes(text)], Padding::Spaces);
    }
    if spec.length == Length::Long {
        // SAFETY: the caller's guarantee for `%ls`.
        return unsafe { write_wide(sink, spec, pointer.cast(), limit) };
    }
    let bytes = pointer.cast::<u8>();
    let mut len = 0;
    // C allows an array without a NUL when the precision stops before its end: read no further than that.
    // SAFETY: every byte up to the NUL or the precision is readable (caller's guarantee).
    while len < limit && unsafe { bytes.add(len).read() } != 0 {
        len += 1;
    }
    // SAFETY: the `len` bytes just read.
    let text = unsafe { core::slice::from_raw_parts(bytes, len) };
    sink.field(spec, b"", &[Piece::Bytes(text)], Padding::Spaces)
}

/// `%ls`: at most `limit` bytes of UTF-8, never part of a character. Checked and measured before anything is
/// written, so a bad character fails the conversion whole.
///
/// # Safety
/// `wide` points to 32-bit characters readable up to a 0 or as far as `limit` bytes of output take.
unsafe fn write_wide(sink: &mut Sink<'_>, spec: &Spec, wide: *const u32, limit: usize) -> Result<(), Error> {
    // The characters that fit in `limit` bytes, and their bytes.
    let mut count = 0;
    let mut bytes = 0;
    // C: with a precision, the array needs no 0 when the precision is reached first; read nothing past that.
    while bytes < limit {
        // SAFETY: a character before the end (caller's guarantee; the loop stops at 0 or at the limit).
        let value = unsafe { wide.add(count).read() };
        if value == 0 {
            break;
        }
        let len = char::from_u32(value).ok_or(Error::WideChar)?.len_utf8();
        if bytes + len > limit {
            break;
        }
        bytes += len;
        count += 1;
    }
    let pad = spec.width.saturating_sub(bytes);
    if !spec.flags.left {
        sink.repeat(b' ', pad)?;
    }
    for index in 0..count {
        // SAFETY: read and checked above.
        let value = unsafe { wide.add(index).read() };
        let mut buffer = [0u8; 4];
        let character = char::from_u32(value).ok_or(Error::WideChar)?;
        sink.write(character.encode_utf8(&mut buffer).as_bytes())?;
    }
    if spec.flags.left {
        sink.repeat(b' ', pad)?;
    }
    Ok(())
}
