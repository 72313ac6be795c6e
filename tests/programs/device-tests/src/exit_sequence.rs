//! The order of the startup's callbacks around a test, which every test's launch goes through: the constructors by
//! priority before it; after it the `atexit` handlers, latest first, then the destructors, highest priority first. A
//! callback that finds the order wrong panics, which fails the test. (`tests/programs/init-fini` shows the same order
//! in a whole program's output.)

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use gpu_startup::{constructor, destructor, process};

/// The steps of this launch so far, one decimal digit each, oldest first.
static STEPS: AtomicU32 = AtomicU32::new(0);
/// Whether the running test checks the exit sequence: only `atexit_handlers_run_latest_first_then_destructors`
/// registers handlers, and the destructors run after every test.
static CHECKING_EXIT: AtomicBool = AtomicBool::new(false);
/// How many handlers the running test registered from its threads at once, and how many of them ran.
static REGISTERED_AT_ONCE: AtomicU32 = AtomicU32::new(0);
static RAN: AtomicU32 = AtomicU32::new(0);

fn record(step: u32) {
    STEPS.store(STEPS.load(Ordering::Relaxed) * 10 + step, Ordering::Relaxed);
}

// Written out of order on purpose: the priority decides.
#[constructor]
fn constructed_last() {
    record(3);
}

#[constructor(priority = 200)]
fn constructed_second() {
    record(2);
}

#[constructor(priority = 101)]
fn constructed_first() {
    // Statics live on from one test's launch to the next: each launch starts its record afresh.
    STEPS.store(1, Ordering::Relaxed);
    CHECKING_EXIT.store(false, Ordering::Relaxed);
    REGISTERED_AT_ONCE.store(0, Ordering::Relaxed);
    RAN.store(0, Ordering::Relaxed);
}

#[gpu_startup::test]
fn constructors_run_by_priority_before_the_test() {
    assert_eq!(STEPS.load(Ordering::Relaxed), 123);
}

fn registered_first() {
    record(4);
}

fn registered_second() {
    record(5);
}

#[destructor(priority = 300)]
fn destroyed_first() {
    if CHECKING_EXIT.load(Ordering::Relaxed) {
        record(6);
    }
}

#[destructor(priority = 101)]
fn destroyed_last() {
    if CHECKING_EXIT.load(Ordering::Relaxed) {
        // Constructors 1, 2, 3; the test's handlers, latest first: 5, 4; the destructor of priority 300: 6.
        assert_eq!(STEPS.load(Ordering::Relaxed), 123_546, "the exit sequence ran out of order");
    }
    let registered = REGISTERED_AT_ONCE.load(Ordering::Relaxed);
    assert_eq!(RAN.load(Ordering::Relaxed), registered, "handlers registered at once ran");
}

#[gpu_startup::test]
fn atexit_handlers_run_latest_first_then_destructors() {
    assert_eq!(STEPS.load(Ordering::Relaxed), 123);
    CHECKING_EXIT.store(true, Ordering::Relaxed);
    process::atexit(registered_first).expect("room for a handler");
    process::atexit(registered_second).expect("room for a handler");
}

/// The registry holds 1,023 handlers (C requires 32; C++'s destructors of global objects share it); the 1,024th is
/// refused, not written past the end.
#[gpu_startup::test]
fn the_atexit_registry_refuses_a_handler_past_its_capacity() {
    fn nothing() {}
    let registered = (0..2000).take_while(|_| process::atexit(nothing).is_ok()).count();
    assert_eq!(registered, 1023);
}

fn count_run() {
    RAN.fetch_add(1, Ordering::Relaxed);
}

/// 48 threads register a handler each at once: the registry's lock lets each in, and every one runs at exit. Each
/// thread is a block of its own: the lock is a spin lock, which lanes of one AMD wavefront cannot take in turn.
#[gpu_startup::test(blocks = 48)]
fn handlers_registered_at_once_all_run() {
    process::atexit(count_run).expect("room for 48 handlers");
    REGISTERED_AT_ONCE.fetch_add(1, Ordering::Relaxed);
}
