//! The test operations: host calls of the project's own tests, on user opcodes (`0xffff_0000` and up), which the GPU
//! test programs, the host tests of the protocol and the benchmarks use. A plain `gpu-loader` has no handler for
//! them; [`operations`] makes the table that the suite's `gpu-test-loader`, the benchmarks and the host tests
//! register.
//!
//! The device half is [`TestOperations`], on the client; the host half is [`operations`] (feature `host`). The first
//! five are the protocol's tests (LLVM libc's RPC tests among them); [`SQUARE`], [`SQUARES_SEEN`] and [`REVERSE`] are
//! the suite's example of host calls of one's own, used as a program embedding the loader would use its own.

use super::{Client, HostCall, UserOpcode};
use crate::gpu::Gpu;

/// Each lane sends a number; the host answers with its successor (wrapping).
pub const INCREMENT: HostCall<u64, u64> = HostCall::new(0xffff_0000, "test increment");
/// One empty packet each way: the round trip alone.
pub const NOOP: HostCall<(), ()> = HostCall::new(0xffff_0001, "test noop");
/// Each lane streams bytes (at most [`ECHO_LIMIT`]); the host streams the same bytes back.
pub const ECHO: UserOpcode = UserOpcode::new(0xffff_0002, "test echo");
/// Alternating sends and receives on one port, each lane's packets carrying its lane id (LLVM libc's
/// rpc_interface_test): the first packet holds the number of rounds and the lane id.
pub const INTERFACE: UserOpcode = UserOpcode::new(0xffff_0003, "test interface");
/// The first packet holds a number of rounds `n`; then the port's buffers go back and forth `n + 1` times with
/// nothing in them, the host handing them over as soon as it has them. The protocol's hand-off alone (no port lock,
/// header, scan or dispatch): the baseline of the round trip, measured on the same port, SM and host thread as the
/// messages it is compared with. The host does nothing else meanwhile.
pub const HAND_OFFS: UserOpcode = UserOpcode::new(0xffff_0004, "test hand-offs");
/// The suite's example of a typed host call: the host squares each lane's number, and fails the run when the square
/// does not fit in 64 bits.
pub const SQUARE: HostCall<u64, u64> = HostCall::new(0xffff_0100, "square");
/// How many numbers the host has squared so far ([`SQUARE`]): state the host keeps between calls.
pub const SQUARES_SEEN: HostCall<(), u64> = HostCall::new(0xffff_0101, "squares seen");
/// The suite's example of a host call with byte streams: each lane streams bytes, the host streams them back
/// reversed (at most [`ECHO_LIMIT`]).
pub const REVERSE: UserOpcode = UserOpcode::new(0xffff_0102, "reverse");

/// The most bytes per lane the host takes in a [`ECHO`] or [`REVERSE`] stream: it holds the whole stream before it
/// answers.
pub const ECHO_LIMIT: u64 = 64 << 10;

/// The device half of the test operations, on the client.
pub trait TestOperations {
    /// [`INCREMENT`]: the host returns `value + 1`, for each lane.
    fn test_increment(&self, value: u64) -> u64;
    /// [`NOOP`]: one empty packet to the host and one back.
    fn test_noop(&self);
    /// [`INTERFACE`]: `rounds` alternating receives and sends on one port, as LLVM's rpc_interface_test does. Every
    /// packet carries the sending lane's id; the host checks it against the lane slot the packet arrived in, and
    /// answers each value with its successor. Returns whether every answer (and the host's final verdict) was right
    /// for this lane. All lanes of the group pass the same `rounds`.
    fn test_interface(&self, rounds: u32) -> bool;
    /// [`HAND_OFFS`]: `rounds` bare hand-offs of the port's buffers to the host and back, timed on the device. Returns
    /// the nanoseconds the rounds took ([`Gpu::nanoseconds`]).
    fn test_hand_offs(&self, rounds: u32) -> u64;
    /// [`ECHO`]: streams `input` to the host, which streams it back into `output` (as much as fits). Returns the
    /// length the host sent, `input.len()`. Each lane has its own input and output.
    fn test_echo(&self, input: &[u8], output: &mut [u8]) -> usize;
}

/// What the host's last packet of an [`INTERFACE`] message says when every packet carried its lane's id.
const ALL_LANES_RIGHT: u64 = u64::MAX;

impl<G: Gpu> TestOperations for Client<G> {
    fn test_increment(&self, value: u64) -> u64 {
        self.call(INCREMENT, value)
    }

    fn test_noop(&self) {
        self.call(NOOP, ())
    }

    fn test_interface(&self, rounds: u32) -> bool {
        let lane = u64::from(G::lane_id());
        let mut port = self.open(INTERFACE.number());
        port.send(|packet| {
            packet.set(0, u64::from(rounds));
            packet.set(1, lane);
        });
        let mut ok = true;
        let mut value = 0;
        for _ in 0..rounds {
            port.recv(|packet| {
                ok &= packet.get(0) == value + 1 && packet.get(1) == lane;
                value = packet.get(0);
            });
            port.send(|packet| {
                packet.set(0, value);
                packet.set(1, lane);
            });
        }
        port.recv(|packet| ok &= packet.get(0) == ALL_LANES_RIGHT);
        port.close();
        ok
    }

    fn test_hand_offs(&self, rounds: u32) -> u64 {
        let mut port = self.open(HAND_OFFS.number());
        port.send(|packet| packet.set(0, u64::from(rounds)));
        // The host's first hand-off answers the request; each receive after it hands the buffers back first.
        port.recv(|_| {});
        let started = G::nanoseconds();
        for _ in 0..rounds {
            port.recv(|_| {});
        }
        let elapsed = G::nanoseconds().wrapping_sub(started);
        port.close();
        elapsed
    }

    fn test_echo(&self, input: &[u8], output: &mut [u8]) -> usize {
        let mut port = self.open(ECHO.number());
        port.send_n(input);
        let len = port.recv_n(output);
        port.close();
        len
    }
}

#[cfg(any(test, feature = "host"))]
pub use host::operations;

/// The host half: the handlers. Everything a message carries is the client's to choose: lengths and round counts are
/// used only as far as they are served packet by packet, never to size an allocation, and arithmetic on them wraps.
#[cfg(any(test, feature = "host"))]
mod host {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use gpu_startup_protocol::region::MAX_LANES;

    use super::super::{HostCallError, HostCalls, Packet, ServerPort};
    use super::*;

    /// The test operations and the suite's example host calls, each with its handler (every call makes new state:
    /// [`SQUARES_SEEN`] counts the squares of this table's [`SQUARE`]).
    pub fn operations() -> HostCalls {
        let squares = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&squares);
        let mut calls = HostCalls::new();
        calls
            .on_call(INCREMENT, |value| Ok(value.wrapping_add(1)))
            .and_then(|calls| calls.on_call(NOOP, |()| Ok(())))
            .and_then(|calls| calls.on_message(ECHO, |port| answer_streams(port, |bytes| bytes)))
            .and_then(|calls| calls.on_message(INTERFACE, interface))
            .and_then(|calls| calls.on_message(HAND_OFFS, hand_offs))
            .and_then(|calls| {
                calls.on_call(SQUARE, move |value| {
                    squares.fetch_add(1, Ordering::Relaxed);
                    value
                        .checked_mul(value)
                        .ok_or_else(|| std::format!("{value} squared does not fit in 64 bits").into())
                })
            })
            .and_then(|calls| calls.on_call(SQUARES_SEEN, move |()| Ok(seen.load(Ordering::Relaxed))))
            .and_then(|calls| {
                calls.on_message(REVERSE, |port| {
                    answer_streams(port, |bytes| {
                        bytes.reverse();
                        bytes
                    })
                })
            })
            .expect("each operation has an opcode of its own");
        calls
    }

    /// Receives each lane's stream (refusing one over [`ECHO_LIMIT`]) and streams back what `answer` makes of it.
    fn answer_streams(port: &mut ServerPort<'_>, answer: impl Fn(&mut [u8]) -> &[u8]) -> Result<(), HostCallError> {
        let mut received = port.recv_n_vec::<0>(ECHO_LIMIT)?;
        let mut by_lane: [&[u8]; MAX_LANES as usize] = [&[]; MAX_LANES as usize];
        for entry in &mut received {
            by_lane[entry.lane as usize] = answer(&mut entry.data);
        }
        port.send_n(|lane| by_lane[lane as usize]);
        Ok(())
    }

    /// The host's half of [`TestOperations::test_hand_offs`]: hands the buffers back, empty, as soon as it has them,
    /// `rounds + 1` times.
    fn hand_offs(port: &mut ServerPort<'_>) -> Result<(), HostCallError> {
        let mut rounds = 0;
        port.recv(|_, packet| rounds = packet.get(0));
        for _ in 0..=rounds {
            if port.is_abandoned() {
                break;
            }
            port.send(|_, _| {});
        }
        Ok(())
    }

    /// The host's half of [`TestOperations::test_interface`]: answers each lane's value with its successor, checking
    /// that every packet carries the id of the lane whose slot it arrived in; the last packet says whether all did.
    fn interface(port: &mut ServerPort<'_>) -> Result<(), HostCallError> {
        let mut values = [0u64; MAX_LANES as usize];
        let mut rounds = 0;
        let mut lanes_right = true;
        let mut check = |lane: u32, packet: Packet<'_>| lanes_right &= packet.get(1) == u64::from(lane);
        port.recv(|lane, packet| {
            rounds = packet.get(0);
            check(lane, packet);
        });
        for _ in 0..rounds {
            if port.is_abandoned() {
                break;
            }
            port.send(|lane, packet| {
                packet.set(0, values[lane as usize].wrapping_add(1));
                packet.set(1, u64::from(lane));
            });
            port.recv(|lane, packet| {
                values[lane as usize] = packet.get(0);
                check(lane, packet);
            });
        }
        port.send(|_, packet| packet.set(0, if lanes_right { ALL_LANES_RIGHT } else { 0 }));
        Ok(())
    }
}
