//! The one place a target's backend is opened: the image's target names its backend ([`BackendKind`]), and
//! [`open_backend`] loads the image on it. `run` and the test worker both open theirs here and drive it as a
//! [`Backend`] alone.

use gpu_startup_targets::{BackendKind, Target};

use crate::backend::{Backend, DeviceOptions};
use crate::ctors::ConstructorTable;
use crate::error::Result;
use crate::image::Image;

/// Opens the backend of the image's target on the device `options` names and loads `image` on it, with its
/// constructor arrays from `constructors` where the backend builds them (CUDA; an AMD code object has its own).
pub fn open_backend(
    image: &Image,
    constructors: &ConstructorTable,
    options: &DeviceOptions,
) -> Result<Box<dyn Backend>> {
    Ok(match image.kind.target().backend {
        BackendKind::Cuda => Box::new(crate::cuda::CudaBackend::load(options, image, constructors)?),
        BackendKind::Hsa => Box::new(crate::hsa::HsaBackend::load(options, image)?),
    })
}

/// How many GPUs of `target` the machine has, where that can be asked without loading anything (the CUDA driver);
/// `None` otherwise.
pub fn gpus_before_loading(target: &Target) -> Option<u32> {
    match target.backend {
        BackendKind::Cuda => crate::cuda::init_driver().ok(),
        BackendKind::Hsa => None,
    }
}
