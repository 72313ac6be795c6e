//! `std_os_runtime!`: the C functions of Hermit's ABI that a std program's runtime exports, each a thin call of this
//! module's parent over the program's one `RUNTIME`.

/// The functions of Hermit's ABI that Rust's std calls, for a program built for the std target (`target_os =
/// "hermit"`; [`std_os`](crate::runtime::std_os)), and `__emutls_get_address`, which the bitcode linker routes every
/// thread-local access through. `target_runtime!` adds them there.
#[doc(hidden)]
#[macro_export]
macro_rules! std_os_runtime {
    ($gpu:ty) => {
        /// Hermit's `sys_open` ([`std_os::open`]($crate::runtime::std_os::open)): a file, through the host.
        ///
        /// # Safety
        /// `path` must be a NUL-terminated string.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_open(path: *const ::core::ffi::c_char, flags: i32, _mode: i32) -> i32 {
            // SAFETY: std passes a NUL-terminated path.
            let path = unsafe { $crate::libc::io::c_string_bytes(path) };
            $crate::runtime::std_os::open(RUNTIME.client(), path, flags)
        }

        /// Hermit's `sys_read` ([`std_os::read`]($crate::runtime::std_os::read)): stdin or a file.
        ///
        /// # Safety
        /// `bytes` must be `len` writable bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_read(fd: i32, bytes: *mut u8, len: usize) -> isize {
            // SAFETY: std passes a buffer of `len` bytes.
            let bytes = unsafe { ::core::slice::from_raw_parts_mut(bytes, len) };
            $crate::runtime::std_os::read(RUNTIME.client(), fd, bytes)
        }

        /// Hermit's `sys_readv` ([`std_os::read_vectored`]($crate::runtime::std_os::read_vectored)).
        ///
        /// # Safety
        /// `pieces` must be `count` `iovec`s, each of writable bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_readv(
            fd: i32,
            pieces: *const $crate::runtime::std_os::IoVec,
            count: usize,
        ) -> isize {
            // SAFETY: std passes `count` iovecs over its buffers.
            unsafe {
                let pieces = ::core::slice::from_raw_parts(pieces, count);
                $crate::runtime::std_os::read_vectored(RUNTIME.client(), fd, pieces)
            }
        }

        /// Hermit's `sys_write` ([`std_os::write`]($crate::runtime::std_os::write)): the output streams or a file,
        /// through the RPC channel.
        ///
        /// # Safety
        /// `bytes` must be `len` readable bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_write(fd: i32, bytes: *const u8, len: usize) -> isize {
            // SAFETY: std passes a buffer of `len` bytes.
            let bytes = unsafe { ::core::slice::from_raw_parts(bytes, len) };
            $crate::runtime::std_os::write(RUNTIME.client(), fd, bytes)
        }

        /// Hermit's `sys_writev` ([`std_os::write_vectored`]($crate::runtime::std_os::write_vectored)): the pieces as
        /// one message.
        ///
        /// # Safety
        /// `pieces` must be `count` `iovec`s, each of readable bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_writev(
            fd: i32,
            pieces: *const $crate::runtime::std_os::IoVec,
            count: usize,
        ) -> isize {
            // SAFETY: std passes `count` iovecs over its buffers.
            unsafe {
                let pieces = ::core::slice::from_raw_parts(pieces, count);
                $crate::runtime::std_os::write_vectored(RUNTIME.client(), fd, pieces)
            }
        }

        /// Hermit's `sys_lseek` ([`std_os::seek`]($crate::runtime::std_os::seek)).
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_lseek(fd: i32, offset: isize, whence: i32) -> isize {
            $crate::runtime::std_os::seek(RUNTIME.client(), fd, offset, whence)
        }

        /// Hermit's `sys_close` ([`std_os::close`]($crate::runtime::std_os::close)).
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_close(fd: i32) -> i32 {
            $crate::runtime::std_os::close(RUNTIME.client(), fd)
        }

        /// Hermit's `sys_stat` ([`std_os::stat_path`]($crate::runtime::std_os::stat_path)): `fs::metadata`.
        ///
        /// # Safety
        /// `path` must be a NUL-terminated string and `stat` a writable `stat`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_stat(
            path: *const ::core::ffi::c_char,
            stat: *mut $crate::runtime::std_os::Stat,
        ) -> i32 {
            // SAFETY: std passes a NUL-terminated path and its own `stat`.
            unsafe {
                let path = $crate::libc::io::c_string_bytes(path);
                $crate::runtime::std_os::stat_path(RUNTIME.client(), path, true, &mut *stat)
            }
        }

        /// Hermit's `sys_lstat`: `fs::symlink_metadata`.
        ///
        /// # Safety
        /// As for `sys_stat`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_lstat(
            path: *const ::core::ffi::c_char,
            stat: *mut $crate::runtime::std_os::Stat,
        ) -> i32 {
            // SAFETY: std passes a NUL-terminated path and its own `stat`.
            unsafe {
                let path = $crate::libc::io::c_string_bytes(path);
                $crate::runtime::std_os::stat_path(RUNTIME.client(), path, false, &mut *stat)
            }
        }

        /// Hermit's `sys_fstat` ([`std_os::stat_open`]($crate::runtime::std_os::stat_open)): `File::metadata`.
        ///
        /// # Safety
        /// `stat` must be a writable `stat`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_fstat(fd: i32, stat: *mut $crate::runtime::std_os::Stat) -> i32 {
            // SAFETY: std passes its own `stat`.
            $crate::runtime::std_os::stat_open(RUNTIME.client(), fd, unsafe { &mut *stat })
        }

        /// Hermit's `sys_mkdir` ([`std_os::make_directory`]($crate::runtime::std_os::make_directory)):
        /// `fs::create_dir`.
        ///
        /// # Safety
        /// `path` must be a NUL-terminated string.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_mkdir(path: *const ::core::ffi::c_char, _mode: u32) -> i32 {
            // SAFETY: std passes a NUL-terminated path.
            let path = unsafe { $crate::libc::io::c_string_bytes(path) };
            $crate::runtime::std_os::make_directory(RUNTIME.client(), path)
        }

        /// Hermit's `sys_rmdir` ([`std_os::remove_directory`]($crate::runtime::std_os::remove_directory)):
        /// `fs::remove_dir`.
        ///
        /// # Safety
        /// `path` must be a NUL-terminated string.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_rmdir(path: *const ::core::ffi::c_char) -> i32 {
            // SAFETY: std passes a NUL-terminated path.
            let path = unsafe { $crate::libc::io::c_string_bytes(path) };
            $crate::runtime::std_os::remove_directory(RUNTIME.client(), path)
        }

        /// Hermit's `sys_getdents64` ([`std_os::read_directory`]($crate::runtime::std_os::read_directory)):
        /// `fs::read_dir`.
        ///
        /// # Safety
        /// `records` must be `len` writable bytes, aligned for `dirent64`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_getdents64(fd: i32, records: *mut u8, len: usize) -> i64 {
            // SAFETY: std passes a buffer of `len` bytes.
            let records = unsafe { ::core::slice::from_raw_parts_mut(records, len) };
            $crate::runtime::std_os::read_directory(RUNTIME.client(), fd, records)
        }

        /// The loader's working directory, for std's `env::current_dir`
        /// (`loader/setup/std-patches/0007-gpu-current-directory.patch`): the length written into `path`, or a
        /// negated error number (`-ERANGE`: `capacity` is too short).
        ///
        /// # Safety
        /// `path` must be `capacity` writable bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn __gpu_startup_getcwd(path: *mut u8, capacity: usize) -> isize {
            // SAFETY: std passes a buffer of `capacity` bytes.
            let path = unsafe { ::core::slice::from_raw_parts_mut(path, capacity) };
            $crate::runtime::std_os::current_directory(RUNTIME.client(), path)
        }

        /// Hermit's `sys_unlink` ([`std_os::unlink`]($crate::runtime::std_os::unlink)): `fs::remove_file`.
        ///
        /// # Safety
        /// `path` must be a NUL-terminated string.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_unlink(path: *const ::core::ffi::c_char) -> i32 {
            // SAFETY: std passes a NUL-terminated path.
            let path = unsafe { $crate::libc::io::c_string_bytes(path) };
            $crate::runtime::std_os::unlink(RUNTIME.client(), path)
        }

        /// Hermit's `sys_malloc`: `size` bytes aligned to `align` on the device heap, or null.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_malloc(size: usize, align: usize) -> *mut u8 {
            RUNTIME.heap().allocate(size, align)
        }

        /// Hermit's `sys_realloc`: the block at `pointer` (of `size` bytes, aligned to `align`) grown or shrunk to
        /// `new_size`, or null with the block left as it was.
        ///
        /// # Safety
        /// `pointer` must be a block of `size` bytes from `sys_malloc` with `align`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_realloc(pointer: *mut u8, size: usize, align: usize, new_size: usize) -> *mut u8 {
            let Ok(layout) = ::core::alloc::Layout::from_size_align(size, align) else {
                return ::core::ptr::null_mut();
            };
            // SAFETY: the caller's block and layout, as `GlobalAlloc::realloc` requires.
            unsafe { ::core::alloc::GlobalAlloc::realloc(&ALLOCATOR, pointer, layout, new_size) }
        }

        /// Hermit's `sys_free`.
        ///
        /// # Safety
        /// `pointer` must be a block from `sys_malloc` that nothing uses any more.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_free(pointer: *mut u8, _size: usize, _align: usize) {
            // SAFETY: the caller's block, as C's `free` requires.
            unsafe { ALLOCATOR.free(pointer.cast()) }
        }

        /// The environment, for std's Hermit layer (`loader/setup/std-patches/0002-hermit-env-at-first-use.patch`):
        /// the loader's `envp`.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_environ() -> *const *const ::core::ffi::c_char {
            RUNTIME.environ().cast()
        }

        /// Hermit's `sys_exit`: the program ends with `status`, as C's `exit`.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_exit(status: i32) -> ! {
            RUNTIME.exit(status)
        }

        /// Hermit's `sys_abort`: as C's `abort`.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_abort() -> ! {
            RUNTIME.abort()
        }

        /// The end of a std program's panic, after std's hook printed its message (std's panic runtime calls it:
        /// `loader/setup/std-patches/0005-gpu-panics-end-as-the-startups.patch`): as the startup's own panics end.
        #[unsafe(no_mangle)]
        pub extern "C" fn __gpu_startup_panic_abort() -> ! {
            RUNTIME.panic_reported()
        }

        /// std's name for the calling thread, its coordinates
        /// (`loader/setup/std-patches/0006-gpu-threads-named-and-ended.patch`): the length written into `name`.
        ///
        /// # Safety
        /// `name` must be `capacity` writable bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn __gpu_startup_thread_name(name: *mut u8, capacity: usize) -> usize {
            // SAFETY: std passes a buffer of `capacity` bytes.
            let name = unsafe { ::core::slice::from_raw_parts_mut(name, capacity) };
            $crate::runtime::std_os::thread_name::<$gpu>(name)
        }

        /// Hermit's `sys_futex_wait` ([`std_os::futex_wait`]($crate::runtime::std_os::futex_wait)).
        ///
        /// # Safety
        /// `address` must be a live word, `timeout` null or a live `timespec`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_futex_wait(
            address: *mut u32,
            expected: u32,
            timeout: *const $crate::runtime::std_os::Timespec,
            _flags: u32,
        ) -> i32 {
            // SAFETY: the caller's word and timeout.
            unsafe { $crate::runtime::std_os::futex_wait::<$gpu>(address, expected, timeout) }
        }

        /// Hermit's `sys_clock_gettime` ([`std_os::clock_gettime`]($crate::runtime::std_os::clock_gettime)).
        ///
        /// # Safety
        /// `time` must be a writable `timespec`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_clock_gettime(clock: i32, time: *mut $crate::runtime::std_os::Timespec) -> i32 {
            // SAFETY: std passes its own `timespec`.
            match unsafe { time.as_mut() } {
                Some(time) => $crate::runtime::std_os::clock_gettime(RUNTIME.client(), clock, time),
                None => -$crate::libc::errno::EINVAL,
            }
        }

        /// Hermit's `sys_usleep`: `thread::sleep`.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_usleep(microseconds: u64) {
            $crate::runtime::std_os::usleep::<$gpu>(microseconds)
        }

        /// Hermit's `sys_yield`: `thread::yield_now`, a pause.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_yield() {
            <$gpu as $crate::Gpu>::sleep_briefly()
        }

        /// Hermit's `sys_available_parallelism`: 1, as `thread::spawn` has nothing to run threads on; the grid's
        /// threads are the program's parallelism.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_available_parallelism() -> usize {
            1
        }

        /// Hermit's `sys_spawn2`: no thread is made (0), as there is nothing to run one on; std's `Builder::spawn`
        /// returns its own error for it (`Uncategorized`, "unable to create thread!"), and `thread::spawn` panics
        /// with it.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_spawn2(
            _start: extern "C" fn(usize),
            _argument: usize,
            _priority: u8,
            _stack_size: usize,
            _core: isize,
        ) -> u32 {
            0
        }

        /// Hermit's `sys_join`: there is no thread to join (`sys_spawn2` makes none), so `-ESRCH`.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_join(_thread: u32) -> i32 {
            -$crate::libc::errno::ESRCH
        }

        /// Hermit's `sys_futex_wake` ([`std_os::futex_wake`]($crate::runtime::std_os::futex_wake)).
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_futex_wake(address: *mut u32, count: i32) -> i32 {
            $crate::runtime::std_os::futex_wake(address, count)
        }

        /// Hermit's `sys_read_entropy` ([`std_os::read_entropy`]($crate::runtime::std_os::read_entropy)).
        ///
        /// # Safety
        /// `bytes` must be `len` writable bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sys_read_entropy(bytes: *mut u8, len: usize, _flags: u32) -> isize {
            // SAFETY: std passes a buffer of `len` bytes.
            let bytes = unsafe { ::core::slice::from_raw_parts_mut(bytes, len) };
            $crate::runtime::std_os::read_entropy::<$gpu>(bytes)
        }

        /// The calling GPU thread's copy of a thread-local, by its control variable (libgcc's and compiler-rt's
        /// `__emutls_get_address`).
        ///
        /// # Safety
        /// `control` must be a control variable that LLVM's `lower-emutls` made.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn __emutls_get_address(control: *mut $crate::runtime::std_os::EmutlsControl) -> *mut u8 {
            // SAFETY: the linker passes the thread-local's control variable.
            unsafe { RUNTIME.thread_local(&*control) }
        }

        $crate::std_os_unsupported!();
    };
}
