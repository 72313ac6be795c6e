//! One conversion specification: `%[flags][width][.precision][length]conversion`.

use super::{Arguments, Error, MAX_OUTPUT};

/// The flags of a specification.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// `-`: pad on the right.
    pub left: bool,
    /// `+`: a sign on non-negative signed numbers.
    pub plus: bool,
    /// ` `: a space where a `+` would go.
    pub space: bool,
    /// `#`: the alternative form.
    pub alternative: bool,
    /// `0`: pad numbers with zeros after their sign and prefix.
    pub zero: bool,
}

/// The length modifier, as far as it changes what is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// None: `int`, `double`, `char`, `char *`.
    Default,
    /// `hh`: the `int` argument converted to `char`.
    Char,
    /// `h`: the `int` argument converted to `short`.
    Short,
    /// `l`, `ll`, `j`, `z`, `t`, `L`: a 64-bit integer; for `c` and `s`, wide characters.
    Long,
}

/// Bases of unsigned conversions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    Binary,
    Octal,
    Decimal,
    Hex,
}

/// Styles of floating-point conversions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatStyle {
    /// `f`, `F`
    Fixed,
    /// `e`, `E`
    Exponent,
    /// `g`, `G`
    General,
    /// `a`, `A`
    Hex,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conversion {
    /// `%%`
    Percent,
    /// `d`, `i`
    Signed,
    /// `u`, `o`, `x`, `X`, `b`, `B`
    Unsigned(Base),
    /// `p`
    Pointer,
    Float(FloatStyle),
    /// `c`, `C`
    Char,
    /// `s`, `S`
    String,
    /// `n`
    WriteCount,
    /// Anything else: written as it stands.
    Unknown,
}

/// A parsed specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub flags: Flags,
    pub width: usize,
    pub precision: Option<usize>,
    pub length: Length,
    pub conversion: Conversion,
    /// The conversion letter is upper case (`X`, `B`, `F`, `E`, `G`, `A`).
    pub upper: bool,
}

impl Spec {
    /// Parses the specification at the start of `text` (just after its `%`), taking `*` widths and precisions from
    /// `args`; returns it and how many bytes of `text` it spans.
    pub fn parse(text: &[u8], args: &mut dyn Arguments) -> Result<(Spec, usize), Error> {
        let mut at = 0;
        let next = |at: usize| text.get(at).copied().ok_or(Error::Incomplete);
        let mut flags = Flags::default();
        loop {
            match next(at)? {
                b'-' => flags.left = true,
                b'+' => flags.plus = true,
                b' ' => flags.space = true,
                b'#' => flags.alternative = true,
                b'0' => flags.zero = true,
                // Thousands' grouping: the C locale groups nothing.
                b'\'' => {}
                _ => break,
            }
            at += 1;
        }
        let width = if next(at)? == b'*' {
            at += 1;
            // `*1$`: a positional width.
            number(text, at)?;
            // A negative width is a `-` flag and its magnitude (C99 7.19.6.1).
            let value = args.next_u32() as i32;
            flags.left |= value < 0;
            bounded(value.unsigned_abs() as usize)?
        } else {
            let (value, end) = number(text, at)?;
            at = end;
            value
        };
        let mut precision = None;
        if next(at)? == b'.' {
            at += 1;
            if next(at)? == b'*' {
                at += 1;
                number(text, at)?;
                // A negative precision is taken as if it were missing.
                let value = args.next_u32() as i32;
                precision = usize::try_from(value).ok();
            } else {
                let (value, end) = number(text, at)?;
                (precision, at) = (Some(value), end);
            }
        }
        let mut length = Length::Default;
        match next(at)? {
            b'h' if text.get(at + 1) == Some(&b'h') => (length, at) = (Length::Char, at + 2),
            b'h' => (length, at) = (Length::Short, at + 1),
            b'l' if text.get(at + 1) == Some(&b'l') => (length, at) = (Length::Long, at + 2),
            b'l' | b'j' | b'z' | b't' | b'L' => (length, at) = (Length::Long, at + 1),
            _ => {}
        }
        let letter = next(at)?;
        let conversion = match letter {
            b'%' => Conversion::Percent,
            b'd' | b'i' => Conversion::Signed,
            b'u' => Conversion::Unsigned(Base::Decimal),
            b'o' => Conversion::Unsigned(Base::Octal),
            b'x' | b'X' => Conversion::Unsigned(Base::Hex),
            b'b' | b'B' => Conversion::Unsigned(Base::Binary),
            b'p' => Conversion::Pointer,
            b'f' | b'F' => Conversion::Float(FloatStyle::Fixed),
            b'e' | b'E' => Conversion::Float(FloatStyle::Exponent),
            b'g' | b'G' => Conversion::Float(FloatStyle::General),
            b'a' | b'A' => Conversion::Float(FloatStyle::Hex),
            b'c' => Conversion::Char,
            b's' => Conversion::String,
            // XSI's spellings of `%lc` and `%ls`.
            b'C' | b'S' => {
                length = Length::Long;
                if letter == b'C' { Conversion::Char } else { Conversion::String }
            }
            b'n' => Conversion::WriteCount,
            _ => Conversion::Unknown,
        };
        let upper = matches!(letter, b'X' | b'B' | b'F' | b'E' | b'G' | b'A');
        Ok((Spec { flags, width, precision, length, conversion, upper }, at + 1))
    }

    /// The sign a non-negative signed number gets from the flags.
    pub fn plus_sign(&self) -> &'static [u8] {
        if self.flags.plus {
            b"+"
        } else if self.flags.space {
            b" "
        } else {
            b""
        }
    }
}

/// The decimal number at `text[at..]` (none is 0) and where it ends; a number followed by `$` is a positional
/// argument.
fn number(text: &[u8], mut at: usize) -> Result<(usize, usize), Error> {
    let mut value: usize = 0;
    while let Some(digit @ b'0'..=b'9') = text.get(at).copied() {
        // Saturates: any value past `MAX_OUTPUT` is refused below, however long.
        value = value.saturating_mul(10).saturating_add(usize::from(digit - b'0'));
        at += 1;
    }
    if text.get(at) == Some(&b'$') {
        return Err(Error::Positional);
    }
    Ok((bounded(value)?, at))
}

fn bounded(value: usize) -> Result<usize, Error> {
    if value > MAX_OUTPUT { Err(Error::Overflow) } else { Ok(value) }
}
