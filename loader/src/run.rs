//! Running a program: the part every backend shares. A backend loads the image and launches kernels; this module
//! packs the arguments, sets up the RPC region, queues `_begin`, `_start` and `_end`, serves RPC while they run and
//! turns what happened into a [`RunStatus`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpu_startup_protocol::abi::{BeginArgs, Control, EndArgs, Kernel, KernelArgs, LaunchParams, MainFn, StartArgs};
use gpu_startup_protocol::region;
use startup_common::rpc::HostCalls;

use crate::args::ArgBlock;
use crate::backend::{Backend, DeviceOptions, HostMapped};
use crate::ctors::ConstructorTable;
use crate::error::{LoaderError, Result};
use crate::image::Image;
use crate::server::HostServer;
pub use crate::status::RunReport;

mod serve;
#[cfg(test)]
mod tests;

/// Stack per GPU thread unless asked otherwise: room for `print!`'s buffer and a panic's formatting.
pub const DEFAULT_STACK_SIZE: usize = 8 * 1024;

/// The device heap's pool unless asked otherwise (`docs/heap.md`): room for a full H200 grid (1,081,344 threads) to
/// hold a block of up to 256 bytes each at once, several times over, where CUDA's default heap of 8 MiB runs out. A
/// device that cannot spare it gets half as much, and so on down to [`MIN_DEFAULT_HEAP_SIZE`].
pub const DEFAULT_HEAP_SIZE: u64 = 1 << 30;

/// The least the default heap shrinks to on a device short of memory; below that the reservation's error stands.
pub const MIN_DEFAULT_HEAP_SIZE: u64 = 16 << 20;

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
    /// RPC ports in the region (1 to `region::MAX_PORTS`).
    pub rpc_ports: u32,
    /// How long an RPC message may make no progress while the kernels run before the loader gives it up.
    pub rpc_stall_limit: Duration,
    /// Bytes of stack per GPU thread.
    pub stack_size: usize,
    /// Bytes of device memory for the device heap; `None`: [`DEFAULT_HEAP_SIZE`], or less where the device cannot
    /// spare it. 0: no heap (every allocation fails).
    pub heap_size: Option<u64>,
    /// Release the device's resources when the run ends. A process that exits right after the run (as
    /// `gpu-loader` does) can leave that to the driver's process teardown, which is faster.
    pub teardown: bool,
    /// The handlers of the program's host calls of its own (`docs/rpc.md`); none by default. A message of a user
    /// opcode without a handler ends the run with an error naming the opcode, and so does a handler's error.
    pub host_calls: HostCalls,
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
            rpc_ports: region::DEFAULT_PORT_COUNT,
            rpc_stall_limit: crate::server::STALL_LIMIT,
            stack_size: DEFAULT_STACK_SIZE,
            heap_size: None,
            teardown: true,
            host_calls: HostCalls::new(),
        }
    }

    /// What a backend needs of these options to open the device and load the image.
    pub fn device_options(&self) -> DeviceOptions {
        DeviceOptions { device: self.device, stack_size: self.stack_size, kernel_times: self.verbose }
    }
}

/// Ends the process at once with `code`, once stdout and stderr are flushed: for a process whose kernels may still
/// run (after `exit` on one thread, a timeout, a signal, a fault or an error). The process's end is what releases the
/// GPU from under them, and nothing may wait for them first, as a library's exit handler may: under compute-sanitizer
/// a loader that left through `exit` with its kernel running stayed alive, busy, after the sanitizer had ended.
pub fn exit_at_once(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: ends the process without running exit handlers; the output was flushed above, and nothing else needs
    // saving.
    unsafe { libc::_exit(code) }
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

pub(crate) fn pending_signal() -> Option<i32> {
    match signal_flag().load(Ordering::Relaxed) {
        0 => None,
        signal => Some(signal as i32),
    }
}

/// Runs the program `options` names, to the end.
pub fn run(options: &RunOptions) -> Result<RunReport> {
    let started = Instant::now();
    crate::launch::validate(&options.launch)?;
    check_rpc_ports(options.rpc_ports)?;
    let image = Image::read(&options.image)?;
    run_image(options, &image, started)
}

/// Runs the program in `image`, read from `options.image` (when the run `started`), to the end. A test binary is
/// refused: its tests run through the test runner (`harness`).
pub fn run_image(options: &RunOptions, image: &Image, started: Instant) -> Result<RunReport> {
    image.check_startup_abi()?;
    if crate::test_list::is_test_binary(image, &crate::test_list::read(image)?)? {
        return Err(LoaderError::BadImage {
            path: image.path.clone(),
            problem: "is a test binary (it has tests, or no `main` of its own): `gpu-loader IMAGE [libtest options]` \
                      runs its tests"
                .into(),
        });
    }
    // Checked before any GPU work, so a bad priority suffix is reported the same with or without a GPU.
    let constructors = crate::ctors::ConstructorTable::of(image)?;
    run_checked(options, image, &constructors, started)
}

/// Runs the program in `image`, which [`run_image`]'s checks passed, with `constructors` its table: for a caller that
/// checked the image itself (`cli`), so the one parse is read once for each check.
pub(crate) fn run_checked(
    options: &RunOptions,
    image: &Image,
    constructors: &ConstructorTable,
    started: Instant,
) -> Result<RunReport> {
    let mut argv = vec![options.image.clone().into_os_string()];
    argv.extend(options.args.iter().cloned());
    let arguments = ArgBlock::new(&argv, &options.env)?;
    let backend = crate::platform::open_backend(image, constructors, &options.device_options())?;
    run_on(backend, options, &arguments, started)
}

/// The port count must fit the protocol's layout (`--rpc-ports` is checked by clap; the library's callers are not).
fn check_rpc_ports(ports: u32) -> Result<()> {
    match region::Layout::checked(ports, 1) {
        Some(_) => Ok(()),
        None => Err(LoaderError::BadRpcPorts(ports)),
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
    let set_up = started.elapsed() - loaded;
    let outcome = session.run(&options.launch);
    if options.verbose {
        let run = started.elapsed() - loaded - set_up;
        eprintln!("gpu-loader: init and load {loaded:.1?}, heap and RPC set-up {set_up:.1?}, run {run:.1?}");
        let steps = session.backend.load_steps();
        if !steps.is_empty() {
            let steps: Vec<String> = steps.iter().map(|(step, time)| format!("{step} {time:.1?}")).collect();
            eprintln!("gpu-loader: load: {}", steps.join(", "));
        }
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
    layout: region::Layout,
    options: RunOptions,
    control: *const Control,
    result: u64,
    /// Whether the result word holds zero: it does when allocated, and `_end` zeroes it once it has read it, so only
    /// a run that did not finish leaves it to the loader.
    result_zeroed: bool,
    begin: BeginArgs,
    start: StartArgs,
    end: EndArgs,
}

impl<B: Backend> Session<B> {
    /// Allocates the RPC region, the control block, the argument block and the result word, and copies the
    /// arguments.
    pub fn new(mut backend: B, options: &RunOptions, arguments: &ArgBlock) -> Result<Self> {
        check_rpc_ports(options.rpc_ports)?;
        backend.check_launch(&options.launch)?;
        let lane_size = backend.lane_size();
        let layout = region::Layout::new(options.rpc_ports, lane_size);
        let region = backend.alloc_host_mapped(layout.size())?;
        let control = backend.alloc_host_mapped(size_of::<Control>())?;
        let args_base = backend.alloc_device(arguments.len())?;
        backend.copy_to_device(args_base, &arguments.at_address(args_base))?;
        let result = backend.alloc_device(size_of::<i32>())?;
        let (heap, heap_size) = reserve_heap(&mut backend, options.heap_size)?;
        if options.verbose {
            eprintln!("gpu-loader: device heap of {heap_size} bytes");
        }

        let argv = args_base as *mut *mut core::ffi::c_char;
        let envp = (args_base + arguments.envp_offset() as u64) as *mut *mut core::ffi::c_char;
        let begin = BeginArgs {
            argc: arguments.argc(),
            rpc_port_count: options.rpc_ports,
            argv,
            envp,
            rpc_region: region.device as *mut _,
            control: control.device as *mut Control,
            heap: heap as *mut _,
            heap_size,
        };
        let start = StartArgs {
            argc: arguments.argc(),
            reserved: 0,
            argv,
            envp,
            result: result as *mut i32,
            test: std::ptr::null(),
        };
        let end = EndArgs { result: result as *mut i32 };
        // SAFETY: the region is `region_size` zeroed bytes of host-mapped memory that lives as long as `backend`,
        // which the session owns alongside the server.
        let server = unsafe { HostServer::new(region.host.cast(), options.rpc_ports, lane_size) }
            .with_stall_limit(options.rpc_stall_limit)
            .with_host_calls(options.host_calls.clone());
        Ok(Self {
            backend,
            server,
            region,
            layout,
            options: options.clone(),
            control: control.host.cast::<Control>(),
            result,
            result_zeroed: true,
            begin,
            start,
            end,
        })
    }

    /// Runs `_begin`, `_start` on `launch`, and `_end`, serving RPC until the program ends.
    pub fn run(&mut self, launch: &LaunchParams) -> Result<RunReport> {
        self.run_entry(launch, std::ptr::null(), self.options.timeout)
    }

    /// Runs one test of a test binary: `_begin`, `_start` on `launch` calling the trampoline that the global at
    /// `entry` holds (from [`Backend::global_address`]), and `_end`, stopped after `timeout`.
    pub fn run_test(&mut self, launch: &LaunchParams, entry: u64, timeout: Option<Duration>) -> Result<RunReport> {
        self.run_entry(launch, entry as *const MainFn, timeout)
    }

    fn run_entry(
        &mut self,
        launch: &LaunchParams,
        test: *const MainFn,
        timeout: Option<Duration>,
    ) -> Result<RunReport> {
        self.start.test = test;
        if !std::mem::replace(&mut self.result_zeroed, false) {
            self.backend.copy_to_device(self.result, &0i32.to_ne_bytes())?;
        }
        // SAFETY: the control block is host-mapped memory the backend keeps alive; no kernel runs now.
        unsafe { self.control.cast_mut().write_volatile(Control::default()) };
        self.server.start_run();
        // All three kernels are queued at once: they run one after another, `_end` reads `main`'s combined result
        // from device memory, and nothing waits on the host between them.
        self.backend.launch_startup(launch, [self.begin.as_bytes(), self.start.as_bytes(), self.end.as_bytes()])?;
        let outcome = serve::serve(&mut self.backend, &mut self.server, timeout, self.control);
        // Finished means `_end` ran: it read the result word and left it zeroed.
        self.result_zeroed = matches!(outcome, Ok(RunReport { finished: true, .. }));
        // The output held for files goes into them before they are closed.
        let flushed = self.server.close_files().map_err(LoaderError::from);
        let mut report = outcome?;
        flushed?;
        report.panicked_threads = panicked_threads(self.control);
        report.panic_message = self.server.take_panic_message();
        // SAFETY: the control block is host-mapped memory the backend keeps alive; the kernels only write it.
        let constructed = unsafe { std::ptr::addr_of!((*self.control).constructed).read_volatile() };
        report.constructors_ran = constructed != 0;
        Ok(report)
    }

    /// Sends the program's output to `stdout` and `stderr` instead of the process's streams.
    pub fn with_output(
        mut self,
        stdout: Box<dyn std::io::Write + Send>,
        stderr: Box<dyn std::io::Write + Send>,
    ) -> Self {
        self.server.set_output(stdout, stderr);
        self
    }

    /// The backend, for launching other work in the same context.
    pub fn backend(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The RPC region and how it is laid out, for benchmarks that compare the protocol with raw accesses to the same
    /// memory. Between runs nothing else touches it; during a run it belongs to the protocol.
    pub fn rpc_region(&self) -> (HostMapped, region::Layout) {
        (self.region, self.layout)
    }

    /// The RPC messages served so far, over every run of this session.
    pub fn rpc_stats(&self) -> crate::server::ServeStats {
        self.server.stats()
    }
}

/// Reserves the device heap's pool: `requested` bytes exactly, or by default [`DEFAULT_HEAP_SIZE`] halved until
/// the device can spare it. Returns its address and size; (0, 0) for no heap.
fn reserve_heap<B: Backend>(backend: &mut B, requested: Option<u64>) -> Result<(u64, u64)> {
    let mut size = match requested {
        Some(0) => return Ok((0, 0)),
        Some(size) => size,
        None => DEFAULT_HEAP_SIZE,
    };
    loop {
        // A size past the host's address space is one no device can give.
        match backend.alloc_device(usize::try_from(size).unwrap_or(usize::MAX)) {
            Ok(address) => return Ok((address, size)),
            Err(_) if requested.is_none() && size > MIN_DEFAULT_HEAP_SIZE => size /= 2,
            Err(error) => return Err(LoaderError::Heap { size, source: Box::new(error) }),
        }
    }
}

/// The threads that panicked so far, as the device reported them in the control block.
fn panicked_threads(control: *const Control) -> u32 {
    // SAFETY: the control block is host-mapped memory the backend keeps alive; the kernels only write it.
    unsafe { std::ptr::addr_of!((*control).panicked_threads).read_volatile() }
}

/// How long the loader waits for the kernels to end after a thread panicked: panicking threads end, but threads
/// that wait for one of them (at a barrier, for a flag it would set) never do.
pub const PANIC_GRACE: Duration = Duration::from_secs(1);
