//! The one place that tells the targets apart: the startup of the target being built, its processor type and its
//! runtime. On the host (documentation, doc tests) one host thread stands in for a grid of one thread, and the
//! process's own `exit` and `abort` end it.

pub(crate) use imp::*;

/// `coordinates` in a box of `shape`, numbered x first: `x + y * sx + z * sx * sy`.
pub(crate) fn linear(coordinates: [u32; 3], shape: [u32; 3]) -> u64 {
    let [x, y, z] = coordinates.map(u64::from);
    let [sx, sy, _] = shape.map(u64::from);
    x + sx * (y + sy * z)
}

/// Threads per block: what `block::thread_count` says, and `grid` and `thread` count with.
pub(crate) fn threads_per_block() -> u32 {
    // The loader refuses blocks of more than 2^32 - 1 threads, and the GPUs allow 1024.
    launch_shape().threads.iter().product()
}

/// The calling thread's block's number in the grid, x first: what `block::index` says, and `thread::index` counts
/// with.
pub(crate) fn block_index() -> u64 {
    linear(thread_ids().block, launch_shape().blocks)
}

#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
mod imp {
    #[cfg(target_arch = "amdgpu")]
    pub(crate) use startup_amdgpu::{RUNTIME, Target};
    use startup_common::Gpu;
    use startup_common::abi::LaunchParams;
    #[cfg(target_arch = "nvptx64")]
    pub(crate) use startup_nvptx::{RUNTIME, Target};

    pub(crate) fn thread_ids() -> startup_common::ThreadIds {
        Target::thread_ids()
    }

    pub(crate) fn launch_shape() -> LaunchParams {
        Target::launch_shape()
    }

    pub(crate) fn exit(status: i32) -> ! {
        RUNTIME.exit(status)
    }

    pub(crate) fn abort() -> ! {
        RUNTIME.abort()
    }
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod imp {
    extern crate std;

    use startup_common::abi::LaunchParams;

    pub(crate) type Target = startup_common::gpu::HostThread;
    pub(crate) static RUNTIME: startup_common::Runtime<Target> = startup_common::Runtime::new();

    pub(crate) fn thread_ids() -> startup_common::ThreadIds {
        startup_common::ThreadIds::default()
    }

    pub(crate) fn launch_shape() -> LaunchParams {
        LaunchParams { threads: [1; 3], blocks: [1; 3] }
    }

    pub(crate) fn exit(status: i32) -> ! {
        std::process::exit(status)
    }

    pub(crate) fn abort() -> ! {
        std::process::abort()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_are_numbered_x_first() {
        assert_eq!(linear([0, 0, 0], [4, 3, 2]), 0);
        assert_eq!(linear([3, 0, 0], [4, 3, 2]), 3);
        assert_eq!(linear([0, 1, 0], [4, 3, 2]), 4);
        assert_eq!(linear([3, 2, 1], [4, 3, 2]), 23);
        let max = u64::from(u32::MAX);
        assert_eq!(linear([u32::MAX - 1, u32::MAX - 1, 0], [u32::MAX, u32::MAX, 1]), max * max - 1);
    }
}
