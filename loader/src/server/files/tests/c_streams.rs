//! C's stream functions (`startup_common::libc::stdio::functions`) against the real server, from host threads.

use std::ffi::{CString, c_char, c_int};
use std::sync::{Mutex, MutexGuard};

use startup_common::gpu::HostThread;
use startup_common::libc::errno;
use startup_common::libc::stdio::{File, functions as c};

use super::{Scratch, Setup, no_stdin};

/// The table of C streams is the process's one table, as it is the program's on the device, and `fflush(NULL)` walks
/// all of it: tests whose servers differ take turns with it.
fn streams_table() -> MutexGuard<'static, ()> {
    static TABLE: Mutex<()> = Mutex::new(());
    TABLE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn c_streams_write_read_seek_and_report_errors_through_errno() {
    let _table = streams_table();
    let scratch = Scratch::new();
    let path = CString::new(scratch.path("c.txt")).unwrap();
    let missing = CString::new(scratch.path("missing")).unwrap();
    let folder = CString::new(scratch.0.to_str().unwrap()).unwrap();
    let mut setup = Setup::new(no_stdin());
    setup.one(|client| {
        let errno = || errno::get::<HostThread>();
        // SAFETY: C strings and buffers of the sizes given, as the C functions require, throughout.
        unsafe {
            assert!(c::fopen(client, missing.as_ptr(), c"r".as_ptr()).is_null());
            assert_eq!(errno(), errno::ENOENT);
            assert!(c::fopen(client, folder.as_ptr(), c"r".as_ptr()).is_null());
            assert_eq!(errno(), errno::EISDIR);
            assert!(c::fopen(client, path.as_ptr(), c"rw".as_ptr()).is_null());
            assert_eq!(errno(), errno::EINVAL);

            let file = c::fopen(client, path.as_ptr(), c"w+".as_ptr());
            assert!(!file.is_null());
            assert_eq!(c::fputs(client, c"one\n".as_ptr(), file), 0);
            assert_eq!(c::fputc(client, c_int::from(b'2'), file), c_int::from(b'2'));
            assert_eq!(c::fwrite(client, b"\nthree".as_ptr().cast(), 2, 3, file), 3);
            assert_eq!(c::ftell(client, file), 11);
            c::rewind(client, file);
            let mut line = [0 as c_char; 8];
            assert_eq!(c::fgets(client, line.as_mut_ptr(), 8, file), line.as_mut_ptr());
            assert_eq!(std::ffi::CStr::from_ptr(line.as_ptr()), c"one\n");
            assert_eq!(c::fgets(client, line.as_mut_ptr(), 3, file), line.as_mut_ptr(), "at most size - 1 bytes");
            assert_eq!(std::ffi::CStr::from_ptr(line.as_ptr()), c"2\n");
            assert_eq!(c::fgetc(client, file), c_int::from(b't'));
            let mut rest = [0u8; 10];
            assert_eq!(c::fread(client, rest.as_mut_ptr().cast(), 1, 10, file), 4);
            assert_eq!(&rest[..4], b"hree");
            assert_ne!(c::feof::<HostThread>(file), 0);
            assert_eq!(c::ferror::<HostThread>(file), 0);
            assert_eq!(c::fgetc(client, file), c::EOF);
            assert!(c::fgets(client, line.as_mut_ptr(), 8, file).is_null());
            c::clearerr::<HostThread>(file);
            assert_eq!(c::feof::<HostThread>(file), 0);
            assert_eq!(c::fseek(client, file, -5, 2), 0);
            assert_eq!(c::fgetc(client, file), c_int::from(b't'));
            assert_eq!(c::fseek(client, file, 0, 7), -1);
            assert_eq!(errno(), errno::EINVAL);
            assert_eq!(c::fflush(client, file), 0);
            assert_eq!(c::fflush(client, std::ptr::null_mut()), 0);
            assert_eq!(c::fclose(client, file), 0);

            // The stream is closed: every call fails with EBADF, none touches the host's files.
            assert_eq!(c::fclose(client, file), c::EOF);
            assert_eq!(errno(), errno::EBADF);
            assert_eq!(c::fputs(client, c"late".as_ptr(), file), c::EOF);
            assert_eq!(c::fgetc(client, file), c::EOF);
            assert_eq!(c::ftell(client, file), -1);
            assert_eq!(errno(), errno::EBADF);
            let nowhere = 0x1234 as *mut File;
            assert_eq!(c::fputc(client, 0, nowhere), c::EOF);
            assert_eq!(errno(), errno::EBADF);
            assert_eq!(c::fclose(client, std::ptr::null_mut()), c::EOF);

            // The standard streams: stdin cannot be written or sought, stdout cannot be read.
            let stdin = &startup_common::libc::stdio::STDIN as *const File as *mut File;
            let stdout = &startup_common::libc::stdio::STDOUT as *const File as *mut File;
            assert_eq!(c::fputc(client, 0, stdin), c::EOF);
            assert_eq!(c::fgetc(client, stdout), c::EOF);
            assert_ne!(c::ferror::<HostThread>(stdout), 0);
            c::clearerr::<HostThread>(stdout);
            assert_eq!(c::ftell(client, stdin), -1);
            assert_eq!(errno(), errno::ESPIPE);
            assert_eq!(c::fgetc(client, stdin), c::EOF, "stdin is empty here");
            assert_ne!(c::feof::<HostThread>(stdin), 0);
            c::clearerr::<HostThread>(stdin);

            let renamed = CString::new(scratch.path("renamed.txt")).unwrap();
            assert_eq!(c::rename(client, path.as_ptr(), renamed.as_ptr()), 0);
            assert_eq!(c::remove(client, path.as_ptr()), -1);
            assert_eq!(errno(), errno::ENOENT);
            assert_eq!(c::remove(client, renamed.as_ptr()), 0);
            assert_eq!(std::ffi::CStr::from_ptr(c::strerror(errno::ENOENT)), c"No such file or directory");
            assert_eq!(std::ffi::CStr::from_ptr(c::strerror(4242)), c"Unknown error");
            errno::set::<HostThread>(errno::EISDIR);
            c::perror(client, c"opening".as_ptr());
            c::perror(client, std::ptr::null());
        }
    });
    setup.server.flush().unwrap();
    assert_eq!(setup.err.text(), "opening: Is a directory\nIs a directory\n");
}

/// Threads opening and closing C streams at once each get a table entry of their own: every thread's file holds
/// exactly what it wrote.
#[test]
fn threads_opening_and_closing_c_streams_at_once_never_share_one() {
    let _table = streams_table();
    let scratch = Scratch::new();
    let mut setup = Setup::new(no_stdin());
    let failures: usize = setup
        .run(8, |runtime, n| {
            let client = runtime.client();
            let mut failures = 0;
            for round in 0..40 {
                let path = CString::new(scratch.path(&format!("t{n}-{round}"))).unwrap();
                let text = CString::new(format!("thread {n} round {round}")).unwrap();
                let mut back = [0 as c_char; 64];
                // SAFETY: C strings and a buffer of the size given.
                unsafe {
                    let file = c::fopen(client, path.as_ptr(), c"w+".as_ptr());
                    c::fputs(client, text.as_ptr(), file);
                    c::rewind(client, file);
                    c::fgets(client, back.as_mut_ptr(), 64, file);
                    failures += usize::from(std::ffi::CStr::from_ptr(back.as_ptr()) != text.as_c_str());
                    failures += usize::from(c::fclose(client, file) != 0);
                    failures += usize::from(c::remove(client, path.as_ptr()) != 0);
                }
            }
            failures
        })
        .into_iter()
        .sum();
    assert_eq!(failures, 0);
    assert_eq!(setup.server.open_files(), 0);
}
