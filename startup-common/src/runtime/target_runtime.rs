//! [`target_runtime!`](crate::target_runtime): what every program gets from its target crate, spelled once for
//! both targets. The file is the list of C functions a program can call, each a thin wrapper over this crate, so its
//! length follows that list.

/// Defines, in a target crate, the program's one [`Runtime`](crate::Runtime) and the C-linkage functions every program
/// gets: `exit`, `abort`, `atexit`, `puts`, C's streams (`stdin`, `stdout`, `stderr`, `fopen` and the functions on a
/// `FILE *`, [`stdio`](crate::libc::stdio)), `remove`, `rename`, `getenv`, `errno` with `perror` and `strerror`
/// ([`errno`](crate::libc::errno)), the `printf` family ([`printf`](crate::libc::printf)), the hook behind
/// [`print!`](crate::print), `malloc`, `free`, `calloc`, `realloc`, `aligned_alloc`, `posix_memalign` on the device
/// heap, C++'s runtime support ([`cxx_runtime!`](crate::cxx_runtime)), and a weak `main` for images that define none
/// (test binaries). With the target crate's `panic-handler` feature, also the panic handler; with its
/// `global-allocator` feature, Rust's global allocator on the same heap. The target crate enables `c_variadic` and
/// `linkage`.
///
/// The target crate names its [`Gpu`](crate::Gpu) type; its kernels then call `RUNTIME.begin`, `RUNTIME.start` and
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
            if RUNTIME.atexit($crate::runtime::atexit::Handler::C(handler)).is_ok() { 0 } else { -1 }
        }

        /// C's `puts`: the string and a newline to stdout, as one line.
        ///
        /// # Safety
        /// `text` must point to a NUL-terminated string.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn puts(text: *const ::core::ffi::c_char) -> ::core::ffi::c_int {
            // SAFETY: the caller passes a C string, as `puts` requires.
            let text = unsafe { $crate::libc::io::c_string_bytes(text) };
            $crate::libc::io::write_line(RUNTIME.client(), $crate::libc::io::Stream::Stdout, text);
            0
        }

        /// The stream `stdin` names in C: its address identifies it.
        #[unsafe(no_mangle)]
        pub static mut stdin: *mut $crate::libc::stdio::File = &$crate::libc::stdio::STDIN as *const _ as *mut _;
        /// The stream `stdout` names in C.
        #[unsafe(no_mangle)]
        pub static mut stdout: *mut $crate::libc::stdio::File = &$crate::libc::stdio::STDOUT as *const _ as *mut _;
        /// The stream `stderr` names in C.
        #[unsafe(no_mangle)]
        pub static mut stderr: *mut $crate::libc::stdio::File = &$crate::libc::stdio::STDERR as *const _ as *mut _;

        /// C's `fputs`: the string as one piece, never interleaved with another thread's.
        ///
        /// # Safety
        /// `text` must point to a NUL-terminated string.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn fputs(
            text: *const ::core::ffi::c_char,
            stream: *mut $crate::libc::stdio::File,
        ) -> ::core::ffi::c_int {
            // SAFETY: the caller passes a C string, as `fputs` requires.
            unsafe { $crate::libc::stdio::functions::fputs(RUNTIME.client(), text, stream) }
        }

        /// C's `fwrite`: `size * count` bytes as one piece; `count`, or 0 on an error.
        ///
        /// # Safety
        /// `data` must point to `size * count` readable bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn fwrite(
            data: *const ::core::ffi::c_void,
            size: usize,
            count: usize,
            stream: *mut $crate::libc::stdio::File,
        ) -> usize {
            // SAFETY: the caller guarantees `size * count` readable bytes at `data`.
            unsafe { $crate::libc::stdio::functions::fwrite(RUNTIME.client(), data, size, count, stream) }
        }

        /// C's `fread`: the number of whole items read.
        ///
        /// # Safety
        /// `data` must have room for `size * count` bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn fread(
            data: *mut ::core::ffi::c_void,
            size: usize,
            count: usize,
            stream: *mut $crate::libc::stdio::File,
        ) -> usize {
            // SAFETY: the caller guarantees room for `size * count` bytes at `data`.
            unsafe { $crate::libc::stdio::functions::fread(RUNTIME.client(), data, size, count, stream) }
        }

        /// C's `fopen`: the stream, or null with `errno` set.
        ///
        /// # Safety
        /// `path` and `mode` must point to NUL-terminated strings.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn fopen(
            path: *const ::core::ffi::c_char,
            mode: *const ::core::ffi::c_char,
        ) -> *mut $crate::libc::stdio::File {
            // SAFETY: the caller passes C strings.
            unsafe { $crate::libc::stdio::functions::fopen(RUNTIME.client(), path, mode) }
        }

        /// C's `fclose`.
        #[unsafe(no_mangle)]
        pub extern "C" fn fclose(stream: *mut $crate::libc::stdio::File) -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::fclose(RUNTIME.client(), stream)
        }

        /// C's `fgets`: one line, at most `size - 1` bytes, and a NUL.
        ///
        /// # Safety
        /// `buffer` must have room for `size` bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn fgets(
            buffer: *mut ::core::ffi::c_char,
            size: ::core::ffi::c_int,
            stream: *mut $crate::libc::stdio::File,
        ) -> *mut ::core::ffi::c_char {
            // SAFETY: the caller guarantees room for `size` bytes.
            unsafe { $crate::libc::stdio::functions::fgets(RUNTIME.client(), buffer, size, stream) }
        }

        /// C's `fputc`.
        #[unsafe(no_mangle)]
        pub extern "C" fn fputc(
            character: ::core::ffi::c_int,
            stream: *mut $crate::libc::stdio::File,
        ) -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::fputc(RUNTIME.client(), character, stream)
        }

        /// C's `putc`, as `fputc`.
        #[unsafe(no_mangle)]
        pub extern "C" fn putc(
            character: ::core::ffi::c_int,
            stream: *mut $crate::libc::stdio::File,
        ) -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::fputc(RUNTIME.client(), character, stream)
        }

        /// C's `putchar`, as `fputc` on stdout.
        #[unsafe(no_mangle)]
        pub extern "C" fn putchar(character: ::core::ffi::c_int) -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::fputc(
                RUNTIME.client(),
                character,
                &$crate::libc::stdio::STDOUT as *const _ as *mut _,
            )
        }

        /// C's `fgetc`.
        #[unsafe(no_mangle)]
        pub extern "C" fn fgetc(stream: *mut $crate::libc::stdio::File) -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::fgetc(RUNTIME.client(), stream)
        }

        /// C's `getc`, as `fgetc`.
        #[unsafe(no_mangle)]
        pub extern "C" fn getc(stream: *mut $crate::libc::stdio::File) -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::fgetc(RUNTIME.client(), stream)
        }

        /// C's `getchar`, as `fgetc` on stdin.
        #[unsafe(no_mangle)]
        pub extern "C" fn getchar() -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::fgetc(RUNTIME.client(), &$crate::libc::stdio::STDIN as *const _ as *mut _)
        }

        /// C's `fflush` (every open file for null).
        #[unsafe(no_mangle)]
        pub extern "C" fn fflush(stream: *mut $crate::libc::stdio::File) -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::fflush(RUNTIME.client(), stream)
        }

        /// C's `feof`.
        #[unsafe(no_mangle)]
        pub extern "C" fn feof(stream: *mut $crate::libc::stdio::File) -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::feof::<$gpu>(stream)
        }

        /// C's `ferror`.
        #[unsafe(no_mangle)]
        pub extern "C" fn ferror(stream: *mut $crate::libc::stdio::File) -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::ferror::<$gpu>(stream)
        }

        /// C's `clearerr`.
        #[unsafe(no_mangle)]
        pub extern "C" fn clearerr(stream: *mut $crate::libc::stdio::File) {
            $crate::libc::stdio::functions::clearerr::<$gpu>(stream)
        }

        /// C's `fseek`.
        #[unsafe(no_mangle)]
        pub extern "C" fn fseek(
            stream: *mut $crate::libc::stdio::File,
            offset: ::core::ffi::c_long,
            whence: ::core::ffi::c_int,
        ) -> ::core::ffi::c_int {
            $crate::libc::stdio::functions::fseek(RUNTIME.client(), stream, offset, whence)
        }

        /// C's `ftell`.
        #[unsafe(no_mangle)]
        pub extern "C" fn ftell(stream: *mut $crate::libc::stdio::File) -> ::core::ffi::c_long {
            $crate::libc::stdio::functions::ftell(RUNTIME.client(), stream)
        }

        /// C's `rewind`.
        #[unsafe(no_mangle)]
        pub extern "C" fn rewind(stream: *mut $crate::libc::stdio::File) {
            $crate::libc::stdio::functions::rewind(RUNTIME.client(), stream)
        }

        /// C's `remove`: a file or an empty directory.
        ///
        /// # Safety
        /// `path` must point to a NUL-terminated string.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn remove(path: *const ::core::ffi::c_char) -> ::core::ffi::c_int {
            // SAFETY: the caller passes a C string.
            unsafe { $crate::libc::stdio::functions::remove(RUNTIME.client(), path) }
        }

        /// C's `rename`.
        ///
        /// # Safety
        /// `from` and `to` must point to NUL-terminated strings.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn rename(
            from: *const ::core::ffi::c_char,
            to: *const ::core::ffi::c_char,
        ) -> ::core::ffi::c_int {
            // SAFETY: the caller passes C strings.
            unsafe { $crate::libc::stdio::functions::rename(RUNTIME.client(), from, to) }
        }

        /// C's `getenv`, from the program's environment.
        ///
        /// # Safety
        /// `name` must point to a NUL-terminated string.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn getenv(name: *const ::core::ffi::c_char) -> *mut ::core::ffi::c_char {
            // SAFETY: the caller passes a C string; `envp` is the loader's environment, whose strings live as long as
            // the program.
            unsafe { $crate::libc::stdio::functions::getenv(RUNTIME.envp(), name) }
        }

        /// C's `perror`.
        ///
        /// # Safety
        /// `prefix` must be null or point to a NUL-terminated string.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn perror(prefix: *const ::core::ffi::c_char) {
            // SAFETY: the caller passes null or a C string.
            unsafe { $crate::libc::stdio::functions::perror(RUNTIME.client(), prefix) }
        }

        /// C's `strerror`.
        #[unsafe(no_mangle)]
        pub extern "C" fn strerror(number: ::core::ffi::c_int) -> *mut ::core::ffi::c_char {
            $crate::libc::stdio::functions::strerror(number)
        }

        /// Where the calling thread's `errno` lives: C's `errno` is `(*__errno_location())`, as in glibc.
        #[unsafe(no_mangle)]
        pub extern "C" fn __errno_location() -> *mut ::core::ffi::c_int {
            $crate::libc::errno::location::<$gpu>()
        }

        /// C's `printf`: formats on the device and writes the text to stdout as one piece; the byte count, or -1.
        ///
        /// # Safety
        /// `format` is a C string and the arguments match its conversions (C's contract; `printf` module docs).
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn printf(format: *const ::core::ffi::c_char, args: ...) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe {
                $crate::libc::printf::stdio::vprint(RUNTIME.client(), $crate::libc::io::Stream::Stdout, format, args)
            }
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
            unsafe {
                $crate::libc::printf::stdio::vprint(RUNTIME.client(), $crate::libc::io::Stream::Stdout, format, args)
            }
        }

        /// C's `fprintf` on `stdout` or `stderr` (-1 for any other stream).
        ///
        /// # Safety
        /// As `printf`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn fprintf(
            stream: *mut $crate::libc::stdio::File,
            format: *const ::core::ffi::c_char,
            args: ...
        ) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe { $crate::libc::printf::stdio::vfprintf(RUNTIME.client(), stream, format, args) }
        }

        /// C's `vfprintf` on `stdout` or `stderr`.
        ///
        /// # Safety
        /// As `printf`, with the arguments in `args`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn vfprintf(
            stream: *mut $crate::libc::stdio::File,
            format: *const ::core::ffi::c_char,
            args: ::core::ffi::VaList<'_>,
        ) -> ::core::ffi::c_int {
            // SAFETY: C's contract, passed on.
            unsafe { $crate::libc::printf::stdio::vfprintf(RUNTIME.client(), stream, format, args) }
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
            unsafe { $crate::libc::printf::stdio::vsnprintf(buffer, size, format, args) }
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
            unsafe { $crate::libc::printf::stdio::vsnprintf(buffer, size, format, args) }
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
            unsafe { $crate::libc::printf::stdio::vsprintf(buffer, format, args) }
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
            unsafe { $crate::libc::printf::stdio::vsprintf(buffer, format, args) }
        }

        /// The program's `main` when it defines none, as a test binary need not: a program's own `main`, a strong
        /// definition, takes this weak one's place at link time. Called, it says that `main` is missing.
        #[unsafe(no_mangle)]
        #[linkage = "weak"]
        pub extern "C" fn main(
            _argc: ::core::ffi::c_int,
            _argv: *mut *mut ::core::ffi::c_char,
            _envp: *mut *mut ::core::ffi::c_char,
        ) -> ::core::ffi::c_int {
            RUNTIME.missing_main()
        }

        /// The link-time hook behind `print!` and friends.
        #[unsafe(no_mangle)]
        pub fn __gpu_startup_print(stream: $crate::libc::io::Stream, args: ::core::fmt::Arguments<'_>) {
            $crate::libc::io::print(RUNTIME.client(), stream, args)
        }

        /// The program's allocation functions, on the heap of [`RUNTIME`].
        #[cfg_attr(feature = "global-allocator", global_allocator)]
        pub static ALLOCATOR: $crate::runtime::allocator::Allocator<$gpu> =
            $crate::runtime::allocator::Allocator::new(&RUNTIME);

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

        #[cfg(target_os = "hermit")]
        $crate::std_os_runtime!($gpu);
    };
}
