//! The program's arguments and environment, as `gpu-loader` passed them, like `std::env`.
//!
//! `argv[0]` is the image's path as the loader was given it, then come the arguments after it; the environment is
//! the loader's. Both live as long as the program, so everything here is `'static`, and every thread (constructors
//! too) sees the same. As in `std::env`, [`args`] and [`vars`] yield `&str` and panic on an entry that is not UTF-8;
//! [`args_os`] and [`vars_os`] yield the bytes as they came.
//!
//! ```no_run
//! #![no_std]
//! #![no_main]
//!
//! #[gpu_startup::main]
//! fn main() -> i32 {
//!     let Some(count) = gpu_startup::env::args().nth(1).and_then(|arg| arg.parse::<u32>().ok()) else {
//!         gpu_startup::eprintln!("usage: count N");
//!         return 2;
//!     };
//!     let greeting = gpu_startup::env::var("GREETING").unwrap_or("hello");
//!     if gpu_startup::thread::index() < u64::from(count) {
//!         gpu_startup::println!("{greeting} from thread {}", gpu_startup::thread::index());
//!     }
//!     0
//! }
//! ```

use core::ffi::{CStr, c_char};
use core::fmt;
use core::iter::{Enumerate, FusedIterator};
use core::slice;

use crate::arch::RUNTIME;

/// The arguments as `&str`, `argv[0]` first. Iterating panics at an argument that is not UTF-8; [`args_os`] reads
/// any.
pub fn args() -> Args {
    Args { inner: args_os() }
}

/// The arguments as C strings, `argv[0]` first.
pub fn args_os() -> ArgsOs {
    ArgsOs::over(RUNTIME.argv())
}

/// The environment's `(name, value)` pairs as `&str`. Iterating panics at an entry that is not UTF-8; [`vars_os`]
/// reads any.
pub fn vars() -> Vars {
    Vars { inner: vars_os() }
}

/// The environment's `(name, value)` pairs as bytes. An entry without `=` is skipped, as `std::env::vars_os` does;
/// a name may start with `=`.
pub fn vars_os() -> VarsOs {
    VarsOs::over(RUNTIME.envp())
}

/// The value of the environment variable `name`.
pub fn var(name: &str) -> Result<&'static str, VarError> {
    vars_os().value_of(name.as_bytes())
}

/// The value of the environment variable `name`, as bytes; `None` when it is not set.
pub fn var_os(name: impl AsRef<[u8]>) -> Option<&'static [u8]> {
    vars_os().value_os_of(name.as_ref())
}

/// Why [`var`] has no value to give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarError {
    /// The variable is not set.
    NotPresent,
    /// The variable's value, which is not UTF-8.
    NotUnicode(&'static [u8]),
}

impl fmt::Display for VarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VarError::NotPresent => f.write_str("environment variable not found"),
            VarError::NotUnicode(_) => f.write_str("environment variable was not valid unicode"),
        }
    }
}

impl core::error::Error for VarError {}

/// The iterator of [`args`].
#[derive(Clone, Debug)]
pub struct Args {
    inner: ArgsOs,
}

/// The iterator of [`args_os`].
#[derive(Clone, Debug)]
pub struct ArgsOs {
    entries: Enumerate<slice::Iter<'static, *mut c_char>>,
}

/// The iterator of [`vars`].
#[derive(Clone, Debug)]
pub struct Vars {
    inner: VarsOs,
}

/// The iterator of [`vars_os`].
#[derive(Clone, Debug)]
pub struct VarsOs {
    entries: slice::Iter<'static, *mut c_char>,
}

/// The loader's C string at `entry`.
fn c_str(entry: *mut c_char) -> &'static CStr {
    // SAFETY: the loader's arrays hold NUL-terminated strings that live as long as the program (the startup's
    // contract with the loader, `docs/abi.md`). `c_string_bytes` rather than `CStr::from_ptr`, which needs libc's
    // `strlen`.
    unsafe {
        let len = startup_common::libc::io::c_string_bytes(entry).len();
        CStr::from_bytes_with_nul_unchecked(slice::from_raw_parts(entry.cast::<u8>(), len + 1))
    }
}

fn utf8(bytes: &'static [u8], what: fmt::Arguments<'_>, instead: &str) -> &'static str {
    match core::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => panic!("{what} is not valid UTF-8: read it with `gpu_startup::env::{instead}()`"),
    }
}

/// `NAME=value` as `(NAME, value)`; the first `=` after the first byte splits it, as in `std::env`.
fn split_entry(entry: &'static [u8]) -> Option<(&'static [u8], &'static [u8])> {
    let split = entry.iter().skip(1).position(|&byte| byte == b'=')? + 1;
    Some((&entry[..split], &entry[split + 1..]))
}

impl ArgsOs {
    fn over(argv: &'static [*mut c_char]) -> Self {
        Self { entries: argv.iter().enumerate() }
    }
}

impl VarsOs {
    fn over(envp: &'static [*mut c_char]) -> Self {
        Self { entries: envp.iter() }
    }

    fn value_os_of(mut self, name: &[u8]) -> Option<&'static [u8]> {
        self.find(|(entry, _)| *entry == name).map(|(_, value)| value)
    }

    fn value_of(self, name: &[u8]) -> Result<&'static str, VarError> {
        let value = self.value_os_of(name).ok_or(VarError::NotPresent)?;
        core::str::from_utf8(value).map_err(|_| VarError::NotUnicode(value))
    }
}

impl Iterator for ArgsOs {
    type Item = &'static CStr;

    fn next(&mut self) -> Option<&'static CStr> {
        self.entries.next().map(|(_, &entry)| c_str(entry))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl DoubleEndedIterator for ArgsOs {
    fn next_back(&mut self) -> Option<&'static CStr> {
        self.entries.next_back().map(|(_, &entry)| c_str(entry))
    }
}

impl ExactSizeIterator for ArgsOs {}
impl FusedIterator for ArgsOs {}

impl Args {
    fn text((index, entry): (usize, &*mut c_char)) -> &'static str {
        utf8(c_str(*entry).to_bytes(), format_args!("argument {index}"), "args_os")
    }
}

impl Iterator for Args {
    type Item = &'static str;

    fn next(&mut self) -> Option<&'static str> {
        self.inner.entries.next().map(Self::text)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl DoubleEndedIterator for Args {
    fn next_back(&mut self) -> Option<&'static str> {
        self.inner.entries.next_back().map(Self::text)
    }
}

impl ExactSizeIterator for Args {}
impl FusedIterator for Args {}

impl Iterator for VarsOs {
    type Item = (&'static [u8], &'static [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        self.entries.by_ref().find_map(|&entry| split_entry(c_str(entry).to_bytes()))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.entries.size_hint().1)
    }
}

impl FusedIterator for VarsOs {}

impl Iterator for Vars {
    type Item = (&'static str, &'static str);

    fn next(&mut self) -> Option<Self::Item> {
        let (name, value) = self.inner.next()?;
        let name = utf8(name, format_args!("an environment variable's name"), "vars_os");
        let value = utf8(value, format_args!("the value of environment variable `{name}`"), "vars_os");
        Some((name, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl FusedIterator for Vars {}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// The loader's layout: C strings that live for the whole test run, then a null pointer.
    fn c_array(entries: &[&'static CStr]) -> &'static [*mut c_char] {
        let mut pointers: Vec<*mut c_char> = entries.iter().map(|entry| entry.as_ptr().cast_mut()).collect();
        pointers.push(core::ptr::null_mut());
        let array = std::boxed::Box::leak(pointers.into_boxed_slice());
        &array[..entries.len()]
    }

    #[test]
    fn arguments_read_as_str_and_as_c_strings_both_ways() {
        let argv = c_array(&[c"prog.ptx", c"1", c"two words", c""]);
        let args = Args { inner: ArgsOs::over(argv) };
        assert_eq!(args.len(), 4);
        assert_eq!(args.clone().collect::<Vec<_>>(), ["prog.ptx", "1", "two words", ""]);
        assert_eq!(args.rev().collect::<Vec<_>>(), ["", "two words", "1", "prog.ptx"]);
        assert_eq!(ArgsOs::over(argv).nth(2), Some(c"two words"));
    }

    #[test]
    fn an_argument_that_is_not_utf8_panics_in_args_and_reads_in_args_os() {
        let argv = c_array(&[c"prog.ptx", c"\xff\xfe"]);
        assert_eq!(ArgsOs::over(argv).next_back().unwrap().to_bytes(), b"\xff\xfe");
        let panic = std::panic::catch_unwind(|| Args { inner: ArgsOs::over(argv) }.count()).unwrap_err();
        let message = panic.downcast_ref::<std::string::String>().unwrap();
        assert_eq!(message, "argument 1 is not valid UTF-8: read it with `gpu_startup::env::args_os()`");
    }

    #[test]
    fn variables_are_looked_up_by_name_and_malformed_entries_skipped() {
        let envp = c_array(&[c"FRANCE=Paris", c"broken", c"GERMANY=Berlin", c"EMPTY=", c"BYTES=\xff"]);
        let pairs: Vec<_> = VarsOs::over(envp).collect();
        assert_eq!(pairs.len(), 4);
        assert_eq!(pairs[1], (&b"GERMANY"[..], &b"Berlin"[..]));
        assert_eq!(VarsOs::over(envp).value_of(b"FRANCE"), Ok("Paris"));
        assert_eq!(VarsOs::over(envp).value_of(b"EMPTY"), Ok(""));
        assert_eq!(VarsOs::over(envp).value_of(b"broken"), Err(VarError::NotPresent));
        assert_eq!(VarsOs::over(envp).value_of(b"BYTES"), Err(VarError::NotUnicode(b"\xff")));
        assert_eq!(VarsOs::over(envp).value_os_of(b"BYTES"), Some(&b"\xff"[..]));
        let panic = std::panic::catch_unwind(|| Vars { inner: VarsOs::over(envp) }.count()).unwrap_err();
        let message = panic.downcast_ref::<std::string::String>().unwrap();
        assert_eq!(
            message,
            "the value of environment variable `BYTES` is not valid UTF-8: read it with `gpu_startup::env::vars_os()`"
        );
    }

    #[test]
    fn entries_split_at_the_first_equals_sign_after_the_first_byte() {
        assert_eq!(split_entry(b"FRANCE=Paris"), Some((&b"FRANCE"[..], &b"Paris"[..])));
        assert_eq!(split_entry(b"A=b=c"), Some((&b"A"[..], &b"b=c"[..])));
        assert_eq!(split_entry(b"EMPTY="), Some((&b"EMPTY"[..], &b""[..])));
        assert_eq!(split_entry(b"=C:=x"), Some((&b"=C:"[..], &b"x"[..])));
        assert_eq!(split_entry(b"no-equals"), None);
        assert_eq!(split_entry(b"="), None);
        assert_eq!(split_entry(b""), None);
    }

    #[test]
    fn before_the_startup_ran_there_is_nothing() {
        assert_eq!(args().len(), 0);
        assert_eq!(args_os().next(), None);
        assert_eq!(vars().next(), None);
        assert_eq!(var("PATH"), Err(VarError::NotPresent));
        assert_eq!(var_os("PATH"), None);
    }
}
