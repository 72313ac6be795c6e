//! Ending the program, like `std::process`, and C's `atexit`.

use startup_common::Gpu;
use startup_common::runtime::atexit::Handler;

use crate::arch::{RUNTIME, Target};

pub use startup_common::runtime::atexit::RegistryFull;

/// Ends the program with `status`: runs the [`atexit`] handlers, latest first, then the destructors, and the
/// loader exits with `status`. The first thread to call it runs that sequence; any other thread that calls it just
/// stops.
///
/// ```no_run
/// #![no_std]
/// #![no_main]
///
/// #[gpu_startup::main]
/// fn main() -> i32 {
///     if gpu_startup::env::args().len() < 2 {
///         gpu_startup::eprintln!("usage: prog INPUT");
///         gpu_startup::process::exit(2);
///     }
///     0
/// }
/// ```
pub fn exit(status: i32) -> ! {
    crate::arch::exit(status)
}

/// Ends the program at once, running no handler; the loader exits with 134, as for `SIGABRT`.
pub fn abort() -> ! {
    crate::arch::abort()
}

/// Stops the whole grid with a device fault: the loader reports it, naming the kernel, and exits with 139. Output
/// sent before it still arrives.
pub fn trap() -> ! {
    Target::trap()
}

/// Registers `handler` to run at exit, before every handler registered so far and before the destructors. Fails
/// when the registry (1,023 handlers, shared with C's `atexit` and C++'s destructors of global objects) is full.
///
/// ```no_run
/// #![no_std]
/// #![no_main]
///
/// fn goodbye() {
///     gpu_startup::println!("goodbye");
/// }
///
/// #[gpu_startup::main]
/// fn main() {
///     if gpu_startup::thread::is_first() {
///         gpu_startup::process::atexit(goodbye).expect("room for one handler");
///     }
/// }
/// ```
pub fn atexit(handler: fn()) -> Result<(), RegistryFull> {
    RUNTIME.atexit(Handler::Rust(handler))
}
