//! What a GPU platform provides to a run: the [`Backend`] trait, the types its methods take and return, and the
//! [`DeviceOptions`] a backend is opened with. Implementations: `cuda::CudaBackend`, `hsa::HsaBackend`, opened by
//! `platform::open_backend`; `run` drives either through this trait alone.

use std::time::Duration;

use gpu_startup_protocol::abi::{Kernel, LaunchParams};

use crate::error::Result;

/// What a backend needs to know to open its device and load a program: the part of the run's options that reaches
/// the platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceOptions {
    /// GPU ordinal, among the platform's GPUs.
    pub device: usize,
    /// Bytes of stack per GPU thread, where the platform lets the host set it (CUDA; on AMD the code object decides).
    pub stack_size: usize,
    /// Measure how long each kernel ran ([`Backend::kernel_times`]).
    pub kernel_times: bool,
}

/// Memory the host and the device both address.
#[derive(Clone, Copy, Debug)]
pub struct HostMapped {
    pub host: *mut u8,
    pub device: u64,
    pub len: usize,
}

/// A kernel's resources, for `--print-resource-usage`.
#[derive(Clone, Debug, Default)]
pub struct ResourceUsage {
    pub registers: Option<u32>,
    pub shared_bytes: u64,
    pub local_bytes: u64,
    pub max_threads_per_block: Option<u32>,
}

/// Whether the queued kernels are done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    Running,
    Finished,
    /// The device reported an error; the message names it (`CUDA_ERROR_ILLEGAL_ADDRESS: ...`).
    Faulted(String),
}

/// What a GPU platform provides. Allocations live until the backend is dropped.
pub trait Backend {
    /// How many GPUs the platform offers (the ordinals [`DeviceOptions::device`] takes).
    fn gpu_count(&self) -> Result<u32>;
    /// Lanes per warp or wavefront on this device.
    fn lane_size(&self) -> u32;
    /// Checks the launch against the device's limits.
    fn check_launch(&self, params: &LaunchParams) -> Result<()>;
    /// Zeroed host memory the device can read and write.
    fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMapped>;
    /// Zeroed device memory.
    fn alloc_device(&mut self, len: usize) -> Result<u64>;
    /// Copies `bytes` to device memory at `address`, synchronously.
    fn copy_to_device(&mut self, address: u64, bytes: &[u8]) -> Result<()>;
    /// Queues `kernel` on the grid `params` with `args` as its one argument. Kernels run in queue order.
    fn launch(&mut self, kernel: Kernel, params: &LaunchParams, args: &[u8]) -> Result<()>;
    /// Queues the startup's three kernels: `_begin` and `_end` on one thread, `_start` on `start`, each with its
    /// argument bytes from `args`. Backends that can launch them as one unit do (CUDA: a graph); the others queue
    /// them one by one.
    fn launch_startup(&mut self, start: &LaunchParams, args: [&[u8]; 3]) -> Result<()> {
        launch_one_by_one(self, start, args)
    }
    /// Whether everything queued has finished, without waiting.
    fn poll(&mut self) -> Result<Progress>;
    /// The kernels' resources.
    fn resource_usage(&self, kernel: Kernel) -> Result<ResourceUsage>;
    /// The device address of the image's global `name` (a test's entry global).
    fn global_address(&mut self, name: &str) -> Result<u64>;
    /// How long each kernel ran, where the backend measured it ([`DeviceOptions::kernel_times`]).
    fn kernel_times(&mut self) -> Option<[Duration; 3]> {
        None
    }
    /// How long each step of opening the device and loading the image took, in order, where the backend timed them
    /// (`gpu-loader -v`).
    fn load_steps(&self) -> &[(&'static str, Duration)] {
        &[]
    }
}

/// A backend opened for the image's target ([`crate::platform::open_backend`]). Every method goes to it, those with a
/// default too: a backend's own `launch_startup` (CUDA's graph), `kernel_times` and `load_steps` must not fall back to the defaults.
impl<B: Backend + ?Sized> Backend for Box<B> {
    fn gpu_count(&self) -> Result<u32> {
        (**self).gpu_count()
    }
    fn lane_size(&self) -> u32 {
        (**self).lane_size()
    }
    fn check_launch(&self, params: &LaunchParams) -> Result<()> {
        (**self).check_launch(params)
    }
    fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMapped> {
        (**self).alloc_host_mapped(len)
    }
    fn alloc_device(&mut self, len: usize) -> Result<u64> {
        (**self).alloc_device(len)
    }
    fn copy_to_device(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        (**self).copy_to_device(address, bytes)
    }
    fn launch(&mut self, kernel: Kernel, params: &LaunchParams, args: &[u8]) -> Result<()> {
        (**self).launch(kernel, params, args)
    }
    fn launch_startup(&mut self, start: &LaunchParams, args: [&[u8]; 3]) -> Result<()> {
        (**self).launch_startup(start, args)
    }
    fn poll(&mut self) -> Result<Progress> {
        (**self).poll()
    }
    fn resource_usage(&self, kernel: Kernel) -> Result<ResourceUsage> {
        (**self).resource_usage(kernel)
    }
    fn global_address(&mut self, name: &str) -> Result<u64> {
        (**self).global_address(name)
    }
    fn kernel_times(&mut self) -> Option<[Duration; 3]> {
        (**self).kernel_times()
    }
    fn load_steps(&self) -> &[(&'static str, Duration)] {
        (**self).load_steps()
    }
}

/// Times the steps of a backend's load one after the other, for [`Backend::load_steps`].
pub(crate) struct LoadSteps {
    last: std::time::Instant,
    pub(crate) steps: Vec<(&'static str, Duration)>,
}

impl LoadSteps {
    pub(crate) fn start() -> Self {
        Self { last: std::time::Instant::now(), steps: Vec::new() }
    }

    /// Ends the step `name`, which began where the one before it ended.
    pub(crate) fn done(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.steps.push((name, now - self.last));
        self.last = now;
    }
}

/// The grid of each startup kernel, in [`Kernel::ALL`]'s order, when the user's grid is `start`.
pub fn startup_grids(start: &LaunchParams) -> [LaunchParams; 3] {
    [LaunchParams::SINGLE, *start, LaunchParams::SINGLE]
}

/// [`Backend::launch_startup`] as three launches in queue order.
pub fn launch_one_by_one<B: Backend + ?Sized>(backend: &mut B, start: &LaunchParams, args: [&[u8]; 3]) -> Result<()> {
    for ((kernel, grid), args) in Kernel::ALL.into_iter().zip(startup_grids(start)).zip(args) {
        backend.launch(kernel, &grid, args)?;
    }
    Ok(())
}
