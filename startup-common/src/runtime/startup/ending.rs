//! How a program ends abnormally: a panic (the startup's own handler's, or the end of one std's hook printed) and
//! the fatal errors the runtime reports where C would abort.

use core::sync::atomic::Ordering;

use super::Runtime;
use crate::gpu::Gpu;
use crate::libc::heap::HeapError;
use crate::runtime::coordinates::Coordinates;
use gpu_startup_protocol::abi::Control;

impl<G: Gpu> Runtime<G> {
    /// The default panic handler. The first thread to panic in a run reports its location and message to the host,
    /// which prints `panicked at FILE:LINE:COL: message` with the thread's coordinates on stderr and keeps the
    /// message for a `should_panic` test's expected text ([`crate::libc::io::report_panic`]); every panicking thread is counted (in [`Control::panicked_threads`]) and
    /// ends. Once the kernel ends, `_end` ends the program with [`PANIC_EXIT_CODE`] without running handlers, like a
    /// Rust program built with `panic = "abort"` but with Rust's exit code for a panic. (Threads that wait for a
    /// panicked one never end; the loader stops waiting for them soon after the first panic.)
    pub fn panic(&self, info: &core::panic::PanicInfo<'_>) -> ! {
        self.end_panic(|| self.report_panic(info))
    }

    /// The end of a panic whose message was printed already: std's panic hook prints it, naming the thread by its
    /// coordinates (`loader/setup/std-patches/0006-gpu-threads-named-and-ended.patch`), then std's panic runtime
    /// calls this (`loader/setup/std-patches/0005-gpu-panics-end-as-the-startups.patch`). As [`Runtime::panic`],
    /// without a message of its own.
    pub fn panic_reported(&self) -> ! {
        self.end_panic(|| {})
    }

    /// Counts the calling thread as panicked, has the first such thread of the run `report`, and ends the thread.
    fn end_panic(&self, report: impl FnOnce()) -> ! {
        if !self.client.is_ready() {
            // Nothing can reach the host before `_begin` set up the channel: make the fault visible instead.
            G::trap();
        }
        let earlier = self.panicked.fetch_add(1, Ordering::Relaxed);
        if earlier == 0 {
            report();
        }
        // Stores of different threads may land out of order: the loader reads a lower bound until `_end` stores
        // the exact count.
        report_panicked_threads(self.control.load(Ordering::Relaxed), earlier + 1);
        G::end_thread()
    }

    /// The panic's location and message, to the host.
    fn report_panic(&self, info: &core::panic::PanicInfo<'_>) {
        crate::libc::io::report_panic(&self.client, info.location(), info.message());
    }

    /// Reports a pointer the heap refused (`call` names the function it was given to, as C or Rust spells it) on
    /// stderr, then ends the program as [`Runtime::abort`] does: the loader exits with 134, as glibc's `free` aborts
    /// on a double free.
    pub fn heap_error(&self, call: &str, pointer: *const u8, error: HeapError) -> ! {
        self.fatal(format_args!("{call}({pointer:p}): {error}"))
    }

    /// Reports `message` with the calling thread's coordinates on stderr, then ends the program as
    /// [`Runtime::abort`] does (exit 134): what the runtime does where C or C++ would abort, such as a call of a pure
    /// virtual function.
    pub fn fatal(&self, message: core::fmt::Arguments<'_>) -> ! {
        if self.client.is_ready() {
            let here = Coordinates(G::thread_ids());
            crate::libc::io::print(&self.client, crate::libc::io::Stream::Stderr, format_args!("{message} ({here})\n"));
        }
        self.abort()
    }
}

pub(super) fn report_panicked_threads(control: *mut Control, count: u32) {
    if !control.is_null() {
        // SAFETY: the loader's control block lives for the whole program; this word is written only by panicking
        // threads and `_end`, and read only by the host, which takes any value as a lower bound.
        unsafe { core::ptr::addr_of_mut!((*control).panicked_threads).write_volatile(count) };
    }
}
