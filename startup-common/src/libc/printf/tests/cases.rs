//! Hand-picked cases: each conversion's corners against glibc, and what this printf does differently on purpose.

use std::ffi::{c_char, c_void};
use std::vec::Vec;

use super::super::Error;
use super::Arg::{self, Double, Int, Long, Pointer};
use super::{Formatted, assert_same, glibc, our_snprintf, ours, use_utf8_locale};

fn text(bytes: &'static [u8]) -> Arg {
    assert_eq!(bytes.last(), Some(&0), "test strings end with a NUL");
    Pointer(bytes.as_ptr().cast())
}

fn wide(characters: &'static [u32]) -> Arg {
    assert_eq!(characters.last(), Some(&0), "test strings end with a NUL");
    Pointer(characters.as_ptr().cast())
}

const NULL: Arg = Pointer(std::ptr::null());

/// Each case against glibc, with a buffer large enough and one of 5 bytes.
fn all_same(cases: &[(&str, &[Arg])]) {
    for (format, args) in cases {
        assert_same(format, args, 5);
    }
}

#[test]
fn integers_match_glibc() {
    all_same(&[
        ("%d %i %u", &[Int(-42), Int(42), Int(-1)]),
        ("%d|%d|%d", &[Int(0), Int(i32::MAX), Int(i32::MIN)]),
        ("%ld %lld %jd %zd %td", &[Long(i64::MIN), Long(i64::MAX), Long(-1), Long(-5), Long(7)]),
        ("%lu %llx %jo %zu %tX", &[Long(-1), Long(-1), Long(-1), Long(1 << 40), Long(0xabc)]),
        ("%hhd %hhu %hd %hu %hhx", &[Int(300), Int(-1), Int(70000), Int(-1), Int(0x1ff)]),
        ("%Ld %Lu", &[Long(1 << 40), Long(-1)]),
        ("%x %X %o %b %B", &[Int(255), Int(255), Int(8), Int(5), Int(5)]),
        ("%#x %#X %#o %#b %#B", &[Int(255), Int(255), Int(8), Int(5), Int(5)]),
        ("%#x %#o %#b %#.0x %#.0o", &[Int(0), Int(0), Int(0), Int(0), Int(0)]),
        ("%#.3o %#.0o %#5o %#-5o|", &[Int(8), Int(1), Int(8), Int(8)]),
        ("%.0d|%.0u|%+.0d|% .0d|%5.0d|", &[Int(0), Int(0), Int(0), Int(0), Int(0)]),
        ("%.3d %08.3d % 08d %+08d %-+8d|", &[Int(-7), Int(-7), Int(7), Int(7), Int(7)]),
        ("%05d|%-05d|%0-5d|%05.2d|", &[Int(-3), Int(3), Int(3), Int(3)]),
        ("%+d % d %+ d % +d", &[Int(3), Int(3), Int(3), Int(3)]),
        ("%+u % u %+x", &[Int(3), Int(3), Int(3)]),
        ("%#010x %#010.5x %#-10x|", &[Int(255), Int(255), Int(255)]),
        ("%*d|%-*d|%*d|", &[Int(5), Int(3), Int(5), Int(3), Int(-5), Int(3)]),
        ("%.*d|%.*d|%*.*d|", &[Int(5), Int(3), Int(-5), Int(3), Int(8), Int(4), Int(3)]),
        ("%'d %'x", &[Int(1234567), Int(0x123456)]),
        ("%.300d|%300d|", &[Int(1), Int(-1)]),
        ("%.64b|%#66b", &[Int(-1), Int(1)]),
    ]);
}

#[test]
fn floats_match_glibc() {
    let subnormal_max = f64::from_bits((1 << 52) - 1);
    all_same(&[
        ("%f %F %e %E %g %G %a %A", &[Double(1.5); 8]),
        ("%f %e %g %a", &[Double(0.0), Double(-0.0), Double(0.0), Double(-0.0)]),
        (
            "%.2f %.2f %.0f %.0f %.0f %.1f",
            &[Double(0.125), Double(0.375), Double(0.5), Double(1.5), Double(2.5), Double(0.25)],
        ),
        ("%.17g %.17g %.16g %.15g", &[Double(0.1), Double(1.0 / 3.0), Double(0.1), Double(0.1)]),
        ("%e %e %e %e", &[Double(1e100), Double(1e-300), Double(f64::MAX), Double(f64::MIN_POSITIVE)]),
        ("%e %.3e %.20e %g", &[Double(5e-324), Double(5e-324), Double(5e-324), Double(5e-324)]),
        (
            "%.0e %#.0e %#.0f %#.0g %.0g %#.3g",
            &[Double(0.0), Double(5.0), Double(2.0), Double(1.0), Double(0.0), Double(0.0)],
        ),
        (
            "%g %g %g %g %g",
            &[Double(100000.0), Double(1000000.0), Double(0.0001), Double(0.00001), Double(123456789.0)],
        ),
        ("%g %g %g %#g %#g", &[Double(9.9999995), Double(0.000099999995), Double(999999.5), Double(1.0), Double(1e-5)]),
        ("%.3g %.10g %.1g %#.10g", &[Double(1234.5), Double(0.1), Double(0.95), Double(1e10)]),
        ("%f %F %e %E %g %G %a %A", &[Double(f64::INFINITY); 8]),
        ("%f %F %+e % E %-6g| %06G %a %A", &[Double(f64::NEG_INFINITY); 8]),
        ("%f %F %e %E %g %G %a %A", &[Double(f64::NAN); 8]),
        ("%f %F %010e %-10E| %+g % G", &[Double(-f64::NAN); 6]),
        (
            "%010.3f|%-10.3f|%+010.3f|% 10.3f|%+-10.3f|",
            &[Double(-1.5), Double(1.5), Double(1.5), Double(1.5), Double(1.5)],
        ),
        ("%010.3e|%+010g|%#010g|%010a|%020a", &[Double(-1.5), Double(1.5), Double(1.5), Double(1.5), Double(-1.0)]),
        (
            "%*.*f|%-*.*e|%.*g",
            &[
                Int(12),
                Int(3),
                Double(std::f64::consts::PI),
                Int(14),
                Int(2),
                Double(std::f64::consts::PI),
                Int(-1),
                Double(std::f64::consts::PI),
            ],
        ),
        ("%a %a %a %a", &[Double(1.0), Double(5e-324), Double(f64::MIN_POSITIVE), Double(subnormal_max)]),
        ("%.0a %.0a %.1a %.0a %A", &[Double(1.5), Double(2.5), Double(1.96875), Double(1.9), Double(-3.0)]),
        ("%#.0a %.3a %20.3a|%-20.3a|", &[Double(1.0), Double(5e-324), Double(1.0), Double(-1.0)]),
        (
            "%.0a %.1a %#.0a %.2a %.20a",
            &[Double(subnormal_max), Double(subnormal_max), Double(0.0), Double(0.0), Double(0.1)],
        ),
        ("%.12a %.13a %.14a", &[Double(0.1), Double(0.1), Double(0.1)]),
        ("%lf %le %lg %la", &[Double(2.5); 4]),
        ("%.60f %.40e", &[Double(0.1), Double(1.0 / 3.0)]),
        ("%.1100f|%.800e|%.800g|%#.800g", &[Double(5e-324), Double(subnormal_max), Double(subnormal_max), Double(0.5)]),
        ("%.0f %.0f %f", &[Double(f64::MAX), Double(1e22), Double(1e23)]),
        ("%.3f %.2f %.1f %.0f", &[Double(2.0005), Double(2.675), Double(0.05), Double(0.5000000000000001)]),
        ("%.15e %.15e %.16e", &[Double(9007199254740993.0), Double(123456789012345680.0), Double(4.35)]),
    ]);
}

#[test]
fn huge_precisions_match_glibc_with_bounded_work() {
    all_same(&[
        ("%.20000f", &[Double(1.0)]),
        ("%.20000f", &[Double(5e-324)]),
        ("%.20000e", &[Double(1.0 / 3.0)]),
        ("%#.20000g|%.20000g", &[Double(0.1), Double(0.1)]),
        ("%.20000a", &[Double(0.1)]),
        ("%.20000d|%-20000.3d|", &[Int(5), Int(5)]),
        ("%30000s|%-30000.2s|", &[text(b"abc\0"), text(b"abc\0")]),
    ]);
}

#[test]
fn characters_and_strings_match_glibc() {
    all_same(&[
        ("%c%c%c", &[Int(b'a' as i32), Int(b'b' as i32 + 256), Int(-1)]),
        ("%5c|%-5c|%05c|%+c|%#c|%.3c", &[Int(120), Int(120), Int(120), Int(120), Int(120), Int(120)]),
        ("%-5c|", &[Int(0)]),
        ("%s|%10s|%-10s|%.2s|%10.2s|%.0s|", &[text(b"hello\0"); 6]),
        ("%s|%5s|%.0s|%.3s|%.6s|%-10s|", &[NULL; 6]),
        (
            "%s|%5s|%05s|%-05s|%+s|%#s",
            &[text(b"\0"), text(b"\0"), text(b"ab\0"), text(b"a\0"), text(b"x\0"), text(b"x\0")],
        ),
        ("%hs %ls", &[text(b"x\0"), wide(&[0x68, 0x69, 0])]),
        ("%%|%5%|%-5%|%.5%|%05%|", &[]),
        ("no conversions at all", &[]),
        ("", &[]),
    ]);
}

#[test]
fn pointers_match_glibc() {
    let address = Pointer(0x7f00_1234_5678usize as *const c_void);
    all_same(&[
        ("%p|%10p|%-10p|%.1p|%010p|%+p", &[NULL; 6]),
        ("%p|%+p|% p|%#p|%.20p|%020p|%-20p|", &[address; 7]),
        ("%p %p", &[Pointer(16 as *const c_void), Pointer(usize::MAX as *const c_void)]),
    ]);
}

#[test]
fn wide_characters_match_glibc_in_a_utf8_locale() {
    use_utf8_locale();
    all_same(&[
        ("%lc|%lc|%lc|%lc|%5lc|%-5lc|", &[Int(0x41), Int(0xe9), Int(0x4e2d), Int(0x1f600), Int(0xe9), Int(0xe9)]),
        ("%lc|", &[Int(0)]),
        ("%C %S", &[Int(0xe9), wide(&[0xe9, 0])]),
        ("%ls|%.1ls|%.2ls|%.3ls|%5ls|%-5ls|", &[wide(&[0x68, 0xe9, 0x4e2d, 0]); 6]),
        ("%ls|%.3ls|%.6ls|", &[NULL; 3]),
    ]);
}

/// The same calls through C's variadic calling convention on the host: our `vsnprintf` reading a real `va_list`.
#[test]
fn the_va_list_path_reads_every_kind_of_argument() {
    macro_rules! both {
        ($format:literal $(, $arg:expr)* $(,)?) => {{
            let mut ours = [0u8; 256];
            let mut theirs = [0u8; 256];
            let format = concat!($format, "\0").as_ptr().cast::<c_char>();
            // SAFETY: 256-byte buffers; the arguments match the format.
            let (a, b) = unsafe {
                (our_snprintf(ours.as_mut_ptr().cast(), 256, format $(, $arg)*),
                 libc::snprintf(theirs.as_mut_ptr().cast(), 256, format $(, $arg)*))
            };
            assert_eq!((a, &ours[..]), (b, &theirs[..]), "{}", $format);
        }};
    }
    let string = c"text".as_ptr();
    both!(
        "%d %ld %f %s %c %p %g %hhd %lld %e",
        1,
        -2i64,
        3.5f64,
        string,
        b'z' as i32,
        string,
        6.25f64,
        300,
        i64::MIN,
        1e-300f64
    );
    both!("%*.*f|%-*d|%.*s|", 10, 3, 2.0f64, 6, 42, 2, string);
    both!("%a %u %x %o %zu %jd %td", 0.1f64, u32::MAX, 0xabcu32, 8u32, usize::MAX, -1i64, -1isize);
    // Twenty integers and ten doubles: past the registers, on the stack.
    both!(
        "%d %d %d %d %d %d %d %d %d %d %f %f %f %f %f %f %f %f %f %f %d %d %d %d %d %d %d %d %d %d",
        1,
        2,
        3,
        4,
        5,
        6,
        7,
        8,
        9,
        10,
        1.0f64,
        2.0f64,
        3.0f64,
        4.0f64,
        5.0f64,
        6.0f64,
        7.0f64,
        8.0f64,
        9.0f64,
        10.0f64,
        11,
        12,
        13,
        14,
        15,
        16,
        17,
        18,
        19,
        20
    );
}

/// Our result, error and text for `format`.
fn run(format: &str, args: &[Arg], capacity: usize) -> (Option<Error>, Formatted) {
    let (formatted, error) = ours(format, args, capacity);
    (error, formatted)
}

fn formatted(result: i32, text: &[u8]) -> Formatted {
    Formatted { result, text: text.to_vec() }
}

#[test]
fn snprintf_truncates_but_counts_everything() {
    for capacity in 0..12 {
        let (error, got) = run("%s=%d", &[text(b"answer\0"), Int(42)], capacity);
        assert_eq!(error, None);
        let whole = b"answer=42";
        assert_eq!(got, formatted(9, &whole[..whole.len().min(capacity.saturating_sub(1))]), "capacity {capacity}");
        assert_eq!(got, glibc("%s=%d", &[text(b"answer\0"), Int(42)], capacity), "capacity {capacity}");
    }
}

#[test]
fn n_is_refused_and_writes_nothing() {
    let mut target = 77i32;
    let pointer = Pointer((&raw mut target).cast());
    for format in ["abc%n", "abc%hhn", "abc%lln", "abc%5n"] {
        let (error, got) = run(format, &[pointer], 64);
        assert_eq!((error, got), (Some(Error::WriteCount), formatted(-1, b"abc")), "{format}");
    }
    assert_eq!(target, 77);
}

#[test]
fn an_incomplete_specification_fails_like_glibc() {
    for format in ["abc%", "%5", "%5.3", "%ll", "%-", "%.", "%h"] {
        let (error, got) = run(format, &[], 64);
        assert_eq!(error, Some(Error::Incomplete), "{format}");
        assert_eq!(got, glibc(format, &[], 64), "{format}");
    }
}

#[test]
fn unknown_conversions_are_written_as_they_stand() {
    // glibc agrees where there is no length modifier...
    all_same(&[("%y|%-5y|%#y|%5.2y|%k", &[])]);
    // ...and drops one where there is; this printf writes the specification exactly as the format has it.
    let (error, got) = run("[%hhy] [%lq] [%5.2Lk]", &[], 64);
    assert_eq!((error, got), (None, formatted(21, b"[%hhy] [%lq] [%5.2Lk]")));
    // `*` widths are read before the conversion is known, as glibc reads them.
    let (error, got) = run("%*y|%d", &[Int(3), Int(9)], 64);
    assert_eq!((error, got), (None, formatted(5, b"%*y|9")));
}

#[test]
fn positional_arguments_are_refused() {
    for format in ["x%1$d", "x%1$*2$d", "x%*1$d", "x%.*1$d"] {
        let (error, got) = run(format, &[Int(1), Int(2)], 64);
        assert_eq!((error, got), (Some(Error::Positional), formatted(-1, b"x")), "{format}");
    }
}

#[test]
fn widths_precisions_and_lengths_past_int_max_fail() {
    let cases: &[(&str, &[Arg])] = &[
        ("x%2147483648d", &[Int(1)]),
        ("x%.2147483648d", &[Int(1)]),
        ("x%99999999999999999999999999d", &[Int(1)]),
        ("x%*d", &[Int(i32::MIN), Int(1)]),
        ("x%2147483647d%d", &[Int(1), Int(2)]),
        ("x%2147483647.1f", &[Double(1.0)]),
    ];
    for (format, args) in cases {
        let (error, got) = run(format, args, 16);
        assert_eq!(error, Some(Error::Overflow), "{format}");
        assert_eq!(got.result, -1, "{format}");
    }
    // Exactly `INT_MAX` bytes is fine, and costs nothing past the buffer.
    let (error, got) = run("%2147483647d", &[Int(1)], 8);
    assert_eq!((error, got), (None, formatted(i32::MAX, b"       ")));
    let (error, got) = run("%-2147483646d|", &[Int(1)], 8);
    assert_eq!((error, got), (None, formatted(i32::MAX, b"1      ")));
}

#[test]
fn wide_characters_that_are_not_unicode_fail() {
    for value in [0xd800, 0xdfff, 0x11_0000, -1] {
        let (error, got) = run("a%lcb", &[Int(value)], 16);
        assert_eq!((error, got), (Some(Error::WideChar), formatted(-1, b"a")), "{value:#x}");
    }
    // The whole `%ls` fails before any of it is written.
    let (error, got) = run("a%lsb", &[wide(&[0x68, 0xd800, 0])], 16);
    assert_eq!((error, got), (Some(Error::WideChar), formatted(-1, b"a")));
    // A precision that stops before the bad character is fine.
    let (error, got) = run("a%.1lsb", &[wide(&[0x68, 0xd800, 0])], 16);
    assert_eq!((error, got), (None, formatted(3, b"ahb")));
}

#[test]
fn long_double_is_double() {
    let (error, got) = run("%Lf %Le %Lg %La", &[Double(1.5); 4], 64);
    assert_eq!((error, got), (None, formatted(34, b"1.500000 1.500000e+00 1.5 0x1.8p+0")));
}

#[test]
fn a_string_precision_reads_no_further_than_it() {
    // Not NUL-terminated: three bytes and then memory that must not be read (Miri would see it).
    let bytes: &'static [u8; 3] = b"abc";
    let (error, got) = run("%.3s|%.2s", &[Pointer(bytes.as_ptr().cast()), Pointer(bytes.as_ptr().cast())], 16);
    assert_eq!((error, got), (None, formatted(6, b"abc|ab")));
    let characters: &'static [u32; 2] = &[0x68, 0x69];
    let (error, got) = run("%.2ls", &[Pointer(characters.as_ptr().cast())], 16);
    assert_eq!((error, got), (None, formatted(2, b"hi")));
}

#[test]
fn every_digit_of_the_longest_expansions_is_exact() {
    // The largest subnormal has 767 significant digits, the most of any double: the 767th is not zero, and asking
    // for more only adds zeros.
    let subnormal_max = Double(f64::from_bits((1 << 52) - 1));
    let (_, got) = run("%.766e", &[subnormal_max], 2048);
    let mantissa: Vec<u8> = got.text.iter().copied().take_while(|&b| b != b'e').filter(u8::is_ascii_digit).collect();
    assert_eq!(mantissa.len(), 767);
    assert_ne!(mantissa.last(), Some(&b'0'));
    assert_same("%.766e|%.767e|%.1000e", &[subnormal_max, subnormal_max, subnormal_max], 5);
}
