//! Floating-point conversions: `f F e E g G` in decimal, from the exact expansion ([`Decimal`]), and `a A` in
//! hexadecimal, from the bits.

use super::Error;
use super::decimal::Decimal;
use super::output::{Padding, Piece, Sink};
use super::spec::{FloatStyle, Spec};

/// Writes `value` in `style`, as `spec` says.
pub fn write(sink: &mut Sink<'_>, spec: &Spec, style: FloatStyle, value: f64) -> Result<(), Error> {
    let sign: &[u8] = if value.is_sign_negative() { b"-" } else { spec.plus_sign() };
    if !value.is_finite() {
        let text: &[u8] = match (value.is_nan(), spec.upper) {
            (true, false) => b"nan",
            (true, true) => b"NAN",
            (false, false) => b"inf",
            (false, true) => b"INF",
        };
        return sink.field(spec, sign, &[Piece::Bytes(text)], Padding::Spaces);
    }
    match style {
        FloatStyle::Hex => hex(sink, spec, sign, value.to_bits()),
        _ => decimal(sink, spec, sign, style, value),
    }
}

/// `%f`, `%e` and `%g` of the exact expansion `value`.
#[inline(never)]
fn decimal(sink: &mut Sink<'_>, spec: &Spec, sign: &[u8], style: FloatStyle, value: f64) -> Result<(), Error> {
    let mut value = Decimal::exact(value);
    let alternative = spec.flags.alternative;
    let mut exponent_buffer = [0u8; 6];
    match style {
        FloatStyle::Fixed => {
            let precision = spec.precision.unwrap_or(6);
            value.round_to_fraction(precision);
            let pieces = fixed_pieces(&value, precision, alternative);
            sink.field(spec, sign, &pieces, Padding::ZerosAllowed)
        }
        FloatStyle::Exponent => {
            let precision = spec.precision.unwrap_or(6);
            value.round_to_significant(precision + 1);
            let exponent = exponent_text(&mut exponent_buffer, spec, value.exponent());
            let pieces = exponent_pieces(&value, precision, alternative, exponent);
            sink.field(spec, sign, &pieces, Padding::ZerosAllowed)
        }
        _ => {
            // `%g`: P significant digits, as `%f` when the exponent X after rounding satisfies P > X >= -4 and as
            // `%e` otherwise; trailing zeros (and a point with nothing after it) go unless `#`.
            let precision = spec.precision.unwrap_or(6).max(1);
            value.round_to_significant(precision);
            let exponent = value.exponent();
            if exponent >= -4 && i64::from(exponent) < precision as i64 {
                // `%f` with P - 1 - X digits after the point, or as many as the digits need.
                let needed = if alternative { precision as i64 - 1 } else { value.digits().len() as i64 - 1 };
                let fraction = (needed - i64::from(exponent)).max(0) as usize;
                let pieces = fixed_pieces(&value, fraction, alternative);
                sink.field(spec, sign, &pieces, Padding::ZerosAllowed)
            } else {
                let fraction = if alternative { precision - 1 } else { value.digits().len().saturating_sub(1) };
                let exponent = exponent_text(&mut exponent_buffer, spec, exponent);
                let pieces = exponent_pieces(&value, fraction, alternative, exponent);
                sink.field(spec, sign, &pieces, Padding::ZerosAllowed)
            }
        }
    }
}

/// `123.4500`: the integer digits (at least a `0`), and `fraction` digits after the point (a point without digits
/// only with `#`). `value` is rounded to at most `fraction` digits after the point.
fn fixed_pieces<'v>(value: &'v Decimal, fraction: usize, alternative: bool) -> [Piece<'v>; 6] {
    let digits = value.digits();
    // Digits before the point: the first `exponent + 1` of them (as far as there are any; zeros after that).
    let integer_count = if digits.is_empty() { 0 } else { (value.exponent() + 1).max(0) as usize };
    let stored_integer = integer_count.min(digits.len());
    // After the point: zeros up to the first digit, the remaining digits, zeros to the precision.
    let leading = if digits.is_empty() { fraction } else { ((-value.exponent() - 1).max(0) as usize).min(fraction) };
    let fraction_digits = &digits[stored_integer..];
    [
        if integer_count == 0 { Piece::Bytes(b"0") } else { Piece::Bytes(&digits[..stored_integer]) },
        Piece::Zeros(integer_count - stored_integer),
        Piece::Bytes(if fraction > 0 || alternative { b"." } else { b"" }),
        Piece::Zeros(leading),
        Piece::Bytes(fraction_digits),
        Piece::Zeros(fraction - leading - fraction_digits.len()),
    ]
}

/// `1.2300e+05`: the first digit, the point (without digits only with `#`), `fraction` digits and the exponent.
/// `value` is rounded to at most `fraction + 1` significant digits.
fn exponent_pieces<'v>(value: &'v Decimal, fraction: usize, alternative: bool, exponent: &'v [u8]) -> [Piece<'v>; 5] {
    let digits = value.digits();
    let (first, rest): (&[u8], &[u8]) = if digits.is_empty() { (b"0", b"") } else { digits.split_at(1) };
    [
        Piece::Bytes(first),
        Piece::Bytes(if fraction > 0 || alternative { b"." } else { b"" }),
        Piece::Bytes(rest),
        Piece::Zeros(fraction - rest.len()),
        Piece::Bytes(exponent),
    ]
}

/// `e+05`, `E-308`: the sign always, at least two digits.
fn exponent_text<'b>(buffer: &'b mut [u8; 6], spec: &Spec, exponent: i32) -> &'b [u8] {
    buffer[0] = if spec.upper { b'E' } else { b'e' };
    buffer[1] = if exponent < 0 { b'-' } else { b'+' };
    let value = exponent.unsigned_abs();
    let mut len = 2;
    if value >= 100 {
        buffer[len] = b'0' + (value / 100 % 10) as u8;
        len += 1;
    }
    buffer[len] = b'0' + (value / 10 % 10) as u8;
    buffer[len + 1] = b'0' + (value % 10) as u8;
    &buffer[..len + 2]
}

/// `%a`: `0x1.8p+1`. Normal numbers lead with 1, subnormals with 0 and exponent -1022, zero is `0x0p+0`, as in
/// glibc. Without a precision, as many hex digits as the value needs; with one, rounded to nearest, ties to even (a
/// carry makes the leading digit 2, as in glibc).
#[inline(never)]
fn hex(sink: &mut Sink<'_>, spec: &Spec, sign: &[u8], bits: u64) -> Result<(), Error> {
    const FRACTION_BITS: u32 = 52;
    const FRACTION_DIGITS: usize = 13;
    let biased = (bits >> FRACTION_BITS) & 0x7ff;
    let fraction = bits & ((1 << FRACTION_BITS) - 1);
    let (lead, exponent): (u64, i32) = match (biased, fraction) {
        (0, 0) => (0, 0),
        (0, _) => (0, -1022),
        _ => (1, biased as i32 - 1023),
    };
    let (lead, kept, digit_count, zeros) = match spec.precision {
        None => {
            let count = if fraction == 0 { 0 } else { FRACTION_DIGITS - fraction.trailing_zeros() as usize / 4 };
            (lead, fraction >> (4 * (FRACTION_DIGITS - count)), count, 0)
        }
        Some(precision) if precision >= FRACTION_DIGITS => {
            (lead, fraction, FRACTION_DIGITS, precision - FRACTION_DIGITS)
        }
        Some(precision) => {
            let shift = 4 * (FRACTION_DIGITS - precision) as u32;
            let whole = lead << FRACTION_BITS | fraction;
            let (kept, rest, half) = (whole >> shift, whole & ((1 << shift) - 1), 1 << (shift - 1));
            let rounded = if rest > half || (rest == half && kept & 1 == 1) { kept + 1 } else { kept };
            let digit_bits = 4 * precision as u32;
            (rounded >> digit_bits, rounded & ((1 << digit_bits) - 1), precision, 0)
        }
    };
    let table: &[u8; 16] = if spec.upper { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
    let mut digits = [0u8; FRACTION_DIGITS];
    for (index, digit) in digits[..digit_count].iter_mut().enumerate() {
        *digit = table[(kept >> (4 * (digit_count - 1 - index))) as usize & 0xf];
    }
    let mut prefix = [0u8; 3];
    prefix[..sign.len()].copy_from_slice(sign);
    prefix[sign.len()..sign.len() + 2].copy_from_slice(if spec.upper { b"0X" } else { b"0x" });
    let point = digit_count > 0 || spec.flags.alternative;
    let mut exponent_buffer = [0u8; 6];
    exponent_buffer[0] = if spec.upper { b'P' } else { b'p' };
    exponent_buffer[1] = if exponent < 0 { b'-' } else { b'+' };
    let mut len = 2;
    for power in [1000, 100, 10, 1] {
        let value = exponent.unsigned_abs();
        if value >= power || power == 1 {
            exponent_buffer[len] = b'0' + (value / power % 10) as u8;
            len += 1;
        }
    }
    let pieces = [
        Piece::Bytes(core::slice::from_ref(&table[lead as usize])),
        Piece::Bytes(if point { b"." } else { b"" }),
        Piece::Bytes(&digits[..digit_count]),
        Piece::Zeros(zeros),
        Piece::Bytes(&exponent_buffer[..len]),
    ];
    sink.field(spec, &prefix[..sign.len() + 2], &pieces, Padding::ZerosAllowed)
}
