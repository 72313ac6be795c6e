//! The exact decimal expansion of a double, and its rounding to nearest, ties to even, at any digit.
//!
//! A finite double is `m × 2^e` with an integer `m < 2^53`. For `e >= 0` that is an integer of at most 309 digits;
//! for `e < 0` it is `m × 5^-e / 10^-e`, so the digits of the integer `m × 5^-e` (at most 767 of them, for the
//! largest subnormal) are the value's significant digits. Both integers fit in [`WORDS`] 32-bit words; their digits
//! come from repeated division by 10^9. Having every digit, rounding is exact at any position, and no precision
//! costs more than the expansion itself: past it, every digit is a zero.

/// Words of the largest integer: `(2^53 - 1) × 5^1074` < 2^2548.
const WORDS: usize = 80;
/// The most digits of an expansion (767 significant digits of the largest subnormal), with room to spare.
pub const MAX_DIGITS: usize = 776;

/// Digits (ASCII) and where the point is: the value is `0.d₁d₂d₃… × 10^(exponent + 1)`, i.e. the first digit has
/// weight `10^exponent`. Zero has no digits.
pub struct Decimal {
    digits: [u8; MAX_DIGITS],
    len: usize,
    exponent: i32,
}

impl Decimal {
    /// The exact expansion of a finite `value`'s magnitude, without trailing zeros.
    pub fn exact(value: f64) -> Self {
        let mut decimal = Self { digits: [b'0'; MAX_DIGITS], len: 0, exponent: 0 };
        let bits = value.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let fraction = bits & ((1 << 52) - 1);
        let (mantissa, binary_exponent) =
            if biased == 0 { (fraction, -1074) } else { (fraction | 1 << 52, biased - 1075) };
        if mantissa == 0 {
            return decimal;
        }
        let mut number = Big::from(mantissa);
        let fraction_digits = if binary_exponent >= 0 {
            number.shift_left(binary_exponent as u32);
            0
        } else {
            number.multiply_by_power_of_five(binary_exponent.unsigned_abs());
            binary_exponent.unsigned_abs() as i32
        };
        // Nine digits at a time, lowest first, into the end of the buffer.
        let mut end = MAX_DIGITS;
        while !number.is_zero() {
            let mut group = number.divide_by(1_000_000_000);
            for _ in 0..9 {
                end -= 1;
                decimal.digits[end] = b'0' + (group % 10) as u8;
                group /= 10;
            }
        }
        let start = end + decimal.digits[end..].iter().position(|&d| d != b'0').unwrap_or(0);
        let stop = MAX_DIGITS - decimal.digits[start..].iter().rev().position(|&d| d != b'0').unwrap_or(0);
        decimal.digits.copy_within(start..stop, 0);
        decimal.len = stop - start;
        decimal.exponent = (MAX_DIGITS - start) as i32 - 1 - fraction_digits;
        decimal
    }

    /// The significant digits; none for zero. Any digit past them is a zero.
    pub fn digits(&self) -> &[u8] {
        &self.digits[..self.len]
    }

    /// The weight of the first digit: `10^exponent`. 0 for zero.
    pub fn exponent(&self) -> i32 {
        self.exponent
    }

    /// Rounds to `count` (at least 1) significant digits.
    pub fn round_to_significant(&mut self, count: usize) {
        self.round_at(count as i64);
    }

    /// Rounds to `count` digits after the point.
    pub fn round_to_fraction(&mut self, count: usize) {
        self.round_at(i64::from(self.exponent) + 1 + count as i64);
    }

    /// Keeps the first `keep` digits (`keep` may be 0 or negative: the rounding digit lies before the first
    /// digit), rounding the rest to nearest, ties to even.
    fn round_at(&mut self, keep: i64) {
        if self.len == 0 || keep >= self.len as i64 {
            return;
        }
        if keep < 0 {
            // Below half of the last kept place: zero.
            self.len = 0;
            self.exponent = 0;
            return;
        }
        let keep = keep as usize;
        let first_dropped = self.digits[keep];
        // Trailing zeros are never stored, so any digit after the first dropped one makes it more than a tie.
        let more = self.len > keep + 1;
        let last_odd = keep > 0 && (self.digits[keep - 1] - b'0') % 2 == 1;
        let up = first_dropped > b'5' || (first_dropped == b'5' && (more || last_odd));
        self.len = keep;
        if up {
            // Add one at the last kept place; a carry past the first digit makes the number 1 followed by zeros.
            let mut at = keep;
            loop {
                if at == 0 {
                    self.digits[0] = b'1';
                    self.len = 1;
                    self.exponent += 1;
                    break;
                }
                at -= 1;
                if self.digits[at] == b'9' {
                    self.len = at;
                } else {
                    self.digits[at] += 1;
                    break;
                }
            }
        }
        // Drop zeros that the rounding left at the end.
        while self.len > 0 && self.digits[self.len - 1] == b'0' {
            self.len -= 1;
        }
        if self.len == 0 {
            self.exponent = 0;
        }
    }
}

/// An unsigned integer of up to [`WORDS`] 32-bit words, lowest first.
struct Big {
    words: [u32; WORDS],
    len: usize,
}

impl Big {
    fn from(value: u64) -> Self {
        let mut words = [0; WORDS];
        words[0] = value as u32;
        words[1] = (value >> 32) as u32;
        Self { words, len: if words[1] != 0 { 2 } else { 1 } }
    }

    fn is_zero(&self) -> bool {
        self.len == 0 || (self.len == 1 && self.words[0] == 0)
    }

    fn multiply_by(&mut self, factor: u32) {
        let mut carry = 0u64;
        for word in &mut self.words[..self.len] {
            let product = u64::from(*word) * u64::from(factor) + carry;
            *word = product as u32;
            carry = product >> 32;
        }
        if carry != 0 {
            self.words[self.len] = carry as u32;
            self.len += 1;
        }
    }

    fn multiply_by_power_of_five(&mut self, mut power: u32) {
        // 5^13 is the largest power of five below 2^32.
        const FIVE_TO_13: u32 = 1_220_703_125;
        while power >= 13 {
            self.multiply_by(FIVE_TO_13);
            power -= 13;
        }
        self.multiply_by(5u32.pow(power));
    }

    fn shift_left(&mut self, bits: u32) {
        let (words, bits) = ((bits / 32) as usize, bits % 32);
        if bits > 0 {
            let mut carry = 0;
            for word in &mut self.words[..self.len] {
                let shifted = *word << bits | carry;
                carry = *word >> (32 - bits);
                *word = shifted;
            }
            if carry != 0 {
                self.words[self.len] = carry;
                self.len += 1;
            }
        }
        if words > 0 {
            self.words.copy_within(0..self.len, words);
            self.words[..words].fill(0);
            self.len += words;
        }
    }

    /// Divides in place by `divisor`; returns the remainder.
    fn divide_by(&mut self, divisor: u32) -> u32 {
        let mut remainder = 0u64;
        for word in self.words[..self.len].iter_mut().rev() {
            let current = remainder << 32 | u64::from(*word);
            *word = (current / u64::from(divisor)) as u32;
            remainder = current % u64::from(divisor);
        }
        while self.len > 0 && self.words[self.len - 1] == 0 {
            self.len -= 1;
        }
        remainder as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expansion(value: f64) -> (std::string::String, i32) {
        let decimal = Decimal::exact(value);
        (std::string::String::from_utf8(decimal.digits().to_vec()).unwrap(), decimal.exponent())
    }

    #[test]
    fn expansions_are_exact() {
        assert_eq!(expansion(0.0), ("".into(), 0));
        assert_eq!(expansion(1.0), ("1".into(), 0));
        assert_eq!(expansion(1234.5), ("12345".into(), 3));
        assert_eq!(expansion(0.125), ("125".into(), -1));
        assert_eq!(expansion(0.1), ("1000000000000000055511151231257827021181583404541015625".into(), -1));
        assert_eq!(expansion(1e22), ("1".into(), 22));
        assert_eq!(expansion(2f64.powi(64)), ("18446744073709551616".into(), 19));
        let (digits, exponent) = expansion(5e-324);
        assert!(digits.starts_with("49406564584124654417656879286822137236505980") && exponent == -324);
        assert_eq!(digits.len(), 751);
        assert_eq!(expansion(f64::from_bits((1 << 52) - 1)).0.len(), 767);
        assert_eq!(expansion(f64::MAX).0.len(), 309);
    }

    #[test]
    fn rounding_is_to_nearest_with_ties_to_even() {
        let rounded = |value: f64, count: usize| {
            let mut decimal = Decimal::exact(value);
            decimal.round_to_significant(count);
            (std::string::String::from_utf8(decimal.digits().to_vec()).unwrap(), decimal.exponent())
        };
        assert_eq!(rounded(0.125, 2), ("12".into(), -1));
        assert_eq!(rounded(0.375, 2), ("38".into(), -1));
        assert_eq!(rounded(9.5, 1), ("1".into(), 1));
        assert_eq!(rounded(8.5, 1), ("8".into(), 0));
        assert_eq!(rounded(999.99, 3), ("1".into(), 3));
        assert_eq!(rounded(0.1, 17), ("10000000000000001".into(), -1));
        assert_eq!(rounded(0.1, 16), ("1".into(), -1));
        let fixed = |value: f64, count: usize| {
            let mut decimal = Decimal::exact(value);
            decimal.round_to_fraction(count);
            (std::string::String::from_utf8(decimal.digits().to_vec()).unwrap(), decimal.exponent())
        };
        assert_eq!(fixed(0.5, 0), ("".into(), 0));
        assert_eq!(fixed(1.5, 0), ("2".into(), 0));
        assert_eq!(fixed(0.004, 2), ("".into(), 0));
        assert_eq!(fixed(0.006, 2), ("1".into(), -2));
        assert_eq!(fixed(0.0051, 2), ("1".into(), -2));
        assert_eq!(fixed(0.96, 1), ("1".into(), 0));
    }
}
