//! The CUDA backend, on cudarc's `result` layer (thin checked wrappers over the driver API; its safe layer tracks
//! events around every launch, which the startup's three back-to-back kernels do not need).

use std::ffi::{CString, c_uint, c_void};
use std::time::Duration;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr, CUfunction_attribute as FnAttr};
use gpu_startup_protocol::abi::{
    EARLY_LAUNCH_MARKER, FINI_ARRAY_END, FINI_ARRAY_START, INIT_ARRAY_END, INIT_ARRAY_START, Kernel, LaunchParams,
};

mod errors;
mod graph;
mod module;

pub use module::MAX_REGISTERS;

use crate::backend::LoadSteps;
use crate::backend::{Backend, DeviceOptions, HostMapped, Progress, ResourceUsage, launch_one_by_one, startup_grids};
use crate::ctors::ConstructorTable;
use crate::error::{LoaderError, Result};
use crate::image::Image;
use errors::{describe, driver_error};
use graph::{Chain, StartupLauncher};
use module::{JitCache, load_module};

/// One program's CUDA state: the primary context of its device, the module, one stream and every allocation.
pub struct CudaBackend {
    device: sys::CUdevice,
    module: sys::CUmodule,
    kernels: [sys::CUfunction; 3],
    stream: sys::CUstream,
    host_allocations: Vec<*mut c_void>,
    device_allocations: Vec<sys::CUdeviceptr>,
    /// Recorded around each kernel when timings were asked for.
    events: Option<[sys::CUevent; 4]>,
    /// The startup's kernels as one graph, unless kernel times were asked for (a graph's kernels cannot be timed
    /// one by one).
    startup: StartupLauncher,
    /// How long each step of [`CudaBackend::load`] took.
    load_steps: Vec<(&'static str, Duration)>,
}

/// Makes sure the driver library exists before cudarc touches it (cudarc panics when it is missing), and that it
/// has a device.
pub fn init_driver() -> Result<c_uint> {
    // SAFETY: only tries to open the library by its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err(LoaderError::NoGpu("the NVIDIA driver library (libcuda.so.1) is not installed".into()));
    }
    result::init().map_err(|error| LoaderError::NoGpu(format!("cuInit failed: {}", describe(error))))?;
    let count = result::device::get_count().map_err(driver_error("cuDeviceGetCount"))?;
    if count <= 0 {
        return Err(LoaderError::NoGpu("the NVIDIA driver found no GPU".into()));
    }
    Ok(count as c_uint)
}

impl CudaBackend {
    /// Opens device `options.device`, loads the image and builds its constructor arrays from `constructors`.
    pub fn load(options: &DeviceOptions, image: &Image, constructors: &ConstructorTable) -> Result<Self> {
        let mut steps = LoadSteps::start();
        let count = init_driver()?;
        if options.device >= count as usize {
            return Err(LoaderError::BadLaunch(format!(
                "there is no GPU {} (this machine has {count})",
                options.device
            )));
        }
        let device = result::device::get(options.device as i32).map_err(driver_error("cuDeviceGet"))?;
        // SAFETY: `device` is a valid ordinal; the primary context is released in `Drop`.
        let context =
            unsafe { result::primary_ctx::retain(device) }.map_err(driver_error("cuDevicePrimaryCtxRetain"))?;
        // SAFETY: the context was just retained.
        unsafe { result::ctx::set_current(context) }.map_err(driver_error("cuCtxSetCurrent"))?;
        let mut backend = Self {
            device,
            module: std::ptr::null_mut(),
            kernels: [std::ptr::null_mut(); 3],
            stream: std::ptr::null_mut(),
            host_allocations: Vec::new(),
            device_allocations: Vec::new(),
            events: None,
            startup: StartupLauncher::default(),
            load_steps: Vec::new(),
        };
        steps.done("driver and context");
        // SAFETY: a plain setting of the current context. Each thread's stack holds `print!`'s formatting buffer
        // and the panic handler's frames; the driver's default of 1 KiB overflows there.
        if let Err(error) = unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_STACK_SIZE, options.stack_size) }
            .result()
            .map_err(driver_error("cuCtxSetLimit"))
        {
            // The reservation is the stack times every resident thread: say so, for a size that looks small.
            let threads = u64::from(backend.attribute(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?)
                * u64::from(backend.attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?);
            let total = threads.saturating_mul(options.stack_size as u64);
            return Err(LoaderError::Stack { size: options.stack_size, threads, total, source: Box::new(error) });
        }
        steps.done("stack reservation");
        backend.module = load_module(image, &JitCache::for_device(device))?;
        steps.done("module");
        for (slot, kernel) in backend.kernels.iter_mut().zip(Kernel::ALL) {
            let name = CString::new(kernel.name()).expect("kernel names have no NUL");
            // SAFETY: the module is loaded; the name is a C string.
            *slot =
                unsafe { result::module::get_function(backend.module, name) }.map_err(|_| LoaderError::BadImage {
                    path: image.path.clone(),
                    problem: format!("has no kernel `{}`", kernel.name()),
                })?;
        }
        backend.install_constructors(constructors)?;
        let mut driver_version = 0;
        // SAFETY: writes one integer; a failure leaves 0, which only keeps the graph's edges ordered.
        let _ = unsafe { sys::cuDriverGetVersion(&mut driver_version) };
        // A lookup that fails for any reason keeps the edges ordered: always correct, only slower.
        let defines_marker = backend.global(EARLY_LAUNCH_MARKER).is_ok();
        backend.startup = StartupLauncher::new(Chain::for_image(defines_marker, driver_version));
        backend.stream =
            result::stream::create(result::stream::StreamKind::NonBlocking).map_err(driver_error("cuStreamCreate"))?;
        if options.kernel_times {
            let mut events = [std::ptr::null_mut(); 4];
            for event in &mut events {
                *event = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                    .map_err(driver_error("cuEventCreate"))?;
            }
            backend.events = Some(events);
        }
        steps.done("kernels, constructors, stream");
        backend.load_steps = steps.steps;
        Ok(backend)
    }

    fn attribute(&self, attribute: Attr) -> Result<u32> {
        // SAFETY: `device` is valid; the attribute is a plain query.
        unsafe { result::device::get_attribute(self.device, attribute) }
            .map(|value| value.max(0) as u32)
            .map_err(driver_error("cuDeviceGetAttribute"))
    }

    /// The device address and size of a global of the module.
    fn global(&self, name: &str) -> Result<(sys::CUdeviceptr, usize)> {
        let c_name = CString::new(name)
            .map_err(|_| LoaderError::BadConstructor { symbol: name.into(), problem: "contains NUL".into() })?;
        // SAFETY: the module is loaded; the name is a C string.
        unsafe { result::module::get_global(self.module, c_name) }.map_err(|error| LoaderError::Driver {
            api: "cuModuleGetGlobal",
            message: format!("`{name}`: {}", describe(error)),
        })
    }

    /// Builds the constructor and destructor arrays in device memory from the `__init_array_object_*` globals (each
    /// holds a function address) and stores their bounds in the startup's four globals.
    fn install_constructors(&mut self, table: &ConstructorTable) -> Result<()> {
        for (objects, [start, end]) in
            [(&table.init, [INIT_ARRAY_START, INIT_ARRAY_END]), (&table.fini, [FINI_ARRAY_START, FINI_ARRAY_END])]
        {
            if objects.is_empty() {
                continue;
            }
            let mut functions = Vec::with_capacity(objects.len());
            for object in objects {
                let (address, size) = self.global(object)?;
                if size != size_of::<u64>() {
                    return Err(LoaderError::BadConstructor {
                        symbol: object.clone(),
                        problem: format!("is {size} bytes, not a function pointer"),
                    });
                }
                let mut function = [0u64];
                // SAFETY: reads the 8-byte global just looked up into an 8-byte buffer.
                unsafe { result::memcpy_dtoh_sync(&mut function, address) }.map_err(driver_error("cuMemcpyDtoH"))?;
                functions.push(function[0]);
            }
            let array = self.alloc_device(functions.len() * size_of::<u64>())?;
            // SAFETY: `array` holds exactly `functions.len()` words.
            unsafe { result::memcpy_htod_sync(array, &functions) }.map_err(driver_error("cuMemcpyHtoD"))?;
            for (bound, value) in [(start, array), (end, array + (functions.len() * size_of::<u64>()) as u64)] {
                let (address, size) = self.global(bound)?;
                if size != size_of::<u64>() {
                    return Err(LoaderError::BadConstructor {
                        symbol: bound.into(),
                        problem: format!("is {size} bytes, not a pointer"),
                    });
                }
                // SAFETY: writes one word into the 8-byte global.
                unsafe { result::memcpy_htod_sync(address, &[value]) }.map_err(driver_error("cuMemcpyHtoD"))?;
            }
        }
        Ok(())
    }
}

impl Backend for CudaBackend {
    fn gpu_count(&self) -> Result<u32> {
        init_driver()
    }
    fn lane_size(&self) -> u32 {
        32
    }

    fn check_launch(&self, params: &LaunchParams) -> Result<()> {
        crate::launch::check_limits(
            params,
            self.attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            [
                self.attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                self.attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                self.attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            [
                self.attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                self.attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                self.attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
        )
    }

    fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMapped> {
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: a plain allocation; freed in `Drop`.
        let host = unsafe { result::malloc_host(len.max(1), flags) }.map_err(driver_error("cuMemHostAlloc"))?;
        self.host_allocations.push(host);
        // SAFETY: `host` is `len` bytes we own.
        unsafe { host.cast::<u8>().write_bytes(0, len) };
        let mut device = 0;
        // SAFETY: `host` was allocated with DEVICEMAP, so it has a device address.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) }
            .result()
            .map_err(driver_error("cuMemHostGetDevicePointer"))?;
        Ok(HostMapped { host: host.cast(), device, len })
    }

    fn alloc_device(&mut self, len: usize) -> Result<u64> {
        // SAFETY: a plain allocation; freed in `Drop`.
        let address = unsafe { result::malloc_sync(len.max(1)) }.map_err(driver_error("cuMemAlloc"))?;
        self.device_allocations.push(address);
        // SAFETY: zeroes the `len` bytes just allocated.
        unsafe { result::memset_d8_sync(address, 0, len.max(1)) }.map_err(driver_error("cuMemsetD8"))?;
        Ok(address)
    }

    fn copy_to_device(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        // SAFETY: callers pass an allocation of theirs of at least `bytes.len()` bytes.
        unsafe { result::memcpy_htod_sync(address, bytes) }.map_err(driver_error("cuMemcpyHtoD"))
    }

    fn launch(&mut self, kernel: Kernel, params: &LaunchParams, args: &[u8]) -> Result<()> {
        let index = kernel as usize;
        if let (Some(events), 0) = (self.events, index) {
            // SAFETY: the event and stream are ours.
            unsafe { result::event::record(events[0], self.stream) }.map_err(driver_error("cuEventRecord"))?;
        }
        let [tx, ty, tz] = params.threads;
        let [bx, by, bz] = params.blocks;
        // The startup keeps a lock word per warp in launch-sized shared memory.
        let shared_bytes = gpu_startup_protocol::abi::block_memory_bytes(params, self.lane_size());
        // The driver copies the argument bytes at launch, so a pointer to the caller's bytes suffices.
        let mut kernel_params = [args.as_ptr().cast_mut().cast::<c_void>()];
        // SAFETY: the function belongs to the loaded module and takes exactly one parameter of `args.len()` bytes
        // (checked against the image before loading).
        unsafe {
            result::launch_kernel(
                self.kernels[index],
                (bx, by, bz),
                (tx, ty, tz),
                shared_bytes,
                self.stream,
                &mut kernel_params,
            )
        }
        .map_err(|error| LoaderError::Driver {
            api: "cuLaunchKernel",
            message: format!("`{}`: {}", kernel.name(), describe(error)),
        })?;
        if let Some(events) = self.events {
            // SAFETY: the event and stream are ours.
            unsafe { result::event::record(events[index + 1], self.stream) }.map_err(driver_error("cuEventRecord"))?;
        }
        Ok(())
    }

    fn launch_startup(&mut self, start: &LaunchParams, args: [&[u8]; 3]) -> Result<()> {
        if self.events.is_some() {
            return launch_one_by_one(self, start, args);
        }
        let grids = startup_grids(start);
        let shared_bytes = grids.map(|grid| gpu_startup_protocol::abi::block_memory_bytes(&grid, self.lane_size()));
        self.startup.launch(self.kernels, grids, shared_bytes, args, self.stream)
    }

    fn poll(&mut self) -> Result<Progress> {
        // SAFETY: the stream is ours.
        match unsafe { sys::cuStreamQuery(self.stream) } {
            sys::CUresult::CUDA_SUCCESS => Ok(Progress::Finished),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(Progress::Running),
            error => Ok(Progress::Faulted(describe(DriverError(error)))),
        }
    }

    fn resource_usage(&self, kernel: Kernel) -> Result<ResourceUsage> {
        let function = self.kernels[kernel as usize];
        let get = |attribute| {
            // SAFETY: a plain query on a function of the loaded module.
            unsafe { result::function::get_function_attribute(function, attribute) }
                .map(|value| value.max(0) as u32)
                .map_err(driver_error("cuFuncGetAttribute"))
        };
        Ok(ResourceUsage {
            registers: Some(get(FnAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?),
            shared_bytes: get(FnAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?.into(),
            local_bytes: get(FnAttr::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?.into(),
            max_threads_per_block: Some(get(FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?),
        })
    }

    fn global_address(&mut self, name: &str) -> Result<u64> {
        Ok(self.global(name)?.0)
    }

    fn load_steps(&self) -> &[(&'static str, Duration)] {
        &self.load_steps
    }

    fn kernel_times(&mut self) -> Option<[Duration; 3]> {
        let events = self.events?;
        let mut times = [Duration::ZERO; 3];
        for (index, time) in times.iter_mut().enumerate() {
            // SAFETY: both events were recorded on our stream; `elapsed` fails (and we report nothing) if they have
            // not completed.
            let ms = unsafe { result::event::elapsed(events[index], events[index + 1]) }.ok()?;
            *time = Duration::from_secs_f64(f64::from(ms) / 1e3);
        }
        Some(times)
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Errors here cannot be acted on: the run's outcome is already decided. Each handle is ours and released
        // once.
        // SAFETY: for each call below, the handle was created by this backend and is not used afterwards.
        unsafe {
            if let Some(events) = self.events {
                for event in events {
                    let _ = result::event::destroy(event);
                }
            }
            if !self.stream.is_null() {
                let _ = result::stream::synchronize(self.stream);
                let _ = result::stream::destroy(self.stream);
            }
            // The graph's nodes name the module's functions: it goes before the module.
            self.startup = StartupLauncher::default();
            for address in self.device_allocations.drain(..) {
                let _ = result::free_sync(address);
            }
            for host in self.host_allocations.drain(..) {
                let _ = result::free_host(host);
            }
            if !self.module.is_null() {
                let _ = result::module::unload(self.module);
            }
            let _ = result::primary_ctx::release(self.device);
        }
    }
}
