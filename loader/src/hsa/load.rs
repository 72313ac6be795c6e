//! Opening an HSA backend: the runtime initialised and its fault handler installed, the GPU and CPU agents found,
//! the memory pools chosen, the code object loaded into a frozen executable with the three kernels looked up, and
//! the queue created. Everything after that (allocation, dispatch, polling, teardown) is in the parent module.

use std::ffi::{CStr, CString};

use gpu_startup_protocol::abi::Kernel;

use super::dispatch::{self, KernelCode};
use super::runtime::{self, HsaError};
use super::{HsaBackend, Pools, faults, sys};
use crate::backend::DeviceOptions;
use crate::error::{LoaderError, Result};
use crate::image::Image;

impl HsaBackend {
    /// Checks the image's kernels against the startup ABI, opens the runtime and GPU `options.device`, loads the
    /// code object and creates the queue.
    pub fn load(options: &DeviceOptions, image: &Image) -> Result<Self> {
        // The image is checked first: that needs no GPU, so a machine without one still reports a bad image.
        let code_object = image.amd_metadata()?;
        let (metadata, wavefront_size) = code_object
            .startup_kernels()
            .map_err(|problem| LoaderError::BadImage { path: image.path.clone(), problem })?;
        let metadata = metadata.map(Clone::clone);

        let runtime = runtime::runtime().map_err(|error| LoaderError::NoGpu(error.to_string()))?;
        if let Err(error) = runtime.init() {
            let kfd = if std::path::Path::new("/dev/kfd").exists() { "" } else { "; there is no /dev/kfd" };
            return Err(LoaderError::NoGpu(format!(
                "the HSA runtime found no AMD GPU agent (hsa_init failed with {}{kfd})",
                error.status_name()
            )));
        }
        faults::reset();
        let mut backend = Self {
            runtime,
            initialized: true,
            gpu: sys::hsa_agent_t { handle: 0 },
            pools: None,
            executable: None,
            kernels: [KernelCode::default(); 3],
            metadata,
            lane_size: wavefront_size.unwrap_or(64),
            queue: std::ptr::null_mut(),
            allocations: Vec::new(),
            dispatches: Vec::new(),
            profiling: options.kernel_times,
        };
        // SAFETY: the handler only touches the fault record, whatever the event; it lives as long as the process.
        unsafe { runtime.register_system_event_handler(Some(faults::on_system_event)) }?;

        let (gpus, cpu) = backend.agents()?;
        if gpus.is_empty() {
            return Err(LoaderError::NoGpu("the HSA runtime found no AMD GPU agent".into()));
        }
        let Some(&gpu) = gpus.get(options.device) else {
            return Err(LoaderError::BadLaunch(format!(
                "there is no GPU {} (this machine has {} AMD GPU agents)",
                options.device,
                gpus.len()
            )));
        };
        let cpu = cpu.ok_or_else(|| LoaderError::NoGpu("the HSA runtime found no CPU agent".into()))?;
        backend.gpu = gpu;
        if wavefront_size.is_none() {
            // SAFETY: WAVEFRONT_SIZE is a u32.
            backend.lane_size = unsafe { runtime.agent_info(gpu, sys::HSA_AGENT_INFO_WAVEFRONT_SIZE, 0u32) }?;
        }
        backend.pools = Some(backend.find_pools(cpu, gpu)?);
        backend.load_code_object(image, code_object.target.as_deref(), options.device)?;
        backend.create_queue()?;
        Ok(backend)
    }

    /// The GPU agents that take kernel dispatches, in the runtime's order, and the first CPU agent.
    pub(super) fn agents(&self) -> Result<(Vec<sys::hsa_agent_t>, Option<sys::hsa_agent_t>), HsaError> {
        let (mut gpus, mut cpu) = (Vec::new(), None);
        for agent in self.runtime.agents()? {
            // SAFETY: DEVICE is an `hsa_device_type_t` (u32).
            let kind: sys::hsa_device_type_t =
                unsafe { self.runtime.agent_info(agent, sys::HSA_AGENT_INFO_DEVICE, 0) }?;
            if kind == sys::HSA_DEVICE_TYPE_GPU {
                // SAFETY: FEATURE is an `hsa_agent_feature_t` (u32).
                let features: sys::hsa_agent_feature_t =
                    unsafe { self.runtime.agent_info(agent, sys::HSA_AGENT_INFO_FEATURE, 0) }?;
                if features & sys::HSA_AGENT_FEATURE_KERNEL_DISPATCH != 0 {
                    gpus.push(agent);
                }
            } else if kind == sys::HSA_DEVICE_TYPE_CPU && cpu.is_none() {
                cpu = Some(agent);
            }
        }
        Ok((gpus, cpu))
    }

    /// The agent's name, such as `gfx90a`.
    fn agent_name(&self, agent: sys::hsa_agent_t) -> String {
        // SAFETY: NAME is a `char[64]`.
        match unsafe { self.runtime.agent_info(agent, sys::HSA_AGENT_INFO_NAME, [0u8; 64]) } {
            Ok(name) => CStr::from_bytes_until_nul(&name).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            Err(_) => "an unknown GPU".into(),
        }
    }

    /// The first global pool of `agent` with `flag` that the runtime lets us allocate from.
    fn pool_with(&self, agent: sys::hsa_agent_t, flag: u32, what: &str) -> Result<sys::hsa_amd_memory_pool_t> {
        let runtime = self.runtime;
        for pool in runtime.memory_pools(agent)? {
            // SAFETY: SEGMENT is an `hsa_amd_segment_t`, GLOBAL_FLAGS a u32, RUNTIME_ALLOC_ALLOWED a bool.
            let (segment, flags, allowed) = unsafe {
                (
                    runtime.memory_pool_info(
                        pool,
                        sys::HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
                        0 as sys::hsa_amd_segment_t,
                    )?,
                    runtime.memory_pool_info(pool, sys::HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, 0u32)?,
                    runtime.memory_pool_info(pool, sys::HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, false)?,
                )
            };
            if segment == sys::HSA_AMD_SEGMENT_GLOBAL && flags & flag != 0 && allowed {
                return Ok(pool);
            }
        }
        Err(LoaderError::Driver {
            api: "hsa_amd_agent_iterate_memory_pools",
            message: format!("no {what} memory pool"),
        })
    }

    fn find_pools(&self, cpu: sys::hsa_agent_t, gpu: sys::hsa_agent_t) -> Result<Pools> {
        Ok(Pools {
            kernarg: self.pool_with(cpu, sys::HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT, "kernel-argument")?,
            fine: self.pool_with(cpu, sys::HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, "fine-grained host")?,
            coarse: self.pool_with(
                gpu,
                sys::HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
                "coarse-grained device",
            )?,
        })
    }

    /// Loads the code object into a frozen executable for the GPU and looks up the three kernels.
    fn load_code_object(&mut self, image: &Image, target: Option<&str>, device: usize) -> Result<()> {
        let runtime = self.runtime;
        // SAFETY: `image.bytes()` outlives the reader, destroyed below before returning.
        let reader = unsafe { runtime.code_object_reader(image.bytes()) }?;
        let loaded = self.load_executable(reader);
        // SAFETY: the reader is ours and no longer needed once the executable is frozen (or failed).
        let _ = unsafe { runtime.code_object_reader_destroy(reader) };
        if let Err(error) = loaded {
            return Err(LoaderError::BadImage {
                path: image.path.clone(),
                problem: format!(
                    "the HSA runtime cannot load it on GPU {device} ({}; the code object is for {}): {}",
                    self.agent_name(self.gpu),
                    target.unwrap_or("an unknown target"),
                    error.description
                ),
            });
        }
        let executable = self.executable.expect("loaded above");
        for (slot, kernel) in self.kernels.iter_mut().zip(Kernel::ALL) {
            let symbol_name = CString::new(format!("{}.kd", kernel.name())).expect("kernel names have no NUL");
            // SAFETY: the executable is frozen.
            let symbol =
                unsafe { runtime.executable_symbol(executable, &symbol_name, Some(&self.gpu)) }.map_err(|error| {
                    LoaderError::BadImage {
                        path: image.path.clone(),
                        problem: format!("has no kernel `{}` ({})", kernel.name(), error.status_name()),
                    }
                })?;
            // SAFETY: each attribute has the documented type: KERNEL_OBJECT a u64, the segment sizes u32,
            // DYNAMIC_CALLSTACK a bool (one byte, read as such).
            *slot = unsafe {
                KernelCode {
                    object: runtime.symbol_info(symbol, sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, 0u64)?,
                    kernarg_size: runtime.symbol_info(
                        symbol,
                        sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
                        0u32,
                    )?,
                    group_size: runtime.symbol_info(
                        symbol,
                        sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE,
                        0u32,
                    )?,
                    private_size: runtime.symbol_info(
                        symbol,
                        sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE,
                        0u32,
                    )?,
                    dynamic_stack: runtime.symbol_info(
                        symbol,
                        sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK,
                        0u8,
                    )? != 0,
                }
            };
        }
        Ok(())
    }

    /// Creates the executable, loads the reader's code object for the GPU and freezes it.
    fn load_executable(&mut self, reader: sys::hsa_code_object_reader_t) -> Result<(), HsaError> {
        let runtime = self.runtime;
        let executable = runtime.executable_create()?;
        // Destroyed in `Drop`.
        self.executable = Some(executable);
        // SAFETY: executable, agent and reader are alive; the executable is not frozen yet.
        unsafe { runtime.executable_load_agent_code_object(executable, self.gpu, reader) }?;
        // SAFETY: nothing is loaded into the executable after this.
        unsafe { runtime.executable_freeze(executable) }
    }

    fn create_queue(&mut self) -> Result<()> {
        let runtime = self.runtime;
        // SAFETY: QUEUE_MIN_SIZE and QUEUE_MAX_SIZE are u32.
        let (min, max) = unsafe {
            (
                runtime.agent_info(self.gpu, sys::HSA_AGENT_INFO_QUEUE_MIN_SIZE, 0u32)?,
                runtime.agent_info(self.gpu, sys::HSA_AGENT_INFO_QUEUE_MAX_SIZE, 0u32)?,
            )
        };
        // SAFETY: the error callback only records the status; its data is the process-lifetime runtime. The queue
        // is destroyed in `Drop`.
        self.queue = unsafe {
            runtime.queue_create(
                self.gpu,
                dispatch::queue_size(min, max),
                faults::on_queue_error,
                std::ptr::from_ref(runtime).cast_mut().cast(),
            )
        }?;
        if self.profiling {
            // SAFETY: the queue was just created.
            unsafe { runtime.enable_profiling(self.queue) }?;
        }
        Ok(())
    }
}
