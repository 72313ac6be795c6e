//! Alternating sends and receives on one port, and lane ids on a port a whole warp shares (LLVM libc's
//! rpc_interface_test): every thread of 4 blocks × 96 threads runs a different number of rounds per warp, and each
//! packet must arrive in its own lane's slot. Its `expect.toml` gives the loader 5 RPC ports for the grid's 12 warps,
//! so warps share ports and contend for them (the other RPC tests have a port per warp).
#![no_std]
#![no_main]

use gpu_startup::rpc::{self, testing::TestOperations};
use gpu_startup::{block, thread};

#[gpu_startup::main]
fn main() -> i32 {
    // The same round count for a whole warp (or wavefront), different between them.
    let warp = thread::id()[0] / thread::warp_size() + 8 * block::id()[0];
    if rpc::client().test_interface(warp % 7 + 1) { 0 } else { 1 }
}
