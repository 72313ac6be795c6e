//! The CUDA backend, on cudarc's `result` layer (thin checked wrappers over the driver API; its safe layer tracks
//! events around every launch, which the startup's three back-to-back kernels do not need).

use std::ffi::{CString, c_uint, c_void};
use std::time::Duration;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr, CUfunction_attribute as FnAttr};
use startup_common::abi::{FINI_ARRAY_END, FINI_ARRAY_START, INIT_ARRAY_END, INIT_ARRAY_START, Kernel, LaunchParams};

use crate::backend::{Backend, DeviceOptions, HostMapped, Progress, ResourceUsage};
use crate::ctors::ConstructorTable;
use crate::error::{LoaderError, Result};
use crate::image::{Image, ImageKind};

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
    launched: usize,
}

/// `api failed: CUDA_ERROR_...: description`.
fn driver_error(api: &'static str) -> impl FnOnce(DriverError) -> LoaderError {
    move |error| LoaderError::Driver { api, message: describe(error) }
}

fn describe(error: DriverError) -> String {
    let name =
        error.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", error.0));
    match error.error_string() {
        Ok(text) => format!("{name} ({})", text.to_string_lossy()),
        Err(_) => name,
    }
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
            launched: 0,
        };
        // SAFETY: a plain setting of the current context. Each thread's stack holds `print!`'s formatting buffer
        // and the panic handler's frames; the driver's default of 1 KiB overflows there.
        unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_STACK_SIZE, options.stack_size) }
            .result()
            .map_err(driver_error("cuCtxSetLimit"))?;
        backend.module = load_module(image, &JitCache::for_device(device))?;
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

/// Registers per thread that compiled code may use: 64 Ki registers per block / 1024 threads.
pub const MAX_REGISTERS: u32 = 64;

/// Loads the image. PTX and relocatable cubins go through the driver's JIT linker, which compiles them as
/// relocatable device code: then a function's address means the same in every kernel of the module. (Compiled
/// whole-program, as `cuModuleLoadData` does with PTX, ptxas clones device functions into each kernel, and a
/// function pointer stored by `_begin` — a constructor's `atexit` handler — is not callable from `_end`.) A linked
/// cubin (`nvlink` of a relocatable one) loads as it is; `Image::check_startup_abi` has refused a whole-program one.
fn load_module(image: &Image, cache: &JitCache) -> Result<sys::CUmodule> {
    let bad_image = |problem: String| LoaderError::BadImage { path: image.path.clone(), problem };
    if image.kind == ImageKind::Cubin && !image.is_relocatable()? {
        return load_linked_cubin(image);
    }
    let cached = cache.path(&image.bytes);
    if let Some(cubin) = cached.as_ref().and_then(|path| std::fs::read(path).ok()) {
        let mut module = std::ptr::null_mut();
        // SAFETY: a cubin this loader linked earlier for this device and driver; if it was damaged, loading fails
        // and the image is linked again below.
        if unsafe { sys::cuModuleLoadData(&mut module, cubin.as_ptr().cast()) }.result().is_ok() {
            return Ok(module);
        }
    }
    let (input_type, data) = match image.kind {
        ImageKind::Ptx => {
            let text = image.ptx_text()?;
            let text = CString::new(text).map_err(|_| bad_image("PTX contains a NUL byte".into()))?;
            (sys::CUjitInputType::CU_JIT_INPUT_PTX, text.into_bytes_with_nul())
        }
        ImageKind::Cubin => (sys::CUjitInputType::CU_JIT_INPUT_CUBIN, image.bytes.clone()),
        ImageKind::AmdCodeObject => unreachable!("the run dispatches AMD code objects to the HSA backend"),
    };
    let log = JitLog::new();
    // Without a bound, ptxas may give a function up to 255 registers, which caps blocks at 256 threads; 64 lets
    // every block size up to CUDA's 1024 launch. In relocatable code the bound must hold for every function, so it
    // is a link option rather than a kernel's `.maxntid`.
    let mut options = [log.options[0], log.options[1], sys::CUjit_option::CU_JIT_MAX_REGISTERS];
    let mut values = [log.values[0], log.values[1], MAX_REGISTERS as usize as *mut c_void];
    let mut link = std::ptr::null_mut();
    // SAFETY: the option arrays hold three entries each and the log outlives the link state, destroyed below.
    unsafe { sys::cuLinkCreate_v2(3, options.as_mut_ptr(), values.as_mut_ptr(), &mut link) }
        .result()
        .map_err(driver_error("cuLinkCreate"))?;
    let linked = (|| {
        // SAFETY: `data` is a NUL-terminated PTX string or a whole relocatable cubin, alive for the call.
        unsafe {
            sys::cuLinkAddData_v2(
                link,
                input_type,
                data.as_ptr().cast_mut().cast(),
                data.len(),
                c"image".as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
        .result()?;
        let (mut cubin, mut size) = (std::ptr::null_mut(), 0usize);
        // SAFETY: the link state holds the one input added above.
        unsafe { sys::cuLinkComplete(link, &mut cubin, &mut size) }.result()?;
        if let Some(path) = &cached {
            // SAFETY: the link state owns `size` bytes at `cubin` until it is destroyed, after this closure.
            JitCache::store(path, unsafe { std::slice::from_raw_parts(cubin.cast::<u8>(), size) });
        }
        let mut module = std::ptr::null_mut();
        // SAFETY: `cubin` is the linked image the link state owns until it is destroyed, after this call.
        unsafe { sys::cuModuleLoadData(&mut module, cubin) }.result()?;
        Ok(module)
    })();
    // SAFETY: created above; the module no longer needs the linker's output once loaded.
    unsafe { sys::cuLinkDestroy(link) };
    linked.map_err(|error| bad_image(log.problem(error)))
}

fn load_linked_cubin(image: &Image) -> Result<sys::CUmodule> {
    let mut log = JitLog::new();
    let mut module = std::ptr::null_mut();
    // SAFETY: the bytes are a whole cubin; the option arrays have two entries each and the log outlives the call.
    unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            image.bytes.as_ptr().cast(),
            2,
            log.options.as_mut_ptr(),
            log.values.as_mut_ptr(),
        )
    }
    .result()
    .map_err(|error| LoaderError::BadImage { path: image.path.clone(), problem: log.problem(error) })?;
    Ok(module)
}

/// Linked cubins from earlier runs. The driver caches what `cuModuleLoadData` compiles, but not what its JIT linker
/// links, and linking the startup's PTX takes about two seconds: the loader keeps its own cache, in
/// `$GPU_LOADER_CACHE_DIR`, else `$XDG_CACHE_HOME/gpu-loader`, else `~/.cache/gpu-loader`. `GPU_LOADER_CACHE_DISABLE=1`
/// turns it off. Entries are keyed by the image, the device's compute capability, the driver version, the
/// register cap and the loader's version.
pub struct JitCache {
    dir: Option<std::path::PathBuf>,
    salt: String,
}

impl JitCache {
    fn for_device(device: sys::CUdevice) -> Self {
        let disabled = std::env::var_os("GPU_LOADER_CACHE_DISABLE").is_some_and(|v| v != "0" && !v.is_empty());
        let dir = std::env::var_os("GPU_LOADER_CACHE_DIR")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| std::path::PathBuf::from(d).join("gpu-loader")))
            .or_else(|| std::env::var_os("HOME").map(|d| std::path::PathBuf::from(d).join(".cache/gpu-loader")))
            .filter(|_| !disabled);
        let attribute = |attribute| {
            // SAFETY: plain queries on a valid device.
            unsafe { result::device::get_attribute(device, attribute) }.unwrap_or(-1)
        };
        let mut driver = 0;
        // SAFETY: writes one int.
        let _ = unsafe { sys::cuDriverGetVersion(&mut driver) };
        let salt = format!(
            "sm{}{}-driver{driver}-regs{MAX_REGISTERS}-loader{}",
            attribute(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            attribute(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
            env!("CARGO_PKG_VERSION")
        );
        Self { dir, salt }
    }

    /// Where the linked form of `image` is (or would be) kept.
    fn path(&self, image: &[u8]) -> Option<std::path::PathBuf> {
        use std::hash::{Hash, Hasher};
        let dir = self.dir.as_ref()?;
        // Two independently seeded 64-bit hashes: a 128-bit key, so distinct images do not collide in practice.
        let hash = |seed: u8| {
            let mut hasher = std::hash::DefaultHasher::new();
            (seed, &self.salt, image).hash(&mut hasher);
            hasher.finish()
        };
        Some(dir.join(format!("{:016x}{:016x}-{}.cubin", hash(1), hash(2), image.len())))
    }

    /// Keeps `cubin` at `path`, atomically; a cache that cannot be written is only a slower next run.
    fn store(path: &std::path::Path, cubin: &[u8]) {
        let Some(dir) = path.parent() else { return };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&temporary, cubin).is_ok() && std::fs::rename(&temporary, path).is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
    }
}

/// The JIT's error log, whose first error line names what is wrong with a bad image.
struct JitLog {
    buffer: Box<[u8; 16 * 1024]>,
    options: [sys::CUjit_option; 2],
    values: [*mut c_void; 2],
}

impl JitLog {
    fn new() -> Self {
        let mut buffer = Box::new([0u8; 16 * 1024]);
        let values = [buffer.as_mut_ptr().cast::<c_void>(), buffer.len() as *mut c_void];
        Self {
            buffer,
            options: [
                sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
                sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            ],
            values,
        }
    }

    fn problem(&self, error: DriverError) -> String {
        let end = self.buffer.iter().position(|&b| b == 0).unwrap_or(0);
        let log = String::from_utf8_lossy(&self.buffer[..end]);
        match log.lines().find(|line| line.contains("error")).or(log.lines().next()).map(str::trim) {
            Some(line) if !line.is_empty() => format!("the driver cannot load it: {} ({line})", describe(error)),
            _ => format!("the driver cannot load it: {}", describe(error)),
        }
    }
}

impl Backend for CudaBackend {
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
        let shared_bytes = startup_common::abi::block_memory_bytes(params, self.lane_size());
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
        self.launched += 1;
        Ok(())
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
