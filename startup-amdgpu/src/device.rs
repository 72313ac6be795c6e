//! The AMD startup itself, built for `amdgcn-amd-amdhsa` only: [`Amdgpu`], the [`startup_common::Gpu`] of a wave64
//! thread from LLVM's AMDGPU intrinsics, the program's runtime (`target_runtime!`) and the kernels `_begin`,
//! `_start` and `_end`.

use core::ffi::{c_char, c_int, c_void};

use core::ptr::NonNull;

use startup_common::BlockMemory;
use startup_common::abi::{BeginArgs, Control, EndArgs, LaunchParams, StartArgs};
use startup_common::{CallbackArrays, FiniCallback, Gpu, InitCallback, MainFn, ThreadIds};

#[allow(improper_ctypes)]
unsafe extern "C" {
    #[link_name = "llvm.amdgcn.mbcnt.lo"]
    fn mbcnt_lo(mask: u32, add: u32) -> u32;
    #[link_name = "llvm.amdgcn.mbcnt.hi"]
    fn mbcnt_hi(mask: u32, add: u32) -> u32;
    #[link_name = "llvm.amdgcn.ballot.i64"]
    fn ballot_i64(predicate: bool) -> u64;
    #[link_name = "llvm.amdgcn.readfirstlane.i32"]
    fn readfirstlane(value: u32) -> u32;
    #[link_name = "llvm.amdgcn.wave.barrier"]
    fn wave_barrier();
    #[link_name = "llvm.amdgcn.s.barrier"]
    fn s_barrier();
    #[link_name = "llvm.amdgcn.s.sleep"]
    fn s_sleep(units: u32);
    #[link_name = "llvm.amdgcn.workitem.id.x"]
    fn workitem_id_x() -> u32;
    #[link_name = "llvm.amdgcn.workitem.id.y"]
    fn workitem_id_y() -> u32;
    #[link_name = "llvm.amdgcn.workitem.id.z"]
    fn workitem_id_z() -> u32;
    #[link_name = "llvm.amdgcn.workgroup.id.x"]
    fn workgroup_id_x() -> u32;
    #[link_name = "llvm.amdgcn.workgroup.id.y"]
    fn workgroup_id_y() -> u32;
    #[link_name = "llvm.amdgcn.workgroup.id.z"]
    fn workgroup_id_z() -> u32;
    #[link_name = "llvm.amdgcn.endpgm"]
    fn endpgm() -> !;
    #[link_name = "llvm.trap"]
    fn llvm_trap() -> !;
    #[link_name = "llvm.readsteadycounter"]
    fn read_steady_counter() -> u64;
}

/// An AMD GPU thread in a 64-lane wavefront.
pub struct Amdgpu;

// SAFETY: a wavefront executes in lockstep under its exec mask, so the lanes of `mask` (the active lanes) run each
// of these operations together; `readfirstlane` and `ballot` read across exactly those lanes.
//
// The runtime's warp-level hand-offs (a leader's lock outcome or reservation, a group's packets before the leader
// hands the port to the host, the port's release after every lane is done) need no lane to wait for another here:
// the lanes of a group execute each instruction together, so a leader's write is issued before any later read of a
// group-mate. What `sync_lanes` still provides is what the hardware does not: the compiler may not move memory
// accesses across it, and its fence makes one lane's stores visible to the others' loads. Diverged groups of a
// wavefront run one after the other, never interleaved, so the block-memory lock they share is never contended
// (`rpc::lock::GroupLock`).
unsafe impl Gpu for Amdgpu {
    const LANE_SIZE: u32 = 64;

    fn lane_id() -> u32 {
        // SAFETY: counts the lanes below this one; no preconditions.
        unsafe { mbcnt_hi(u32::MAX, mbcnt_lo(u32::MAX, 0)) }
    }

    fn lane_mask() -> u64 {
        // SAFETY: a ballot of `true` is the exec mask.
        unsafe { ballot_i64(true) }
    }

    fn broadcast_first(_mask: u64, value: u32) -> u32 {
        // SAFETY: the first active lane is the lowest lane of `mask`, which is the active set (trait contract).
        unsafe { readfirstlane(value) }
    }

    fn ballot(mask: u64, predicate: bool) -> u64 {
        // SAFETY: a wave-wide vote; restricted to `mask` for callers that pass a subset.
        unsafe { ballot_i64(predicate) & mask }
    }

    fn sync_lanes(_mask: u64) {
        // A wavefront has no independent lanes to wait for; the barrier keeps the compiler from moving memory
        // accesses across this point, and the fence makes each lane's writes visible to the others.
        // SAFETY: a scheduling barrier with no preconditions.
        unsafe { wave_barrier() };
        core::sync::atomic::fence(core::sync::atomic::Ordering::AcqRel);
    }

    fn sleep_briefly() {
        // SAFETY: only delays this wavefront.
        unsafe { s_sleep(2) };
    }

    fn thread_ids() -> ThreadIds {
        // SAFETY: reading the dispatch coordinates has no preconditions.
        unsafe {
            ThreadIds {
                thread: [workitem_id_x(), workitem_id_y(), workitem_id_z()],
                block: [workgroup_id_x(), workgroup_id_y(), workgroup_id_z()],
            }
        }
    }

    fn launch_shape() -> LaunchParams {
        // The dispatch packet holds the work-group size and the grid size in work-items; a last partial work-group
        // counts as a block.
        // SAFETY: the packet lives as long as the dispatch; its layout is the HSA kernel dispatch packet's, whose
        // 16-bit work-group sizes start at byte 4 and 32-bit grid sizes at byte 12.
        unsafe {
            let packet = core::intrinsics::gpu::amdgpu_dispatch_ptr().cast::<u8>();
            let group = |i: usize| u32::from(packet.add(4 + 2 * i).cast::<u16>().read());
            let grid = |i: usize| packet.add(12 + 4 * i).cast::<u32>().read();
            let threads = [group(0), group(1), group(2)];
            LaunchParams { threads, blocks: [0, 1, 2].map(|i| grid(i).div_ceil(threads[i].max(1))) }
        }
    }

    fn block_memory() -> Option<NonNull<BlockMemory>> {
        // The dynamic part of the work-group's LDS: the loader adds `abi::block_memory_bytes` to every dispatch's
        // group segment.
        NonNull::new(core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<BlockMemory>())
    }

    fn sync_block() {
        // System-scope fences around the barrier (Rust has no work-group scope): more than the LDS needs, once per
        // kernel.
        core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
        // SAFETY: every work-item of the work-group reaches this barrier (the trait's contract).
        unsafe { s_barrier() };
        core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
    }

    fn nanoseconds() -> u64 {
        // The constant-rate real-time counter (`s_memrealtime` on gfx9, a message on gfx11), 100 MHz on the GPUs the
        // loader targets, as HIP's `hipDeviceAttributeWallClockRate` reports for them; `docs/amd.md` lists it
        // among what only an AMD GPU can verify.
        // SAFETY: reading the counter has no preconditions.
        unsafe { read_steady_counter() }.wrapping_mul(10)
    }

    fn end_thread() -> ! {
        // SAFETY: `s_endpgm` ends this wavefront's program; lanes that diverged away from here already left it.
        unsafe { endpgm() }
    }

    fn trap() -> ! {
        // SAFETY: the trap aborts the queue; the host sees the fault.
        unsafe { llvm_trap() }
    }
}

startup_common::target_runtime!(Amdgpu);

// rust-lld defines these around the `.init_array.N`/`.fini_array.N` input sections, sorted by priority.
unsafe extern "C" {
    static __init_array_start: [InitCallback; 0];
    static __init_array_end: [InitCallback; 0];
    static __fini_array_start: [FiniCallback; 0];
    static __fini_array_end: [FiniCallback; 0];
}

/// The callbacks the linker placed between two of its bounds.
///
/// # Safety
/// `start` and `end` must be linker-defined bounds of one array.
unsafe fn array_between<T>(start: *const T, end: *const T) -> &'static [T] {
    // SAFETY: the linker puts `end` at or after `start`, around an array of `T` that lives in the code object.
    unsafe { core::slice::from_raw_parts(start, end.offset_from(start).max(0) as usize) }
}

// rustc passes a struct argument of an AMDGPU kernel by reference (a pointer in the kernarg segment), not by value
// as PTX does. The loader writes the argument structs themselves at the start of the kernarg segment, so the kernels
// take their fields one by one: rustc lays scalar kernel arguments out at their natural alignment, which is exactly
// the `repr(C)` layout of the structs (the loader checks this against the code object's metadata before launching).

/// One work-item: resets the RPC client, registers the destructors, runs the constructors.
#[unsafe(no_mangle)]
pub extern "gpu-kernel" fn _begin(
    argc: c_int,
    rpc_port_count: u32,
    argv: *mut *mut c_char,
    envp: *mut *mut c_char,
    rpc_region: *mut c_void,
    control: *mut Control,
    heap: *mut c_void,
    heap_size: u64,
) {
    let args = BeginArgs { argc, rpc_port_count, argv, envp, rpc_region, control, heap, heap_size };
    // SAFETY: the bounds come from the linker, around arrays in this code object.
    let arrays = unsafe {
        CallbackArrays {
            init: array_between((&raw const __init_array_start).cast(), (&raw const __init_array_end).cast()),
            fini: array_between((&raw const __fini_array_start).cast(), (&raw const __fini_array_end).cast()),
        }
    };
    // SAFETY: the arguments come from the loader, which dispatches this kernel with one work-item before any other.
    unsafe { RUNTIME.begin(&args, &arrays) }
}

/// The user's grid: every work-item calls `main`, or the test `test` names.
#[unsafe(no_mangle)]
pub extern "gpu-kernel" fn _start(
    argc: c_int,
    reserved: u32,
    argv: *mut *mut c_char,
    envp: *mut *mut c_char,
    result: *mut c_int,
    test: *const MainFn,
) {
    let args = StartArgs { argc, reserved, argv, envp, result, test };
    // SAFETY: dispatched by the loader after `_begin` completed, with its arguments.
    unsafe { RUNTIME.start(&args, main) }
}

/// One work-item: the exit sequence.
#[unsafe(no_mangle)]
pub extern "gpu-kernel" fn _end(result: *mut c_int) {
    // SAFETY: dispatched by the loader after `_start` completed, with its result word.
    unsafe { RUNTIME.end(&EndArgs { result }) }
}
