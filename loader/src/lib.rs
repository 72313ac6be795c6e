//! `gpu-loader` as a library: run a GPU program built with the GPU startup and get its exit status.
//!
//! ```no_run
//! let mut options = gpu_loader::RunOptions::new("target/gpu/nvptx/sm_90/hello.ptx");
//! options.launch.threads = [32, 1, 1];
//! let report = gpu_loader::run(&options)?;
//! std::process::exit(report.status.exit_code());
//! # Ok::<(), gpu_loader::LoaderError>(())
//! ```
//!
//! The image decides the platform: PTX or an `EM_CUDA` cubin runs through CUDA ([`cuda`]), an `EM_AMDGPU` code
//! object through HSA ([`hsa`]). Everything else ([`run`], [`server`], [`args`], [`ctors`]) is shared.

pub mod args;
pub mod ctors;
pub mod cuda;
pub mod error;
pub mod harness;
pub mod hsa;
pub mod image;
pub mod launch;
pub mod linker;
pub mod run;
pub mod server;
pub mod setup;
pub mod status;
pub mod target;
pub mod test_list;

pub use error::LoaderError;
pub use run::{RunOptions, RunReport, install_signal_handlers, run, run_image};
pub use status::RunStatus;
