//! Run a Rust crate on the GPU as an ordinary program.
//!
//! A GPU program depends on this one crate, marks its entry point with [`#[gpu_startup::main]`](main), and runs
//! with `cargo run` through `gpu-loader` (`docs/your-own-crate.md` sets a crate up with `cargo gpu-startup init`).
//! Every thread of the grid runs `main`; the program's exit code is the OR of their results, or what
//! [`process::exit`] was given first.
//!
//! ```no_run
//! #![no_std]
//! #![no_main]
//!
//! #[gpu_startup::main]
//! fn main() -> i32 {
//!     if gpu_startup::thread::is_first() {
//!         for arg in gpu_startup::env::args() {
//!             gpu_startup::println!("{arg}");
//!         }
//!     }
//!     0
//! }
//! ```
//!
//! What a program gets, on NVIDIA (`nvptx64`) and AMD (`amdgcn`) alike, with no `#[cfg]`:
//!
//! - entry point, constructors and destructors: [`main`], [`constructor`], [`destructor`], all on plain functions;
//! - [`env`](mod@env): arguments and environment as `&'static str`, with `_os` variants for bytes that are not UTF-8;
//! - [`thread`], [`block`], [`grid`]: where the calling thread is, and the launch's shape; [`warp`]: the lanes that
//!   run together, and votes among them; [`time`]: the device clock;
//! - [`print!`], [`println!`], [`eprint!`], [`eprintln!`]: each call reaches the host whole, never interleaved with
//!   another thread's;
//! - [`process`]: `exit`, `abort`, `atexit`;
//! - a heap: `extern crate alloc` gives `Vec`, `String`, `Box`, `format!` and the collections, the startup being
//!   the global allocator (feature `global-allocator`, on by default), on device memory that `gpu-loader` reserves
//!   (`--heap-size`); running out is Rust's `handle_alloc_error`;
//! - [`fs`] and [`io`]: files on the host (`File` with `Read`, `Write` and `Seek`, `remove_file`, `rename`) and the
//!   loader's stdin (`io::stdin()`), with `String` and `Vec` versions (`lines`, `read_line`, `read_to_string`) under
//!   the `alloc` feature, which `global-allocator` turns on;
//! - a panic handler that prints the message with the thread and exits with 101 (feature `panic-handler`, on by
//!   default);
//! - [`rpc`]: host calls of one's own ([`rpc::call`], [`rpc::open`]): the program asks the host program that runs it
//!   for something, and the channel to the host underneath;
//! - tests: [`#[gpu_startup::test]`](test) functions, which `cargo test` runs on the GPU through `gpu-loader`
//!   (`docs/testing-your-code.md`).
//!
//! The crate builds on the host too, where one host thread stands in for the grid: that is how its documentation
//! and compile-error tests are checked.
#![no_std]

#[cfg(feature = "alloc")]
extern crate alloc;

mod arch;
pub mod block;
pub mod env;
pub mod fs;
pub mod grid;
pub mod io;
pub mod process;
pub mod rpc;
pub mod thread;
pub mod time;
pub mod warp;

/// Marks the program's entry point: every thread of the grid calls it, after the constructors.
///
/// The function is `fn main() -> i32` (the exit status; the program's is the OR over all threads) or `fn main()`
/// (status 0); any name will do. The crate is `#![no_main]`: the attribute writes the C `main` the startup calls.
/// Anything else is a compile error that names the expected signature:
///
/// ```compile_fail
/// #![no_std]
/// #![no_main]
///
/// #[gpu_startup::main]
/// fn main(argc: i32) -> i32 { // error: `#[gpu_startup::main]` expects `fn main() -> i32` or `fn main()`, with no arguments
///     argc
/// }
/// ```
///
/// ```no_run
/// #![no_std]
/// #![no_main]
///
/// #[gpu_startup::main]
/// fn main() {
///     gpu_startup::println!("thread {}", gpu_startup::thread::index());
/// }
/// ```
pub use gpu_startup_macros::main;

/// Registers a constructor: a plain `fn()` that runs once, on one thread, before any thread enters `main`.
///
/// `#[constructor(priority = N)]` orders them: lowest `N` first, from 0 to 65535; without a priority a constructor
/// runs after every one that has one, as in C. Constructors can read [`env::args`] already.
///
/// ```no_run
/// #![no_std]
/// #![no_main]
/// use core::sync::atomic::{AtomicU32, Ordering};
///
/// static TABLE_READY: AtomicU32 = AtomicU32::new(0);
///
/// #[gpu_startup::constructor(priority = 101)]
/// fn fill_table() {
///     TABLE_READY.store(1, Ordering::Relaxed);
/// }
///
/// #[gpu_startup::main]
/// fn main() -> i32 {
///     if TABLE_READY.load(Ordering::Relaxed) == 1 { 0 } else { 1 }
/// }
/// ```
pub use gpu_startup_macros::constructor;

/// Registers a destructor: a plain `fn()` that runs once at exit, after every [`process::atexit`] handler, highest
/// priority first (`#[destructor(priority = N)]`, 0 to 65535; without one it runs first).
///
/// ```no_run
/// #![no_std]
/// #![no_main]
///
/// #[gpu_startup::destructor(priority = 300)]
/// fn report() {
///     gpu_startup::println!("done");
/// }
///
/// #[gpu_startup::main]
/// fn main() {}
/// ```
pub use gpu_startup_macros::destructor;

/// Marks a test, which `cargo test` runs on the GPU: every thread of the test's grid calls it, in a launch of its own
/// (`docs/testing-your-code.md`). Like libtest's `#[test]`, the function exists in test builds only.
///
/// The function is `fn NAME()` or `fn NAME() -> Result<(), E>` with `E: Debug` (an `Err` fails the test). Options:
///
/// - `ignore`: run only when asked for ignored tests (`--ignored`, `--include-ignored`);
/// - `should_panic`, `should_panic(expected = "text")`: pass only if a thread panics (with `text` in the message);
/// - `threads = N` or `threads = [X, Y, Z]`, `blocks = N` or `blocks = [X, Y, Z]`: the test's grid (otherwise the
///   runner's `--threads` and `--blocks`, one thread by default);
/// - `timeout = SECONDS` (`5`, `0.5`): the test fails when it runs longer (otherwise `--timeout`, or 60 s).
///
/// libtest's own `#[ignore]` and `#[should_panic(expected = "...")]` on the function work too. One line sets a crate
/// up for tests (see [`test_runner`]): in a program, as here, `#![cfg_attr(test, feature(custom_test_frameworks),
/// test_runner(gpu_startup::test_runner))]`; a library adds `no_main` to it.
///
/// ```no_run
/// #![no_std]
/// #![no_main]
/// #![cfg_attr(test, feature(custom_test_frameworks), test_runner(gpu_startup::test_runner))]
///
/// /// The sum of `value` over the lanes of a warp.
/// fn warp_sum(value: u32) -> u32 {
///     (0..32).map(|bit| gpu_startup::warp::ballot(value >> bit & 1 == 1).count_ones() << bit).sum()
/// }
///
/// #[gpu_startup::main]
/// fn main() {
///     gpu_startup::println!("{}", warp_sum(gpu_startup::thread::lane()));
/// }
///
/// #[cfg(test)]
/// mod tests {
///     #[gpu_startup::test(threads = 32, timeout = 5)]
///     fn sums_the_lane_numbers() {
///         assert_eq!(super::warp_sum(gpu_startup::thread::lane()), (0..32).sum::<u32>());
///     }
///
///     #[gpu_startup::test(should_panic(expected = "too large"))]
///     fn refuses_a_large_grid() {
///         panic!("a grid too large");
///     }
/// }
/// ```
///
/// Anything else is a compile error that names what the attribute takes:
///
/// ```compile_fail
/// #[gpu_startup::test(threads = 0)] // error: `threads` counts are whole numbers from 1 to 4294967295
/// fn empty_grid() {}
/// ```
pub use gpu_startup_macros::test;

/// The test runner a crate names for its tests: `#![test_runner(gpu_startup::test_runner)]`, with
/// `#![feature(custom_test_frameworks)]`, so that `cargo test` builds its tests for the GPU without libtest (which
/// needs `std`). It is never called: `gpu-loader`, `cargo test`'s runner, finds the [`test`] functions in the image
/// and runs each in a launch of its own. `#[test_case]` items are not tests here; `#[gpu_startup::test]` makes them.
pub fn test_runner(_tests: &[&dyn core::any::Any]) {}

/// Prints to the program's stdout, like `std::print!`; one call arrives whole.
pub use startup_common::print;

/// Prints a line to the program's stdout, like `std::println!`; the line arrives whole.
pub use startup_common::println;

/// Prints to the program's stderr, like `std::eprint!`.
pub use startup_common::eprint;

/// Prints a line to the program's stderr, like `std::eprintln!`.
pub use startup_common::eprintln;

/// What the attributes' expansions name; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use core::ffi::{c_char, c_int};
    pub use startup_common::{constructor, destructor, gpu_test};
}
