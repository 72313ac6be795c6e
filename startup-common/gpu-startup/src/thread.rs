//! The calling thread: where it is in its block and in the grid, and its lane in its warp (wavefront on AMD).
//!
//! ```no_run
//! #![no_std]
//! #![no_main]
//! use gpu_startup::{block, grid, thread};
//!
//! #[gpu_startup::main]
//! fn main() {
//!     let [x, y, z] = thread::id();
//!     if thread::is_first() {
//!         gpu_startup::println!("{} threads in {:?} blocks of {:?}", grid::thread_count(), grid::shape(), block::shape());
//!     }
//!     if thread::lane() == 0 {
//!         gpu_startup::println!("warp of thread ({x}, {y}, {z}) in block {:?}", block::id());
//!     }
//! }
//! ```

use core::time::Duration;

use startup_common::Gpu;

use crate::arch::{self, Target};

/// The thread's coordinates in its block, each below [`block::shape`](crate::block::shape) (CUDA's `threadIdx`).
pub fn id() -> [u32; 3] {
    arch::thread_ids().thread
}

/// The thread's number in the whole grid, from 0 to [`grid::thread_count`](crate::grid::thread_count) - 1: its
/// block's [`index`](crate::block::index) times the threads per block, plus its [`index_in_block`].
pub fn index() -> u64 {
    arch::block_index() * u64::from(arch::threads_per_block()) + u64::from(index_in_block())
}

/// The thread's number in its block: x first, then y, then z.
pub fn index_in_block() -> u32 {
    arch::linear(id(), arch::launch_shape().threads) as u32
}

/// Whether this is thread 0 of block 0: the one to do what the whole program does once.
pub fn is_first() -> bool {
    let ids = arch::thread_ids();
    ids.thread == [0; 3] && ids.block == [0; 3]
}

/// The thread's lane in its warp (NVIDIA) or wavefront (AMD), below [`warp_size`].
pub fn lane() -> u32 {
    Target::lane_id()
}

/// Lanes per warp or wavefront: 32 on NVIDIA, 64 on the AMD GPUs the startup supports.
pub fn warp_size() -> u32 {
    Target::LANE_SIZE
}

/// Waits at least `duration` on the device clock, letting other threads run meanwhile.
pub fn sleep(duration: Duration) {
    let start = crate::time::Instant::now();
    while start.elapsed() < duration {
        Target::sleep_briefly();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_a_grid_of_one_thread() {
        assert_eq!((id(), index(), index_in_block(), is_first()), ([0; 3], 0, 0, true));
        assert_eq!((lane(), warp_size()), (0, 1));
        assert_eq!(crate::grid::thread_count(), 1);
    }
}
