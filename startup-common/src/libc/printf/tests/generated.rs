//! Generated cases: random specifications (flags, widths, precisions, `*`, length modifiers) of every conversion,
//! with arguments drawn from the values where printf implementations go wrong, against glibc byte for byte. The
//! generator is seeded, so a failure repeats; its message names the format and the arguments.

use std::string::{String, ToString};
use std::vec::Vec;

use super::Arg::{self, Double, Int, Long, Pointer};
use super::assert_same_as;

/// SplitMix64: a small, seeded, good-enough generator.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    fn int(&mut self) -> i32 {
        match self.below(4) {
            0 => self.pick(&[0, 1, -1, 7, -7, 42, 127, 128, 255, 256, 65535, 65536, i32::MAX, i32::MIN, 1_000_000]),
            1 => self.below(1000) as i32 - 500,
            _ => self.next() as i32,
        }
    }

    fn long(&mut self) -> i64 {
        match self.below(4) {
            0 => self.pick(&[0, 1, -1, i64::MAX, i64::MIN, u32::MAX as i64, 1 << 32, 1_000_000_000_000_000_000]),
            1 => self.below(100_000) as i64 - 50_000,
            _ => self.next() as i64,
        }
    }

    fn double(&mut self) -> f64 {
        let sign = if self.chance(30) { -1.0 } else { 1.0 };
        let magnitude = match self.below(9) {
            0 => self.pick(&[
                0.0,
                1.0,
                0.5,
                1.5,
                2.5,
                0.125,
                0.1,
                1e-5,
                1e-4,
                9.5,
                99.5,
                999_999.5,
                1e15,
                1e16,
                1e17,
                1e21,
                1e22,
                1e23,
                123_456_789.125,
                f64::MAX,
                f64::MIN_POSITIVE,
                5e-324,
                f64::from_bits((1 << 52) - 1),
                9_007_199_254_740_992.0,
                0.1 + 0.2,
                1.0 / 3.0,
                core::f64::consts::PI,
                9.999_999_5,
                0.000_099_999_95,
                f64::INFINITY,
                f64::NAN,
            ]),
            // Any bit pattern: every exponent, subnormals, NaNs with payloads.
            1 | 2 => f64::from_bits(self.next() & !(1 << 63)),
            // A decimal with few digits, the kind people print.
            3 | 4 => self.below(1_000_000) as f64 / 10f64.powi(self.below(8) as i32),
            // An odd multiple of a power of two: exact ties when rounded to fewer digits.
            5 | 6 => (2 * self.below(1 << 20) + 1) as f64 / (1u64 << self.below(24)) as f64,
            // Near powers of ten, where the exponent changes as digits round up.
            7 => 10f64.powi(self.below(40) as i32 - 20) * (1.0 - self.below(1000) as f64 * 1e-16),
            _ => {
                f64::from_bits(0x3ff0_0000_0000_0000 | self.below(1 << 52)) * 2f64.powi(self.below(2100) as i32 - 1075)
            }
        };
        sign * magnitude
    }
}

const STRINGS: &[&[u8]] = &[b"\0", b"a\0", b"hello\0", b"hello, world with spaces\0", b"%d is not a conversion here\0"];

/// A format and its arguments.
#[derive(Default)]
struct Case {
    format: String,
    args: Vec<Arg>,
}

/// One random specification and its arguments, appended to `case`, and to `reference` what glibc is to print the
/// same with. That is the same specification, except for one glibc bug: `%#g` of a value whose rounding adds a digit
/// (999999.99999999 to `1.00000e+06`) loses the zeros that `#` keeps (glibc prints `1.e+06`); C defines `%g` as `%e`
/// or `%f` of a precision that depends on the exponent after rounding, so glibc gets that instead.
fn specification(random: &mut Random, case: &mut Case, reference: &mut Case) {
    let conversion = random.pick(&[
        'd', 'i', 'u', 'o', 'x', 'X', 'b', 'B', 'c', 's', 'p', 'f', 'F', 'e', 'E', 'g', 'G', 'a', 'A', 'f', 'e', 'g',
        'd', 'x', '%',
    ]);
    let float = "fFeEgGaA".contains(conversion);
    let mut flags = String::new();
    for flag in ['-', '+', ' ', '#', '0', '\''] {
        if random.chance(20) {
            flags.push(flag);
        }
    }
    let mut width_args = Vec::new();
    let width = match random.below(20) {
        0..=8 => String::new(),
        9..=15 => random.below(25).to_string(),
        16 => (100 + random.below(300)).to_string(),
        _ => {
            width_args.push(Int(random.below(61) as i32 - 30));
            "*".into()
        }
    };
    // The precision as written, and its value (`None` when missing or negative).
    let (precision, precision_value, precision_arg) = match random.below(20) {
        0..=7 => (String::new(), None, None),
        8 | 9 => (".".into(), Some(0), None),
        10..=16 => {
            let value = random.below(21) as usize;
            (std::format!(".{value}"), Some(value), None)
        }
        17 => {
            let value = random.below(if float { 1100 } else { 300 }) as usize;
            (std::format!(".{value}"), Some(value), None)
        }
        _ => {
            let value = random.below(46) as i32 - 5;
            (".*".into(), usize::try_from(value).ok(), Some(Int(value)))
        }
    };
    let length = match conversion {
        'd' | 'i' | 'u' | 'o' | 'x' | 'X' | 'b' | 'B' => {
            random.pick(&["", "", "", "hh", "h", "l", "ll", "j", "z", "t"])
        }
        'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'a' | 'A' => random.pick(&["", "", "l"]),
        _ => "",
    };
    let value = match conversion {
        '%' => None,
        'c' => Some(Int(random.int())),
        's' => {
            let pointer = if random.chance(10) { std::ptr::null() } else { random.pick(STRINGS).as_ptr() };
            Some(Pointer(pointer.cast()))
        }
        'p' => Some(Pointer(random.pick(&[0, 16, 0xdead_beef, 0x7f12_3456_789a, usize::MAX]) as *const _)),
        _ if float => Some(Double(random.double())),
        _ if matches!(length, "l" | "ll" | "j" | "z" | "t") => Some(Long(random.long())),
        _ => Some(Int(random.int())),
    };
    case.format.push_str(&std::format!("%{flags}{width}{precision}{length}{conversion}"));
    case.args.extend(width_args.iter().chain(&precision_arg).chain(&value));
    let replacement = match (conversion, value) {
        ('g' | 'G', Some(Double(value))) if flags.contains('#') => carried_general(value, precision_value),
        _ => None,
    };
    match replacement {
        Some((letter, precision)) => {
            let letter = if conversion == 'G' { letter.to_ascii_uppercase() } else { letter };
            reference.format.push_str(&std::format!("%{flags}{width}.{precision}{length}{letter}"));
            reference.args.extend(width_args.iter().chain(&value));
        }
        None => {
            reference.format.push_str(&std::format!("%{flags}{width}{precision}{length}{conversion}"));
            reference.args.extend(width_args.iter().chain(&precision_arg).chain(&value));
        }
    }
}

/// For `%#g` of `value` with `precision`, where rounding to the precision raises the decimal exponent: the `%e` or
/// `%f` conversion and precision C defines it as.
fn carried_general(value: f64, precision: Option<usize>) -> Option<(char, usize)> {
    if !value.is_finite() || value == 0.0 {
        return None;
    }
    let significant = precision.unwrap_or(6).max(1);
    let exponent = |text: String| -> i32 { text[text.find('e').unwrap() + 1..].parse().unwrap() };
    // 767 significant digits are exact for every double: no rounding, the exponent of the value itself.
    let exact = exponent(std::format!("{:.766e}", value.abs()));
    let rounded = exponent(std::format!("{:.*e}", significant.min(767) - 1, value.abs()));
    if rounded == exact {
        return None;
    }
    if (rounded as i64) < significant as i64 && rounded >= -4 {
        Some(('f', (significant as i64 - 1 - rounded as i64) as usize))
    } else {
        Some(('e', significant - 1))
    }
}

/// Runs `count` cases of up to `conversions` specifications each, between bits of literal text.
fn run(seed: u64, count: usize, conversions: u64) {
    let mut random = Random(seed);
    for _ in 0..count {
        let (mut case, mut reference) = (Case::default(), Case::default());
        for _ in 0..1 + random.below(conversions) {
            let text = random.pick(&["", "", "x", " | ", "text "]);
            case.format.push_str(text);
            reference.format.push_str(text);
            specification(&mut random, &mut case, &mut reference);
        }
        // At most 8 doubles and 12 integers fit the prototype `glibc` calls.
        let doubles = case.args.iter().filter(|arg| matches!(arg, Double(_))).count();
        assert!(doubles <= 8 && case.args.len() - doubles <= 12, "too many arguments for `glibc`");
        let short = random.below(40) as usize;
        assert_same_as(&case.format, &case.args, (&reference.format, &reference.args), short);
    }
}

#[test]
fn single_conversions_match_glibc() {
    run(0x5eed_0001, 50_000, 1);
}

#[test]
fn formats_of_several_conversions_match_glibc() {
    run(0x5eed_0002, 10_000, 4);
}
