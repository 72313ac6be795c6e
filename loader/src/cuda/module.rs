//! Loading an image into a module: through the driver's JIT linker, with the loader's cache of what it linked, or a
//! linked cubin as it is.

use std::borrow::Cow;
use std::ffi::{CString, c_void};

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr};

use super::errors::{describe, driver_error};
use crate::error::{LoaderError, Result};
use crate::image::{Image, ImageKind};

/// Registers per thread that compiled code may use: 64 Ki registers per block / 1024 threads.
pub const MAX_REGISTERS: u32 = 64;

/// Loads the image. PTX and relocatable cubins go through the driver's JIT linker, which compiles them as
/// relocatable device code: then a function's address means the same in every kernel of the module. (Compiled
/// whole-program, as `cuModuleLoadData` does with PTX, ptxas clones device functions into each kernel, and a
/// function pointer stored by `_begin` — a constructor's `atexit` handler — is not callable from `_end`.) A linked
/// cubin (`nvlink` of a relocatable one) loads as it is; `Image::check_startup_abi` has refused a whole-program one.
pub(super) fn load_module(image: &Image, cache: &JitCache) -> Result<sys::CUmodule> {
    let bad_image = |problem: String| LoaderError::BadImage { path: image.path.clone(), problem };
    if image.kind == ImageKind::Cubin && !image.is_relocatable()? {
        return load_linked_cubin(image);
    }
    let cached = cache.path(image.bytes());
    if let Some(cubin) = cached.as_ref().and_then(|path| std::fs::read(path).ok()) {
        let mut module = std::ptr::null_mut();
        // SAFETY: a cubin this loader linked earlier for this device and driver; if it was damaged, loading fails
        // and the image is linked again below.
        if unsafe { sys::cuModuleLoadData(&mut module, cubin.as_ptr().cast()) }.result().is_ok() {
            return Ok(module);
        }
    }
    // The driver reads PTX as a C string; a cubin is passed as the image holds it.
    let (input_type, data): (_, Cow<'_, [u8]>) = match image.kind {
        ImageKind::Ptx => {
            let text = image.ptx_text()?;
            let text = CString::new(text).map_err(|_| bad_image("PTX contains a NUL byte".into()))?;
            (sys::CUjitInputType::CU_JIT_INPUT_PTX, Cow::Owned(text.into_bytes_with_nul()))
        }
        ImageKind::Cubin => (sys::CUjitInputType::CU_JIT_INPUT_CUBIN, Cow::Borrowed(image.bytes())),
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
            image.bytes().as_ptr().cast(),
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
    pub(super) fn for_device(device: sys::CUdevice) -> Self {
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
