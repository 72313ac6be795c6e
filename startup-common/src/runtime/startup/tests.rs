//! The runtime's tests on host threads: `exit`, `abort` and `_end` report the program's end once, and in order.

extern crate std;

use super::*;
use crate::gpu::HostThread;
use core::sync::atomic::AtomicU64;
use std::boxed::Box;
use std::time::{Duration, Instant};

/// A runtime with a control block of its own, as `_begin` leaves it (the rest of `_begin` touches globals that
/// other tests use).
fn runtime_with_control() -> (&'static Runtime<HostThread>, &'static AtomicU64) {
    let runtime: &'static Runtime<HostThread> = Box::leak(Box::new(Runtime::new()));
    let control: &'static mut Control = Box::leak(Box::default());
    runtime.control.store(control, Ordering::Relaxed);
    // SAFETY: the block lives for the rest of the process; the runtime writes its end word atomically.
    let end = unsafe { AtomicU64::from_ptr(core::ptr::addr_of_mut!(control.end)) };
    (runtime, end)
}

/// The end the host would read, once the word is written (at most 10 s).
fn reported(end: &AtomicU64) -> Option<ProgramEnd> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while end.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    ProgramEnd::from_word(end.load(Ordering::Relaxed)).unwrap()
}

/// A thread that ends (the host's stand-in parks it) never comes back: each runs on a thread of its own.
fn on_a_thread(body: impl FnOnce() + Send + 'static) {
    std::thread::spawn(body);
}

/// `exit` reports once its handlers ran; an `abort` meanwhile, on another thread, ends the program first, and its
/// report stands.
#[test]
fn exit_reports_after_its_handlers_and_an_earlier_abort_stands() {
    static HANDLER_STARTED: AtomicBool = AtomicBool::new(false);
    static HANDLER_MAY_RETURN: AtomicBool = AtomicBool::new(false);
    fn slow_handler() {
        HANDLER_STARTED.store(true, Ordering::SeqCst);
        while !HANDLER_MAY_RETURN.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }
    let (runtime, end) = runtime_with_control();
    runtime.atexit(Handler::Rust(slow_handler)).unwrap();
    on_a_thread(|| runtime.exit(3));
    while !HANDLER_STARTED.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    assert_eq!(end.load(Ordering::Relaxed), 0, "reported before its handlers ran");
    on_a_thread(|| runtime.abort());
    assert_eq!(reported(end), Some(ProgramEnd::Abort));
    HANDLER_MAY_RETURN.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(reported(end), Some(ProgramEnd::Abort), "the exit overwrote the abort");

    let (runtime, end) = runtime_with_control();
    on_a_thread(|| runtime.exit(-2));
    assert_eq!(reported(end), Some(ProgramEnd::Exit(-2)));
}

/// `_end` reports `main`'s combined result and leaves the word zeroed; after a thread's `exit`, it reports
/// nothing more.
#[test]
fn end_reports_mains_result_unless_the_program_already_ended() {
    let (runtime, end) = runtime_with_control();
    let result: &'static mut c_int = Box::leak(Box::new(5));
    let result = result as *mut c_int as usize;
    // SAFETY: the result word lives for the rest of the process, and this is the runtime's only thread.
    on_a_thread(move || unsafe { runtime.end(&EndArgs { result: result as *mut c_int }) });
    assert_eq!(reported(end), Some(ProgramEnd::Exit(5)));
    // SAFETY: `_end` wrote the word before it reported.
    assert_eq!(unsafe { (result as *const c_int).read_volatile() }, 0);

    let (runtime, end) = runtime_with_control();
    on_a_thread(|| runtime.exit(9));
    assert_eq!(reported(end), Some(ProgramEnd::Exit(9)));
    let result: &'static mut c_int = Box::leak(Box::new(1));
    let result = result as *mut c_int as usize;
    // SAFETY: as above.
    on_a_thread(move || unsafe { runtime.end(&EndArgs { result: result as *mut c_int }) });
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(reported(end), Some(ProgramEnd::Exit(9)));
}
