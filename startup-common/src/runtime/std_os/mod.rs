//! The operating system Rust's std runs on, on the GPU: the functions of Hermit's ABI that std's Hermit layer calls
//! (`docs/std.md`), over this runtime: output through the RPC channel, the device heap, waits that poll, and each
//! GPU thread's thread-locals. `target_runtime!` exports them as C functions in a program built for the std target
//! (`target_os = "hermit"`).

use core::sync::atomic::{AtomicU32, Ordering};

use crate::gpu::Gpu;
// Hermit's error numbers, which these functions return negated, are Linux's, as the contract's are.
use crate::libc::errno;

mod files;
mod thread_locals;

pub use files::{
    IoVec, Stat, close, make_directory, open, read, read_directory, read_vectored, remove_directory, seek, stat_open,
    stat_path, unlink, write, write_vectored,
};
pub use thread_locals::{EmutlsControl, ThreadLocals};

/// Hermit's `timespec`, a relative timeout for [`futex_wait`].
#[repr(C)]
pub struct Timespec {
    pub seconds: i64,
    pub nanoseconds: i32,
}

/// How many pauses a futex wait polls before it returns as woken: the caller checks its condition again and waits
/// again, as after a spurious wake-up, which futexes allow.
const FUTEX_POLLS: u32 = 64;

/// `sys_futex_wait`: waits while the word at `address` holds `expected`, at most until the relative `timeout` (none:
/// no limit). There is no queue to sleep in: the wait polls the word, pausing between reads, and returns 0 once it
/// changed or after [`FUTEX_POLLS`] pauses (a spurious wake-up), `-EAGAIN` when it did not hold `expected` to begin
/// with, `-ETIMEDOUT` when the timeout passed. std changes a futex's word before it wakes its waiters, so a poll
/// sees every wake-up that matters.
///
/// # Safety
/// `address` must be a live, aligned word, and `timeout` null or a live `Timespec`.
pub unsafe fn futex_wait<G: Gpu>(address: *mut u32, expected: u32, timeout: *const Timespec) -> i32 {
    if address.is_null() {
        return -errno::EINVAL;
    }
    // SAFETY: the caller passes a live, aligned word, which other threads change only atomically (std's futexes are
    // atomics).
    let word = unsafe { AtomicU32::from_ptr(address) };
    // SAFETY: the caller passes null or a live `Timespec`.
    let deadline = unsafe { timeout.as_ref() }.map(|timeout| {
        let nanoseconds = i128::from(timeout.seconds) * 1_000_000_000 + i128::from(timeout.nanoseconds);
        G::nanoseconds().saturating_add(u64::try_from(nanoseconds.max(0)).unwrap_or(u64::MAX))
    });
    if word.load(Ordering::Acquire) != expected {
        return -errno::EAGAIN;
    }
    for _ in 0..FUTEX_POLLS {
        if deadline.is_some_and(|deadline| G::nanoseconds() >= deadline) {
            return -errno::ETIMEDOUT;
        }
        G::sleep_briefly();
        if word.load(Ordering::Acquire) != expected {
            return 0;
        }
    }
    0
}

/// `sys_futex_wake`: waiters poll ([`futex_wait`]), so there is no one to wake; none is reported woken. `-EINVAL` for
/// a null address or a negative count, as Hermit has it.
pub fn futex_wake(address: *mut u32, count: i32) -> i32 {
    if address.is_null() || count < 0 { -errno::EINVAL } else { 0 }
}

/// Hermit's clock ids.
pub const CLOCK_REALTIME: i32 = 1;
pub const CLOCK_MONOTONIC: i32 = 4;

/// `sys_clock_gettime`: `CLOCK_MONOTONIC` from the GPU's nanosecond clock (`Instant`); `-EINVAL` for any other
/// clock, `CLOCK_REALTIME` (`SystemTime`) included, whose epoch the GPU's clock does not promise, rather than a time
/// that may be wrong.
pub fn clock_gettime<G: Gpu>(clock: i32, time: &mut Timespec) -> i32 {
    if clock != CLOCK_MONOTONIC {
        return -errno::EINVAL;
    }
    let now = G::nanoseconds();
    *time = Timespec { seconds: (now / 1_000_000_000) as i64, nanoseconds: (now % 1_000_000_000) as i32 };
    0
}

/// `sys_usleep`: `microseconds` pass on the GPU's clock, the thread pausing between reads.
pub fn usleep<G: Gpu>(microseconds: u64) {
    let until = G::nanoseconds().saturating_add(microseconds.saturating_mul(1000));
    while G::nanoseconds() < until {
        G::sleep_briefly();
    }
}

/// Calls of [`read_entropy`] so far, mixed into each: two calls of one thread in one nanosecond differ.
static ENTROPY_CALLS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// `sys_read_entropy`: `bytes` filled from the GPU's nanosecond clock, the calling thread's index in the grid and a
/// count of the calls, through SplitMix64; all of `bytes`, always. Not a cryptographic source: it makes std's
/// `RandomState` keys differ between threads and runs, which is what std asks of it on a GPU with no other one.
pub fn read_entropy<G: Gpu>(bytes: &mut [u8]) -> isize {
    let (thread, _) = thread_in_grid::<G>();
    let call = ENTROPY_CALLS.fetch_add(1, Ordering::Relaxed);
    let mut state = G::nanoseconds() ^ thread.rotate_left(32) ^ call.wrapping_mul(0xd1b5_4a32_d192_ed03);
    for chunk in bytes.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_ne_bytes()[..chunk.len()]);
    }
    bytes.len() as isize
}

/// The calling GPU thread's index in the grid and the grid's thread count (saturating: host threads, which stand in
/// for GPU threads in the host tests, report a grid of `u32::MAX` blocks in each dimension).
pub fn thread_in_grid<G: Gpu>() -> (u64, u64) {
    let ids = G::thread_ids();
    let shape = G::launch_shape();
    let [bx, by, bz] = ids.block.map(u64::from);
    let [nx, ny, nz] = shape.blocks.map(u64::from);
    let block = bx.saturating_add(nx.saturating_mul(by.saturating_add(ny.saturating_mul(bz))));
    let per_block = u64::from(shape.threads_per_block());
    let thread = block.saturating_mul(per_block).saturating_add(u64::from(shape.linear_thread_in_block(ids.thread)));
    (thread, nx.saturating_mul(ny).saturating_mul(nz).saturating_mul(per_block))
}

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
                Some(time) => $crate::runtime::std_os::clock_gettime::<$gpu>(clock, time),
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
    };
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::gpu::HostThread;

    #[test]
    fn the_monotonic_clock_reads_the_gpus_and_the_real_time_clock_is_refused() {
        let mut time = Timespec { seconds: -1, nanoseconds: -1 };
        assert_eq!(clock_gettime::<HostThread>(CLOCK_MONOTONIC, &mut time), 0);
        assert!(time.seconds >= 0 && (0..1_000_000_000).contains(&time.nanoseconds));
        assert_eq!(clock_gettime::<HostThread>(CLOCK_REALTIME, &mut time), -errno::EINVAL);
        let start = HostThread::nanoseconds();
        usleep::<HostThread>(2000);
        assert!(HostThread::nanoseconds() - start >= 2_000_000);
    }

    #[test]
    fn entropy_fills_every_byte_and_differs_between_calls() {
        let (mut first, mut second) = ([0u8; 13], [0u8; 13]);
        assert_eq!(read_entropy::<HostThread>(&mut first), 13);
        assert_eq!(read_entropy::<HostThread>(&mut second), 13);
        assert_ne!(first, second);
        assert_ne!(first, [0; 13]);
    }

    #[test]
    fn a_futex_wait_returns_at_once_when_the_word_changed_and_times_out() {
        let word = AtomicU32::new(5);
        // SAFETY: a live word and timespec.
        unsafe {
            assert_eq!(futex_wait::<HostThread>(word.as_ptr(), 4, core::ptr::null()), -errno::EAGAIN);
            let zero = Timespec { seconds: 0, nanoseconds: 0 };
            assert_eq!(futex_wait::<HostThread>(word.as_ptr(), 5, &zero), -errno::ETIMEDOUT);
            assert_eq!(futex_wait::<HostThread>(core::ptr::null_mut(), 5, core::ptr::null()), -errno::EINVAL);
        }
        assert_eq!(futex_wake(word.as_ptr(), 1), 0);
        assert_eq!(futex_wake(word.as_ptr(), -1), -errno::EINVAL);
    }
}
