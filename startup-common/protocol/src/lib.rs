//! The contract between the GPU startup and the loader that runs it, written once for both sides.
//!
//! - [`abi`]: the three kernels, the one argument struct each takes, the control block and the names the loader
//!   looks up;
//! - [`region`]: the RPC region's layout (mailboxes, headers, packets) and how a byte stream fills packets;
//! - [`messages`]: the opcode list ([`opcode`]) and every operation's request and reply as typed values that encode
//!   themselves into packet words and decode themselves from them;
//! - [`files`]: the values the file operations carry and their limits; [`errno`]: the error numbers they return,
//!   and their messages;
//! - [`test_table`]: how a test binary lists its tests for the loader (the globals' names, the metadata's encoding).
//!
//! The device side (`startup-common`, compiled for nvptx and amdgpu) and the host side (`gpu-loader`) both depend on
//! this crate, and neither writes a layout, an offset or an opcode of its own. It is `no_std` and depends on nothing
//! but `core`; its tests run on the host.
#![no_std]

#[cfg(test)]
extern crate std;

pub mod abi;
pub mod errno;
pub mod files;
pub mod messages;
pub mod region;
pub mod test_table;

pub use messages::opcode;
