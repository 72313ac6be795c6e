//! Byte streams of divergent lengths echoed through RPC (32 threads x 8 blocks), as LLVM libc's
//! rpc_stream_test does: each thread sends a different length, 0 and several packets included, and checks every
//! byte that comes back.
#![no_std]
#![no_main]

use gpu_startup::rpc::{self, testing::TestOperations};
use gpu_startup::{block, thread};

#[gpu_startup::main]
fn main() -> i32 {
    let id = thread::id()[0] + 32 * block::id()[0];
    let len = ((id * 37) % 300) as usize;
    let mut input = [0u8; 300];
    for (i, byte) in input.iter_mut().enumerate() {
        *byte = (i as u32 * 7 + id) as u8;
    }
    let mut output = [0u8; 300];
    let echoed = rpc::client().test_echo(&input[..len], &mut output);
    if echoed != len || input[..len] != output[..len] { 1 } else { 0 }
}
