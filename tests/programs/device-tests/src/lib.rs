//! The startup's device tests: what it does on the GPU that a single function can show, tested there with
//! `#[gpu_startup::test]`, each test in a launch of its own. What only a whole program shows (exit codes, signals,
//! timeouts, faults, arguments and environment, output) stays in the GPU suite's programs.
//!
//! - [`rpc`]: the RPC operations from many threads at once (LLVM libc's RPC tests);
//! - [`exit_sequence`]: constructors by priority before a test, `atexit` handlers and destructors after it;
//! - [`formatting`]: `core::fmt` and C's `printf` family formatting on the device;
//! - [`heap`]: Rust's `alloc` types on the device heap, from many threads at once.
#![no_std]
#![cfg_attr(test, no_main, feature(custom_test_frameworks), test_runner(gpu_startup::test_runner))]

#[cfg(test)]
mod exit_sequence;
#[cfg(test)]
extern crate alloc;

#[cfg(test)]
mod formatting;
#[cfg(test)]
mod heap;
#[cfg(test)]
mod rpc;
