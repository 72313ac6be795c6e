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
//! object through HSA ([`hsa`]), each opened in one place ([`platform::open_backend`]). Everything else ([`run`],
//! [`server`], [`args`], [`ctors`]) is shared.
//!
//! # Host calls of one's own
//!
//! A GPU program can ask the program that runs it to do things for it. Define a [`HostCall`] where both programs
//! see it (a crate they share, say): its opcode from the users' range and the types that travel each way. The GPU
//! program calls it (`gpu_startup::rpc::call(LOOK_UP, key)`: every thread with its own key), and the host serves it
//! with a handler in [`RunOptions::host_calls`], which gets each thread's request and returns its reply:
//!
//! ```no_run
//! use gpu_loader::{HostCall, RunOptions};
//!
//! /// Shared with the GPU program: the host looks a key up in a table only it has.
//! pub const LOOK_UP: HostCall<u32, u64> = HostCall::new(0x1_0000, "look up");
//!
//! let table = std::collections::HashMap::from([(1, 10), (2, 20)]);
//! let mut options = RunOptions::new("target/gpu/nvptx/sm_90/look-up.ptx");
//! options.host_calls.on_call(LOOK_UP, move |key| {
//!     table.get(&key).copied().ok_or_else(|| format!("no entry for key {key}").into())
//! })?;
//! let report = gpu_loader::run(&options)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! An error from the handler ends the run with a one-line message naming the call; so does a message whose opcode
//! has no handler. Messages of several packets and byte streams take a [`UserOpcode`] and
//! [`HostCalls::on_message`], whose handler gets the port. `docs/rpc.md` has the opcode ranges and the whole example;
//! [`cli::main`] is `gpu-loader` with one's own host calls.

pub mod args;
pub mod backend;
pub mod cli;
pub mod ctors;
pub mod cuda;
pub mod error;
pub mod harness;
pub mod hsa;
pub mod image;
pub mod launch;
pub mod platform;
pub mod run;
pub mod server;
pub mod status;
pub mod test_list;

pub use error::LoaderError;
pub use run::{RunOptions, RunReport, install_signal_handlers, run, run_image};
/// Host calls of one's own: what a program embedding the loader defines and serves (`docs/rpc.md`).
pub use startup_common::rpc::{
    AlreadyRegistered, HostCall, HostCallError, HostCalls, Packet, Pod, ReservedOpcode, ServerPort, UserOpcode,
    Zeroable,
};
pub use status::RunStatus;
