//! The error numbers the file operations return, and their messages: the loader returns the error its operating
//! system gave (`open` of a missing file is [`ENOENT`], 2) and the device passes it on unchanged, to C's `errno` and
//! Rust's `io::Error` alike.
//!
//! The numbers are Linux's, the host's, so a number this module does not name still means what it means on the host.

use core::ffi::{CStr, c_int};

macro_rules! error_numbers {
    ($($(#[$doc:meta])* $name:ident = $number:literal, $message:literal;)*) => {
        $($(#[$doc])* pub const $name: c_int = $number;)*

        /// The message C's `strerror` gives for `number`, as glibc words it, as a C string; `None` for a number
        /// not named here.
        pub const fn c_message(number: c_int) -> Option<&'static CStr> {
            let text: &'static str = match number {
                0 => "Success\0",
                $($number => concat!($message, "\0"),)*
                _ => return None,
            };
            match CStr::from_bytes_with_nul(text.as_bytes()) {
                Ok(message) => Some(message),
                Err(_) => None,
            }
        }

        /// The name of `number` (`"ENOENT"`), for reports; `None` for a number not named here.
        pub const fn name(number: c_int) -> Option<&'static str> {
            match number {
                $($number => Some(stringify!($name)),)*
                _ => None,
            }
        }

        #[cfg(test)]
        const ALL: &[c_int] = &[$($number),*];
    };
}

error_numbers! {
    EPERM = 1, "Operation not permitted";
    ENOENT = 2, "No such file or directory";
    /// No such thread: std's `sys_join` of a thread that was never made.
    ESRCH = 3, "No such process";
    EINTR = 4, "Interrupted system call";
    EIO = 5, "Input/output error";
    ENXIO = 6, "No such device or address";
    E2BIG = 7, "Argument list too long";
    /// A handle (or `FILE *`) that names no open file: never opened, closed, or not open for this operation.
    EBADF = 9, "Bad file descriptor";
    /// The host's operation would have to wait (an empty terminal or pipe); the file functions retry it themselves.
    EAGAIN = 11, "Resource temporarily unavailable";
    ENOMEM = 12, "Cannot allocate memory";
    EACCES = 13, "Permission denied";
    EFAULT = 14, "Bad address";
    EBUSY = 16, "Device or resource busy";
    EEXIST = 17, "File exists";
    EXDEV = 18, "Invalid cross-device link";
    ENODEV = 19, "No such device";
    ENOTDIR = 20, "Not a directory";
    EISDIR = 21, "Is a directory";
    EINVAL = 22, "Invalid argument";
    ENFILE = 23, "Too many open files in system";
    /// The run has as many files open as it may ([`MAX_OPEN_FILES`](crate::files::MAX_OPEN_FILES)).
    EMFILE = 24, "Too many open files";
    ENOTTY = 25, "Inappropriate ioctl for device";
    ETXTBSY = 26, "Text file busy";
    EFBIG = 27, "File too large";
    ENOSPC = 28, "No space left on device";
    /// A seek on a stream that cannot seek (stdin).
    ESPIPE = 29, "Illegal seek";
    EROFS = 30, "Read-only file system";
    EMLINK = 31, "Too many links";
    EPIPE = 32, "Broken pipe";
    EDOM = 33, "Numerical argument out of domain";
    ERANGE = 34, "Numerical result out of range";
    ENAMETOOLONG = 36, "File name too long";
    /// There is no host to serve the operation: the RPC channel is not set up (before `_begin`, or on the host).
    ENOSYS = 38, "Function not implemented";
    ENOTEMPTY = 39, "Directory not empty";
    ELOOP = 40, "Too many levels of symbolic links";
    EOVERFLOW = 75, "Value too large for defined data type";
    EILSEQ = 84, "Invalid or incomplete multibyte or wide character";
    EOPNOTSUPP = 95, "Operation not supported";
    /// A wait whose time limit passed (std's futex waits on the GPU).
    ETIMEDOUT = 110, "Connection timed out";
    ESTALE = 116, "Stale file handle";
    EDQUOT = 122, "Disk quota exceeded";
}

/// The message C's `strerror` gives for `number`, as glibc words it; `None` for a number not named here.
pub fn message(number: c_int) -> Option<&'static str> {
    c_message(number).and_then(|message| message.to_str().ok())
}

/// C's `strerror` text of `number`, written into `out` when the number is not named here ("Unknown error N", as glibc
/// says); returns the text.
pub fn describe(number: c_int, out: &mut [u8; 32]) -> &str {
    if let Some(message) = message(number) {
        return message;
    }
    /// The front of `out`, filled by `fmt`.
    struct Text<'a> {
        out: &'a mut [u8; 32],
        len: usize,
    }
    impl core::fmt::Write for Text<'_> {
        fn write_str(&mut self, text: &str) -> core::fmt::Result {
            let end = self.len + text.len();
            self.out.get_mut(self.len..end).ok_or(core::fmt::Error)?.copy_from_slice(text.as_bytes());
            self.len = end;
            Ok(())
        }
    }
    let mut text = Text { out: &mut *out, len: 0 };
    // At most 25 bytes: it fits.
    let _ = core::fmt::Write::write_fmt(&mut text, format_args!("Unknown error {number}"));
    let len = text.len;
    // ASCII by construction.
    core::str::from_utf8(&out[..len]).unwrap_or("Unknown error")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every number and message is the host's: the device passes the host's numbers on, and C programs compare them
    /// with the header's macros.
    #[test]
    fn numbers_and_messages_are_the_hosts() {
        for &number in ALL {
            // SAFETY: `strerror` returns a C string that stays valid until the next call on this thread.
            let host = unsafe { std::ffi::CStr::from_ptr(libc::strerror(number)) };
            assert_eq!(message(number), host.to_str().ok(), "{:?}", name(number));
        }
        assert_eq!((ENOENT, EISDIR, EBADF), (libc::ENOENT, libc::EISDIR, libc::EBADF));
        assert_eq!((EMFILE, ESPIPE, ENAMETOOLONG), (libc::EMFILE, libc::ESPIPE, libc::ENAMETOOLONG));
        assert_eq!(name(EISDIR), Some("EISDIR"));
    }

    #[test]
    fn unknown_numbers_are_described_as_glibc_does() {
        let mut buffer = [0; 32];
        assert_eq!(describe(ENOENT, &mut buffer), "No such file or directory");
        assert_eq!(describe(0, &mut buffer), "Success");
        assert_eq!(describe(4242, &mut buffer), "Unknown error 4242");
        assert_eq!(describe(-7, &mut buffer), "Unknown error -7");
        assert_eq!(describe(c_int::MIN, &mut buffer), "Unknown error -2147483648");
    }
}
