//! Constructors by priority, `main`, then `atexit` handlers (latest first) before destructors (highest priority
//! first), as LLVM libc's init_fini_array_test checks, plus the values constructors leave for `main`.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use gpu_startup::{constructor, destructor, println, process};

static CONSTRUCTED: AtomicU32 = AtomicU32::new(0);

fn record(step: u32) {
    CONSTRUCTED.store(CONSTRUCTED.load(Ordering::Relaxed) * 10 + step, Ordering::Relaxed);
}

// Written out of order on purpose: the priority decides.
#[constructor]
fn last() {
    println!("constructor default");
    record(3);
}

#[constructor(priority = 200)]
fn second() {
    println!("constructor 200");
    record(2);
}

#[constructor(priority = 101)]
fn first() {
    println!("constructor 101 (argc {})", gpu_startup::env::args().len());
    record(1);
    process::atexit(registered_by_constructor).expect("room for a handler");
}

fn registered_by_constructor() {
    println!("atexit from constructor");
}

fn registered_by_main() {
    println!("atexit from main");
}

#[destructor(priority = 101)]
fn destructor_low() {
    println!("destructor 101");
}

#[destructor(priority = 300)]
fn destructor_high() {
    println!("destructor 300");
}

#[gpu_startup::main]
fn main() -> i32 {
    println!("main sees {}", CONSTRUCTED.load(Ordering::Relaxed));
    process::atexit(registered_by_main).expect("room for a handler");
    if CONSTRUCTED.load(Ordering::Relaxed) == 123 { 0 } else { 1 }
}
