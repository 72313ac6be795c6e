//! The GPU startup runtime, once for every target.
//!
//! A GPU program links a target crate (`startup-nvptx` or `startup-amdgpu`), which spells the kernels `_begin`,
//! `_start` and `_end` and provides the intrinsics behind [`Gpu`]. Everything else lives here: walking the
//! constructor and destructor arrays, `atexit`, `exit`, the RPC protocol to the host (client *and* server, from the
//! same source), printing, and the kernel-argument structs that `gpu-loader` shares.
//!
//! The crate is `no_std` and builds on the host too, where [`gpu::HostThread`] stands in for a GPU lane, so its logic
//! is tested with `cargo test`, under loom and under Miri.
//!
//! Programs do not use this crate directly: they depend on `gpu-startup` (in `gpu-startup/` here), which picks the
//! target crate and gives them a safe API over this one.
#![no_std]
#![feature(c_variadic)]

#[cfg(any(test, feature = "host"))]
extern crate std;

pub mod allocator;
pub mod atexit;
pub mod block_memory;
pub mod ctor;
pub mod cxxabi;
pub mod errno;
pub mod files;
pub mod gpu;
pub mod heap;
pub mod io;
pub mod printf;
#[cfg(any(test, feature = "host"))]
pub mod reassembly;
pub mod rpc;
pub mod startup;
pub mod stdio;
pub mod sync;
mod target_runtime;
pub mod test_table;

/// The kernel ABI, shared with the loader: the contract crate's.
pub use gpu_startup_protocol::abi;

pub use abi::{FiniCallback, InitCallback, MainFn};
pub use block_memory::BlockMemory;
pub use gpu::{Gpu, ThreadIds};
pub use startup::{CallbackArrays, Runtime};
