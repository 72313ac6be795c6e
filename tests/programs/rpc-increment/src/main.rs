//! RPC round trips from every thread of a 3-D grid (2x2x2 blocks of 4x4x4 threads), each thread doing a different
//! number of them, as LLVM libc's rpc_test does: the host adds one each time, so each thread ends at its count. The
//! increment is a test operation, which the suite's `gpu-test-loader` serves (`expect.toml`); a plain `gpu-loader`
//! has no handler for it and ends the run naming its opcode (`expect.plain.toml`).
#![no_std]
#![no_main]

use gpu_startup::rpc::{self, testing::TestOperations};
use gpu_startup::{block, thread};

#[gpu_startup::main]
fn main() -> i32 {
    let [x, y, z] = thread::id();
    let [bx, by, bz] = block::id();
    let flat = x + 4 * (y + 4 * z) + 64 * (bx + 2 * (by + 2 * bz));
    let rounds = u64::from(flat % 17 + 1);
    let mut value = 0;
    for _ in 0..rounds {
        value = rpc::client().test_increment(value);
    }
    if value == rounds { 0 } else { 1 }
}
