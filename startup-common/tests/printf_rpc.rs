//! C's `printf` through the RPC channel: many host threads (`HostThread`, one lane each) format lines of every
//! length, some many chunks long, against one server thread; every line must arrive whole, once, in each thread's
//! order, and say what glibc would.

mod common;

use std::ffi::c_void;

use common::{TestServer, client, region, run_clients, scaled};
use startup_common::gpu::HostThread;
use startup_common::libc::io::{Destination, PRINT_BUFFER, Stream};
use startup_common::libc::printf::{Arguments, Error, stdio};

/// `int` arguments, then one string.
struct Ints<'a>(&'a [u32], *const c_void);

impl Arguments for Ints<'_> {
    fn next_u32(&mut self) -> u32 {
        let (first, rest) = self.0.split_first().expect("more arguments read than passed");
        self.0 = rest;
        *first
    }

    fn next_u64(&mut self) -> u64 {
        unreachable!("no 64-bit argument is passed")
    }

    fn next_f64(&mut self) -> f64 {
        unreachable!("no double is passed")
    }

    fn next_pointer(&mut self) -> *const c_void {
        self.1
    }
}

#[test]
fn lines_of_every_length_arrive_whole_and_in_order() {
    let threads = scaled(12, 2);
    let lines = scaled(30, 3);
    let region = region(8, 1);
    let client = client::<HostThread>(&region);
    let mut server = TestServer::new(&region);
    let word = c"word";
    // Padding from nothing to four chunks: the zeros go through `Output::repeat`, the string through `write`.
    let width = |t: usize, l: usize| ((t * 97 + l * 131) % (4 * PRINT_BUFFER)) as u32;
    run_clients(&mut server, threads, |t| {
        for l in 0..lines {
            let format = b"T%d L%d %0*d|%*s|\n";
            let args = [t as u32, l as u32, width(t, l), 7, width(l, t), 0];
            let mut args = Ints(&args, word.as_ptr().cast());
            // SAFETY: the arguments match the format; the string is NUL-terminated.
            let written = unsafe { stdio::print(&client, Destination::Stream(Stream::Stdout), format, &mut args) };
            assert!(matches!(written, Ok(n) if n >= 14), "{written:?}");
        }
    });
    let stdout = &server.seen.messages[&1];
    assert_eq!(stdout.len(), threads * lines);
    let mut next = vec![0; threads];
    for message in stdout {
        let text = std::str::from_utf8(message).unwrap();
        let mut words = text.split(' ');
        let t: usize = words.next().unwrap().strip_prefix('T').unwrap().parse().unwrap();
        let l: usize = words.next().unwrap().strip_prefix('L').unwrap().parse().unwrap();
        assert_eq!(l, next[t], "thread {t}'s lines out of order");
        next[t] += 1;
        let (zeros, spaces) = (width(t, l) as usize, width(l, t) as usize);
        let expected = format!("T{t} L{l} {:0zeros$}|{:>spaces$}|\n", 7, "word");
        assert_eq!(text, expected);
    }
    assert!(next.iter().all(|&n| n == lines));
}

#[test]
fn a_failed_conversion_still_sends_what_came_before_it() {
    let region = region(2, 1);
    let client = client::<HostThread>(&region);
    let mut server = TestServer::new(&region);
    run_clients(&mut server, 1, |_| {
        let mut args = Ints(&[], std::ptr::null());
        // SAFETY: `%n` reads a pointer, which `Ints` gives (null); it is refused before anything is written through it.
        let written =
            unsafe { stdio::print(&client, Destination::Stream(Stream::Stderr), b"before %n after", &mut args) };
        assert_eq!(written, Err(Error::WriteCount));
        // SAFETY: no conversions.
        let written = unsafe { stdio::print(&client, Destination::Stream(Stream::Stderr), b"", &mut args) };
        assert_eq!(written, Ok(0));
    });
    // The empty call sent nothing at all.
    assert_eq!(server.seen.messages[&2], [b"before ".to_vec()]);
}
