//! The GPU startup runtime, once for every target.
//!
//! A GPU program links a target crate (`startup-nvptx` or `startup-amdgpu`), which spells the kernels `_begin`,
//! `_start` and `_end` and provides the intrinsics behind [`Gpu`]. Everything else lives here, grouped by role:
//!
//! - [`runtime`]: what every program runs on: the three kernels' bodies, constructors and destructors, `atexit`,
//!   `exit`, `abort`, the panic handler, the allocator over the heap, C++'s runtime support, and `target_runtime!`,
//!   which gives a target crate all of it;
//! - [`rpc`]: the channel to the host (client *and* server, from the same source), host calls of one's own;
//! - [`libc`]: the C library on the device: `printf`, `<stdio.h>` streams, files and stdin, `errno`, the heap, the
//!   output path;
//! - [`rust`]: what only the Rust API (`gpu-startup`) uses: the printing macros and the test table;
//! - at the root, what all of them share: [`gpu`] (the `Gpu` trait), [`sync`], [`block_memory`].
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

pub mod block_memory;
pub mod gpu;
pub mod libc;
pub mod rpc;
pub mod runtime;
pub mod rust;
pub mod sync;

/// The kernel ABI, shared with the loader: the contract crate's.
pub use gpu_startup_protocol::abi;

pub use abi::{FiniCallback, InitCallback, MainFn};
pub use block_memory::BlockMemory;
pub use gpu::{Gpu, ThreadIds};
pub use runtime::startup::{CallbackArrays, Runtime};

/// The test table's names as literals, for `concat!` in [`gpu_test!`]: the contract's.
#[doc(hidden)]
pub use gpu_startup_protocol::{__gpu_test_entry_prefix, __gpu_test_meta_prefix};
