//! The GPUs this machine has, which decide what `cargo xtask test` can run.

use std::path::Path;

use gpu_startup_targets::{BackendKind, Target};

/// The GPUs this machine can run programs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gpus {
    pub nvidia: bool,
    pub amd: bool,
}

impl Gpus {
    /// Asks the NVIDIA driver for a device (without panicking when it is missing) and looks for the AMD kernel
    /// driver's `/dev/kfd`.
    pub fn detect() -> Self {
        Self { nvidia: gpu_loader::cuda::init_driver().is_ok(), amd: Path::new("/dev/kfd").exists() }
    }

    pub fn has(self, target: &'static Target) -> bool {
        match target.backend {
            BackendKind::Cuda => self.nvidia,
            BackendKind::Hsa => self.amd,
        }
    }

    pub fn none(self) -> bool {
        !self.nvidia && !self.amd
    }
}
