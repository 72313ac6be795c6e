//! The whole launch: how many blocks, and threads in all.
//!
//! Constructors and destructors run in kernels of their own, on one thread: there the grid is one block of one
//! thread.

use crate::arch;

/// Blocks in x, y and z (CUDA's `gridDim`; `gpu-loader --blocks`).
pub fn shape() -> [u32; 3] {
    arch::launch_shape().blocks
}

/// Blocks in the grid.
pub fn block_count() -> u64 {
    shape().iter().map(|&n| u64::from(n)).product()
}

/// Threads in the grid: every one of them runs `main`.
pub fn thread_count() -> u64 {
    // The loader refuses grids of more than 2^64 threads.
    block_count() * u64::from(arch::threads_per_block())
}
