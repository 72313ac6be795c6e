//! The calling thread's block (CUDA's thread block, AMD's work-group): where it is in the grid and its shape. In a
//! constructor or destructor, which run on one thread in a kernel of their own, that is block 0 of one thread.

use crate::arch;

/// The block's coordinates in the grid, each below [`grid::shape`](crate::grid::shape) (CUDA's `blockIdx`).
pub fn id() -> [u32; 3] {
    arch::thread_ids().block
}

/// The block's number in the grid: x first, then y, then z.
pub fn index() -> u64 {
    arch::block_index()
}

/// Threads per block in x, y and z (CUDA's `blockDim`; `gpu-loader --threads`).
pub fn shape() -> [u32; 3] {
    arch::launch_shape().threads
}

/// Threads per block.
pub fn thread_count() -> u32 {
    arch::threads_per_block()
}
