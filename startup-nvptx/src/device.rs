//! The NVIDIA startup itself, built for `nvptx64-nvidia-cuda` only: [`Nvptx`], the [`startup_common::Gpu`] of a
//! thread from inline PTX, the program's runtime (`target_runtime!`), the constructor and destructor arrays' bounds
//! and the kernels `_begin`, `_start` and `_end`.

use core::arch::asm;
use core::arch::nvptx;

use core::ptr::NonNull;

use core::sync::atomic::Ordering;
use startup_common::BlockMemory;
use startup_common::abi::{BeginArgs, EndArgs, LaunchParams, StartArgs};

use startup_common::gpu::DeviceRmw;
use startup_common::sync::{AtomicU32, AtomicU64};
use startup_common::{CallbackArrays, FiniCallback, Gpu, InitCallback, ThreadIds};

/// An NVIDIA GPU thread.
pub struct Nvptx;

/// Whether `mask` holds one lane (a thread that calls into the runtime alone). Its lane operations are then trivial,
/// and skipping them skips what ptxas puts before every `.sync` instruction whose mask it cannot know: a check that
/// the lanes of the mask are converged (`MATCH.ANY`, `REDUX.OR`, `VOTEU.ANY`, a branch), several per RPC message.
fn alone(mask: u64) -> bool {
    mask.is_power_of_two()
}

// SAFETY: every lane operation is the `.sync` form of its PTX instruction, which takes the participating lanes'
// mask explicitly and waits for them under independent thread scheduling (sm_70 and later, which we require); for a
// mask of one lane each returns what that lane alone would (its own value, its own vote) without the instruction.
unsafe impl Gpu for Nvptx {
    const LANE_SIZE: u32 = 32;
    const INDEPENDENT_LANES: bool = true;

    fn lane_id() -> u32 {
        let lane: u32;
        // SAFETY: reads a special register.
        unsafe { asm!("mov.u32 {}, %laneid;", out(reg32) lane, options(nomem, nostack, pure)) };
        lane
    }

    fn lane_mask() -> u64 {
        let mask: u32;
        // SAFETY: `activemask` only reads which lanes execute this instruction; not `pure`, since the answer
        // depends on where it runs.
        unsafe { asm!("activemask.b32 {};", out(reg32) mask, options(nomem, nostack)) };
        u64::from(mask)
    }

    fn broadcast_first(mask: u64, value: u32) -> u32 {
        if alone(mask) {
            return value;
        }
        let first = mask.trailing_zeros();
        let result: u32;
        // SAFETY: every lane of `mask` executes this shuffle together (the trait's contract) and reads a lane of
        // `mask`.
        unsafe {
            asm!("shfl.sync.idx.b32 {}, {}, {}, 31, {};", out(reg32) result, in(reg32) value, in(reg32) first,
                 in(reg32) mask as u32, options(nomem, nostack))
        };
        result
    }

    fn ballot(mask: u64, predicate: bool) -> u64 {
        if alone(mask) {
            return if predicate { mask } else { 0 };
        }
        let result: u32;
        // SAFETY: every lane of `mask` votes together (the trait's contract).
        unsafe {
            asm!("{{ .reg .pred p; setp.ne.u32 p, {}, 0; vote.sync.ballot.b32 {}, p, {}; }}",
                 in(reg32) u32::from(predicate), out(reg32) result, in(reg32) mask as u32, options(nomem, nostack))
        };
        u64::from(result)
    }

    fn sync_lanes(mask: u64) {
        if alone(mask) {
            // One lane is in step with itself, and program order orders its accesses; the compiler must still not
            // move them across this point: an empty asm that may touch memory. (`compiler_fence` would be a
            // single-thread fence, which this LLVM's NVPTX backend rejects.)
            // SAFETY: an empty instruction sequence.
            unsafe { asm!("", options(nostack)) };
            return;
        }
        // SAFETY: a warp barrier over the lanes of `mask`, which all reach it (the trait's contract); it also
        // orders their memory accesses.
        unsafe { asm!("bar.warp.sync {};", in(reg32) mask as u32, options(nostack)) };
    }

    fn sleep_briefly() {
        // SAFETY: `nanosleep` only delays this thread (sm_70 and later).
        unsafe { asm!("nanosleep.u32 64;", options(nomem, nostack)) };
    }

    fn lock_fetch_or(word: &AtomicU32, bits: u32) -> u32 {
        // Inline PTX for two reasons. The LLVM of our toolchain (22) drops the ordering of NVPTX `atomicrmw`:
        // `fetch_or(bits, Acquire)` becomes a relaxed `atom.or`. And the language's orderings are system scope, while
        // a lock among the GPU's own threads needs only GPU scope, where an acquire atomic costs about half of a
        // relaxed one followed by `fence.acq_rel.gpu` (`docs/performance.md`).
        let old: u32;
        // SAFETY: `word` is a live atomic; an atomic OR on it is what `fetch_or` does.
        unsafe {
            asm!("atom.acquire.gpu.or.b32 {}, [{}], {};", out(reg32) old, in(reg64) word.as_ptr(), in(reg32) bits,
                options(nostack));
        }
        old
    }

    fn unlock_swap(word: &AtomicU32, value: u32) {
        // A release store at GPU scope, for the reasons given in `lock_fetch_or`: the swap's old value is not needed.
        // SAFETY: `word` is a live atomic; an atomic store to it is what `swap` does, less the old value.
        unsafe { asm!("st.release.gpu.b32 [{}], {};", in(reg64) word.as_ptr(), in(reg32) value, options(nostack)) };
    }

    fn device_rmw(word: &AtomicU64, op: DeviceRmw, operand: u64, order: Ordering) -> u64 {
        // Inline PTX for the reasons given in `lock_fetch_or`: LLVM 22 would emit every ordering as a relaxed `atom`,
        // and the heap's words need only GPU scope.
        macro_rules! atom {
            ($instruction:literal) => {{
                let old: u64;
                // SAFETY: `word` is a live atomic; this is the atomic operation `device_rmw` names, with its ordering.
                unsafe {
                    asm!(concat!($instruction, " {}, [{}], {};"), out(reg64) old, in(reg64) word.as_ptr(),
                        in(reg64) operand, options(nostack));
                }
                old
            }};
        }
        match (op, order) {
            (DeviceRmw::Add, Ordering::Relaxed) => atom!("atom.relaxed.gpu.add.u64"),
            (DeviceRmw::Add, Ordering::Acquire) => atom!("atom.acquire.gpu.add.u64"),
            (DeviceRmw::Add, Ordering::Release) => atom!("atom.release.gpu.add.u64"),
            (DeviceRmw::Add, _) => atom!("atom.acq_rel.gpu.add.u64"),
            (DeviceRmw::Or, Ordering::Relaxed) => atom!("atom.relaxed.gpu.or.b64"),
            (DeviceRmw::Or, Ordering::Acquire) => atom!("atom.acquire.gpu.or.b64"),
            (DeviceRmw::Or, Ordering::Release) => atom!("atom.release.gpu.or.b64"),
            (DeviceRmw::Or, _) => atom!("atom.acq_rel.gpu.or.b64"),
            (DeviceRmw::And, Ordering::Relaxed) => atom!("atom.relaxed.gpu.and.b64"),
            (DeviceRmw::And, Ordering::Acquire) => atom!("atom.acquire.gpu.and.b64"),
            (DeviceRmw::And, Ordering::Release) => atom!("atom.release.gpu.and.b64"),
            (DeviceRmw::And, _) => atom!("atom.acq_rel.gpu.and.b64"),
        }
    }

    fn device_load(word: &AtomicU64, order: Ordering) -> u64 {
        // GPU scope, as `device_rmw`: a system-scope acquire costs more and orders nothing the heap needs.
        let value: u64;
        // SAFETY: `word` is a live atomic; this is an atomic load of it with the ordering asked for.
        unsafe {
            match order {
                Ordering::Relaxed => asm!("ld.relaxed.gpu.b64 {}, [{}];", out(reg64) value, in(reg64) word.as_ptr(),
                    options(nostack, readonly)),
                _ => asm!("ld.acquire.gpu.b64 {}, [{}];", out(reg64) value, in(reg64) word.as_ptr(),
                    options(nostack)),
            }
        }
        value
    }

    fn thread_ids() -> ThreadIds {
        // SAFETY: reading the special registers that hold the thread's coordinates has no preconditions.
        unsafe {
            ThreadIds {
                thread: [nvptx::_thread_idx_x(), nvptx::_thread_idx_y(), nvptx::_thread_idx_z()].map(|i| i as u32),
                block: [nvptx::_block_idx_x(), nvptx::_block_idx_y(), nvptx::_block_idx_z()].map(|i| i as u32),
            }
        }
    }

    fn launch_shape() -> LaunchParams {
        // SAFETY: reading the special registers that hold the launch's dimensions has no preconditions.
        unsafe {
            LaunchParams {
                threads: [nvptx::_block_dim_x(), nvptx::_block_dim_y(), nvptx::_block_dim_z()].map(|n| n as u32),
                blocks: [nvptx::_grid_dim_x(), nvptx::_grid_dim_y(), nvptx::_grid_dim_z()].map(|n| n as u32),
            }
        }
    }

    fn block_memory() -> Option<NonNull<BlockMemory>> {
        // The launch-sized shared memory (CUDA's dynamic shared memory): the loader asks for
        // `abi::block_memory_bytes` of it with every launch.
        NonNull::new(core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<BlockMemory>())
    }

    fn sync_block() {
        // SAFETY: a barrier of all the block's threads, which all reach it (the trait's contract); it orders their
        // shared-memory accesses. `barrier.sync` rather than `bar.sync`: the threads of a warp need not arrive
        // together.
        unsafe { asm!("barrier.sync 0;", options(nostack)) };
    }

    fn block_lock_fetch_or(word: &AtomicU32, bits: u32) -> u32 {
        // A block-scope acquire on the shared-memory word (see `lock_fetch_or` for why inline PTX): an atomic in the
        // SM, with no L1 invalidation, against a device-scope atomic at L2.
        let old: u32;
        // SAFETY: `word` lies in `block_memory` (the trait's contract), in this block's shared memory, so its generic
        // address converts to a shared one; an atomic OR on it is what `fetch_or` does.
        unsafe {
            asm!("{{ .reg .u64 a; cvta.to.shared.u64 a, {}; atom.acquire.cta.shared.or.b32 {}, [a], {}; }}",
                in(reg64) word.as_ptr(), out(reg32) old, in(reg32) bits, options(nostack));
        }
        old
    }

    fn block_unlock_swap(word: &AtomicU32, value: u32) {
        // An exchange rather than `st.release`: divergent groups of a warp hand this lock to each other, and
        // racecheck counts only atomic read-modify-writes as synchronised (`Gpu::block_swap`).
        // SAFETY: as in `block_lock_fetch_or`; an atomic exchange at block scope is what the swap does.
        unsafe {
            asm!("{{ .reg .u64 a; cvta.to.shared.u64 a, {}; atom.release.cta.shared.exch.b32 {}, [a], {}; }}",
                in(reg64) word.as_ptr(), out(reg32) _, in(reg32) value, options(nostack));
        }
    }

    fn block_swap(word: &AtomicU64, value: u64) -> u64 {
        let old: u64;
        // SAFETY: as in `block_lock_fetch_or`, for a 64-bit word of block memory; a relaxed exchange at block scope
        // is what the trait asks for.
        unsafe {
            asm!("{{ .reg .u64 a; cvta.to.shared.u64 a, {}; atom.relaxed.cta.shared.exch.b64 {}, [a], {}; }}",
                in(reg64) word.as_ptr(), out(reg64) old, in(reg64) value, options(nostack));
        }
        old
    }

    fn block_read(word: &AtomicU64) -> u64 {
        let value: u64;
        // SAFETY: as in `block_swap`; OR with 0 leaves the word as it is.
        unsafe {
            asm!("{{ .reg .u64 a; cvta.to.shared.u64 a, {}; atom.relaxed.cta.shared.or.b64 {}, [a], 0; }}",
                in(reg64) word.as_ptr(), out(reg64) value, options(nostack));
        }
        value
    }

    fn nanoseconds() -> u64 {
        let time: u64;
        // SAFETY: reading the global timer (nanoseconds, the same on every SM) has no preconditions. Not `pure`: it
        // changes between reads.
        unsafe { asm!("mov.u64 {}, %globaltimer;", out(reg64) time, options(nomem, nostack)) };
        time
    }

    fn end_thread() -> ! {
        // SAFETY: `exit` ends this thread; nothing after it runs, and other threads go on.
        unsafe { asm!("exit;", options(noreturn, nostack)) }
    }

    fn trap() -> ! {
        // SAFETY: `trap` aborts the kernel; the host reports the fault.
        unsafe { asm!("trap;", options(noreturn, nostack)) }
    }
}

startup_common::target_runtime!(Nvptx);

// The loader fills these before `_begin`: PTX has no sections for the linker to gather constructors into, so the
// loader collects the `__init_array_object_*`/`__fini_array_object_*` globals, sorts them by priority, and stores
// the arrays' bounds here (see `docs/abi.md`).
#[unsafe(no_mangle)]
static mut __init_array_start: *const InitCallback = core::ptr::null();
#[unsafe(no_mangle)]
static mut __init_array_end: *const InitCallback = core::ptr::null();
#[unsafe(no_mangle)]
static mut __fini_array_start: *const FiniCallback = core::ptr::null();
#[unsafe(no_mangle)]
static mut __fini_array_end: *const FiniCallback = core::ptr::null();

/// The slice between two bounds the loader stored; empty when it stored none.
///
/// # Safety
/// The bounds must be null or delimit an array in device memory that lives as long as the program.
unsafe fn array_between<T>(start: *const *const T, end: *const *const T) -> &'static [T] {
    // SAFETY: the globals are only written by the loader, before any kernel runs.
    let (start, end) = unsafe { (start.read_volatile(), end.read_volatile()) };
    if start.is_null() || end <= start {
        return &[];
    }
    // SAFETY: the caller guarantees a live array between the bounds; `end > start` was checked.
    unsafe { core::slice::from_raw_parts(start, end.offset_from(start) as usize) }
}

// Programmatic dependent launch (sm_90 and later): the loader may launch `_start` and `_end` while the kernel before
// still runs (`startup_common::abi::EARLY_LAUNCH_MARKER`). `_begin` and `_start` first let the next kernel's blocks be
// scheduled (`griddepcontrol.launch_dependents`), and `_start` and `_end` first wait until the kernel before has
// ended and its writes are visible (`griddepcontrol.wait`). The instructions stand in the kernels themselves, not in
// a function they call, so that the image check finds them in every build profile.

/// Tells the loader that these kernels wait for the one before them.
#[cfg(target_feature = "sm_90")]
#[unsafe(no_mangle)]
#[used]
static __gpu_startup_early_launch: u8 = 1;

// Each kernel takes its argument struct by value: one `.param` aggregate with the struct's layout, which the image
// check compares with the ABI before loading (hence the lint, which warns that aggregates are not guaranteed to).

/// Runs on one thread first: resets the RPC client, registers the destructors, runs the constructors.
#[unsafe(no_mangle)]
#[allow(improper_gpu_kernel_arg)]
pub extern "gpu-kernel" fn _begin(args: BeginArgs) {
    // SAFETY: only lets `_start`'s blocks be scheduled; they wait for this kernel's end themselves.
    #[cfg(target_feature = "sm_90")]
    unsafe {
        asm!("griddepcontrol.launch_dependents;", options(nostack))
    };
    // SAFETY: the loader stores the bounds of arrays it built in device memory before launching `_begin`.
    let arrays = unsafe {
        CallbackArrays {
            init: array_between(&raw const __init_array_start, &raw const __init_array_end),
            fini: array_between(&raw const __fini_array_start, &raw const __fini_array_end),
        }
    };
    // SAFETY: `args` comes from the loader, which launches this kernel with one thread before any other.
    unsafe { RUNTIME.begin(&args, &arrays) }
}

/// Runs `main`, or the test `args.test` names, on every thread of the user's grid.
#[unsafe(no_mangle)]
#[allow(improper_gpu_kernel_arg)]
pub extern "gpu-kernel" fn _start(args: StartArgs) {
    // SAFETY: the first lets `_end` be scheduled, which waits for this kernel's end itself; the second only waits.
    // Not `nomem`: no read of the runtime may move before the wait.
    #[cfg(target_feature = "sm_90")]
    unsafe {
        asm!("griddepcontrol.launch_dependents;", "griddepcontrol.wait;", options(nostack))
    };
    // SAFETY: launched by the loader after `_begin`, with its arguments; `_begin` has ended (queue order, or the wait
    // above).
    unsafe { RUNTIME.start(&args, main) }
}

/// Runs on one thread last: the exit sequence with `main`'s combined result.
#[unsafe(no_mangle)]
#[allow(improper_gpu_kernel_arg)]
pub extern "gpu-kernel" fn _end(args: EndArgs) {
    // SAFETY: only waits. Not `nomem`: no read of the runtime or the result word may move before it.
    #[cfg(target_feature = "sm_90")]
    unsafe {
        asm!("griddepcontrol.wait;", options(nostack))
    };
    // SAFETY: launched by the loader after `_start`, with its result word; `_start` has ended (queue order, or the
    // wait above).
    unsafe { RUNTIME.end(&args) }
}
