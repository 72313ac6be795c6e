//! Protocol tests on one region in ordinary memory: single-threaded sequences (quick under Miri), a few threads, and
//! the loom models of the port hand-off.

use super::testing::TestOperations;
use super::*;
use crate::gpu::HostThread;

/// The test operations' opcodes, as message headers carry them.
const TEST_INCREMENT: u32 = testing::INCREMENT.opcode().number();
const TEST_NOOP: u32 = testing::NOOP.opcode().number();
const TEST_ECHO: u32 = testing::ECHO.number();
/// A message the client sends without waiting for an answer (no operation of the startup's is one; a host call of
/// one's own may be): one packet whose word 0 holds a value.
const SEND_ONLY: u32 = opcode::FIRST_USER + 0x5e;

/// Sends a [`SEND_ONLY`] message carrying `value` and returns at once, leaving the port with the server.
fn send_only<G: crate::Gpu>(client: &Client<G>, value: u64) {
    let mut port = client.open(SEND_ONLY);
    port.send(|packet| packet.set(0, value));
    port.close();
}

#[cfg(not(loom))]
mod plain;

/// Loom models of the hand-off: `RUSTFLAGS="--cfg loom" cargo test -p startup-common --release --features host loom`.
#[cfg(loom)]
mod loom_models;
