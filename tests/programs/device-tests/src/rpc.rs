//! The RPC operations from many threads at once, as LLVM libc's RPC tests check them. The test binary runs with the
//! loader's 1,024 ports, a port for each warp; its `shared-ports` case runs these tests again with 5 ports, which the
//! warps share and contend for. The operations are the test operations, which `gpu-test-loader` serves; a plain
//! `gpu-loader` has none, and its `plain` case checks the error that ends such a test.

use gpu_startup::rpc::{self, testing::TestOperations};
use gpu_startup::{block, thread};

/// Round trips from every thread of a 3-D grid, each thread a different number of them (LLVM libc's rpc_test): the
/// host adds one each time, so each thread ends at its count.
#[gpu_startup::test(threads = [4, 4, 4], blocks = [2, 2, 2])]
fn increments_from_every_thread_of_a_3d_grid() {
    let [x, y, z] = thread::id();
    let [bx, by, bz] = block::id();
    let flat = x + 4 * (y + 4 * z) + 64 * (bx + 2 * (by + 2 * bz));
    let rounds = u64::from(flat % 17 + 1);
    let mut value = 0;
    for _ in 0..rounds {
        value = rpc::testing::client().test_increment(value);
    }
    assert_eq!(value, rounds, "thread {flat}");
}

/// Byte streams of divergent lengths echoed back (LLVM libc's rpc_stream_test): each thread sends a different length,
/// 0 and several packets included, and checks every byte that comes back.
#[gpu_startup::test(threads = 32, blocks = 8)]
fn echoes_streams_of_divergent_lengths() {
    let id = thread::id()[0] + 32 * block::id()[0];
    let len = ((id * 37) % 300) as usize;
    let mut input = [0u8; 300];
    for (i, byte) in input.iter_mut().enumerate() {
        *byte = (i as u32 * 7 + id) as u8;
    }
    let mut output = [0u8; 300];
    let echoed = rpc::testing::client().test_echo(&input[..len], &mut output);
    assert_eq!(echoed, len, "thread {id}");
    assert!(input[..len] == output[..len], "thread {id} got other bytes back");
}

/// Alternating sends and receives on one port, every packet carrying its lane's number (LLVM libc's
/// rpc_interface_test): each warp runs a different number of rounds.
#[gpu_startup::test(threads = 96, blocks = 4)]
fn alternates_sends_and_receives_on_one_port() {
    // The same round count for a whole warp (or wavefront), different between them.
    let warp = thread::id()[0] / thread::warp_size() + 8 * block::id()[0];
    assert!(rpc::testing::client().test_interface(warp % 7 + 1), "warp {warp}");
}
