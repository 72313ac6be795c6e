//! The one place that tells the targets apart: the startup of the target being built, its processor type and its
//! runtime. On the host (documentation, doc tests) one host thread stands in for a grid of one thread, and the
//! process's own `exit` and `abort` end it.

pub(crate) use imp::*;

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
