//! The HSA backend: runs AMDGPU code objects through the ROCm runtime (`libhsa-runtime64.so.1`), opened at run time
//! so that `gpu-loader` builds and runs on machines without ROCm.
//!
//! The launch path: `hsa_init`; a system event handler that turns GPU memory faults into a [`Progress::Faulted`]
//! instead of the runtime's abort ([`faults`]); the GPU agent (`--device` counts GPU agents that take kernel
//! dispatches) and the CPU agent; the code object loaded into an executable and frozen; the kernarg and fine-grained
//! pools of the CPU agent and the coarse-grained pool of the GPU; one queue (all of it opening the backend, in
//! `load.rs`). Each kernel is one AQL dispatch packet
//! (see [`dispatch`]) with the barrier bit, so `_begin`, `_start` and `_end` run in queue order while the host serves
//! RPC, and one completion signal, which [`Backend::poll`] reads without waiting. Every runtime call goes through
//! [`runtime`], the checked layer over the bindings ([`sys`]). `docs/amd.md` says what is verified without an AMD GPU
//! and what only one can verify.

pub mod dispatch;
pub mod faults;
mod load;
pub mod runtime;
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub mod sys;

use std::ffi::{CString, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use gpu_startup_protocol::abi::{Kernel, LaunchParams};

use crate::backend::{Backend, HostMapped, Progress, ResourceUsage};
use crate::error::{LoaderError, Result};
use crate::image::amd_metadata::KernelMetadata;
use dispatch::{Geometry, KernelCode};
use runtime::{HsaError, Runtime};

/// A failed runtime call, as the loader reports driver failures: `hsa_queue_create failed: HSA_STATUS_...: ...`.
impl From<HsaError> for LoaderError {
    fn from(error: HsaError) -> Self {
        LoaderError::Driver { api: error.call, message: error.description }
    }
}

/// Memory pools the loader allocates from.
#[derive(Clone, Copy)]
struct Pools {
    /// CPU agent, `KERNARG_INIT`: kernel argument segments.
    kernarg: sys::hsa_amd_memory_pool_t,
    /// CPU agent, fine-grained: host memory the GPU reads and writes coherently (RPC region, control block).
    fine: sys::hsa_amd_memory_pool_t,
    /// GPU agent, coarse-grained: device memory (arguments, result).
    coarse: sys::hsa_amd_memory_pool_t,
}

/// One program's HSA state: the agents, the frozen executable, the queue, every allocation and signal.
pub struct HsaBackend {
    runtime: &'static Runtime,
    /// `hsa_init` succeeded, so `Drop` shuts the runtime down (reference counted).
    initialized: bool,
    gpu: sys::hsa_agent_t,
    pools: Option<Pools>,
    executable: Option<sys::hsa_executable_t>,
    kernels: [KernelCode; 3],
    metadata: [KernelMetadata; 3],
    lane_size: u32,
    queue: *mut sys::hsa_queue_t,
    /// Pool allocations, all freed with `hsa_amd_memory_pool_free`.
    allocations: Vec<*mut c_void>,
    /// The completion signal of each dispatch, in queue order.
    dispatches: Vec<(Kernel, sys::hsa_signal_t)>,
    profiling: bool,
}

impl HsaBackend {
    fn pools(&self) -> Pools {
        self.pools.expect("pools are found before anything is allocated")
    }

    /// `len` bytes (at least one) from `pool`, which the GPU may access; freed in `Drop`.
    fn allocate(&mut self, pool: sys::hsa_amd_memory_pool_t, len: usize) -> Result<*mut c_void> {
        let pointer = self.runtime.memory_pool_allocate(pool, len)?;
        self.allocations.push(pointer);
        // SAFETY: `pointer` is a live allocation of the runtime's.
        unsafe { self.runtime.allow_access(&self.gpu, pointer) }?;
        Ok(pointer)
    }

    fn free(&mut self, pointer: *mut c_void) {
        if let Some(index) = self.allocations.iter().position(|&p| p == pointer) {
            self.allocations.swap_remove(index);
            // SAFETY: an allocation of ours, no longer used.
            let _ = unsafe { self.runtime.memory_pool_free(pointer) };
        }
    }
}

impl Backend for HsaBackend {
    /// The GPU agents that take kernel dispatches.
    fn gpu_count(&self) -> Result<u32> {
        Ok(self.agents()?.0.len() as u32)
    }

    fn lane_size(&self) -> u32 {
        self.lane_size
    }

    fn check_launch(&self, params: &LaunchParams) -> Result<()> {
        let geometry = Geometry::new(params).map_err(|error| LoaderError::BadLaunch(error.to_string()))?;
        let runtime = self.runtime;
        // SAFETY: WORKGROUP_MAX_SIZE is a u32, WORKGROUP_MAX_DIM a u16[3], GRID_MAX_DIM an `hsa_dim3_t`.
        let (per_block, block_dims, grid) = unsafe {
            (
                runtime.agent_info(self.gpu, sys::HSA_AGENT_INFO_WORKGROUP_MAX_SIZE, 0u32)?,
                runtime.agent_info(self.gpu, sys::HSA_AGENT_INFO_WORKGROUP_MAX_DIM, [0u16; 3])?,
                runtime.agent_info(self.gpu, sys::HSA_AGENT_INFO_GRID_MAX_DIM, sys::hsa_dim3_t::default())?,
            )
        };
        // A kernel compiled for at most N work-items per group must not be dispatched with more.
        let kernel_limit = self.metadata[Kernel::Start.index()].max_flat_workgroup_size.unwrap_or(u32::MAX);
        let grid = [grid.x, grid.y, grid.z];
        // The agent limits the grid in work-items; the shared check counts blocks.
        let max_blocks: [u32; 3] =
            std::array::from_fn(|axis| grid[axis] / u32::from(geometry.workgroup_size[axis]).max(1));
        crate::launch::check_limits(params, per_block.min(kernel_limit), block_dims.map(u32::from), max_blocks)
    }

    fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMapped> {
        let host = self.allocate(self.pools().fine, len)?.cast::<u8>();
        // SAFETY: `host` is `len` (or more) bytes of fine-grained host memory we own.
        unsafe { host.write_bytes(0, len) };
        // HSA shares one virtual address space between the host and its agents.
        Ok(HostMapped { host, device: host as u64, len })
    }

    fn alloc_device(&mut self, len: usize) -> Result<u64> {
        // `hsa_amd_memory_fill` writes whole 32-bit words.
        let words = len.div_ceil(4).max(1);
        let pointer = self.allocate(self.pools().coarse, words * 4)?;
        // SAFETY: zeroes the `words` words just allocated, which nothing uses yet.
        unsafe { self.runtime.memory_fill(pointer, 0, words) }?;
        Ok(pointer as u64)
    }

    fn copy_to_device(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        // Copy through runtime-allocated host memory, which every copy engine can read.
        let staging = self.allocate(self.pools().fine, bytes.len())?;
        // SAFETY: `staging` has room for `bytes`, and the two do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), staging.cast::<u8>(), bytes.len()) };
        // SAFETY: callers pass an allocation of theirs of at least `bytes.len()` bytes; the copy is synchronous.
        let copied = unsafe { self.runtime.memory_copy(address as *mut c_void, staging, bytes.len()) };
        self.free(staging);
        Ok(copied?)
    }

    fn launch(&mut self, kernel: Kernel, params: &LaunchParams, args: &[u8]) -> Result<()> {
        let runtime = self.runtime;
        let geometry = Geometry::new(params).map_err(|error| LoaderError::BadLaunch(error.to_string()))?;
        let code = self.kernels[kernel.index()];
        let metadata = &self.metadata[kernel.index()];
        let size = (code.kernarg_size as usize).max(metadata.kernarg_segment_size as usize);
        let segment = dispatch::kernarg_segment(size, args, &metadata.args, params, self.queue as u64);
        let kernargs = self.allocate(self.pools().kernarg, segment.len())?;
        // SAFETY: the kernarg allocation holds `segment.len()` bytes; the two do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(segment.as_ptr(), kernargs.cast::<u8>(), segment.len()) };

        // Destroyed in `Drop`. The packet processor decrements it to 0 when the dispatch completes.
        let signal = runtime.signal_create(1)?;
        self.dispatches.push((kernel, signal));
        let block_memory = gpu_startup_protocol::abi::block_memory_bytes(params, self.lane_size);
        let packet = dispatch::dispatch_packet(&geometry, &code, block_memory, kernargs, signal);

        // SAFETY: the queue is ours; the runtime keeps its descriptor valid until `hsa_queue_destroy`.
        let queue = unsafe { &*self.queue };
        // SAFETY: reserves one packet slot, which is filled below.
        let slot_index = unsafe { runtime.queue_reserve(self.queue, 1) };
        // Wait until the slot is free: the packet processor has read everything a full ring before it.
        // SAFETY: the queue is alive.
        while slot_index - unsafe { runtime.queue_read_index(self.queue) } >= u64::from(queue.size) {
            if faults::reported().is_some() {
                // The queue stopped at the fault and the slot never frees: the packet stays out, and the next
                // `poll` ends the run with the fault, in the kernel that had it.
                return Ok(());
            }
            std::hint::spin_loop();
        }
        let slot = queue
            .base_address
            .cast::<sys::hsa_kernel_dispatch_packet_t>()
            .wrapping_add((slot_index & u64::from(queue.size - 1)) as usize);
        // SAFETY: the slot is ours until its header leaves `INVALID`. Everything but the first 32 bits (header and
        // setup) is written first; those are stored last, atomically with release ordering, so the packet processor
        // never sees a valid header over a half-written packet.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&raw const packet).cast::<u8>().add(4),
                slot.cast::<u8>().add(4),
                size_of::<sys::hsa_kernel_dispatch_packet_t>() - 4,
            );
            AtomicU32::from_ptr(slot.cast::<u32>()).store(dispatch::header_word(&geometry), Ordering::Release);
        }
        // SAFETY: ringing the queue's doorbell with the packet's index, now written, tells the packet processor to
        // go on.
        unsafe { runtime.signal_store(queue.doorbell_signal, slot_index as i64) };
        Ok(())
    }

    fn poll(&mut self) -> Result<Progress> {
        if let Some(fault) = faults::reported() {
            return Ok(Progress::Faulted(fault));
        }
        for (_, signal) in &self.dispatches {
            // SAFETY: the signal is ours and alive.
            if unsafe { self.runtime.signal_load(*signal) } > 0 {
                return Ok(Progress::Running);
            }
        }
        Ok(Progress::Finished)
    }

    fn resource_usage(&self, kernel: Kernel) -> Result<ResourceUsage> {
        let (code, metadata) = (&self.kernels[kernel.index()], &self.metadata[kernel.index()]);
        Ok(ResourceUsage {
            // Vector registers per work-item, AMD's counterpart of CUDA's per-thread registers.
            registers: metadata.vgpr_count,
            shared_bytes: code.group_size.into(),
            local_bytes: code.private_size.into(),
            max_threads_per_block: metadata.max_flat_workgroup_size,
        })
    }

    fn global_address(&mut self, name: &str) -> Result<u64> {
        let runtime = self.runtime;
        let executable = self.executable.expect("the code object is loaded before the backend is used");
        let c_name = CString::new(name).map_err(|_| LoaderError::Driver {
            api: "hsa_executable_get_symbol_by_name",
            message: "NUL in name".into(),
        })?;
        // A program-scope variable is looked up without an agent, an agent-scope one with the GPU.
        // SAFETY: the executable is frozen.
        let symbol = unsafe { runtime.executable_symbol(executable, &c_name, None) }
            // SAFETY: as above.
            .or_else(|_| unsafe { runtime.executable_symbol(executable, &c_name, Some(&self.gpu)) })
            .map_err(|error| LoaderError::Driver {
                api: error.call,
                message: format!("`{name}`: {}", error.description),
            })?;
        // SAFETY: VARIABLE_ADDRESS is a u64.
        Ok(unsafe { runtime.symbol_info(symbol, sys::HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, 0u64) }?)
    }

    fn kernel_times(&mut self) -> Option<[Duration; 3]> {
        if !self.profiling {
            return None;
        }
        // SAFETY: TIMESTAMP_FREQUENCY is a u64.
        let frequency = unsafe { self.runtime.system_info(sys::HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, 0u64) }.ok()?;
        if frequency == 0 {
            return None;
        }
        let mut times = [Duration::ZERO; 3];
        for kernel in Kernel::ALL {
            let (_, signal) = self.dispatches.iter().find(|(k, _)| *k == kernel)?;
            // SAFETY: the signal completed a dispatch on a queue with profiling enabled; the runtime reports its
            // start and end in system timestamp ticks (fails, and we report nothing, otherwise).
            let time = unsafe { self.runtime.dispatch_time(self.gpu, *signal) }.ok()?;
            times[kernel.index()] =
                Duration::from_secs_f64(time.end.saturating_sub(time.start) as f64 / frequency as f64);
        }
        Some(times)
    }
}

impl Drop for HsaBackend {
    fn drop(&mut self) {
        if !self.initialized {
            return;
        }
        let runtime = self.runtime;
        // After a fault, or while a dispatch still runs, the GPU may still use the queue, the code and the memory:
        // tearing them down could hang or corrupt. Leave them to the process exit, which releases everything.
        // SAFETY: each signal is ours and alive.
        let idle = faults::reported().is_none()
            && self.dispatches.iter().all(|(_, signal)| unsafe { runtime.signal_load(*signal) } <= 0);
        if !idle {
            return;
        }
        // Errors here cannot be acted on: the run's outcome is decided. Each handle is ours and released once.
        // SAFETY: for each call below, the handle was created by this backend, nothing runs on the GPU any more and
        // the handle is not used afterwards.
        unsafe {
            for (_, signal) in self.dispatches.drain(..) {
                let _ = runtime.signal_destroy(signal);
            }
            if !self.queue.is_null() {
                let _ = runtime.queue_destroy(self.queue);
            }
            for pointer in self.allocations.drain(..) {
                let _ = runtime.memory_pool_free(pointer);
            }
            if let Some(executable) = self.executable.take() {
                let _ = runtime.executable_destroy(executable);
            }
            let _ = runtime.shut_down();
        }
    }
}
