//! The HSA backend: runs AMDGPU code objects through the ROCm runtime (`libhsa-runtime64.so.1`), opened at run time
//! so that `gpu-loader` builds and runs on machines without ROCm.
//!
//! The launch path: `hsa_init`; a system event handler that turns GPU memory faults into a [`Progress::Faulted`]
//! instead of the runtime's abort; the GPU agent (`--device` counts GPU agents that take kernel dispatches) and the
//! CPU agent; the code object loaded into an executable and frozen; the kernarg and fine-grained pools of the CPU
//! agent and the coarse-grained pool of the GPU; one queue. Each kernel is one AQL dispatch packet (see [`dispatch`])
//! with the barrier bit, so `_begin`, `_start` and `_end` run in queue order while the host serves RPC, and one
//! completion signal, which [`Backend::poll`] reads without waiting. `docs/amd.md` says what is verified without an AMD
//! GPU and what only one can verify.

pub mod dispatch;
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

use std::ffi::{CStr, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use startup_common::abi::{Kernel, LaunchParams};

use crate::backend::{Backend, DeviceOptions, HostMapped, Progress, ResourceUsage};
use crate::error::{LoaderError, Result};
use crate::image::Image;
use crate::image::amd_metadata::KernelMetadata;
use dispatch::{Geometry, KernelCode};

/// The ROCm runtime's soname.
pub const LIBRARY: &str = "libhsa-runtime64.so.1";

/// Opens the HSA runtime once per process. The message says why it cannot be used.
fn runtime() -> Result<&'static sys::Hsa> {
    static RUNTIME: OnceLock<std::result::Result<sys::Hsa, String>> = OnceLock::new();
    RUNTIME.get_or_init(|| open_runtime(LIBRARY)).as_ref().map_err(|message| LoaderError::NoGpu(message.clone()))
}

/// Opens the HSA runtime `name` and looks up every function the loader calls.
pub fn open_runtime(name: &str) -> std::result::Result<sys::Hsa, String> {
    // SAFETY: opening runs the library's initialisers, which need nothing from us; a missing library is an error.
    let library = unsafe { libloading::Library::new(name) }.map_err(|error| {
        let error = error.to_string();
        if error.contains("No such file") || error.contains("cannot open shared object") {
            format!("the ROCm HSA runtime ({name}) is not installed")
        } else {
            format!("the ROCm HSA runtime ({name}) cannot be loaded: {}", one_line(&error))
        }
    })?;
    // SAFETY: each symbol is looked up with the signature bindgen generated from the runtime's own headers.
    unsafe { sys::Hsa::from_library(library) }
        .map_err(|error| format!("{name} lacks HSA functions the loader needs: {}", one_line(&error.to_string())))
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `HSA_STATUS_...: description`, from the runtime.
fn status_text(api: &sys::Hsa, status: sys::hsa_status_t) -> String {
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: the runtime stores a pointer to a static string in `text`.
    if unsafe { api.hsa_status_string(status, &mut text) } == sys::HSA_STATUS_SUCCESS && !text.is_null() {
        // SAFETY: the runtime's status strings are static and NUL-terminated.
        return one_line(&unsafe { CStr::from_ptr(text) }.to_string_lossy());
    }
    format!("HSA status {status:#x}")
}

/// The `HSA_STATUS_...` name alone, for messages that go on to say more.
fn status_name(api: &sys::Hsa, status: sys::hsa_status_t) -> String {
    let text = status_text(api, status);
    text.split(':').next().unwrap_or(&text).to_owned()
}

fn check(api: &sys::Hsa, status: sys::hsa_status_t, call: &'static str) -> Result<()> {
    if status == sys::HSA_STATUS_SUCCESS || status == sys::HSA_STATUS_INFO_BREAK {
        Ok(())
    } else {
        Err(LoaderError::Driver { api: call, message: status_text(api, status) })
    }
}

/// What the runtime reported from its own threads: a GPU memory fault (system event) or a queue error (a trap,
/// an illegal instruction). Reset when a backend loads.
#[derive(Default)]
struct Faults {
    memory: Option<String>,
    queue: Option<String>,
}

static FAULTS: Mutex<Faults> = Mutex::new(Faults { memory: None, queue: None });

fn reported_fault() -> Option<String> {
    let faults = FAULTS.lock().ok()?;
    faults.memory.clone().or_else(|| faults.queue.clone())
}

/// The reasons of a memory fault, from `hsa_amd_gpu_memory_fault_info_t::fault_reason_mask`.
fn fault_reasons(mask: u32) -> String {
    const REASONS: [(sys::hsa_amd_memory_fault_reason_t, &str); 8] = [
        (sys::HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT, "page not present or supervisor privilege"),
        (sys::HSA_AMD_MEMORY_FAULT_READ_ONLY, "write to a read-only page"),
        (sys::HSA_AMD_MEMORY_FAULT_NX, "execute on a no-execute page"),
        (sys::HSA_AMD_MEMORY_FAULT_HOST_ONLY, "host-only page"),
        (sys::HSA_AMD_MEMORY_FAULT_DRAMECC, "DRAM ECC error"),
        (sys::HSA_AMD_MEMORY_FAULT_IMPRECISE, "address may be imprecise"),
        (sys::HSA_AMD_MEMORY_FAULT_SRAMECC, "SRAM ECC error"),
        (sys::HSA_AMD_MEMORY_FAULT_HANG, "GPU hang"),
    ];
    let reasons: Vec<&str> =
        REASONS.iter().filter(|(bit, _)| mask & (*bit as u32) != 0).map(|(_, reason)| *reason).collect();
    if reasons.is_empty() { "unknown reason".into() } else { reasons.join(", ") }
}

/// The system event handler: records a GPU memory fault for [`Backend::poll`] and tells the runtime it was
/// handled (otherwise the runtime prints it and aborts the process). Other events keep the runtime's handling.
unsafe extern "C" fn on_system_event(event: *const sys::hsa_amd_event_t, _data: *mut c_void) -> sys::hsa_status_t {
    if event.is_null() {
        return sys::HSA_STATUS_ERROR;
    }
    // SAFETY: the runtime passes a valid event for the duration of the call.
    let event = unsafe { &*event };
    if event.event_type != sys::HSA_AMD_GPU_MEMORY_FAULT_EVENT {
        return sys::HSA_STATUS_ERROR;
    }
    // SAFETY: for a memory fault event the union holds `memory_fault`.
    let fault = unsafe { event.__bindgen_anon_1.memory_fault };
    let message = format!(
        "GPU memory access fault at address {:#x} ({})",
        fault.virtual_address,
        fault_reasons(fault.fault_reason_mask)
    );
    if let Ok(mut faults) = FAULTS.lock() {
        faults.memory.get_or_insert(message);
    }
    sys::HSA_STATUS_SUCCESS
}

/// The queue's error callback (a trap such as `s_trap 2`, an illegal instruction, a bad packet): recorded for
/// [`Backend::poll`]. `data` is the `&'static sys::Hsa` the queue was created with.
unsafe extern "C" fn on_queue_error(status: sys::hsa_status_t, _queue: *mut sys::hsa_queue_t, data: *mut c_void) {
    // SAFETY: `data` is the runtime table, which lives for the whole process (`runtime()`).
    let api = unsafe { &*data.cast::<sys::Hsa>() };
    let message = format!("the HSA queue reported {}", status_text(api, status));
    if let Ok(mut faults) = FAULTS.lock() {
        faults.queue.get_or_insert(message);
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
    api: &'static sys::Hsa,
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

/// Collects the agents `hsa_iterate_agents` reports into the `Vec<hsa_agent_t>` behind `data`.
unsafe extern "C" fn collect_agent(agent: sys::hsa_agent_t, data: *mut c_void) -> sys::hsa_status_t {
    // SAFETY: `data` is the `&mut Vec` passed to `hsa_iterate_agents` by `agents`, alive for the call.
    unsafe { (*data.cast::<Vec<sys::hsa_agent_t>>()).push(agent) };
    sys::HSA_STATUS_SUCCESS
}

/// Collects the pools `hsa_amd_agent_iterate_memory_pools` reports into the `Vec` behind `data`.
unsafe extern "C" fn collect_pool(pool: sys::hsa_amd_memory_pool_t, data: *mut c_void) -> sys::hsa_status_t {
    // SAFETY: `data` is the `&mut Vec` passed by `pools_of`, alive for the call.
    unsafe { (*data.cast::<Vec<sys::hsa_amd_memory_pool_t>>()).push(pool) };
    sys::HSA_STATUS_SUCCESS
}

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

        let api = runtime()?;
        // SAFETY: no preconditions; reference counted, undone by `hsa_shut_down` in `Drop`.
        let status = unsafe { api.hsa_init() };
        if status != sys::HSA_STATUS_SUCCESS {
            let kfd = if std::path::Path::new("/dev/kfd").exists() { "" } else { "; there is no /dev/kfd" };
            return Err(LoaderError::NoGpu(format!(
                "the HSA runtime found no AMD GPU agent (hsa_init failed with {}{kfd})",
                status_name(api, status)
            )));
        }
        if let Ok(mut faults) = FAULTS.lock() {
            *faults = Faults::default();
        }
        let mut backend = Self {
            api,
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
        // SAFETY: the handler is a plain function that only touches `FAULTS`; it lives as long as the process.
        let status = unsafe { api.hsa_amd_register_system_event_handler(Some(on_system_event), std::ptr::null_mut()) };
        check(api, status, "hsa_amd_register_system_event_handler")?;

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
            backend.lane_size = unsafe { backend.agent_info(gpu, sys::HSA_AGENT_INFO_WAVEFRONT_SIZE, 0u32) }?;
        }
        backend.pools = Some(backend.find_pools(cpu, gpu)?);
        backend.load_code_object(image, code_object.target.as_deref(), options.device)?;
        backend.create_queue()?;
        Ok(backend)
    }

    /// How many GPU agents the runtime offers (the ordinals `--device` takes).
    pub fn gpu_count(&self) -> Result<u32> {
        Ok(self.agents()?.0.len() as u32)
    }

    /// The GPU agents that take kernel dispatches, in the runtime's order, and the first CPU agent.
    fn agents(&self) -> Result<(Vec<sys::hsa_agent_t>, Option<sys::hsa_agent_t>)> {
        let mut agents: Vec<sys::hsa_agent_t> = Vec::new();
        // SAFETY: the callback pushes into `agents`, which outlives the call.
        let status = unsafe { self.api.hsa_iterate_agents(Some(collect_agent), (&raw mut agents).cast()) };
        check(self.api, status, "hsa_iterate_agents")?;
        let (mut gpus, mut cpu) = (Vec::new(), None);
        for agent in agents {
            // SAFETY: DEVICE is an `hsa_device_type_t` (u32).
            let kind: sys::hsa_device_type_t = unsafe { self.agent_info(agent, sys::HSA_AGENT_INFO_DEVICE, 0) }?;
            if kind == sys::HSA_DEVICE_TYPE_GPU {
                // SAFETY: FEATURE is an `hsa_agent_feature_t` (u32).
                let features: sys::hsa_agent_feature_t =
                    unsafe { self.agent_info(agent, sys::HSA_AGENT_INFO_FEATURE, 0) }?;
                if features & sys::HSA_AGENT_FEATURE_KERNEL_DISPATCH != 0 {
                    gpus.push(agent);
                }
            } else if kind == sys::HSA_DEVICE_TYPE_CPU && cpu.is_none() {
                cpu = Some(agent);
            }
        }
        Ok((gpus, cpu))
    }

    /// One `hsa_agent_get_info` attribute.
    ///
    /// # Safety
    /// `T` must be the type the runtime writes for `attribute` (`initial` only gives it a value first).
    unsafe fn agent_info<T: Copy>(
        &self,
        agent: sys::hsa_agent_t,
        attribute: sys::hsa_agent_info_t,
        initial: T,
    ) -> Result<T> {
        let mut value = initial;
        // SAFETY: `value` has the attribute's type (caller's contract).
        let status = unsafe { self.api.hsa_agent_get_info(agent, attribute, (&raw mut value).cast()) };
        check(self.api, status, "hsa_agent_get_info")?;
        Ok(value)
    }

    /// The agent's name, such as `gfx90a`.
    fn agent_name(&self, agent: sys::hsa_agent_t) -> String {
        // SAFETY: NAME is a `char[64]`.
        match unsafe { self.agent_info(agent, sys::HSA_AGENT_INFO_NAME, [0u8; 64]) } {
            Ok(name) => CStr::from_bytes_until_nul(&name).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            Err(_) => "an unknown GPU".into(),
        }
    }

    fn pools_of(&self, agent: sys::hsa_agent_t) -> Result<Vec<sys::hsa_amd_memory_pool_t>> {
        let mut pools: Vec<sys::hsa_amd_memory_pool_t> = Vec::new();
        // SAFETY: the callback pushes into `pools`, which outlives the call.
        let status =
            unsafe { self.api.hsa_amd_agent_iterate_memory_pools(agent, Some(collect_pool), (&raw mut pools).cast()) };
        check(self.api, status, "hsa_amd_agent_iterate_memory_pools")?;
        Ok(pools)
    }

    /// The first global pool of `agent` with `flag` that the runtime lets us allocate from.
    fn pool_with(&self, agent: sys::hsa_agent_t, flag: u32, what: &str) -> Result<sys::hsa_amd_memory_pool_t> {
        for pool in self.pools_of(agent)? {
            let (mut segment, mut flags, mut allowed): (sys::hsa_amd_segment_t, u32, bool) = (0, 0, false);
            // SAFETY: SEGMENT is an `hsa_amd_segment_t`, GLOBAL_FLAGS a u32, RUNTIME_ALLOC_ALLOWED a bool.
            let statuses = unsafe {
                [
                    self.api.hsa_amd_memory_pool_get_info(
                        pool,
                        sys::HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
                        (&raw mut segment).cast(),
                    ),
                    self.api.hsa_amd_memory_pool_get_info(
                        pool,
                        sys::HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
                        (&raw mut flags).cast(),
                    ),
                    self.api.hsa_amd_memory_pool_get_info(
                        pool,
                        sys::HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
                        (&raw mut allowed).cast(),
                    ),
                ]
            };
            for status in statuses {
                check(self.api, status, "hsa_amd_memory_pool_get_info")?;
            }
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
        let api = self.api;
        let mut reader = sys::hsa_code_object_reader_t { handle: 0 };
        // SAFETY: the reader reads `image.bytes`, which outlives it (destroyed below, before returning).
        let status = unsafe {
            api.hsa_code_object_reader_create_from_memory(image.bytes.as_ptr().cast(), image.bytes.len(), &mut reader)
        };
        check(api, status, "hsa_code_object_reader_create_from_memory")?;
        let loaded = self.load_executable(reader);
        // SAFETY: the reader is ours and no longer needed once the executable is frozen (or failed).
        let _ = unsafe { api.hsa_code_object_reader_destroy(reader) };
        if let Err(status) = loaded {
            return Err(LoaderError::BadImage {
                path: image.path.clone(),
                problem: format!(
                    "the HSA runtime cannot load it on GPU {device} ({}; the code object is for {}): {}",
                    self.agent_name(self.gpu),
                    target.unwrap_or("an unknown target"),
                    status_text(api, status)
                ),
            });
        }
        let executable = self.executable.expect("loaded above");
        for (slot, kernel) in self.kernels.iter_mut().zip(Kernel::ALL) {
            let symbol_name =
                std::ffi::CString::new(format!("{}.kd", kernel.name())).expect("kernel names have no NUL");
            let mut symbol = sys::hsa_executable_symbol_t { handle: 0 };
            // SAFETY: the executable is frozen; the name is a C string; `symbol` receives the handle.
            let status = unsafe {
                api.hsa_executable_get_symbol_by_name(executable, symbol_name.as_ptr(), &self.gpu, &mut symbol)
            };
            if status != sys::HSA_STATUS_SUCCESS {
                return Err(LoaderError::BadImage {
                    path: image.path.clone(),
                    problem: format!("has no kernel `{}` ({})", kernel.name(), status_name(api, status)),
                });
            }
            let mut code = KernelCode::default();
            let mut dynamic_stack = 0u8;
            let targets: [(sys::hsa_executable_symbol_info_t, *mut c_void); 5] = [
                (sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, (&raw mut code.object).cast()),
                (sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, (&raw mut code.kernarg_size).cast()),
                (sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, (&raw mut code.group_size).cast()),
                (sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, (&raw mut code.private_size).cast()),
                (sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK, (&raw mut dynamic_stack).cast()),
            ];
            for (attribute, target) in targets {
                // SAFETY: each target has the attribute's documented type: KERNEL_OBJECT a u64, the segment sizes
                // u32, DYNAMIC_CALLSTACK a bool (one byte); all outlive the call.
                let status = unsafe { api.hsa_executable_symbol_get_info(symbol, attribute, target) };
                check(api, status, "hsa_executable_symbol_get_info")?;
            }
            code.dynamic_stack = dynamic_stack != 0;
            *slot = code;
        }
        Ok(())
    }

    /// Creates the executable, loads the reader's code object for the GPU and freezes it; the failing status if not.
    fn load_executable(&mut self, reader: sys::hsa_code_object_reader_t) -> std::result::Result<(), sys::hsa_status_t> {
        let api = self.api;
        let mut executable = sys::hsa_executable_t { handle: 0 };
        // SAFETY: an empty options string; the executable is destroyed in `Drop`.
        let status = unsafe {
            api.hsa_executable_create_alt(
                sys::HSA_PROFILE_FULL,
                sys::HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                c"".as_ptr(),
                &mut executable,
            )
        };
        if status != sys::HSA_STATUS_SUCCESS {
            return Err(status);
        }
        self.executable = Some(executable);
        // SAFETY: executable, agent and reader are valid; no options; the loaded-object handle is not needed.
        let status = unsafe {
            api.hsa_executable_load_agent_code_object(
                executable,
                self.gpu,
                reader,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        if status != sys::HSA_STATUS_SUCCESS {
            return Err(status);
        }
        // SAFETY: no options; nothing is loaded into the executable after this.
        let status = unsafe { api.hsa_executable_freeze(executable, std::ptr::null()) };
        if status != sys::HSA_STATUS_SUCCESS {
            return Err(status);
        }
        Ok(())
    }

    fn create_queue(&mut self) -> Result<()> {
        let api = self.api;
        // SAFETY: QUEUE_MIN_SIZE and QUEUE_MAX_SIZE are u32.
        let (min, max) = unsafe {
            (
                self.agent_info(self.gpu, sys::HSA_AGENT_INFO_QUEUE_MIN_SIZE, 0u32)?,
                self.agent_info(self.gpu, sys::HSA_AGENT_INFO_QUEUE_MAX_SIZE, 0u32)?,
            )
        };
        let mut queue = std::ptr::null_mut();
        // SAFETY: the error callback only records the status; its data is the process-lifetime runtime table. The
        // queue is destroyed in `Drop`. `u32::MAX` segment sizes let the runtime choose.
        let status = unsafe {
            api.hsa_queue_create(
                self.gpu,
                dispatch::queue_size(min, max),
                sys::HSA_QUEUE_TYPE_MULTI,
                Some(on_queue_error),
                std::ptr::from_ref(api).cast_mut().cast(),
                u32::MAX,
                u32::MAX,
                &mut queue,
            )
        };
        check(api, status, "hsa_queue_create")?;
        self.queue = queue;
        if self.profiling {
            // SAFETY: the queue was just created.
            let status = unsafe { api.hsa_amd_profiling_set_profiler_enabled(queue, 1) };
            check(api, status, "hsa_amd_profiling_set_profiler_enabled")?;
        }
        Ok(())
    }

    fn pools(&self) -> Pools {
        self.pools.expect("pools are found before anything is allocated")
    }

    /// `len` bytes (at least one) from `pool`, which the GPU may access; freed in `Drop`.
    fn allocate(&mut self, pool: sys::hsa_amd_memory_pool_t, len: usize) -> Result<*mut c_void> {
        let mut pointer = std::ptr::null_mut();
        // SAFETY: a plain allocation; recorded below and freed in `Drop`.
        let status = unsafe { self.api.hsa_amd_memory_pool_allocate(pool, len.max(1), 0, &mut pointer) };
        check(self.api, status, "hsa_amd_memory_pool_allocate")?;
        self.allocations.push(pointer);
        // SAFETY: `pointer` is an allocation of the runtime's; one agent, no attributes.
        let status = unsafe { self.api.hsa_amd_agents_allow_access(1, &self.gpu, std::ptr::null(), pointer) };
        check(self.api, status, "hsa_amd_agents_allow_access")?;
        Ok(pointer)
    }

    fn free(&mut self, pointer: *mut c_void) {
        if let Some(index) = self.allocations.iter().position(|&p| p == pointer) {
            self.allocations.swap_remove(index);
            // SAFETY: an allocation of ours, no longer used.
            let _ = unsafe { self.api.hsa_amd_memory_pool_free(pointer) };
        }
    }
}

impl Backend for HsaBackend {
    fn lane_size(&self) -> u32 {
        self.lane_size
    }

    fn check_launch(&self, params: &LaunchParams) -> Result<()> {
        let geometry = Geometry::new(params).map_err(LoaderError::BadLaunch)?;
        // SAFETY: WORKGROUP_MAX_SIZE is a u32, WORKGROUP_MAX_DIM a u16[3], GRID_MAX_DIM an `hsa_dim3_t`.
        let (per_block, block_dims, grid) = unsafe {
            (
                self.agent_info(self.gpu, sys::HSA_AGENT_INFO_WORKGROUP_MAX_SIZE, 0u32)?,
                self.agent_info(self.gpu, sys::HSA_AGENT_INFO_WORKGROUP_MAX_DIM, [0u16; 3])?,
                self.agent_info(self.gpu, sys::HSA_AGENT_INFO_GRID_MAX_DIM, sys::hsa_dim3_t::default())?,
            )
        };
        // A kernel compiled for at most N work-items per group must not be dispatched with more.
        let kernel_limit = self.metadata[Kernel::Start as usize].max_flat_workgroup_size.unwrap_or(u32::MAX);
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
        // SAFETY: zeroes the `words` words just allocated.
        let status = unsafe { self.api.hsa_amd_memory_fill(pointer, 0, words) };
        check(self.api, status, "hsa_amd_memory_fill")?;
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
        let status = unsafe { self.api.hsa_memory_copy(address as *mut c_void, staging, bytes.len()) };
        self.free(staging);
        check(self.api, status, "hsa_memory_copy")
    }

    fn launch(&mut self, kernel: Kernel, params: &LaunchParams, args: &[u8]) -> Result<()> {
        let api = self.api;
        let index = kernel as usize;
        let geometry = Geometry::new(params).map_err(LoaderError::BadLaunch)?;
        let code = self.kernels[index];
        let metadata = &self.metadata[index];
        let size = (code.kernarg_size as usize).max(metadata.kernarg_segment_size as usize);
        let segment = dispatch::kernarg_segment(size, args, &metadata.args, params, self.queue as u64);
        let kernargs = self.allocate(self.pools().kernarg, segment.len())?;
        // SAFETY: the kernarg allocation holds `segment.len()` bytes; the two do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(segment.as_ptr(), kernargs.cast::<u8>(), segment.len()) };

        let mut signal = sys::hsa_signal_t { handle: 0 };
        // SAFETY: a signal with value 1 and any consumer; destroyed in `Drop`. The packet processor decrements it
        // to 0 when the dispatch completes.
        let status = unsafe { api.hsa_signal_create(1, 0, std::ptr::null(), &mut signal) };
        check(api, status, "hsa_signal_create")?;
        self.dispatches.push((kernel, signal));
        let block_memory = startup_common::abi::block_memory_bytes(params, self.lane_size);
        let packet = dispatch::dispatch_packet(&geometry, &code, block_memory, kernargs, signal);

        // SAFETY: the queue is ours; the runtime keeps its descriptor valid until `hsa_queue_destroy`.
        let queue = unsafe { &*self.queue };
        // SAFETY: reserves one packet slot.
        let slot_index = unsafe { api.hsa_queue_add_write_index_relaxed(self.queue, 1) };
        // Wait until the slot is free: the packet processor has read everything a full ring before it.
        // SAFETY: reading the queue's read index has no preconditions.
        while slot_index - unsafe { api.hsa_queue_load_read_index_scacquire(self.queue) } >= u64::from(queue.size) {
            if let Some(fault) = reported_fault() {
                return Err(LoaderError::DeviceFault { kernel: kernel.name(), message: fault });
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
        // SAFETY: ringing the queue's doorbell with the packet's index tells the packet processor to go on.
        unsafe { api.hsa_signal_store_screlease(queue.doorbell_signal, slot_index as i64) };
        Ok(())
    }

    fn poll(&mut self) -> Result<Progress> {
        if let Some(fault) = reported_fault() {
            return Ok(Progress::Faulted(fault));
        }
        for (_, signal) in &self.dispatches {
            // SAFETY: the signal is ours and alive.
            if unsafe { self.api.hsa_signal_load_scacquire(*signal) } > 0 {
                return Ok(Progress::Running);
            }
        }
        Ok(Progress::Finished)
    }

    fn resource_usage(&self, kernel: Kernel) -> Result<ResourceUsage> {
        let (code, metadata) = (&self.kernels[kernel as usize], &self.metadata[kernel as usize]);
        Ok(ResourceUsage {
            // Vector registers per work-item, AMD's counterpart of CUDA's per-thread registers.
            registers: metadata.vgpr_count,
            shared_bytes: code.group_size.into(),
            local_bytes: code.private_size.into(),
            max_threads_per_block: metadata.max_flat_workgroup_size,
        })
    }

    fn global_address(&mut self, name: &str) -> Result<u64> {
        let api = self.api;
        let executable = self.executable.expect("the code object is loaded before the backend is used");
        let c_name = std::ffi::CString::new(name).map_err(|_| LoaderError::Driver {
            api: "hsa_executable_get_symbol_by_name",
            message: "NUL in name".into(),
        })?;
        let mut symbol = sys::hsa_executable_symbol_t { handle: 0 };
        // SAFETY: the executable is frozen; the name is a C string; `symbol` receives the handle. A program-scope
        // variable is looked up without an agent.
        let status = unsafe {
            api.hsa_executable_get_symbol_by_name(executable, c_name.as_ptr(), std::ptr::null(), &mut symbol)
        };
        if status != sys::HSA_STATUS_SUCCESS {
            // SAFETY: as above, for an agent-scope variable.
            let status =
                unsafe { api.hsa_executable_get_symbol_by_name(executable, c_name.as_ptr(), &self.gpu, &mut symbol) };
            check(api, status, "hsa_executable_get_symbol_by_name").map_err(|error| match error {
                LoaderError::Driver { api, message } => {
                    LoaderError::Driver { api, message: format!("`{name}`: {message}") }
                }
                other => other,
            })?;
        }
        let mut address = 0u64;
        // SAFETY: VARIABLE_ADDRESS is a u64, which outlives the call.
        let status = unsafe {
            api.hsa_executable_symbol_get_info(
                symbol,
                sys::HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
                (&raw mut address).cast(),
            )
        };
        check(api, status, "hsa_executable_symbol_get_info")?;
        Ok(address)
    }

    fn kernel_times(&mut self) -> Option<[Duration; 3]> {
        if !self.profiling {
            return None;
        }
        let mut frequency = 0u64;
        // SAFETY: TIMESTAMP_FREQUENCY is a u64.
        let status = unsafe {
            self.api.hsa_system_get_info(sys::HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, (&raw mut frequency).cast())
        };
        if status != sys::HSA_STATUS_SUCCESS || frequency == 0 {
            return None;
        }
        let mut times = [Duration::ZERO; 3];
        for kernel in Kernel::ALL {
            let (_, signal) = self.dispatches.iter().find(|(k, _)| *k == kernel)?;
            let mut time = sys::hsa_amd_profiling_dispatch_time_t::default();
            // SAFETY: the signal completed a dispatch on a queue with profiling enabled; the runtime reports its
            // start and end in system timestamp ticks (fails, and we report nothing, otherwise).
            let status = unsafe { self.api.hsa_amd_profiling_get_dispatch_time(self.gpu, *signal, &mut time) };
            if status != sys::HSA_STATUS_SUCCESS {
                return None;
            }
            times[kernel as usize] =
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
        let api = self.api;
        // After a fault, or while a dispatch still runs, the GPU may still use the queue, the code and the memory:
        // tearing them down could hang or corrupt. Leave them to the process exit, which releases everything.
        // SAFETY: each signal is ours and alive.
        let idle = reported_fault().is_none()
            && self.dispatches.iter().all(|(_, signal)| unsafe { api.hsa_signal_load_scacquire(*signal) } <= 0);
        if !idle {
            return;
        }
        // Errors here cannot be acted on: the run's outcome is decided. Each handle is ours and released once.
        // SAFETY: for each call below, the handle was created by this backend, nothing runs on the GPU any more and
        // the handle is not used afterwards.
        unsafe {
            for (_, signal) in self.dispatches.drain(..) {
                let _ = api.hsa_signal_destroy(signal);
            }
            if !self.queue.is_null() {
                let _ = api.hsa_queue_destroy(self.queue);
            }
            for pointer in self.allocations.drain(..) {
                let _ = api.hsa_amd_memory_pool_free(pointer);
            }
            if let Some(executable) = self.executable.take() {
                let _ = api.hsa_executable_destroy(executable);
            }
            let _ = api.hsa_shut_down();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runtime_is_named() {
        let error = open_runtime("libhsa-runtime64-not-here.so.1").err().unwrap();
        assert_eq!(error, "the ROCm HSA runtime (libhsa-runtime64-not-here.so.1) is not installed");
    }

    #[test]
    fn a_library_without_hsa_is_refused_without_panicking() {
        // libc is present everywhere and exports none of the HSA functions.
        let error = open_runtime("libc.so.6").err().unwrap();
        assert!(error.starts_with("libc.so.6 lacks HSA functions the loader needs"), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }

    /// Where the Debian runtime is installed (CI installs it), every function the bindings name must resolve.
    #[test]
    fn the_installed_runtime_has_every_function() {
        match open_runtime(LIBRARY) {
            Ok(api) => {
                let text = status_text(&api, sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES);
                assert!(text.starts_with("HSA_STATUS_ERROR_OUT_OF_RESOURCES"), "{text}");
                assert_eq!(status_name(&api, sys::HSA_STATUS_ERROR_INVALID_ISA), "HSA_STATUS_ERROR_INVALID_ISA");
            }
            Err(message) => assert!(message.contains("is not installed"), "{message}"),
        }
    }

    #[test]
    fn fault_reasons_are_spelled_out() {
        assert_eq!(
            fault_reasons(sys::HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT as u32),
            "page not present or supervisor privilege"
        );
        let both = (sys::HSA_AMD_MEMORY_FAULT_READ_ONLY | sys::HSA_AMD_MEMORY_FAULT_IMPRECISE) as u32;
        assert_eq!(fault_reasons(both), "write to a read-only page, address may be imprecise");
        assert_eq!(fault_reasons(sys::HSA_AMD_MEMORY_FAULT_HANG as u32), "GPU hang");
        assert_eq!(fault_reasons(0), "unknown reason");
    }
}
