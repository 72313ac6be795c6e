//! Host calls of one's own: operations that a GPU program and the host program embedding the loader define together,
//! on opcodes of the users' range. The protocol is the same as for the startup's own operations; this adds the
//! opcode's type and typed packets.
//!
//! - [`UserOpcode`]: an opcode of the users' range ([`opcode::FIRST_USER`] and above) with a name for the loader's
//!   messages. A reserved opcode cannot be made into one: [`UserOpcode::new`] fails to compile in a `const` (and
//!   panics elsewhere), [`UserOpcode::checked`] returns [`ReservedOpcode`].
//! - [`HostCall<T, R>`]: a user opcode whose message is one packet each way: every lane of the calling group sends a
//!   `T` and gets an `R` back. `T` and `R` are [`Pod`] types of at most [`PACKET_BYTES`] bytes, copied as bytes.
//! - [`Client::call`] on the device; on the host, `HostCalls` (feature `host`) registers the handlers.
//!
//! Anything else (several packets, byte streams) uses the port itself: [`Client::open`] with
//! [`UserOpcode::number`], and [`Port::send_value`]/[`Port::recv_value`], [`Port::send_n`]/[`Port::recv_n`] on the
//! device, mirrored by the [`ServerPort`](super::ServerPort) the host's handler gets.

use core::fmt;
use core::marker::PhantomData;

pub use bytemuck::{Pod, Zeroable};

use gpu_startup_protocol::region::{PACKET_BYTES, gather, scatter};

use super::{Client, Packet, Port, opcode};
use crate::gpu::Gpu;

/// An opcode of the users' range, [`opcode::FIRST_USER`] and above, with the name the loader gives it in messages
/// (a handler's error, a message given up).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UserOpcode {
    number: u32,
    name: &'static str,
}

impl UserOpcode {
    /// The user opcode `number`, called `name` in the loader's messages.
    ///
    /// # Panics
    /// When `number` is reserved for the startup (below [`opcode::FIRST_USER`]); in a `const` that is a compile
    /// error:
    ///
    /// ```compile_fail,E0080
    /// use startup_common::rpc::UserOpcode;
    /// const MINE: UserOpcode = UserOpcode::new(1, "mine"); // 1 is the startup's WRITE
    /// ```
    pub const fn new(number: u32, name: &'static str) -> Self {
        match Self::checked(number, name) {
            Ok(opcode) => opcode,
            Err(_) => panic!("opcodes below 0x10000 are reserved for the startup's own operations"),
        }
    }

    /// The user opcode `number`, or [`ReservedOpcode`] when the startup reserves it.
    pub const fn checked(number: u32, name: &'static str) -> Result<Self, ReservedOpcode> {
        if opcode::is_reserved(number) { Err(ReservedOpcode { number }) } else { Ok(Self { number, name }) }
    }

    /// The number the message header carries.
    pub const fn number(self) -> u32 {
        self.number
    }

    pub const fn name(self) -> &'static str {
        self.name
    }
}

impl fmt::Display for UserOpcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` (opcode {:#x})", self.name, self.number)
    }
}

/// An opcode below [`opcode::FIRST_USER`], which the startup keeps for its own operations, asked for as a user
/// opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReservedOpcode {
    pub number: u32,
}

impl fmt::Display for ReservedOpcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "opcode {:#x} is reserved for the startup's own operations: a host call of one's own takes an opcode from \
             {:#x} up",
            self.number,
            opcode::FIRST_USER
        )
    }
}

impl core::error::Error for ReservedOpcode {}

/// A host call: every lane of the calling group sends a `T` in one packet, and the host's handler answers each lane
/// with an `R` in one packet. Define it once, where the GPU program and the host program both see it:
///
/// ```
/// use startup_common::rpc::HostCall;
///
/// /// The host looks the key up in a table it loaded; the run ends with the handler's error for an unknown key.
/// pub const LOOK_UP: HostCall<u32, u64> = HostCall::new(0x1_0000, "look up");
/// ```
///
/// `T` and `R` are plain data ([`Pod`]: integers, floats, arrays of them, `#[repr(C)]` structs deriving
/// `bytemuck::Pod`) of at most [`PACKET_BYTES`] bytes; a larger one is a compile error where the call is made.
pub struct HostCall<T, R> {
    opcode: UserOpcode,
    _values: PhantomData<fn(T) -> R>,
}

impl<T, R> Clone for HostCall<T, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, R> Copy for HostCall<T, R> {}

impl<T, R> fmt::Debug for HostCall<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HostCall").field(&self.opcode).finish()
    }
}

impl<T: Pod, R: Pod> HostCall<T, R> {
    /// The host call with user opcode `number`, called `name` in the loader's messages.
    ///
    /// # Panics
    /// As [`UserOpcode::new`]: when `number` is reserved (a compile error in a `const`).
    pub const fn new(number: u32, name: &'static str) -> Self {
        Self { opcode: UserOpcode::new(number, name), _values: PhantomData }
    }

    pub const fn opcode(self) -> UserOpcode {
        self.opcode
    }
}

/// Fails to compile for a type that does not fit in one lane's packet.
const fn assert_fits_a_packet<T>() {
    assert!(size_of::<T>() <= PACKET_BYTES, "a host call's values are at most one packet: 64 bytes");
}

impl Packet<'_> {
    /// Writes `value`'s bytes into the packet's first words (little-endian, the last word zero-padded).
    #[inline(always)]
    pub fn write_value<T: Pod>(&self, value: &T) {
        const { assert_fits_a_packet::<T>() };
        let bytes = bytemuck::bytes_of(value);
        for word in 0..bytes.len().div_ceil(8) {
            self.set(word, gather(bytes, word * 8));
        }
    }

    /// Reads a `T` from the packet's first words, as [`Packet::write_value`] wrote it. Whatever the words hold (the
    /// other side's to choose) is a valid `T`: that is what [`Pod`] promises.
    #[inline(always)]
    pub fn read_value<T: Pod>(&self) -> T {
        const { assert_fits_a_packet::<T>() };
        let mut value = T::zeroed();
        let bytes = bytemuck::bytes_of_mut(&mut value);
        let len = bytes.len();
        for word in 0..len.div_ceil(8) {
            scatter(bytes, word * 8, len, self.get(word));
        }
        value
    }
}

impl<G: Gpu> Port<'_, G> {
    /// Sends `value` (this lane's) in one packet.
    #[inline(always)]
    pub fn send_value<T: Pod>(&mut self, value: &T) {
        self.send(|packet| packet.write_value(value));
    }

    /// Receives one packet and reads this lane's value from it.
    #[inline(always)]
    pub fn recv_value<T: Pod>(&mut self) -> T {
        let mut value = T::zeroed();
        self.recv(|packet| value = packet.read_value());
        value
    }
}

impl<G: Gpu> Client<G> {
    /// Makes the host call `call` with this lane's `request` and returns the host's reply for this lane. Every lane of
    /// the calling group sends its own request in one message; the host's handler answers each.
    ///
    /// When the host has no handler for the call, the loader ends the run with an error naming the opcode; when the
    /// handler fails, with the handler's error. In neither case does this return.
    #[inline(always)]
    pub fn call<T: Pod, R: Pod>(&self, call: HostCall<T, R>, request: T) -> R {
        let mut port = self.open(call.opcode().number());
        port.send_value(&request);
        let reply = port.recv_value();
        port.close();
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn reserved_opcodes_are_refused() {
        for number in [0, opcode::WRITE, 2, opcode::FILE_RENAME, opcode::FIRST_USER - 1] {
            assert_eq!(UserOpcode::checked(number, "mine"), Err(ReservedOpcode { number }));
        }
        let first = UserOpcode::checked(opcode::FIRST_USER, "first").unwrap();
        assert_eq!((first.number(), first.name()), (0x1_0000, "first"));
        assert_eq!(UserOpcode::checked(u32::MAX, "last").map(UserOpcode::number), Ok(u32::MAX));
        assert_eq!(
            ReservedOpcode { number: 2 }.to_string(),
            "opcode 0x2 is reserved for the startup's own operations: a host call of one's own takes an opcode from \
             0x10000 up"
        );
        assert_eq!(first.to_string(), "`first` (opcode 0x10000)");
    }

    #[test]
    #[should_panic(expected = "reserved for the startup's own operations")]
    fn a_reserved_opcode_made_at_run_time_panics() {
        let number = std::hint::black_box(opcode::WRITE);
        let _ = UserOpcode::new(number, "write");
    }

    #[test]
    fn a_host_call_keeps_its_opcode() {
        const DOUBLE: HostCall<u64, u64> = HostCall::new(0x1_2345, "double");
        assert_eq!((DOUBLE.opcode().number(), DOUBLE.opcode().name()), (0x1_2345, "double"));
        assert_eq!(std::format!("{DOUBLE:?}"), "HostCall(UserOpcode { number: 74565, name: \"double\" })");
    }
}
