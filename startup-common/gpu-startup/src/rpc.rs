//! The channel to the host (`docs/rpc.md`), and host calls of one's own: a program asks the host program that runs
//! it (one embedding the `gpu_loader` library) to do something for it.
//!
//! A host call is defined once, where both programs see it: its opcode, from the users' range ([`opcode::FIRST_USER`]
//! up; the startup keeps the numbers below), a name for the loader's messages, and the types that travel each way,
//! plain data ([`Pod`]) of at most 64 bytes each:
//!
//! ```
//! use gpu_startup::rpc::HostCall;
//!
//! /// The host looks `key` up in a table only it has.
//! pub const LOOK_UP: HostCall<u32, u64> = HostCall::new(0x1_0000, "look up");
//! ```
//!
//! Every thread of a warp that calls it sends its own request; the warp's requests travel together, and the host's
//! handler answers each thread:
//!
//! ```no_run
//! # #![no_std]
//! # #![no_main]
//! # use gpu_startup::rpc::HostCall;
//! # pub const LOOK_UP: HostCall<u32, u64> = HostCall::new(0x1_0000, "look up");
//! #[gpu_startup::main]
//! fn main() -> i32 {
//!     let key = gpu_startup::thread::index() as u32;
//!     let value = gpu_startup::rpc::call(LOOK_UP, key);
//!     gpu_startup::println!("{key} -> {value}");
//!     0
//! }
//! ```
//!
//! The host registers the handler with `gpu_loader::RunOptions::host_calls` (`gpu_loader`'s documentation has that
//! half). Without a handler for the opcode (a plain `gpu-loader` has none), or when the handler fails, the loader
//! ends the run with a one-line error naming the opcode; the call does not return. Messages of several packets and
//! byte streams go through a port of their own: [`open`].
//!
//! Structs travel as their bytes: `#[repr(C)]` with `#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]`
//! (add `bytemuck` with its `derive` feature to the crate that defines them).

use startup_common::Gpu;

use crate::arch::RUNTIME;

pub use startup_common::rpc::{HostCall, Packet, Pod, Port, ReservedOpcode, UserOpcode, Zeroable, opcode};

/// The test operations of this repository's own test programs (`startup_common::rpc::testing`): host calls that
/// only the suite's `gpu-test-loader` serves.
#[cfg(feature = "testing")]
pub mod testing {
    pub use startup_common::rpc::testing::*;

    /// The loader's control block, where the program reports its end: for the suite's programs that write over it
    /// to check how the loader copes; null before `_begin` ran.
    pub fn control_block() -> *mut startup_common::abi::Control {
        crate::arch::RUNTIME.control_for_testing()
    }
}

/// The RPC client every thread of the program shares: the startup's own operations use it, and so do [`call`] and
/// [`open`].
pub fn client() -> &'static startup_common::rpc::Client<impl Gpu> {
    RUNTIME.client()
}

/// Makes the host call `call` with this thread's `request` and returns the host's reply to it. The threads of a warp
/// that make the same call together send one message; the host's handler answers each of them. Threads that run the
/// call together with different calls send a message per call.
#[inline(always)]
pub fn call<T: Pod, R: Pod>(call: HostCall<T, R>, request: T) -> R {
    RUNTIME.client().call(call, request)
}

/// Opens a port for a message of the user opcode `opcode`, for exchanges a [`HostCall`] does not cover: several
/// packets, each thread's values ([`Port::send_value`], [`Port::recv_value`]) or byte streams ([`Port::send_n`],
/// [`Port::recv_n`]), in the order the host's handler (`gpu_loader::HostCalls::on_message`) mirrors. The threads
/// that call it together with the same opcode share the port and each uses its own packet, so every message of one
/// opcode must make the same sends and receives in the same order; dropping the port (or [`Port::close`]) ends the
/// message.
///
/// ```no_run
/// # #![no_std]
/// # #![no_main]
/// use gpu_startup::rpc::{self, UserOpcode};
///
/// /// Each thread streams its bytes; the host streams back an answer of its own length.
/// pub const REVERSE: UserOpcode = UserOpcode::new(0x1_0001, "reverse");
///
/// #[gpu_startup::main]
/// fn main() -> i32 {
///     let mut port = rpc::open(REVERSE);
///     port.send_n(b"hello");
///     let mut reply = [0u8; 5];
///     let len = port.recv_n(&mut reply);
///     port.close();
///     if len == 5 && &reply == b"olleh" { 0 } else { 1 }
/// }
/// ```
#[inline(always)]
pub fn open(opcode: UserOpcode) -> Port<'static, impl Gpu> {
    RUNTIME.client().open(opcode.number())
}
