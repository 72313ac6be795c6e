//! The few facts about the processor that the shared runtime cannot know by itself.
//!
//! `startup-nvptx` and `startup-amdgpu` implement [`Gpu`] with their intrinsics; [`HostThread`] implements it for
//! ordinary host threads so that every piece of logic in this crate is tested on the host, including the RPC
//! protocol with many real threads acting as clients.

pub use gpu_startup_protocol::abi::ThreadIds;

/// The operation of [`Gpu::device_rmw`]: `word = word + operand` (wrapping; a subtraction adds the two's
/// complement), `word | operand` or `word & operand`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceRmw {
    Add,
    Or,
    And,
}

/// The processor a runtime instance runs on.
///
/// A *lane group* is the set of lanes of one warp (NVIDIA, 32 lanes) or wavefront (AMD, 64 lanes) that execute an
/// operation together: the lanes in [`Gpu::lane_mask`] at that point of the program. On NVIDIA, independent thread
/// scheduling lets the lanes of one warp diverge into several groups that make progress independently.
///
/// # Safety
/// The lane operations must behave as documented for every group that calls them together: `broadcast_first` and
/// `ballot` must return the same value in every lane of `mask`, and `sync_lanes` must not return in any lane of
/// `mask` until all have reached it. The RPC protocol relies on this for mutual exclusion.
pub unsafe trait Gpu: 'static {
    /// Lanes per warp or wavefront; at most 64 (lane masks are `u64`).
    const LANE_SIZE: u32;

    /// Whether a lane may wait for another lane of its own warp: true where diverged lanes make progress
    /// independently (NVIDIA's independent thread scheduling). Without it (an AMD wavefront runs one path at a time)
    /// a lane that spins until another lane of its wavefront acts waits for ever, since that lane runs only once the
    /// spinning ones leave the loop.
    const INDEPENDENT_LANES: bool = false;

    /// This lane's index within its warp or wavefront, below [`Gpu::LANE_SIZE`].
    fn lane_id() -> u32;

    /// The lanes executing this call together, the caller included.
    fn lane_mask() -> u64;

    /// The value `value` has in the lowest lane of `mask`, returned to every lane of `mask`.
    fn broadcast_first(mask: u64, value: u32) -> u32;

    /// The lanes of `mask` for which `predicate` is true.
    fn ballot(mask: u64, predicate: bool) -> u64;

    /// Waits until every lane of `mask` has arrived, and orders their memory accesses around that point.
    fn sync_lanes(mask: u64);

    /// Lets other work run while polling memory written by another agent.
    fn sleep_briefly();

    /// Sets `bits` in `word` and returns its old value, ordered as an acquire among this device's threads (not with
    /// the host): how a lock that only device threads take is entered. A target overrides the default,
    /// `fetch_or(bits, Acquire)`, with a device-scope atomic where that is cheaper, or where its compiler does not
    /// honour the ordering.
    #[inline(always)]
    fn lock_fetch_or(word: &crate::sync::AtomicU32, bits: u32) -> u32 {
        word.fetch_or(bits, core::sync::atomic::Ordering::Acquire)
    }

    /// Replaces `word` with `value`, ordered as a release among this device's threads: how such a lock is left. The
    /// default swaps rather than stores: with a plain store the loom models of the RPC locks exceed loom's branch
    /// limit (the waiters' `fetch_or`s on the word), though the protocol needs only a release write.
    #[inline(always)]
    fn unlock_swap(word: &crate::sync::AtomicU32, value: u32) {
        word.swap(value, core::sync::atomic::Ordering::Release);
    }

    /// An atomic read-modify-write of a word that only this device's threads use (the heap's metadata), ordered by
    /// `order` among them; returns the old value. `Ordering::SeqCst` is not supported: no caller needs it. A target
    /// overrides the default, the language's operation (ordered at system scope), where its compiler does not honour
    /// the ordering or a device-scope atomic is cheaper.
    #[inline(always)]
    fn device_rmw(
        word: &crate::sync::AtomicU64,
        op: DeviceRmw,
        operand: u64,
        order: core::sync::atomic::Ordering,
    ) -> u64 {
        match op {
            DeviceRmw::Add => word.fetch_add(operand, order),
            DeviceRmw::Or => word.fetch_or(operand, order),
            DeviceRmw::And => word.fetch_and(operand, order),
        }
    }

    /// An atomic load of a word that only this device's threads use, ordered by `order` (`Relaxed` or `Acquire`)
    /// among them: [`Gpu::device_rmw`]'s load. The default is the language's load, which orders at system scope.
    #[inline(always)]
    fn device_load(word: &crate::sync::AtomicU64, order: core::sync::atomic::Ordering) -> u64 {
        word.load(order)
    }

    /// Where the calling thread sits in the grid.
    fn thread_ids() -> ThreadIds;

    /// The shape of the running kernel's launch: threads per block and blocks, in three dimensions each.
    fn launch_shape() -> crate::abi::LaunchParams;

    /// The memory the threads of the calling block share during this kernel, [`crate::abi::block_memory_bytes`] of
    /// it (the loader provides it with every launch), or `None` where the target has no such memory (host threads).
    /// The RPC client keeps per-group port locks there; its content is undefined when a kernel starts, until every
    /// thread of the block has called
    /// [`Client::prepare_block`](crate::rpc::Client::prepare_block).
    fn block_memory() -> Option<core::ptr::NonNull<crate::BlockMemory>>;

    /// Waits until every thread of the calling block has arrived, and orders their accesses to the block's words
    /// around that point. Every thread of the block must call it, from the same place.
    fn sync_block();

    /// Like [`Gpu::lock_fetch_or`], for a lock among the threads of one block: `word` is one of
    /// a word of [`Gpu::block_memory`], and the acquire need only order among the block's threads.
    #[inline(always)]
    fn block_lock_fetch_or(word: &crate::sync::AtomicU32, bits: u32) -> u32 {
        word.fetch_or(bits, core::sync::atomic::Ordering::Acquire)
    }

    /// Like [`Gpu::unlock_swap`], for a lock among the threads of one block: `word` is one of
    /// a word of [`Gpu::block_memory`], and the release need only order among the block's threads. An atomic
    /// read-modify-write, never a plain store, where lanes of one warp may take the lock: see [`Gpu::block_swap`].
    #[inline(always)]
    fn block_unlock_swap(word: &crate::sync::AtomicU32, value: u32) {
        word.swap(value, core::sync::atomic::Ordering::Release);
    }

    /// Replaces a word of [`Gpu::block_memory`] with `value`, relaxed, and returns its old value. For words that
    /// diverged lane groups of one warp share (a port lock's holder): they cannot meet at a warp barrier, one may wait
    /// for the other, so nothing but atomic operations may order what they exchange; and only an atomic
    /// read-modify-write, not a load or store of any ordering, is what NVIDIA's racecheck takes for one.
    #[inline(always)]
    fn block_swap(word: &crate::sync::AtomicU64, value: u64) -> u64 {
        word.swap(value, core::sync::atomic::Ordering::Relaxed)
    }

    /// Reads a word of [`Gpu::block_memory`], relaxed, as an atomic read-modify-write that changes nothing: the read
    /// of [`Gpu::block_swap`]'s words, for the same reason.
    #[inline(always)]
    fn block_read(word: &crate::sync::AtomicU64) -> u64 {
        word.fetch_or(0, core::sync::atomic::Ordering::Relaxed)
    }

    /// A clock in nanoseconds, the same for every thread of the device, for measuring on the device.
    fn nanoseconds() -> u64;

    /// Ends the calling thread; the rest of the grid runs on.
    fn end_thread() -> !;

    /// Stops the whole kernel abnormally; the host sees a device fault.
    fn trap() -> !;
}

/// Nanoseconds since the process first asked: the host's stand-in for a device clock.
#[cfg(any(test, feature = "host-threads"))]
pub fn host_nanoseconds() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

/// One host thread as a lane group of one: every operation is trivial, so the shared logic runs unchanged on the
/// host, under Miri and under loom.
#[cfg(any(test, feature = "host-threads"))]
pub struct HostThread;

// SAFETY: with one lane per group, every lane operation is trivially uniform across the group.
#[cfg(any(test, feature = "host-threads"))]
unsafe impl Gpu for HostThread {
    const LANE_SIZE: u32 = 1;

    fn lane_id() -> u32 {
        0
    }

    fn lane_mask() -> u64 {
        1
    }

    fn broadcast_first(_mask: u64, value: u32) -> u32 {
        value
    }

    fn ballot(mask: u64, predicate: bool) -> u64 {
        if predicate { mask } else { 0 }
    }

    fn sync_lanes(_mask: u64) {}

    fn sleep_briefly() {
        #[cfg(loom)]
        loom::thread::yield_now();
        #[cfg(not(loom))]
        std::thread::yield_now();
    }

    /// Each host thread gets its own x coordinate, so that per-thread bookkeeping (the server reassembles each
    /// thread's output by its coordinates) tells host threads apart as it tells GPU threads apart.
    fn thread_ids() -> ThreadIds {
        #[cfg(not(loom))]
        {
            use core::sync::atomic::{AtomicU32, Ordering};
            static NEXT: AtomicU32 = AtomicU32::new(0);
            std::thread_local! {
                static ID: u32 = NEXT.fetch_add(1, Ordering::Relaxed);
            }
            ThreadIds { thread: [ID.with(|id| *id), 0, 0], block: [0; 3] }
        }
        #[cfg(loom)]
        ThreadIds::default()
    }

    /// Each host thread is a block of its own (see [`HostThread::block_memory`]), in a grid too large for the
    /// client to give groups ports of their own: host tests with this type exercise the shared, locked ports.
    fn launch_shape() -> crate::abi::LaunchParams {
        crate::abi::LaunchParams { threads: [1, 1, 1], blocks: [u32::MAX, u32::MAX, u32::MAX] }
    }

    /// None: host threads share no block memory, so the client locks every port in its own memory.
    fn block_memory() -> Option<core::ptr::NonNull<crate::BlockMemory>> {
        None
    }

    /// A block of one thread has no one to wait for.
    fn sync_block() {}

    fn nanoseconds() -> u64 {
        host_nanoseconds()
    }

    fn end_thread() -> ! {
        // A host thread that "ends" inside a test must not unwind through the caller's stack frames, which still
        // believe they own locks; parking forever is the closest host equivalent of a GPU thread's `exit`.
        loop {
            std::thread::park();
        }
    }

    fn trap() -> ! {
        std::process::abort()
    }
}
