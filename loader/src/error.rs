//! Everything that can stop a run before the program reports an exit code.

use std::path::PathBuf;

use crate::server::ServerError;

/// A loader failure. Each message is one line naming the problem.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {problem}")]
    BadImage { path: PathBuf, problem: String },
    #[error("bad launch parameters: {0}")]
    BadLaunch(String),
    #[error("bad constructor symbol `{symbol}`: {problem}")]
    BadConstructor { symbol: String, problem: String },
    #[error("bad program arguments: {0}")]
    BadArguments(String),
    #[error("bad RPC port count {0}: it must be 1 to {max}", max = gpu_startup_protocol::region::MAX_PORTS)]
    BadRpcPorts(u32),
    #[error("no GPU: {0}")]
    NoGpu(String),
    #[error("{api} failed: {message}")]
    Driver { api: &'static str, message: String },
    #[error("cannot reserve a device heap of {size} bytes (--heap-size): {source}")]
    Heap { size: u64, source: Box<LoaderError> },
    /// The driver reserves the stack for every thread the device can hold at once, not only for the launched ones.
    #[error(
        "cannot reserve a stack of {size} bytes (--stack-size) for each of the {threads} threads the device holds at \
         once, {total} bytes in all: {source}"
    )]
    Stack { size: usize, threads: u64, total: u64, source: Box<LoaderError> },
    #[error("the program ended without reporting an exit code (its control block says it is still running)")]
    NoExitReported,
    /// The control block's end word holds what no startup writes.
    #[error("the program wrote over its control block: its end word reads {word:#x}")]
    CorruptEnd { word: u64 },
    /// The RPC server failed (the message starts with `RPC: `), or a file the program left open could not be written
    /// out when the run ended. The server's own message is the whole message.
    #[error(transparent)]
    Rpc(#[from] ServerError),
}

pub type Result<T, E = LoaderError> = std::result::Result<T, E>;
