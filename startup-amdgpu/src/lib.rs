//! The GPU startup for AMD GPUs (`amdgcn-amd-amdhsa`, wave64: CDNA such as gfx90a and gfx942): the three kernels in
//! the AMDGPU spelling, and the intrinsics behind [`startup_common::Gpu`]. Everything else is in `startup-common`.
//!
//! Programs get it through `gpu-startup`, which depends on it when building for amdgcn; the linker gathers
//! `.init_array.N`/`.fini_array.N` and provides their bounds. On any other target the crate is empty, so the
//! workspace builds and tests on the host.
#![no_std]
#![cfg_attr(target_arch = "amdgpu", allow(internal_features))]
#![cfg_attr(
    target_arch = "amdgpu",
    feature(
        abi_gpu_kernel,
        c_variadic,
        link_llvm_intrinsics,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem,
        linkage
    )
)]

#[cfg(target_arch = "amdgpu")]
mod device;
#[cfg(target_arch = "amdgpu")]
pub use device::*;
