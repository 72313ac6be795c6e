//! The operating system Rust's std runs on, on the GPU: the functions of Hermit's ABI that std's Hermit layer calls
//! (`docs/std.md`), over this runtime: output through the RPC channel, the device heap, waits that poll, and each
//! GPU thread's thread-locals. `target_runtime!` exports them as C functions in a program built for the std target
//! (`target_os = "hermit"`).

use core::ffi::c_int;
use core::sync::atomic::{AtomicI64, AtomicU32, Ordering};

use gpu_startup_protocol::messages::RealtimeReply;
use gpu_startup_protocol::opcode;

use crate::gpu::Gpu;
// Hermit's error numbers, which these functions return negated, are Linux's, as the contract's are.
use crate::libc::errno;
use crate::rpc::Client;
use crate::runtime::coordinates::Coordinates;

mod exports;
mod files;
mod thread_locals;
mod unsupported;

pub use files::{
    IoVec, Stat, close, current_directory, make_directory, open, read, read_directory, read_vectored, remove_directory,
    seek, stat_open, stat_path, unlink, write, write_vectored,
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

/// The host's real time less the GPU's nanosecond clock, asked of the host at the first `CLOCK_REALTIME` read of the
/// process (the GPU's clock runs on between runs and tests, as the host's does); `i64::MIN` until then.
static REALTIME_OFFSET: AtomicI64 = AtomicI64::new(i64::MIN);

/// `sys_clock_gettime`: `CLOCK_MONOTONIC` (`Instant`) from the GPU's nanosecond clock; `CLOCK_REALTIME`
/// (`SystemTime::now`) from the same clock plus its offset from the host's real time, which one host call measures
/// (within half its round trip) the first time; `-EINVAL` for any other clock.
pub fn clock_gettime<G: Gpu>(client: &Client<G>, clock: i32, time: &mut Timespec) -> i32 {
    let now = match clock {
        CLOCK_MONOTONIC => G::nanoseconds() as i64,
        CLOCK_REALTIME => match realtime_offset(client) {
            Ok(offset) => (G::nanoseconds() as i64).wrapping_add(offset),
            Err(error) => return -error,
        },
        _ => return -errno::EINVAL,
    };
    *time = Timespec { seconds: now.div_euclid(1_000_000_000), nanoseconds: now.rem_euclid(1_000_000_000) as i32 };
    0
}

/// [`REALTIME_OFFSET`], measured now if it was not yet.
fn realtime_offset<G: Gpu>(client: &Client<G>) -> Result<i64, c_int> {
    let known = REALTIME_OFFSET.load(Ordering::Relaxed);
    if known != i64::MIN {
        return Ok(known);
    }
    if !client.is_ready() {
        return Err(errno::ENOSYS);
    }
    let before = G::nanoseconds();
    let mut port = client.open(opcode::CLOCK_REALTIME);
    port.send(|_| {});
    let mut words = [0; 1];
    port.recv(|packet| words = packet.get_words());
    port.close();
    let after = G::nanoseconds();
    // The host read its clock between the two reads of the GPU's: its middle is the best guess of when.
    let middle = before + (after - before) / 2;
    let offset = RealtimeReply::decode(words).nanoseconds.wrapping_sub(middle as i64);
    // The first measurement stays: a thread that read the clock with one offset and then with another would see
    // real time move by their difference (microseconds), even backwards. i64::MIN itself would be measured again.
    match REALTIME_OFFSET.compare_exchange(i64::MIN, offset, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => Ok(offset),
        Err(first) => Ok(first),
    }
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

/// `__gpu_startup_thread_name` (for `loader/setup/std-patches/0006-gpu-threads-named-and-ended.patch`): std's name
/// for the calling thread, its coordinates as the runtime's messages give them (`thread (x, y, z) of block (x, y,
/// z)`), written into `name`; the length written, cut to `name`'s length (the text is ASCII).
pub fn thread_name<G: Gpu>(name: &mut [u8]) -> usize {
    /// Writes into a slice, keeping what fits.
    struct Cut<'a> {
        bytes: &'a mut [u8],
        length: usize,
    }
    impl core::fmt::Write for Cut<'_> {
        fn write_str(&mut self, text: &str) -> core::fmt::Result {
            let room = &mut self.bytes[self.length..];
            let taken = text.len().min(room.len());
            room[..taken].copy_from_slice(&text.as_bytes()[..taken]);
            self.length += taken;
            Ok(())
        }
    }
    let mut cut = Cut { bytes: name, length: 0 };
    let _ = core::fmt::Write::write_fmt(&mut cut, format_args!("{}", Coordinates(G::thread_ids())));
    cut.length
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::gpu::HostThread;

    #[test]
    fn the_monotonic_clock_reads_the_gpus_and_other_clocks_are_refused() {
        let client = Client::<HostThread>::new();
        let mut time = Timespec { seconds: -1, nanoseconds: -1 };
        assert_eq!(clock_gettime(&client, CLOCK_MONOTONIC, &mut time), 0);
        assert!(time.seconds >= 0 && (0..1_000_000_000).contains(&time.nanoseconds));
        assert_eq!(clock_gettime(&client, 2, &mut time), -errno::EINVAL);
        let start = HostThread::nanoseconds();
        usleep::<HostThread>(2000);
        assert!(HostThread::nanoseconds() - start >= 2_000_000);
    }

    #[test]
    fn a_threads_name_is_its_coordinates_cut_to_the_room_given() {
        let mut name = [0u8; 96];
        let length = thread_name::<HostThread>(&mut name);
        let name = core::str::from_utf8(&name[..length]).unwrap();
        assert!(name.starts_with("thread (") && name.contains(") of block ("), "{name}");
        let mut short = [0u8; 9];
        assert_eq!(thread_name::<HostThread>(&mut short), 9);
        assert_eq!(&short[..], &name.as_bytes()[..9]);
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
