//! The runtime: what every program runs on, whatever its language. The three kernels' bodies and the program's end
//! ([`startup`]), constructors and destructors ([`ctor`]), the exit registry ([`atexit`]), the allocation functions
//! over the device heap ([`allocator`]), C++'s runtime support ([`cxxabi`]), the operating system std runs on
//! ([`std_os`]) and `target_runtime!`, which gives a target crate all of it.
//!
//! `cxxabi` is here rather than with the C library: what it provides (`__cxa_atexit`, the guards of function-local
//! statics, `__cxa_pure_virtual`, `operator new` and `delete`) is the C++ ABI's runtime support, which registers in
//! this runtime's exit registry and ends the program through it; no C header declares any of it. `allocator` is
//! here too: an `Allocator` is the runtime's heap as C, C++ and Rust ask for it, and it ends the program through
//! the [`startup::Runtime`] on a pointer the heap refuses; the runtime in turn uses the C library (it clears
//! `errno`, resets the streams, prints its messages), so in `libc` the two folders would refer to each other.

pub mod allocator;
pub mod atexit;
pub(crate) mod coordinates;
pub mod ctor;
pub mod cxxabi;
pub mod startup;
pub mod std_os;
mod target_runtime;
