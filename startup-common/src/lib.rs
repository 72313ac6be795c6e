//! The GPU startup runtime, once for every target.
//!
//! A GPU program links a target crate (`startup-nvptx` or `startup-amdgpu`), which spells the kernels `_begin`,
//! `_start` and `_end` and provides the intrinsics behind [`Gpu`]. Everything else lives here: walking the
//! constructor and destructor arrays, `atexit`, `exit`, the RPC protocol to the host (client *and* server, from the
//! same source), printing, and the kernel-argument structs that `gpu-loader` shares.
//!
//! The crate is `no_std` and builds on the host too, where [`gpu::HostThread`] stands in for a GPU lane, so its logic
//! is tested with `cargo test`, under loom and under Miri.
//!
//! Programs do not use this crate directly: they depend on `gpu-startup` (in `gpu-startup/` here), which picks the
//! target crate and gives them a safe API over this one.
#![no_std]
#![feature(c_variadic)]

#[cfg(any(test, feature = "host"))]
extern crate std;

pub mod abi;
pub mod allocator;
pub mod atexit;
pub mod ctor;
pub mod cxxabi;
pub mod gpu;
pub mod heap;
pub mod io;
pub mod printf;
pub mod rpc;
pub mod startup;

pub use abi::{FiniCallback, InitCallback};
pub use gpu::{Gpu, ThreadIds};
pub use startup::{CallbackArrays, MainFn, Runtime};

/// Defines, in a target crate, the program's one [`Runtime`] and the C-linkage functions every program gets:
/// `exit`, `abort`, `atexit`, `puts`, `fputs`/`fwrite` on `stdout` and `stderr`, the `printf` family ([`printf`]),
/// the hook behind [`print!`], and `malloc`, `free`, `calloc`, `realloc`, `aligned_alloc`, `posix_memalign` on the
/// device heap, and C++'s runtime support ([`cxx_runtime!`]). With the target crate's `panic-handler` feature, also
/// the panic handler; with its `global-allocator` feature, Rust's global allocator on the same heap. The target crate
/// enables `c_variadic`.
///
/// The target crate names its [`Gpu`] type; its kernels then call `RUNTIME.begin`, `RUNTIME.start` and
/// `RUNTIME.end`.
#[macro_export]
macro_rules! target_runtime {
    ($gpu:ty) => {
        /// The processor this crate targets: `gpu-startup` reads thread ids, lanes and the clock through it.
        pub type Target = $gpu;

        /// The program's runtime state, shared by all its kernels.
        pub static RUNTIME: $crate::Runtime<$gpu> = $crate::Runtime::new();

        /// C's `exit`.
        #[unsafe(no_mangle)]
        pub extern "C" fn exit(status: ::core::ffi::c_int) -> ! {
            RUNTIME.exit(status)
        }

        /// C's `abort`.
        #[unsafe(no_mangle)]
        pub extern "C" fn abort() -> ! {
            RUNTIME.abort()
        }

        /// C's `atexit`: 0 on success, non-zero when the registry is full.
        #[unsafe(no_mangle)]
        pub extern "C" fn atexit(handler: $crate::FiniCallback) -> ::core::ffi::c_int {
            if RUNTIME.atexit($crate::atexit::Handler::C(handler)).is_ok() { 0 } else { -1 }
        }

        /// C's `puts`: the string and a newline to stdout, as one line.
        ///
        /// # Safety
        /// `text` must point to a NUL-terminated string.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn puts(text: *const ::core::ffi::c_char) -> ::core::ffi::c_int {
            // SAFETY: the caller passes a C string, as `puts` requires.
            let text = unsafe { $crate::io::c_string_bytes(text) };
            $crate::io::write_line(RUNTIME.client(), $crate::io::Stream::Stdout, text);
            0
        }

        /// The stream `stdout` names in C: its address identifies it.
        #[unsafe(no_mangle)]
        pub static mut stdout: *mut $crate::io::File = &$crate::io::STDOUT as *const _ as *mut _;
        /// The stream `stderr` names in C.
        #[unsafe(no_mangle)]
        pub static mut stderr: *mut $crate::io::File = &$crate::io::STDERR as *const _ as *mut _;

        /// C's `fputs` on `stdout` or `stderr`: the string is written whole, never interleaved with another thread's.
        ///
        /// # Safety
        /// `text` must point to a NUL-terminated string and `stream` be `stdout` or `stderr`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn fputs(
            text: *const ::core::ffi::c_char,
            stream: *mut $crate::io::File,
        ) -> ::core::ffi::c_int {
            // SAFETY: the caller passes a C string, as `fputs` requires.
            let text = unsafe { $crate::io::c_string_bytes(text) };
            match $crate::io::File::stream(stream) {
                Some(stream) => {
                    $crate::io::write(RUNTIME.client(), stream, text);
                    0
                }
                None => -1,
            }
        }

        /// C's `fwrite` on `stdout` or `stderr`; returns `count` on success, 0 for an unknown stream.
        ///
        /// # Safety
        /// `data` must point to `size * count` readable bytes and `stream` be `stdout` or `stderr`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn fwrite(
            data: *const ::core::ffi::c_void,
            size: usize,
            count: usize,
            stream: *mut $crate::io::File,
        ) -> usize {
            let Some(stream) = $crate::io::File::stream(stream) else { return 0 };
            // SAFETY: the caller guarantees `size * count` readable bytes at `data`.
            let bytes = unsafe { ::core::slice::from_raw_parts(data.cast::<u8>(), size.saturating_mul(count)) };
            $crate::io::write(RUNTIME.client(), stream, bytes);
            count
        }

        /// C's `printf`: formats on the device and writes the text to stdout as one piece; the byte count, or -1.
        ///
        /// # Safety
        /// `format` is a C string and the arguments match its conversions (C's contract; `printf` module docs).
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn printf(format: *const ::core::ffi::c_char, args: ...) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe { $crate::printf::stdio::vprint(RUNTIME.client(), $crate::io::Stream::Stdout, format, args) }
        }

        /// C's `vprintf`.
        ///
        /// # Safety
        /// As `printf`, with the arguments in `args`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn vprintf(
            format: *const ::core::ffi::c_char,
            args: ::core::ffi::VaList<'_>,
        ) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe { $crate::printf::stdio::vprint(RUNTIME.client(), $crate::io::Stream::Stdout, format, args) }
        }

        /// C's `fprintf` on `stdout` or `stderr` (-1 for any other stream).
        ///
        /// # Safety
        /// As `printf`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn fprintf(
            stream: *mut $crate::io::File,
            format: *const ::core::ffi::c_char,
            args: ...
        ) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe { $crate::printf::stdio::vfprintf(RUNTIME.client(), stream, format, args) }
        }

        /// C's `vfprintf` on `stdout` or `stderr`.
        ///
        /// # Safety
        /// As `printf`, with the arguments in `args`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn vfprintf(
            stream: *mut $crate::io::File,
            format: *const ::core::ffi::c_char,
            args: ::core::ffi::VaList<'_>,
        ) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe { $crate::printf::stdio::vfprintf(RUNTIME.client(), stream, format, args) }
        }

        /// C's `snprintf`.
        ///
        /// # Safety
        /// `buffer` has `size` writable bytes; otherwise as `printf`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn snprintf(
            buffer: *mut ::core::ffi::c_char,
            size: usize,
            format: *const ::core::ffi::c_char,
            args: ...
        ) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe { $crate::printf::stdio::vsnprintf(buffer, size, format, args) }
        }

        /// C's `vsnprintf`.
        ///
        /// # Safety
        /// As `snprintf`, with the arguments in `args`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn vsnprintf(
            buffer: *mut ::core::ffi::c_char,
            size: usize,
            format: *const ::core::ffi::c_char,
            args: ::core::ffi::VaList<'_>,
        ) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe { $crate::printf::stdio::vsnprintf(buffer, size, format, args) }
        }

        /// C's `sprintf`.
        ///
        /// # Safety
        /// `buffer` has room for the whole text and its NUL; otherwise as `printf`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sprintf(
            buffer: *mut ::core::ffi::c_char,
            format: *const ::core::ffi::c_char,
            args: ...
        ) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe { $crate::printf::stdio::vsprintf(buffer, format, args) }
        }

        /// C's `vsprintf`.
        ///
        /// # Safety
        /// As `sprintf`, with the arguments in `args`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn vsprintf(
            buffer: *mut ::core::ffi::c_char,
            format: *const ::core::ffi::c_char,
            args: ::core::ffi::VaList<'_>,
        ) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe { $crate::printf::stdio::vsprintf(buffer, format, args) }
        }

        /// The link-time hook behind `print!` and friends.
        #[unsafe(no_mangle)]
        pub fn __gpu_startup_print(stream: $crate::io::Stream, args: ::core::fmt::Arguments<'_>) {
            $crate::io::print(RUNTIME.client(), stream, args)
        }

        /// The program's allocation functions, on the heap of [`RUNTIME`].
        #[cfg_attr(feature = "global-allocator", global_allocator)]
        pub static ALLOCATOR: $crate::allocator::Allocator<$gpu> = $crate::allocator::Allocator::new(&RUNTIME);

        /// C's `malloc`: `size` bytes aligned to 16, or null when the heap has no room.
        #[unsafe(no_mangle)]
        pub extern "C" fn malloc(size: usize) -> *mut ::core::ffi::c_void {
            ALLOCATOR.malloc(size)
        }

        /// C's `free`. A pointer that is not the start of an allocated block (a double free) ends the program with a
        /// message naming it; the loader exits with 134.
        ///
        /// # Safety
        /// Nothing may use the block once it is freed.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn free(pointer: *mut ::core::ffi::c_void) {
            // SAFETY: the caller's guarantee, as C's `free` requires.
            unsafe { ALLOCATOR.free(pointer) }
        }

        /// C's `calloc`: `count * size` zeroed bytes, or null.
        #[unsafe(no_mangle)]
        pub extern "C" fn calloc(count: usize, size: usize) -> *mut ::core::ffi::c_void {
            ALLOCATOR.calloc(count, size)
        }

        /// C's `realloc` (a size of 0 frees the block and returns null, as glibc does).
        ///
        /// # Safety
        /// Unless the result is null or `pointer`, nothing may use the old block afterwards.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn realloc(pointer: *mut ::core::ffi::c_void, size: usize) -> *mut ::core::ffi::c_void {
            // SAFETY: the caller's guarantee, as C's `realloc` requires.
            unsafe { ALLOCATOR.realloc(pointer, size) }
        }

        /// C's `aligned_alloc`: null for an alignment that is not a power of two.
        #[unsafe(no_mangle)]
        pub extern "C" fn aligned_alloc(alignment: usize, size: usize) -> *mut ::core::ffi::c_void {
            ALLOCATOR.aligned_alloc(alignment, size)
        }

        /// POSIX's `posix_memalign`: 0, `EINVAL` (22) or `ENOMEM` (12).
        ///
        /// # Safety
        /// `out` must be valid for a pointer's write.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn posix_memalign(
            out: *mut *mut ::core::ffi::c_void,
            alignment: usize,
            size: usize,
        ) -> ::core::ffi::c_int {
            // SAFETY: the caller passes a writable `out`, as `posix_memalign` requires.
            unsafe { ALLOCATOR.posix_memalign(out, alignment, size) }
        }

        $crate::cxx_runtime!($gpu);

        #[cfg(feature = "panic-handler")]
        #[panic_handler]
        fn panic(info: &::core::panic::PanicInfo<'_>) -> ! {
            RUNTIME.panic(info)
        }
    };
}
