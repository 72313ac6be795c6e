//! Protocol tests on one region in ordinary memory: single-threaded sequences (quick under Miri), a few threads, and
//! the loom models of the port hand-off.

use super::testing::TestOperations;
use super::*;
use crate::gpu::HostThread;

/// The test operations' opcodes, as message headers carry them.
const TEST_INCREMENT: u32 = testing::INCREMENT.opcode().number();
const TEST_NOOP: u32 = testing::NOOP.opcode().number();
const TEST_ECHO: u32 = testing::ECHO.number();

#[cfg(not(loom))]
mod plain;

/// Loom models of the hand-off: `RUSTFLAGS="--cfg loom" cargo test -p startup-common --release --features host loom`.
#[cfg(loom)]
mod loom_models;
