//! Integer conversions (`d i u o x X b B`) and `%p`.

use super::output::{Padding, Piece, Sink};
use super::spec::{Base, Conversion, Length, Spec};
use super::{Arguments, Error};

/// Room for the digits of any 64-bit number in any base (64 binary digits).
const MAX_DIGITS: usize = 64;

/// Reads the integer argument `spec` asks for and writes it.
pub fn write(sink: &mut Sink<'_>, spec: &Spec, args: &mut dyn Arguments) -> Result<(), Error> {
    let signed = spec.conversion == Conversion::Signed;
    // `char` and `short` arrive promoted to `int`; `hh`/`h` convert the value back.
    let (bits, negative) = match (spec.length, signed) {
        (Length::Long, false) => (args.next_u64(), false),
        (Length::Long, true) => split_sign(args.next_u64() as i64),
        (Length::Default, false) => (u64::from(args.next_u32()), false),
        (Length::Default, true) => split_sign(i64::from(args.next_u32() as i32)),
        (Length::Short, false) => (u64::from(args.next_u32() as u16), false),
        (Length::Short, true) => split_sign(i64::from(args.next_u32() as i16)),
        (Length::Char, false) => (u64::from(args.next_u32() as u8), false),
        (Length::Char, true) => split_sign(i64::from(args.next_u32() as i8)),
    };
    let base = match spec.conversion {
        Conversion::Unsigned(base) => base,
        _ => Base::Decimal,
    };
    let sign: &[u8] = match (negative, signed) {
        (true, _) => b"-",
        (false, true) => spec.plus_sign(),
        (false, false) => b"",
    };
    write_number(sink, spec, sign, bits, base)
}

/// `%p`: `(nil)` for null, as glibc prints it, otherwise the address as `%#lx` would, with the `+` and space flags.
pub fn write_pointer(sink: &mut Sink<'_>, spec: &Spec, pointer: *const core::ffi::c_void) -> Result<(), Error> {
    if pointer.is_null() {
        return sink.field(spec, b"", &[Piece::Bytes(b"(nil)")], Padding::Spaces);
    }
    let spec = Spec { flags: super::spec::Flags { alternative: true, ..spec.flags }, ..*spec };
    write_number(sink, &spec, spec.plus_sign(), pointer as usize as u64, Base::Hex)
}

fn split_sign(value: i64) -> (u64, bool) {
    (value.unsigned_abs(), value < 0)
}

/// Writes `magnitude` in `base` after `sign`, with the spec's precision (minimum digits), prefix and padding.
fn write_number(sink: &mut Sink<'_>, spec: &Spec, sign: &[u8], magnitude: u64, base: Base) -> Result<(), Error> {
    let mut buffer = [0u8; MAX_DIGITS];
    let digits = digits(&mut buffer, magnitude, base, spec.upper);
    // C: precision 0 with the value 0 gives no digits at all.
    let digits: &[u8] = if magnitude == 0 && spec.precision == Some(0) { b"" } else { digits };
    let mut minimum = spec.precision.unwrap_or(1);
    let alternative: &[u8] = match (spec.flags.alternative, base) {
        // `#o` makes the first digit a zero, by raising the precision when it is not one already.
        (true, Base::Octal) if digits.first() != Some(&b'0') => {
            minimum = minimum.max(digits.len() + 1);
            b""
        }
        (true, Base::Hex) if magnitude != 0 => {
            if spec.upper {
                b"0X"
            } else {
                b"0x"
            }
        }
        (true, Base::Binary) if magnitude != 0 => {
            if spec.upper {
                b"0B"
            } else {
                b"0b"
            }
        }
        _ => b"",
    };
    let mut prefix = [0u8; 3];
    prefix[..sign.len()].copy_from_slice(sign);
    prefix[sign.len()..sign.len() + alternative.len()].copy_from_slice(alternative);
    let prefix = &prefix[..sign.len() + alternative.len()];
    let zeros = minimum.saturating_sub(digits.len());
    // With a precision, the `0` flag is ignored for integers.
    let padding = if spec.precision.is_some() { Padding::Spaces } else { Padding::ZerosAllowed };
    sink.field(spec, prefix, &[Piece::Zeros(zeros), Piece::Bytes(digits)], padding)
}

/// The digits of `value` in `base`, at the end of `buffer`.
fn digits(buffer: &mut [u8; MAX_DIGITS], mut value: u64, base: Base, upper: bool) -> &[u8] {
    let table: &[u8; 16] = if upper { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
    let mut start = MAX_DIGITS;
    match base {
        Base::Decimal => {
            // 64-bit division is slow on GPUs: divide 32-bit halves once the value fits.
            while value > u64::from(u32::MAX) {
                start -= 1;
                buffer[start] = b'0' + (value % 10) as u8;
                value /= 10;
            }
            let mut small = value as u32;
            loop {
                start -= 1;
                buffer[start] = b'0' + (small % 10) as u8;
                small /= 10;
                if small == 0 {
                    break;
                }
            }
        }
        Base::Binary | Base::Octal | Base::Hex => {
            let shift = match base {
                Base::Binary => 1,
                Base::Octal => 3,
                _ => 4,
            };
            let mask = (1u64 << shift) - 1;
            loop {
                start -= 1;
                buffer[start] = table[(value & mask) as usize];
                value >>= shift;
                if value == 0 {
                    break;
                }
            }
        }
    }
    &buffer[start..]
}
