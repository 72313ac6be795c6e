//! The channel to the host (`docs/rpc.md`), and host calls of one's own: a program asks the host program that runs
//! it (one embedding the `gpu_loader` library) to do something for it.
//!
//! A host call is defined once, where both programs see it: its opcode, from the users' range (`0x1_0000` up; the
//! startup keeps the numbers below, and [`UserOpcode::checked`] says which), a name for the loader's messages, and the
//! types that travel each way, plain data ([`Pod`]) of at most 64 bytes each:
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

use crate::arch::{RUNTIME, Target};

pub use startup_common::rpc::{HostCall, Pod, ReservedOpcode, UserOpcode, Zeroable};

/// The test operations of this repository's own test programs (`startup_common::rpc::testing`): host calls that
/// only the suite's `gpu-test-loader` serves.
#[cfg(feature = "testing")]
pub mod testing {
    pub use startup_common::rpc::testing::*;

    /// The RPC client every thread of the program shares, which the test operations ([`TestOperations`]) and the
    /// suite's programs that write over their own RPC region use.
    pub fn client() -> &'static startup_common::rpc::Client<impl startup_common::Gpu> {
        crate::arch::RUNTIME.client()
    }

    /// The loader's control block, where the program reports its end: for the suite's programs that write over it
    /// to check how the loader copes; null before `_begin` ran.
    pub fn control_block() -> *mut startup_common::abi::Control {
        crate::arch::RUNTIME.control_for_testing()
    }
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
pub fn open(opcode: UserOpcode) -> Port {
    Port { port: RUNTIME.client().open(opcode.number()) }
}

/// A port held by the threads that opened it together ([`open`]), for one message: every thread makes the same calls
/// in the same order, each with its own packet (8 words, 64 bytes) or stream. Dropping it closes it.
pub struct Port {
    port: startup_common::rpc::Port<'static, Target>,
}

impl Port {
    /// Sends this thread's `value` in its packet; the host's handler reads it with `Packet::read_value`.
    #[inline(always)]
    pub fn send_value<T: Pod>(&mut self, value: &T) {
        self.port.send_value(value);
    }

    /// Waits for the host's packet and reads this thread's value from it, as the handler wrote it with
    /// `Packet::write_value`.
    #[inline(always)]
    pub fn recv_value<T: Pod>(&mut self) -> T {
        self.port.recv_value()
    }

    /// Sends this thread's packet, its 8 words as `fill` leaves them (zero where it writes none).
    #[inline(always)]
    pub fn send(&mut self, fill: impl FnOnce(&mut [u64; 8])) {
        self.port.send(|packet| {
            let mut words = [0; 8];
            fill(&mut words);
            packet.set_words(words);
        });
    }

    /// Waits for the host's packet and returns this thread's 8 words of it.
    #[inline(always)]
    pub fn recv(&mut self) -> [u64; 8] {
        let mut words = [0; 8];
        self.port.recv(|packet| words = packet.get_words());
        words
    }

    /// Sends this thread's bytes as a stream of packets; the threads' lengths may differ.
    #[inline(always)]
    pub fn send_n(&mut self, data: &[u8]) {
        self.port.send_n(data);
    }

    /// Receives the host's stream for this thread: copies what fits into `out` and returns the length the host sent.
    #[inline(always)]
    pub fn recv_n(&mut self, out: &mut [u8]) -> usize {
        self.port.recv_n(out)
    }

    /// Ends the message, as dropping the port does.
    pub fn close(self) {}
}
