//! Running a program: the part every backend shares. A backend loads the image and launches kernels; this module
//! packs the arguments, sets up the RPC region, queues `_begin`, `_start` and `_end`, serves RPC while they run and
//! turns what happened into a [`RunStatus`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use startup_common::abi::{self, BeginArgs, Control, EndArgs, KernelArgs, LaunchParams, StartArgs};
use startup_common::rpc;

use crate::args::ArgBlock;
use crate::error::{LoaderError, Result};
use crate::image::{Image, Platform};
use crate::server::{HostServer, Outcome};
use crate::status::RunStatus;

/// Stack per GPU thread unless asked otherwise: room for `print!`'s buffer and a panic's formatting.
pub const DEFAULT_STACK_SIZE: usize = 8 * 1024;

/// Everything `gpu-loader` takes from its command line.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub image: PathBuf,
    /// The program's arguments after `argv[0]` (which is the image path as given).
    pub args: Vec<OsString>,
    /// The program's environment, `KEY=VALUE` entries.
    pub env: Vec<OsString>,
    pub launch: LaunchParams,
    /// GPU ordinal.
    pub device: usize,
    pub timeout: Option<Duration>,
    /// Report phase timings on stderr.
    pub verbose: bool,
    /// Report each kernel's registers, shared and local memory on stderr.
    pub print_resource_usage: bool,
    /// RPC ports in the region.
    pub rpc_ports: u32,
    /// Bytes of stack per GPU thread.
    pub stack_size: usize,
    /// Release the device's resources when the run ends. A process that exits right after the run (as
    /// `gpu-loader` does) can leave that to the driver's process teardown, which is faster.
    pub teardown: bool,
}

impl RunOptions {
    /// Options for running `image` with one thread, no arguments and the loader's environment.
    pub fn new(image: impl Into<PathBuf>) -> Self {
        Self {
            image: image.into(),
            args: Vec::new(),
            env: std::env::vars_os().map(|(k, v)| [k, "=".into(), v].into_iter().collect()).collect(),
            launch: LaunchParams::SINGLE,
            device: 0,
            timeout: None,
            verbose: false,
            print_resource_usage: false,
            rpc_ports: rpc::DEFAULT_PORT_COUNT,
            stack_size: DEFAULT_STACK_SIZE,
            teardown: true,
        }
    }
}

/// Which of the three kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Begin,
    Start,
    End,
}

impl Kernel {
    pub const ALL: [Kernel; 3] = [Kernel::Begin, Kernel::Start, Kernel::End];

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Begin => abi::BEGIN_KERNEL,
            Kernel::Start => abi::START_KERNEL,
            Kernel::End => abi::END_KERNEL,
        }
    }
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

/// What a GPU platform provides. Implementations: `cuda::CudaBackend`, `hsa::HsaBackend`. Allocations live until
/// the backend is dropped.
pub trait Backend {
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
    /// Whether everything queued has finished, without waiting.
    fn poll(&mut self) -> Result<Progress>;
    /// The kernels' resources.
    fn resource_usage(&self, kernel: Kernel) -> Result<ResourceUsage>;
    /// How long each kernel ran, where the backend measured it (`verbose`).
    fn kernel_times(&mut self) -> Option<[Duration; 3]> {
        None
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunReport {
    pub status: RunStatus,
    /// Whether every kernel finished; if not (timeout, a signal, `exit` while other threads still ran), kernels may
    /// still be running and the backend was leaked rather than torn down under them: end the process soon.
    pub finished: bool,
}

/// Makes SIGINT and SIGTERM stop a run promptly (exit 130 and 143) instead of killing the loader mid-output.
pub fn install_signal_handlers() -> Result<()> {
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The handler only stores the signal number; the serve loop notices it.
        signal_hook::flag::register_usize(signal, std::sync::Arc::clone(signal_flag()), signal as usize)
            .map_err(|error| LoaderError::Driver { api: "sigaction", message: error.to_string() })?;
    }
    Ok(())
}

/// The last SIGINT or SIGTERM received (0: none), shared with the signal handlers.
fn signal_flag() -> &'static std::sync::Arc<AtomicUsize> {
    static FLAG: std::sync::OnceLock<std::sync::Arc<AtomicUsize>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| std::sync::Arc::new(AtomicUsize::new(0)))
}

fn pending_signal() -> Option<i32> {
    match signal_flag().load(Ordering::Relaxed) {
        0 => None,
        signal => Some(signal as i32),
    }
}

/// Runs the program `options` names, to the end.
pub fn run(options: &RunOptions) -> Result<RunReport> {
    let started = Instant::now();
    crate::launch::validate(&options.launch)?;
    let image = Image::read(&options.image)?;
    image.check_startup_abi()?;
    // Checked before any GPU work, so a bad priority suffix is reported the same with or without a GPU.
    let constructors = crate::ctors::ConstructorTable::of(&image)?;
    let mut argv = vec![options.image.clone().into_os_string()];
    argv.extend(options.args.iter().cloned());
    let arguments = ArgBlock::new(&argv, &options.env)?;
    match image.kind.platform() {
        Platform::Cuda => {
            let backend = crate::cuda::CudaBackend::load(options, &image, &constructors)?;
            run_on(backend, options, &arguments, started)
        }
        Platform::Hsa => {
            let backend = crate::hsa::HsaBackend::load(options, &image)?;
            run_on(backend, options, &arguments, started)
        }
    }
}

/// The shared launch path, for any backend.
pub fn run_on<B: Backend>(
    backend: B,
    options: &RunOptions,
    arguments: &ArgBlock,
    started: Instant,
) -> Result<RunReport> {
    if options.print_resource_usage {
        print_resource_usage(&backend)?;
    }
    let loaded = started.elapsed();
    let mut session = Session::new(backend, options, arguments)?;
    let outcome = session.run(&options.launch);
    if options.verbose {
        eprintln!("gpu-loader: init and load {loaded:.1?}, run {:.1?}", started.elapsed() - loaded);
        if let Some([b, s, e]) = session.backend.kernel_times() {
            eprintln!("gpu-loader: _begin {b:.1?}, _start {s:.1?}, _end {e:.1?}");
        }
        let stats = session.rpc_stats();
        let per_message = if stats.messages == 0 { 0.0 } else { stats.lanes as f64 / stats.messages as f64 };
        eprintln!(
            "gpu-loader: RPC {} messages from {} lanes ({per_message:.1} lanes each)",
            stats.messages, stats.lanes
        );
    }
    match outcome {
        Ok(report) if report.finished && options.teardown => Ok(report),
        outcome => {
            // Kernels may still run (a timeout, a signal, an `exit` while other threads ran on, or an error of the
            // loader's own, such as a message no handler serves or output that cannot be written, while a thread
            // waits for the answer): tearing the context down under them would wait for them forever. Or the process
            // is about to exit, and the driver releases everything then.
            std::mem::forget(session);
            outcome
        }
    }
}

fn print_resource_usage<B: Backend>(backend: &B) -> Result<()> {
    for kernel in Kernel::ALL {
        let usage = backend.resource_usage(kernel)?;
        eprintln!(
            "gpu-loader: {:>6}: registers {}, shared {} B, local {} B, max threads per block {}",
            kernel.name(),
            usage.registers.map_or("n/a".into(), |r| r.to_string()),
            usage.shared_bytes,
            usage.local_bytes,
            usage.max_threads_per_block.map_or("n/a".into(), |t| t.to_string()),
        );
    }
    Ok(())
}

/// A loaded program with its arguments and RPC region in place, ready to run: once, as `gpu-loader` does, or again
/// and again, as the benchmarks do (each `_begin` starts the startup afresh).
pub struct Session<B: Backend> {
    backend: B,
    server: HostServer,
    region: HostMapped,
    layout: rpc::Layout,
    options: RunOptions,
    control: *const Control,
    result: u64,
    begin: BeginArgs,
    start: StartArgs,
    end: EndArgs,
}

impl<B: Backend> Session<B> {
    /// Allocates the RPC region, the control block, the argument block and the result word, and copies the
    /// arguments.
    pub fn new(mut backend: B, options: &RunOptions, arguments: &ArgBlock) -> Result<Self> {
        backend.check_launch(&options.launch)?;
        let lane_size = backend.lane_size();
        let region = backend.alloc_host_mapped(rpc::region_size(options.rpc_ports, lane_size))?;
        let control = backend.alloc_host_mapped(size_of::<Control>())?;
        let args_base = backend.alloc_device(arguments.len())?;
        backend.copy_to_device(args_base, &arguments.at_address(args_base))?;
        let result = backend.alloc_device(size_of::<i32>())?;

        let argv = args_base as *mut *mut core::ffi::c_char;
        let envp = (args_base + arguments.envp_offset() as u64) as *mut *mut core::ffi::c_char;
        let begin = BeginArgs {
            argc: arguments.argc(),
            rpc_port_count: options.rpc_ports,
            argv,
            envp,
            rpc_region: region.device as *mut _,
            control: control.device as *mut Control,
        };
        let start = StartArgs { argc: arguments.argc(), reserved: 0, argv, envp, result: result as *mut i32 };
        let end = EndArgs { result: result as *const i32 };
        // SAFETY: the region is `region_size` zeroed bytes of host-mapped memory that lives as long as `backend`,
        // which the session owns alongside the server.
        let server = unsafe { HostServer::new(region.host.cast(), options.rpc_ports, lane_size) };
        Ok(Self {
            backend,
            server,
            region,
            layout: rpc::Layout::new(options.rpc_ports, lane_size),
            options: options.clone(),
            control: control.host.cast::<Control>(),
            result,
            begin,
            start,
            end,
        })
    }

    /// Runs `_begin`, `_start` on `launch`, and `_end`, serving RPC until the program ends.
    pub fn run(&mut self, launch: &LaunchParams) -> Result<RunReport> {
        self.backend.copy_to_device(self.result, &0i32.to_ne_bytes())?;
        // SAFETY: the control block is host-mapped memory the backend keeps alive; no kernel runs now.
        unsafe {
            std::ptr::addr_of_mut!((*self.control.cast_mut()).progress).write_volatile(abi::progress::NOT_STARTED)
        };
        self.server.start_run();
        // All three kernels are queued at once: stream order runs them one after another, `_end` reads `main`'s
        // combined result from device memory, and nothing waits on the host between them.
        self.backend.launch(Kernel::Begin, &LaunchParams::SINGLE, self.begin.as_bytes())?;
        self.backend.launch(Kernel::Start, launch, self.start.as_bytes())?;
        self.backend.launch(Kernel::End, &LaunchParams::SINGLE, self.end.as_bytes())?;
        let outcome = serve(&mut self.backend, &mut self.server, &self.options, self.control);
        let flushed = self.server.flush().map_err(|error| LoaderError::Rpc(error.to_string()));
        let report = outcome?;
        flushed?;
        Ok(report)
    }

    /// The backend, for launching other work in the same context.
    pub fn backend(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The RPC region and how it is laid out, for benchmarks that compare the protocol with raw accesses to the same
    /// memory. Between runs nothing else touches it; during a run it belongs to the protocol.
    pub fn rpc_region(&self) -> (HostMapped, rpc::Layout) {
        (self.region, self.layout)
    }

    /// The RPC messages served so far, over every run of this session.
    pub fn rpc_stats(&self) -> crate::server::ServeStats {
        self.server.stats()
    }
}

/// Serves RPC until the program reports its end, faults, times out or the loader is interrupted.
fn serve<B: Backend>(
    backend: &mut B,
    server: &mut HostServer,
    options: &RunOptions,
    control: *const Control,
) -> Result<RunReport> {
    let deadline = options.timeout.map(|timeout| Instant::now() + timeout);
    let mut last_look = Instant::now();
    let mut busy_passes = 0u32;
    loop {
        let outcome = server
            .poll_watched(&mut || client_cannot_answer(backend, deadline))
            .map_err(|error| LoaderError::Rpc(error.to_string()))?;
        let worked = server.served_last_poll();
        if let Some(outcome) = outcome {
            // Messages other threads posted before the exit still count: serve until a pass finds nothing.
            drain(backend, server)?;
            let status = match outcome {
                Outcome::Exit(code) => RunStatus::Exited(code),
                Outcome::Abort => RunStatus::Aborted,
            };
            return Ok(RunReport { status, finished: settle(backend, server)? });
        }
        if server.abandoned_a_message() {
            // A client stopped answering in the middle of a message: find out why now.
        } else if worked {
            busy_passes += 1;
            // A program that never stops printing must still be stoppable by `--timeout` and signals, and a fault
            // still noticed: look up from the ports now and then even while they are busy.
            if !busy_passes.is_multiple_of(256) {
                continue;
            }
        } else {
            busy_passes = 0;
            // Querying the device costs more than a pass over idle ports, and a message that arrives meanwhile
            // waits for it: look up only every `LOOK_UP_INTERVAL`.
            if last_look.elapsed() < LOOK_UP_INTERVAL {
                std::hint::spin_loop();
                continue;
            }
        }
        last_look = Instant::now();
        match backend.poll()? {
            Progress::Running => {}
            Progress::Finished => {
                drain(backend, server)?;
                return match server.outcome() {
                    Some(Outcome::Exit(code)) => Ok(RunReport { status: RunStatus::Exited(code), finished: true }),
                    Some(Outcome::Abort) => Ok(RunReport { status: RunStatus::Aborted, finished: true }),
                    None => Err(LoaderError::NoExitReported),
                };
            }
            Progress::Faulted(message) => {
                drain(backend, server)?;
                // SAFETY: the control block is host-mapped memory the backend keeps alive; the kernels only write it.
                let progress = unsafe { std::ptr::addr_of!((*control).progress).read_volatile() };
                return Err(LoaderError::DeviceFault { kernel: faulted_kernel(progress).name(), message });
            }
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            drain(backend, server)?;
            eprintln!(
                "gpu-loader: the program ran past its {:?} timeout and was stopped",
                options.timeout.unwrap_or_default()
            );
            return Ok(RunReport { status: RunStatus::TimedOut, finished: false });
        }
        if let Some(signal) = pending_signal() {
            drain(backend, server)?;
            return Ok(RunReport { status: RunStatus::Interrupted(signal), finished: false });
        }
    }
}

/// How often an idle serve loop asks the device whether the kernels finished or faulted, and checks the timeout and
/// signals: rarely enough that the queries take a small part of the loop, often enough that nobody waits on them.
const LOOK_UP_INTERVAL: Duration = Duration::from_micros(20);

/// After the program reported its end: whether the kernels finish within a short grace period (they do when `_end`
/// reported; threads still running after an `exit` elsewhere may not), serving RPC meanwhile.
fn settle<B: Backend>(backend: &mut B, server: &mut HostServer) -> Result<bool> {
    const GRACE: Duration = Duration::from_millis(20);
    let deadline = Instant::now() + GRACE;
    loop {
        match backend.poll()? {
            Progress::Finished => return Ok(true),
            Progress::Faulted(_) => return Ok(false),
            Progress::Running if Instant::now() >= deadline => return Ok(false),
            Progress::Running => drain(backend, server)?,
        }
    }
}

/// Serves until a pass over the ports finds no work, so that messages sent before the end still arrive; but for at
/// most [`DRAIN_LIMIT`]: threads that go on printing after another thread's `exit` would otherwise keep the loader
/// serving forever.
fn drain<B: Backend>(backend: &mut B, server: &mut HostServer) -> Result<()> {
    let deadline = Instant::now() + DRAIN_LIMIT;
    loop {
        server
            .poll_watched(&mut || client_cannot_answer(backend, Some(deadline)))
            .map_err(|error| LoaderError::Rpc(error.to_string()))?;
        if !server.served_last_poll() || Instant::now() >= deadline {
            break;
        }
    }
    server.flush().map_err(|error| LoaderError::Rpc(error.to_string()))
}

/// Whether a client that keeps the server waiting in the middle of a message may never answer, so that the server
/// should give up on it: its kernels are no longer running (a fault ends them all), `deadline` has passed, or the
/// loader was interrupted. The serve loop then finds out which and ends the run.
fn client_cannot_answer<B: Backend>(backend: &mut B, deadline: Option<Instant>) -> bool {
    !matches!(backend.poll(), Ok(Progress::Running))
        || deadline.is_some_and(|deadline| Instant::now() >= deadline)
        || pending_signal().is_some()
}

/// How long the loader goes on serving after the program's end, for messages already on their way.
const DRAIN_LIMIT: Duration = Duration::from_millis(100);

/// The kernel that was running when the device faulted, from the startup's progress markers.
fn faulted_kernel(progress: u32) -> Kernel {
    match progress {
        abi::progress::NOT_STARTED => Kernel::Begin,
        abi::progress::BEGIN_DONE => Kernel::Start,
        _ => Kernel::End,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use startup_common::Gpu;
    use startup_common::gpu::HostThread;
    use startup_common::io::Stream;
    use startup_common::rpc::Client;
    use std::ffi::c_void;
    use std::sync::atomic::AtomicBool;

    /// Set when a [`StandIn`] backend is torn down.
    static TORN_DOWN: AtomicBool = AtomicBool::new(false);

    /// A backend without a device: its `_start` is one host thread's message with an opcode nobody serves, after
    /// which that thread would wait for an answer forever (as a GPU thread would); the kernels never finish. Or, when
    /// `faults_mid_stream`, the first packet of a long line, after which the kernels fault.
    struct StandIn {
        region: Option<*mut c_void>,
        faults_mid_stream: bool,
    }

    impl Backend for StandIn {
        fn lane_size(&self) -> u32 {
            HostThread::LANE_SIZE
        }
        fn check_launch(&self, _: &LaunchParams) -> Result<()> {
            Ok(())
        }
        fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMapped> {
            let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
            // SAFETY: a non-zero size (every allocation the session makes has one); leaked, as the test ends.
            let host = unsafe { std::alloc::alloc_zeroed(layout) };
            self.region.get_or_insert(host.cast());
            Ok(HostMapped { host, device: host as u64, len })
        }
        fn alloc_device(&mut self, len: usize) -> Result<u64> {
            Ok(self.alloc_host_mapped(len.max(8))?.device)
        }
        fn copy_to_device(&mut self, _: u64, _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn launch(&mut self, kernel: Kernel, _: &LaunchParams, _: &[u8]) -> Result<()> {
            if kernel == Kernel::Start {
                let client = Box::leak(Box::new(Client::<HostThread>::new()));
                // SAFETY: the first allocation is the session's zeroed RPC region, for the default port count and
                // one lane, and it is never freed.
                unsafe { client.reset(self.region.unwrap(), rpc::DEFAULT_PORT_COUNT) };
                if self.faults_mid_stream {
                    crate::server::tests::first_packet_of_a_write(client, Stream::Stderr, 500, b"cut short");
                } else {
                    let mut port = client.open(0x4242);
                    port.send(|_| {});
                    port.close();
                }
            }
            Ok(())
        }
        fn poll(&mut self) -> Result<Progress> {
            Ok(if self.faults_mid_stream { Progress::Faulted("stand-in fault".into()) } else { Progress::Running })
        }
        fn resource_usage(&self, _: Kernel) -> Result<ResourceUsage> {
            Ok(ResourceUsage::default())
        }
    }

    impl Drop for StandIn {
        fn drop(&mut self) {
            TORN_DOWN.store(true, Ordering::SeqCst);
        }
    }

    /// Runs a program on a [`StandIn`] backend, which must fail.
    fn run_stand_in(faults_mid_stream: bool) -> LoaderError {
        let options = RunOptions::new(PathBuf::from("stand-in.ptx"));
        let arguments = ArgBlock::new(&[OsString::from("stand-in.ptx")], &[]).unwrap();
        run_on(StandIn { region: None, faults_mid_stream }, &options, &arguments, Instant::now()).unwrap_err()
    }

    /// A message no handler serves ends the run with an error, and the loader does not tear the context down under
    /// the thread that waits for the answer (on a GPU that teardown waits for the kernel: the loader would hang).
    #[test]
    fn an_unserved_message_is_an_error_and_the_waiting_kernel_is_left_alone() {
        let error = run_stand_in(false);
        assert!(error.to_string().starts_with("RPC: no handler for opcode 0x4242 (port "), "{error}");
        assert!(!TORN_DOWN.load(Ordering::SeqCst), "the backend was torn down while a kernel waits");
    }

    /// A kernel that faults while the server waits for the rest of a message ends the run as a device fault: the
    /// server does not wait for the message for ever.
    #[test]
    fn a_fault_in_the_middle_of_a_message_ends_the_run() {
        let error = run_stand_in(true);
        assert!(error.to_string().starts_with("device fault in kernel"), "{error}");
    }

    #[test]
    fn progress_markers_name_the_faulting_kernel() {
        assert_eq!(faulted_kernel(abi::progress::NOT_STARTED), Kernel::Begin);
        assert_eq!(faulted_kernel(abi::progress::BEGIN_DONE), Kernel::Start);
        assert_eq!(faulted_kernel(abi::progress::END_STARTED), Kernel::End);
    }
}
