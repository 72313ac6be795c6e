//! The GPU startup for NVIDIA GPUs: the three kernels in PTX's spelling, and the intrinsics behind
//! [`startup_common::Gpu`]. Everything else is in `startup-common`.
//!
//! Programs get it through `gpu-startup`, which depends on it when building for nvptx64; `docs/abi.md` describes
//! what the loader does around the kernels. On any other target the crate is empty, so the workspace builds and
//! tests on the host.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        abi_gpu_kernel,
        asm_experimental_arch,
        c_variadic,
        stdarch_nvptx,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem,
        linkage
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

#[cfg(target_arch = "nvptx64")]
mod device;
#[cfg(target_arch = "nvptx64")]
pub use device::*;
