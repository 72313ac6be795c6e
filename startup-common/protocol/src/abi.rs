//! The kernel ABI between `gpu-loader` and the startup: the three kernels ([`Kernel`]), the one argument each takes,
//! and the names the loader looks up. The loader uses these very types to build the arguments, so the two sides
//! cannot drift apart.
//! `docs/abi.md` describes the whole contract.
//!
//! Every kernel takes exactly one parameter, one of the structs below, passed by value: a `.param` aggregate on
//! NVIDIA, the start of the kernarg segment on AMD. Pointers are device addresses (64-bit on both targets).

use core::ffi::{c_char, c_int, c_void};

/// The three kernels of the startup: the one list of their names and arguments, which the loader's launches, its
/// image checks (PTX, cubin and AMD metadata) and the nvptx linker's export list all read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `_begin`: runs the constructors, on one thread; takes [`BeginArgs`].
    Begin,
    /// `_start`: runs `main` (or a test) on the user's grid; takes [`StartArgs`].
    Start,
    /// `_end`: runs the exit sequence, on one thread; takes [`EndArgs`].
    End,
}

impl Kernel {
    /// The three kernels, in launch order.
    pub const ALL: [Kernel; 3] = [Kernel::Begin, Kernel::Start, Kernel::End];

    /// The kernel's symbol (on AMD its descriptor is this name with `.kd` appended).
    pub const fn name(self) -> &'static str {
        match self {
            Kernel::Begin => "_begin",
            Kernel::Start => "_start",
            Kernel::End => "_end",
        }
    }

    /// Bytes of the kernel's one parameter: the size of its argument struct.
    pub const fn arg_size(self) -> usize {
        match self {
            Kernel::Begin => size_of::<BeginArgs>(),
            Kernel::Start => size_of::<StartArgs>(),
            Kernel::End => size_of::<EndArgs>(),
        }
    }

    /// The kernel's place in launch order (0 to 2), for tables of one entry per kernel.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// The user's entry point: `int main(int argc, char **argv, char **envp)`.
pub const MAIN_SYMBOL: &str = "main";

/// NVIDIA has no linker-provided array bounds: the loader builds the arrays from the `__init_array_object_*` and
/// `__fini_array_object_*` globals (LLVM's NVPTX scheme, `<prefix><name>_<priority>`) and stores their bounds in
/// these four globals before launching `_begin`.
pub const INIT_ARRAY_START: &str = "__init_array_start";
pub const INIT_ARRAY_END: &str = "__init_array_end";
pub const FINI_ARRAY_START: &str = "__fini_array_start";
pub const FINI_ARRAY_END: &str = "__fini_array_end";
pub const INIT_OBJECT_PREFIX: &str = "__init_array_object_";
pub const FINI_OBJECT_PREFIX: &str = "__fini_array_object_";

/// A global that an image defines when its `_start` and `_end` first wait for the kernel before them to end, and
/// `_begin` and `_start` let the next kernel launch early: the loader may then queue the three with programmatic
/// dependent launch (NVIDIA, sm_90 and later; `docs/abi.md`), so that each kernel's launch overlaps the work of the
/// one before. Without it, each kernel starts only once the one before has ended.
pub const EARLY_LAUNCH_MARKER: &str = "__gpu_startup_early_launch";

/// A global that the bitcode linker adds to a std program that links libtest (a `cargo test` binary of `#[test]`s):
/// the loader then plays libtest's parent, running each test in a run of its own (`docs/testing-your-code.md`).
pub const LIBTEST_MARKER: &str = "__gpu_startup_libtest";

/// Progress markers the startup writes into [`Control::progress`], so that the host can name the kernel that
/// faulted without synchronising between launches.
pub mod progress {
    /// Nothing has run yet.
    pub const NOT_STARTED: u32 = 0;
    /// `_begin` finished: constructors ran.
    pub const BEGIN_DONE: u32 = 1;
    /// `_end` started: `main` returned on every thread.
    pub const END_STARTED: u32 = 2;
}

/// Coordinates of the calling thread, used in messages such as the panic report and in the key of a write
/// ([`WriteHead`](crate::messages::WriteHead)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadIds {
    pub thread: [u32; 3],
    pub block: [u32; 3],
}

/// A constructor: called once, before `main`, with `main`'s arguments. PTX calls through a function pointer only with
/// the exact prototype of the callee, so every constructor has this one signature, on both targets.
pub type InitCallback = unsafe extern "C" fn(argc: c_int, argv: *mut *mut c_char, envp: *mut *mut c_char);
/// A destructor or `atexit` handler.
pub type FiniCallback = unsafe extern "C" fn();
/// The user's `main`, as C declares it; a test's trampoline has the same prototype, so that `_start` calls either
/// through the same pointer type.
pub type MainFn = unsafe extern "C" fn(argc: c_int, argv: *mut *mut c_char, envp: *mut *mut c_char) -> c_int;

/// Host-visible state the kernels write for the loader. It lives in host-pinned memory mapped into the device.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Control {
    /// One of the [`progress`] markers.
    pub progress: u32,
    /// How many threads panicked in this run: exact once `_end` started, a lower bound before (panicking threads
    /// count on the device and store their count here, possibly out of order).
    pub panicked_threads: u32,
    /// 1 once every constructor returned; stays 0 when one panicked or called `exit`. Apart from `progress`, which
    /// `_end` moves on regardless: a test harness must tell "the test failed" from "the test never ran".
    pub constructed: u32,
    /// Zero; keeps `end` at its alignment.
    pub reserved: u32,
    /// How the program ended ([`ProgramEnd::to_word`]): zero while it runs. Written once, by `exit`, `abort` or
    /// `_end`, with one 64-bit store, which the loader watches between its passes over the RPC ports.
    pub end: u64,
}

/// The exit code of a program whose thread panicked, as for a Rust program on the host: the startup ends it with
/// this status, and the loader tells a panic's end from others by it.
pub const PANIC_EXIT_CODE: c_int = 101;

/// How a program ended, as the startup reports it in [`Control::end`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramEnd {
    /// `exit` (or `main`'s combined result, or a panic's 101) with this status.
    Exit(c_int),
    /// `abort`.
    Abort,
}

impl ProgramEnd {
    /// The word's high half says which end, the low half holds the status: one store writes both, so the host
    /// never sees the one without the other.
    const EXIT: u64 = 1 << 32;
    const ABORT: u64 = 2 << 32;

    /// The word the startup writes into [`Control::end`]; never zero.
    pub const fn to_word(self) -> u64 {
        match self {
            ProgramEnd::Exit(status) => Self::EXIT | status as u32 as u64,
            ProgramEnd::Abort => Self::ABORT,
        }
    }

    /// Reads a [`Control::end`] word: `Ok(None)` while the program runs, `Err(word)` for a word the startup never
    /// writes (the program wrote over its control block).
    pub const fn from_word(word: u64) -> Result<Option<Self>, u64> {
        match word {
            0 => Ok(None),
            Self::ABORT => Ok(Some(ProgramEnd::Abort)),
            _ if word >> 32 == Self::EXIT >> 32 => Ok(Some(ProgramEnd::Exit(word as u32 as c_int))),
            _ => Err(word),
        }
    }

    /// Reports this end to the host: writes its word into `control.end`.
    ///
    /// # Safety
    /// `control` must be null (nothing is written) or the loader's control block, which lives as long as the program.
    pub unsafe fn report(self, control: *mut Control) {
        if control.is_null() {
            return;
        }
        // SAFETY: the loader's control block (the caller's contract), 8-byte aligned as `Control` is; the host reads
        // the word with atomic loads.
        let word = unsafe { core::sync::atomic::AtomicU64::from_ptr(core::ptr::addr_of_mut!((*control).end)) };
        // Relaxed: the host needs only the word itself, and sees it within microseconds; what the program printed
        // before was acknowledged, and what other threads still send, the host serves after it saw the end.
        word.store(self.to_word(), core::sync::atomic::Ordering::Relaxed);
    }
}

/// The argument of `_begin`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BeginArgs {
    pub argc: c_int,
    /// How many ports the RPC region holds.
    pub rpc_port_count: u32,
    pub argv: *mut *mut c_char,
    pub envp: *mut *mut c_char,
    /// The RPC region in host-pinned, device-mapped memory (layout: [`Layout`](crate::region::Layout)), as the device addresses it.
    pub rpc_region: *mut c_void,
    /// Where the startup reports its progress.
    pub control: *mut Control,
    /// The device heap's pool (`gpu-loader --heap-size`), device memory that only the heap uses; null for none.
    pub heap: *mut c_void,
    /// Bytes of the pool.
    pub heap_size: u64,
}

/// The argument of `_start`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StartArgs {
    pub argc: c_int,
    /// Zero; keeps the struct free of padding.
    pub reserved: u32,
    pub argv: *mut *mut c_char,
    pub envp: *mut *mut c_char,
    /// Device memory, zeroed by the loader, into which every thread ORs the value its `main` returned.
    pub result: *mut c_int,
    /// What every thread calls: null for `main`, or a test binary's `__gpu_test_entry_*` global (see
    /// `startup_common::rust::test_table`), which holds the test's trampoline.
    pub test: *const MainFn,
}

/// The argument of `_end`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EndArgs {
    /// The same word `_start` ORed into; `_end` reads it, so the loader can queue all three kernels at once, and
    /// zeroes it, so the next run of the loaded program starts from zero without a copy from the host.
    pub result: *mut c_int,
}

/// A kernel argument as the bytes the driver copies: the structs have no padding, so every byte is initialised.
///
/// # Safety
/// Implementors must be `repr(C)` with no padding bytes.
pub unsafe trait KernelArgs: Copy {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: the implementor has no padding (trait contract), so all `size_of::<Self>()` bytes are initialised.
        unsafe { core::slice::from_raw_parts((self as *const Self).cast::<u8>(), size_of::<Self>()) }
    }
}

// SAFETY: each field is 4 or 8 bytes, ordered so that every field sits at its alignment with no gap or tail; the
// layout test below checks the sizes.
unsafe impl KernelArgs for BeginArgs {}
// SAFETY: as above.
unsafe impl KernelArgs for StartArgs {}
// SAFETY: a single pointer.
unsafe impl KernelArgs for EndArgs {}

/// Launch dimensions, as the user gave them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchParams {
    pub threads: [u32; 3],
    pub blocks: [u32; 3],
}

impl LaunchParams {
    /// One thread in one block, as `_begin` and `_end` run.
    pub const SINGLE: Self = Self { threads: [1, 1, 1], blocks: [1, 1, 1] };

    /// Threads in the whole grid.
    pub fn total_threads(&self) -> u64 {
        self.threads.iter().chain(&self.blocks).map(|&n| u64::from(n)).product()
    }

    /// Threads in one block (at most 1024 on both targets).
    pub fn threads_per_block(&self) -> u32 {
        self.threads.iter().fold(1u32, |n, &d| n.saturating_mul(d))
    }

    /// Warps or wavefronts of `lane_size` lanes in one block: its threads in order of their linear index (x fastest),
    /// `lane_size` to a group, the last one possibly partial.
    pub fn lane_groups_per_block(&self, lane_size: u32) -> u32 {
        self.threads_per_block().div_ceil(lane_size)
    }

    /// Blocks in the grid.
    pub fn blocks_in_grid(&self) -> u64 {
        self.blocks.iter().map(|&n| u64::from(n)).product()
    }

    /// The linear index, x fastest, of the thread at `thread` within its block.
    pub fn linear_thread_in_block(&self, thread: [u32; 3]) -> u32 {
        let [tx, ty, tz] = thread;
        let [nx, ny, _] = self.threads;
        tx + nx * (ty + ny * tz)
    }
}

/// Bytes of block memory before the lane groups' part ([`block_memory_bytes`]).
pub const BLOCK_MEMORY_HEADER: u32 = 16;

/// Bytes of block memory per lane group ([`block_memory_bytes`]).
pub const BLOCK_MEMORY_PER_GROUP: u32 = 16;

/// Bytes of block memory per thread of a block, after the lane groups' part ([`block_memory_bytes`]): the thread's
/// C `errno` (`startup_common::libc::errno`).
pub const BLOCK_MEMORY_PER_THREAD: u32 = 4;

/// Bytes of launch-sized block memory ("dynamic shared memory", 8-byte aligned) the loader requests with every launch
/// of the three kernels, for `params` on a target with `lane_size` lanes per warp or wavefront: 16 bytes where the RPC
/// client keeps a copy of its setup, then 16 bytes per lane group of a block, where it keeps the group's port and that
/// port's lock (`docs/rpc.md`), then 4 bytes per thread of the block, its `errno`. The startup reaches it through
/// `Gpu::block_memory` (`startup_common::Gpu`).
pub fn block_memory_bytes(params: &LaunchParams, lane_size: u32) -> u32 {
    block_memory_thread_part(params, lane_size) + params.threads_per_block() * BLOCK_MEMORY_PER_THREAD
}

/// Where the per-thread part of block memory starts: after the RPC client's header and lane groups.
pub fn block_memory_thread_part(params: &LaunchParams, lane_size: u32) -> u32 {
    BLOCK_MEMORY_HEADER + params.lane_groups_per_block(lane_size) * BLOCK_MEMORY_PER_GROUP
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    /// The layout is the ABI: `docs/abi.md` gives these offsets, and the static image check compares them with the
    /// parameter sizes in the PTX.
    #[test]
    fn layouts_match_the_documented_abi() {
        // No padding anywhere: the size is the sum of the fields (`KernelArgs` relies on it).
        assert_eq!(size_of::<BeginArgs>(), 4 + 4 + 8 * 6);
        assert_eq!(offset_of!(BeginArgs, rpc_port_count), 4);
        assert_eq!(offset_of!(BeginArgs, argv), 8);
        assert_eq!(offset_of!(BeginArgs, rpc_region), 24);
        assert_eq!(offset_of!(BeginArgs, control), 32);
        assert_eq!(offset_of!(BeginArgs, heap), 40);
        assert_eq!(offset_of!(BeginArgs, heap_size), 48);
        assert_eq!(size_of::<StartArgs>(), 4 + 4 + 8 * 4);
        assert_eq!(offset_of!(StartArgs, argv), 8);
        assert_eq!(offset_of!(StartArgs, result), 24);
        assert_eq!(offset_of!(StartArgs, test), 32);
        assert_eq!(size_of::<Control>(), 24);
        assert_eq!(offset_of!(Control, panicked_threads), 4);
        assert_eq!(offset_of!(Control, constructed), 8);
        assert_eq!(offset_of!(Control, end), 16);
        assert_eq!(size_of::<EndArgs>(), 8);
        for align in [align_of::<BeginArgs>(), align_of::<StartArgs>(), align_of::<EndArgs>()] {
            assert_eq!(align, 8);
        }
    }

    /// Every end survives its word, statuses of all 32 bits included, and no end is the word of a running program.
    #[test]
    fn program_ends_round_trip_through_their_word() {
        for end in [ProgramEnd::Exit(0), ProgramEnd::Exit(-1), ProgramEnd::Exit(c_int::MIN), ProgramEnd::Abort] {
            assert_ne!(end.to_word(), 0);
            assert_eq!(ProgramEnd::from_word(end.to_word()), Ok(Some(end)));
        }
        assert_eq!(ProgramEnd::from_word(0), Ok(None));
        for corrupt in [1, 3 << 32, u64::MAX, (2 << 32) | 7] {
            assert_eq!(ProgramEnd::from_word(corrupt), Err(corrupt));
        }
    }

    /// `report` writes the word, and nothing through a null control block.
    #[test]
    fn an_end_is_reported_in_the_control_block() {
        let mut control = Control::default();
        // SAFETY: a live control block, and null.
        unsafe {
            ProgramEnd::Exit(7).report(&mut control);
            ProgramEnd::Abort.report(core::ptr::null_mut());
        }
        assert_eq!(ProgramEnd::from_word(control.end), Ok(Some(ProgramEnd::Exit(7))));
    }

    /// The kernel list gives the names the target crates spell and the sizes of the structs above, in launch order.
    #[test]
    fn the_kernel_list_names_each_kernel_and_its_argument() {
        let list = Kernel::ALL.map(|kernel| (kernel.name(), kernel.arg_size(), kernel.index()));
        assert_eq!(list, [("_begin", 56, 0), ("_start", 40, 1), ("_end", 8, 2)]);
    }

    #[test]
    fn total_threads_multiplies_all_six_dimensions() {
        let params = LaunchParams { threads: [4, 4, 4], blocks: [2, 2, 2] };
        assert_eq!(params.total_threads(), 512);
        assert_eq!(LaunchParams::SINGLE.total_threads(), 1);
        assert_eq!((params.threads_per_block(), params.blocks_in_grid()), (64, 8));
    }

    #[test]
    fn block_memory_holds_a_lock_per_lane_group_and_a_word_per_thread() {
        let block = |x, y| LaunchParams { threads: [x, y, 1], blocks: [3, 1, 1] };
        assert_eq!(block_memory_bytes(&block(1, 1), 32), 16 + 16 + 4);
        assert_eq!(block_memory_bytes(&block(32, 1), 32), 16 + 16 + 128);
        assert_eq!(block_memory_bytes(&block(33, 1), 32), 16 + 32 + 132);
        assert_eq!(block_memory_bytes(&block(16, 64), 32), 16 + 512 + 4096);
        assert_eq!(block_memory_bytes(&block(1024, 1), 64), 16 + 256 + 4096);
        assert_eq!(block_memory_thread_part(&block(16, 64), 32), 16 + 512);
    }

    #[test]
    fn threads_are_numbered_x_fastest_within_their_block() {
        let params = LaunchParams { threads: [4, 3, 2], blocks: [5, 1, 1] };
        assert_eq!(params.linear_thread_in_block([0, 0, 0]), 0);
        assert_eq!(params.linear_thread_in_block([3, 0, 0]), 3);
        assert_eq!(params.linear_thread_in_block([0, 1, 0]), 4);
        assert_eq!(params.linear_thread_in_block([3, 2, 1]), 23);
    }
}
