//! `gpu-bench --images DIR --loader PATH [--test-loader PATH] [--repeat N] [--json FILE]`: the startup and the RPC
//! channel measured against bare baselines in the same run, on an NVIDIA GPU. `cargo xtask bench` and the bundle's
//! `bench` script run it; `docs/performance.md` keeps the latest results and what they mean.
//!
//! Every number is a median over repeated runs, with min and max; the baselines run in the same process (or, for
//! whole-process timings, the same machine) right next to what they are compared with.

use std::ffi::{CString, OsString, c_void};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use cudarc::driver::result;
use cudarc::driver::sys;
use gpu_loader::args::ArgBlock;
use gpu_loader::ctors::ConstructorTable;
use gpu_loader::cuda::CudaBackend;
use gpu_loader::image::Image;
use gpu_loader::run::{RunOptions, Session};
use startup_common::abi::LaunchParams;

// The benchmarks of the heap and of the test runner, in files of their own.
#[path = "bench/heap.rs"]
mod heap;
#[path = "bench/test_runner.rs"]
mod test_runner;

#[derive(Parser)]
#[command(name = "gpu-bench", about = "Benchmarks of the GPU startup and its RPC channel against bare baselines")]
struct Cli {
    #[command(subcommand)]
    child: Option<Child>,
    /// The folder of NVIDIA images (`empty.ptx`, `rpc-latency.ptx`, `idle.ptx`, `print-flood.ptx`,
    /// `printf-flood-c.ptx`, `heap-throughput-c.ptx`).
    #[arg(long)]
    images: Option<PathBuf>,
    /// The gpu-loader binary, for the whole-process benchmarks.
    #[arg(long)]
    loader: Option<PathBuf>,
    /// The gpu-test-loader binary, for the whole-process benchmarks of the test operations [default: next to
    /// --loader].
    #[arg(long)]
    test_loader: Option<PathBuf>,
    /// Samples per measurement.
    #[arg(long, default_value_t = 30)]
    repeat: usize,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run only the benchmarks whose name contains this.
    #[arg(long)]
    only: Option<String>,
}

/// What the benchmark runs as child processes.
#[derive(Subcommand)]
enum Child {
    /// The bare baseline of a whole run: create the context, load IMAGE, launch one empty kernel, exit.
    BareRun { image: PathBuf },
    /// Print one line per thread of BLOCKS blocks of 1024 threads with CUDA's `vprintf`, FIFO of FIFO bytes (0:
    /// the driver's default).
    Vprintf { blocks: u32, fifo: usize },
    /// The allocation benchmark's baseline: BLOCKS blocks of 1024 threads each allocate and free ROUNDS blocks with
    /// CUDA's device-side `malloc`, its heap HEAP bytes (0: the driver's default); warm up, then REPEAT timed launches.
    CudaMalloc {
        #[arg(long)]
        blocks: u32,
        #[arg(long)]
        rounds: u32,
        #[arg(long)]
        heap: usize,
        #[arg(long)]
        repeat: usize,
    },
}

/// One measurement: seconds per sample.
#[derive(Clone, Debug, serde::Serialize)]
struct Stats {
    median: f64,
    min: f64,
    max: f64,
    samples: usize,
}

impl Stats {
    fn of(mut samples: Vec<f64>) -> Self {
        assert!(!samples.is_empty(), "a measurement needs samples");
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let median = if n % 2 == 1 { samples[n / 2] } else { (samples[n / 2 - 1] + samples[n / 2]) / 2.0 };
        Stats { median, min: samples[0], max: samples[n - 1], samples: n }
    }
}

/// One row of the report.
#[derive(Clone, Debug, serde::Serialize)]
struct Row {
    name: String,
    what: String,
    unit: &'static str,
    ours: Stats,
    baseline: Option<Stats>,
    baseline_what: String,
    /// ours / baseline (medians), where a baseline exists.
    ratio: Option<f64>,
    goal: String,
    note: String,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.child {
        Some(Child::BareRun { image }) => bare_run(image),
        Some(Child::Vprintf { blocks, fifo }) => vprintf_child(*blocks, *fifo),
        Some(Child::CudaMalloc { blocks, rounds, heap, repeat }) => {
            heap::cuda_malloc_child(*blocks, *rounds, *heap, *repeat)
        }
        None => benchmarks(&cli),
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("gpu-bench: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn benchmarks(cli: &Cli) -> Result<()> {
    let images = cli.images.clone().context("--images is required")?;
    let loader = cli.loader.clone().context("--loader is required")?;
    let test_loader = cli.test_loader.clone().unwrap_or_else(|| loader.with_file_name("gpu-test-loader"));
    gpu_loader::cuda::init_driver().map_err(|e| anyhow::anyhow!("{e}"))?;
    let device = describe_device()?;
    println!("gpu-bench: {device}");
    // A benchmark runs when `--only` is part of its name or of a row it makes (`name` lists them, space-separated).
    let wanted = |name: &str| {
        let wanted = cli.only.as_deref().is_none_or(|only| name.split(' ').any(|row| row.contains(only)));
        if wanted {
            eprintln!("gpu-bench: {name}...");
        }
        wanted
    };
    let mut rows = Vec::new();
    let repeat = cli.repeat.max(1);
    if wanted("kernel-phase kernel-phase-graph") {
        rows.extend(kernel_phase(&images, repeat)?);
    }
    if wanted("tests-per-test") {
        rows.push(test_runner::per_test(&images, &loader, repeat.min(5))?);
    }
    if wanted("loader-run") {
        rows.push(loader_run(&images, &loader, repeat.min(10))?);
    }
    if wanted("grid-scaling") {
        rows.extend(grid_scaling(&images, repeat.min(10))?);
    }
    if wanted("rpc-round-trip rpc-round-trip-data") {
        rows.extend(rpc_round_trip(&images, repeat.min(10))?);
    }
    if wanted("rpc-round-trip-in-kernel") {
        rows.push(rpc_round_trip_in_kernel(&images, &test_loader, repeat.min(10))?);
    }
    if wanted("print-throughput printf-throughput") {
        rows.extend(print_throughput(&images, &loader, repeat.min(3))?);
    }
    if wanted("idle-cpu") {
        rows.push(idle_cpu(&images, repeat.min(3))?);
    }
    if wanted("rpc-after-idle") {
        rows.push(rpc_after_idle(&images, &test_loader, repeat.min(3))?);
    }
    if wanted("heap-throughput heap-throughput-8mib") {
        rows.extend(heap::heap_throughput(&images, repeat.min(3))?);
    }
    print_table(&rows);
    if let Some(path) = &cli.json {
        let json = serde_json::json!({ "device": device, "results": rows });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)?;
        println!("gpu-bench: wrote {}", path.display());
    }
    Ok(())
}

fn describe_device() -> Result<String> {
    let device = result::device::get(0)?;
    let name = result::device::get_name(device)?;
    let mut driver = 0;
    // SAFETY: writes one int.
    unsafe { sys::cuDriverGetVersion(&mut driver) }.result()?;
    Ok(format!("{name}, CUDA driver API {}.{}", driver / 1000, driver % 1000 / 10))
}

/// A program loaded into a session, ready to run again and again.
fn session(images: &Path, program: &str, args: &[&str]) -> Result<Session<CudaBackend>> {
    let path = images.join(format!("{program}.ptx"));
    let image = Image::read(&path)?;
    image.check_startup_abi()?;
    let mut options = RunOptions::new(&path);
    options.env.clear();
    // A hang must fail the benchmark, not stall it.
    options.timeout = Some(Duration::from_secs(30));
    options.launch = LaunchParams { threads: [1024, 1, 1], blocks: [1, 1, 1] };
    // `rpc-latency` makes its round trips with the test operations.
    options.host_calls = startup_common::rpc::testing::operations();
    let backend = CudaBackend::load(&options.device_options(), &image, &ConstructorTable::of(&image)?)?;
    let mut argv: Vec<OsString> = vec![path.into_os_string()];
    argv.extend(args.iter().map(OsString::from));
    Ok(Session::new(backend, &options, &ArgBlock::new(&argv, &[])?)?)
}

fn run_ok(session: &mut Session<CudaBackend>, launch: &LaunchParams) -> Result<Duration> {
    let started = Instant::now();
    let report = session.run(launch)?;
    let elapsed = started.elapsed();
    if report.status != gpu_loader::RunStatus::Exited(0) || !report.finished {
        bail!("the benchmark program ended with {} (finished: {})", report.status, report.finished);
    }
    Ok(elapsed)
}

/// A module with one empty kernel, `empty`, in the current context.
struct EmptyKernel {
    function: sys::CUfunction,
    stream: sys::CUstream,
}

const EMPTY_PTX: &str = ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry empty()\n{\n\tret;\n}\n";

/// Loads PTX text as a module of the current context, which it stays in for the process.
fn load_module(ptx: impl Into<Vec<u8>>) -> Result<sys::CUmodule> {
    let text = CString::new(ptx)?;
    let mut module = std::ptr::null_mut();
    // SAFETY: a NUL-terminated PTX string.
    unsafe { sys::cuModuleLoadData(&mut module, text.as_ptr().cast()) }.result()?;
    Ok(module)
}

/// Loads `ptx` ([`load_module`]) and returns its kernel `name` and a stream of its own to launch it on.
fn load_kernel(ptx: &str, name: &str) -> Result<(sys::CUfunction, sys::CUstream)> {
    let module = load_module(ptx)?;
    // SAFETY: the module was just loaded; a missing kernel is an error, not undefined behaviour.
    let function = unsafe { result::module::get_function(module, CString::new(name)?) }?;
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking)?;
    Ok((function, stream))
}

impl EmptyKernel {
    fn load() -> Result<Self> {
        let (function, stream) = load_kernel(EMPTY_PTX, "empty")?;
        Ok(Self { function, stream })
    }

    /// One launch of `grid` and a wait for it.
    fn launch_and_wait(&self, grid: &LaunchParams) -> Result<Duration> {
        let started = Instant::now();
        let [tx, ty, tz] = grid.threads;
        let [bx, by, bz] = grid.blocks;
        // SAFETY: the kernel takes no parameters; the stream is ours.
        unsafe {
            result::launch_kernel(self.function, (bx, by, bz), (tx, ty, tz), 0, self.stream, &mut [])?;
            result::stream::synchronize(self.stream)?;
        }
        Ok(started.elapsed())
    }
}

/// Waits for `stream`, or fails after `limit`: a benchmark that hangs must say so, not stall the run.
fn wait_for(stream: sys::CUstream, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        // SAFETY: a query on our stream.
        match unsafe { sys::cuStreamQuery(stream) } {
            sys::CUresult::CUDA_SUCCESS => return Ok(()),
            sys::CUresult::CUDA_ERROR_NOT_READY if Instant::now() < deadline => std::hint::spin_loop(),
            sys::CUresult::CUDA_ERROR_NOT_READY => bail!("a baseline kernel did not finish within {limit:?}"),
            error => bail!("a baseline kernel failed: {error:?}"),
        }
    }
}

fn seconds(samples: impl IntoIterator<Item = Duration>) -> Vec<f64> {
    samples.into_iter().map(|d| d.as_secs_f64()).collect()
}

/// Benchmark 1: `_begin` + `_start` + `_end` for an empty `main`, with RPC served, against one empty launch +
/// synchronize, and against a CUDA graph of three empty kernels + synchronize (the floor for three kernels).
fn kernel_phase(images: &Path, repeat: usize) -> Result<Vec<Row>> {
    let mut session = session(images, "empty", &[])?;
    let empty = EmptyKernel::load()?;
    let graph = test_runner::GraphOfThree::capture(&EmptyKernel::load()?)?;
    let single = LaunchParams::SINGLE;
    for _ in 0..10 {
        run_ok(&mut session, &single)?;
        empty.launch_and_wait(&single)?;
        graph.launch_and_wait()?;
    }
    let (mut ours, mut bare, mut graphs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeat {
        ours.push(run_ok(&mut session, &single)?);
        bare.push(empty.launch_and_wait(&single)?);
        graphs.push(graph.launch_and_wait()?);
    }
    let what = "_begin + _start + _end, empty main, 1 thread, RPC served";
    let ours = Stats::of(seconds(ours));
    Ok(vec![
        row(
            "kernel-phase",
            what,
            "µs",
            ours.clone(),
            Some((Stats::of(seconds(bare)), "one empty kernel launch + synchronize, same context")),
            "≤ 1.3×",
        ),
        row(
            "kernel-phase-graph",
            what,
            "µs",
            ours,
            Some((Stats::of(seconds(graphs)), "a CUDA graph of three empty kernels: launch + synchronize")),
            "≤ 1.3×",
        ),
    ])
}

/// Benchmark 2: The whole loader run, process start to exit, for an empty `main`, against a bare program.
fn loader_run(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    let image = images.join("empty.ptx");
    let me = std::env::current_exe()?;
    let mut ours_cmd = Command::new(loader);
    ours_cmd.arg(&image);
    let mut bare_cmd = Command::new(&me);
    bare_cmd.arg("bare-run").arg(&image);
    // Warm both: the driver's JIT cache for the bare program, the loader's linked-cubin cache for ours.
    for _ in 0..2 {
        time_process(&mut ours_cmd)?;
        time_process(&mut bare_cmd)?;
    }
    let mut ours = Vec::new();
    let mut bare = Vec::new();
    for _ in 0..repeat {
        ours.push(time_process(&mut ours_cmd)?);
        bare.push(time_process(&mut bare_cmd)?);
    }
    Ok(row(
        "loader-run",
        "gpu-loader empty.ptx, process start to exit, warm caches",
        "ms",
        Stats::of(seconds(ours)),
        Some((Stats::of(seconds(bare)), "cudarc program: context, load the same image, one empty launch")),
        "≤ 1.05×",
    ))
}

fn time_process(command: &mut Command) -> Result<Duration> {
    let started = Instant::now();
    let status = command.stdout(Stdio::null()).stderr(Stdio::null()).status()?;
    let elapsed = started.elapsed();
    if !status.success() {
        bail!("{:?} failed with {status}", command.get_program());
    }
    Ok(elapsed)
}

/// The child of `loader-run`'s baseline.
fn bare_run(image: &Path) -> Result<()> {
    result::init()?;
    let device = result::device::get(0)?;
    // SAFETY: the primary context of device 0, kept until the process exits.
    let context = unsafe { result::primary_ctx::retain(device) }?;
    // SAFETY: the context was just retained.
    unsafe { result::ctx::set_current(context) }?;
    load_module(std::fs::read(image)?)?;
    EmptyKernel::load()?.launch_and_wait(&LaunchParams::SINGLE)?;
    Ok(())
}

/// LLVM libc's first design: one kernel whose threads meet at a global atomic barrier before and after `main`.
const BARRIER_PTX: &str = r#".version 7.8
.target sm_90
.address_size 64
.visible .global .align 4 .u32 arrived;
.visible .entry barrier_start(.param .u32 total)
{
	.reg .pred %p<3>;
	.reg .b32 %r<6>;
	ld.param.u32 %r1, [total];
	shl.b32 %r5, %r1, 1;
	atom.global.add.u32 %r2, [arrived], 1;
$before:
	ld.volatile.global.u32 %r3, [arrived];
	setp.lt.u32 %p1, %r3, %r1;
	@%p1 nanosleep.u32 64;
	@%p1 bra.uni $before;
	atom.global.add.u32 %r2, [arrived], 1;
$after:
	ld.volatile.global.u32 %r4, [arrived];
	setp.lt.u32 %p2, %r4, %r5;
	@%p2 nanosleep.u32 64;
	@%p2 bra.uni $after;
	ret;
}
"#;

/// Benchmark 3: Startup cost against grid size, up to 16 times what the device holds at once; the barrier design as the
/// comparator up to the largest grid it can run (beyond residency it never finishes).
fn grid_scaling(images: &Path, repeat: usize) -> Result<Vec<Row>> {
    let mut session = session(images, "empty", &[])?;
    let module = load_module(BARRIER_PTX)?;
    // SAFETY: the module has this kernel and this global.
    let function = unsafe { result::module::get_function(module, CString::new("barrier_start")?) }?;
    // SAFETY: as above.
    let (arrived, _) = unsafe { result::module::get_global(module, CString::new("arrived")?) }?;
    let device = result::device::get(0)?;
    // SAFETY: plain queries.
    let sms = unsafe {
        result::device::get_attribute(device, sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    }? as u32;
    // SAFETY: the kernel is loaded; 1024 threads, no dynamic shared memory.
    let per_sm = unsafe { result::occupancy::max_active_block_per_multiprocessor(function, 1024, 0) }? as u32;
    let resident = sms * per_sm;
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking)?;
    let mut rows = Vec::new();
    let sizes: Vec<(String, LaunchParams)> = [
        ("1 thread".to_owned(), LaunchParams::SINGLE),
        ("1 block × 1024".to_owned(), LaunchParams { threads: [1024, 1, 1], blocks: [1, 1, 1] }),
        (format!("{sms} blocks × 1024 (1 per SM)"), LaunchParams { threads: [1024, 1, 1], blocks: [sms, 1, 1] }),
    ]
    .into_iter()
    .chain([1u32, 4, 16].map(|times| {
        (
            format!("{} blocks × 1024 ({times}× resident)", resident * times),
            LaunchParams { threads: [1024, 1, 1], blocks: [resident * times, 1, 1] },
        )
    }))
    .collect();
    for (label, launch) in sizes {
        run_ok(&mut session, &launch)?;
        let ours = (0..repeat).map(|_| run_ok(&mut session, &launch)).collect::<Result<Vec<_>>>()?;
        let total = launch.total_threads();
        let fits = launch.blocks[0] <= resident;
        let baseline = if fits {
            let mut samples = Vec::new();
            for _ in 0..=repeat {
                // SAFETY: resets the 4-byte counter; then one launch of the barrier kernel with its one parameter.
                let sample = unsafe {
                    result::memset_d8_sync(arrived, 0, 4)?;
                    let mut total_param = total as u32;
                    let started = Instant::now();
                    result::launch_kernel(
                        function,
                        (launch.blocks[0], 1, 1),
                        (launch.threads[0], 1, 1),
                        0,
                        stream,
                        &mut [(&raw mut total_param).cast::<c_void>()],
                    )?;
                    wait_for(stream, Duration::from_secs(20))?;
                    started.elapsed()
                };
                samples.push(sample);
            }
            samples.remove(0);
            Some((Stats::of(seconds(samples)), "one kernel with a global atomic barrier (LLVM libc's first design)"))
        } else {
            None
        };
        let mut row =
            row("grid-scaling", &format!("empty main, {label}"), "µs", Stats::of(seconds(ours)), baseline, "flat");
        if !fits {
            row.note = format!("the barrier design cannot run: only {resident} blocks of 1024 are resident");
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The raw hand-off: the device writes the round's number to one word of mapped host memory and waits for the host to
/// write it back to another.
const PING_PONG_PTX: &str = r#".version 7.8
.target sm_90
.address_size 64
.visible .entry ping_pong(.param .u64 to_host, .param .u64 to_device, .param .u32 rounds)
{
	.reg .pred %p<3>;
	.reg .b32 %r<3>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd1, [to_host];
	ld.param.u64 %rd2, [to_device];
	ld.param.u32 %r1, [rounds];
	mov.u32 %r2, 0;
$loop:
	setp.ge.u32 %p1, %r2, %r1;
	@%p1 bra.uni $done;
	add.u32 %r2, %r2, 1;
	cvt.u64.u32 %rd3, %r2;
	st.release.sys.u64 [%rd1], %rd3;
$wait:
	ld.acquire.sys.u64 %rd4, [%rd2];
	setp.ne.u64 %p2, %rd4, %rd3;
	@%p2 bra.uni $wait;
	bra.uni $loop;
$done:
	ret;
}
"#;

/// The raw hand-off as a kernel of its own, loaded in the current context, and the host's side of it.
struct PingPong {
    function: sys::CUfunction,
    stream: sys::CUstream,
}

impl PingPong {
    const ROUNDS: u32 = 20_000;

    fn load() -> Result<Self> {
        let (function, stream) = load_kernel(PING_PONG_PTX, "ping_pong")?;
        Ok(Self { function, stream })
    }

    /// Seconds per round trip over [`PingPong::ROUNDS`] rounds of one launch, through the two words that carry the
    /// hand-off of port 0 in `session`'s RPC region (its client and server outboxes), the port a lone thread's
    /// messages take. The same words matter: the raw round trip takes one of two speeds by the pair of SM and host
    /// address (`docs/performance.md`), so a baseline in memory of its own would be a draw of its own.
    /// The words get back their values afterwards, so the session's next run finds the port as it left it.
    fn sample(&self, session: &Session<CudaBackend>) -> Result<f64> {
        let (region, layout) = session.rpc_region();
        let word = |index: usize| {
            // SAFETY: the index is a word of the region's layout, inside the region, which the session keeps alive;
            // no run of the session is in progress, so nothing else accesses it until this sample is done.
            let host = unsafe { AtomicU64::from_ptr(region.host.cast::<u64>().add(index)) };
            (host, region.device + 8 * index as u64)
        };
        let (to_host, mut to_host_device) = word(layout.client_outbox(0));
        let (to_device, mut to_device_device) = word(layout.server_outbox(0));
        let left = (to_host.load(Ordering::SeqCst), to_device.load(Ordering::SeqCst));
        to_host.store(0, Ordering::SeqCst);
        to_device.store(0, Ordering::SeqCst);
        let mut rounds = Self::ROUNDS;
        let started = Instant::now();
        // SAFETY: the kernel takes two pointers and a count, given in this order.
        unsafe {
            result::launch_kernel(
                self.function,
                (1, 1, 1),
                (1, 1, 1),
                0,
                self.stream,
                &mut [
                    (&raw mut to_host_device).cast::<c_void>(),
                    (&raw mut to_device_device).cast::<c_void>(),
                    (&raw mut rounds).cast::<c_void>(),
                ],
            )?;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for round in 1..=u64::from(Self::ROUNDS) {
            while to_host.load(Ordering::Acquire) != round {
                if Instant::now() > deadline {
                    bail!("the ping-pong kernel stopped answering at round {round}");
                }
                std::hint::spin_loop();
            }
            to_device.store(round, Ordering::Release);
        }
        wait_for(self.stream, Duration::from_secs(20))?;
        let elapsed = started.elapsed();
        to_host.store(left.0, Ordering::SeqCst);
        to_device.store(left.1, Ordering::SeqCst);
        Ok(elapsed.as_secs_f64() / f64::from(Self::ROUNDS))
    }
}

/// Benchmark 4: One thread's RPC round trip, against a raw mapped-memory ping-pong in the same context: an RPC that
/// carries nothing (the protocol's own cost: port lock, hand-off both ways) and one that carries a number each way
/// (one more read of host memory by the device for the reply). The ping-pong runs on the outbox words of the port
/// that the RPC of the same row uses ([`PingPong::sample`]). Each sample of ours is followed by a sample of the
/// baseline, so that both see the same state of the machine.
fn rpc_round_trip(images: &Path, repeat: usize) -> Result<Vec<Row>> {
    let rounds = PingPong::ROUNDS;
    let single = LaunchParams::SINGLE;
    let arg = rounds.to_string();
    let mut none = session(images, "rpc-latency", &["0"])?;
    let mut empty = session(images, "rpc-latency", &[&arg, "empty"])?;
    let mut increment = session(images, "rpc-latency", &[&arg])?;
    let ping_pong = PingPong::load()?;
    // Warm-up: the first launch of each pays for loading and caching.
    run_ok(&mut none, &single)?;
    run_ok(&mut empty, &single)?;
    run_ok(&mut increment, &single)?;
    ping_pong.sample(&empty)?;
    let (mut empties, mut increments) = (Vec::new(), Vec::new());
    let (mut raw_empty, mut raw_increment) = (Vec::new(), Vec::new());
    for _ in 0..repeat {
        let base = run_ok(&mut none, &single)?;
        let with_empty = run_ok(&mut empty, &single)?;
        raw_empty.push(ping_pong.sample(&empty)?);
        let with_increment = run_ok(&mut increment, &single)?;
        raw_increment.push(ping_pong.sample(&increment)?);
        empties.push(with_empty.saturating_sub(base).as_secs_f64() / f64::from(rounds));
        increments.push(with_increment.saturating_sub(base).as_secs_f64() / f64::from(rounds));
    }
    let baseline = "raw ping-pong through the same port's outbox words";
    Ok(vec![
        row(
            "rpc-round-trip",
            "one thread, an RPC that carries nothing (test noop)",
            "µs",
            Stats::of(empties),
            Some((Stats::of(raw_empty), baseline)),
            "≤ 1.3×",
        ),
        row(
            "rpc-round-trip-data",
            "one thread, an RPC that carries a number each way (test increment)",
            "µs",
            Stats::of(increments),
            Some((Stats::of(raw_increment), baseline)),
            "≤ 1.7×",
        ),
    ])
}

/// Benchmark 4b: One thread's empty RPC against bare hand-offs of the same port's buffers, alternating in one kernel
/// and timed with the device's clock (`rpc-latency N compare`): the same SM, port words and host thread for both, so
/// the ratio is the protocol's cost alone. Across processes the raw round trip itself differs by a few tenths of a
/// microsecond (where the kernel and the region land), which the separate-kernel baseline of benchmark 4 mixes into
/// its ratio. One sample per `gpu-test-loader` process (`loader`), so the samples are draws of that placement.
fn rpc_round_trip_in_kernel(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    let image = images.join("rpc-latency.ptx");
    let rounds = PingPong::ROUNDS.to_string();
    let mut command = Command::new(loader);
    command.args(["--timeout", "60"]).arg(&image).args([rounds.as_str(), "compare"]);
    let (mut messages, mut hand_offs) = (Vec::new(), Vec::new());
    for sample in 0..=repeat {
        let output = command.stderr(Stdio::inherit()).output()?;
        if !output.status.success() {
            bail!("{} {rounds} compare failed with {}", image.display(), output.status);
        }
        let text = String::from_utf8_lossy(&output.stdout);
        let parsed = text.trim_end().strip_prefix("round trip ps: message ").and_then(|rest| {
            let (message, hand_off) = rest.split_once(" hand-off ")?;
            Some((message.parse::<f64>().ok()?, hand_off.parse::<f64>().ok()?))
        });
        let Some((message, hand_off)) = parsed else { bail!("unexpected output of rpc-latency compare: {text:?}") };
        eprintln!("gpu-bench:   message {:.3} µs, hand-off {:.3} µs", message / 1e6, hand_off / 1e6);
        // The first process warms the JIT cache; it is reported but not counted.
        if sample > 0 {
            messages.push(message / 1e12);
            hand_offs.push(hand_off / 1e12);
        }
    }
    let mut row = row(
        "rpc-round-trip-in-kernel",
        "one thread, an RPC that carries nothing, alternating with bare hand-offs in one kernel",
        "µs",
        Stats::of(messages.clone()),
        Some((Stats::of(hand_offs.clone()), "bare hand-offs of the same port's buffers, same kernel (test hand-offs)")),
        "≤ 1.3×",
    );
    let mut ratios: Vec<f64> = messages.iter().zip(&hand_offs).map(|(m, h)| m / h).collect();
    ratios.sort_by(f64::total_cmp);
    row.note = format!(
        "per process: ratio {:.2}–{:.2}×, ours − bare {:.2}–{:.2} µs",
        ratios[0],
        ratios[ratios.len() - 1],
        messages.iter().zip(&hand_offs).map(|(m, h)| (m - h) * 1e6).fold(f64::INFINITY, f64::min),
        messages.iter().zip(&hand_offs).map(|(m, h)| (m - h) * 1e6).fold(f64::NEG_INFINITY, f64::max),
    );
    Ok(row)
}

/// Benchmark 5: A million lines from a full grid through `println!` and through C's `printf` (`printf-flood-c`),
/// against CUDA's `vprintf` with the driver's FIFO and an enlarged one; every line must arrive whole, once.
/// Throughput is lines arrived per second of the whole process. `vprintf` with the driver's FIFO drains at a few
/// thousand lines a second (the kernel waits on a full FIFO), so that run is stopped after [`SLOW_LIMIT`] and rated
/// by the lines that had arrived by then.
fn print_throughput(images: &Path, loader: &Path, repeat: usize) -> Result<Vec<Row>> {
    const BLOCKS: u32 = 977; // × 1024 threads = 1,000,448 lines
    const LIMIT: Duration = Duration::from_secs(90);
    const SLOW_LIMIT: Duration = Duration::from_secs(20);
    let expected = u64::from(BLOCKS) * 1024;
    let flood = |image: &str| {
        let mut command = Command::new(loader);
        command.args(["--threads", "1024", "--blocks", &BLOCKS.to_string()]).arg(images.join(image));
        command
    };
    let me = std::env::current_exe()?;
    let mut rows = Vec::new();
    let measure = |command: &mut Command, label: &str, limit: Duration, may_stop: bool| -> Result<(Stats, u64)> {
        let mut samples = Vec::new();
        let mut lines = u64::MAX;
        // The first run warms the JIT cache and the driver; it is reported but not counted.
        for sample in 0..=repeat {
            let counted = count_lines(command, limit)?;
            let stopped = if counted.finished { "" } else { " (stopped at the limit)" };
            eprintln!("gpu-bench:   {label}: {} lines in {:.2?}{stopped}", counted.lines, counted.elapsed);
            if !counted.finished && !may_stop {
                bail!("{label} did not finish within {limit:?}");
            }
            if counted.finished && counted.lines != expected {
                bail!("{label}: {} of {expected} lines arrived whole", counted.lines);
            }
            if sample > 0 {
                samples.push(counted.lines as f64 / counted.elapsed.as_secs_f64());
                lines = lines.min(counted.lines);
            }
        }
        Ok((Stats::of(samples), lines))
    };
    let (println, println_lines) = measure(&mut flood("print-flood.ptx"), "println!", LIMIT, false)?;
    let (printf, printf_lines) = measure(&mut flood("printf-flood-c.ptx"), "C printf", LIMIT, false)?;
    let println_what = format!("{expected} lines, one per thread, println! (whole process)");
    let printf_what = format!("{expected} lines, one per thread, C printf (whole process)");
    for (fifo, label) in [(0usize, "driver's default FIFO"), (512 << 20, "512 MiB FIFO")] {
        let mut vprintf_cmd = Command::new(&me);
        vprintf_cmd.args(["vprintf", &BLOCKS.to_string(), &fifo.to_string()]);
        let (limit, may_stop) = if fifo == 0 { (SLOW_LIMIT, true) } else { (LIMIT, false) };
        let (theirs, their_lines) = measure(&mut vprintf_cmd, &format!("vprintf, {label}"), limit, may_stop)?;
        let baseline = if fifo == 0 { "vprintf, driver's default FIFO" } else { "vprintf, 512 MiB FIFO" };
        // Higher is better here; the ratio stays ours / theirs.
        let mut println_row = row(
            "print-throughput",
            &println_what,
            "lines/s",
            println.clone(),
            Some((theirs.clone(), baseline)),
            "≥ vprintf, no line lost",
        );
        let stopped = if their_lines < expected && may_stop {
            format!(" when stopped after {SLOW_LIMIT:?}")
        } else {
            String::new()
        };
        println_row.note = format!(
            "lines arrived whole: ours {println_lines}/{expected}, vprintf ({label}) {their_lines}/{expected}{stopped}"
        );
        rows.push(println_row);
        if fifo != 0 {
            let mut printf_row = row(
                "printf-throughput",
                &printf_what,
                "lines/s",
                printf.clone(),
                Some((theirs, baseline)),
                "≥ vprintf, no line lost",
            );
            printf_row.note = format!(
                "lines arrived whole: ours {printf_lines}/{expected}, vprintf ({label}) {their_lines}/{expected}"
            );
            rows.push(printf_row);
        }
    }
    let mut against_println = row(
        "printf-throughput",
        &printf_what,
        "lines/s",
        printf,
        Some((println, "println!, same grid and text, same run")),
        "≥ println!",
    );
    against_println.note =
        format!("lines arrived whole: printf {printf_lines}/{expected}, println! {println_lines}/{expected}");
    rows.push(against_println);
    Ok(rows)
}

/// What [`count_lines`] saw of one run.
struct Counted {
    elapsed: Duration,
    /// Lines that arrived whole: `line ID from thread T of block B` with ID = B × 1024 + T, each ID once.
    lines: u64,
    /// Whether the command exited (successfully) within the limit, rather than being killed at it.
    finished: bool,
}

/// Runs `command`, a flood of `line ID from thread T of block B` lines, counting the lines of its standard output
/// that arrived whole ([`FloodLines`]); kills it once `limit` has passed.
fn count_lines(command: &mut Command, limit: Duration) -> Result<Counted> {
    let started = Instant::now();
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
    let mut stdout = child.stdout.take().context("piped stdout")?;
    let counter = std::thread::spawn(move || -> std::io::Result<u64> {
        let mut buffer = vec![0u8; 1 << 20];
        let mut lines = FloodLines::default();
        loop {
            let read = stdout.read(&mut buffer)?;
            if read == 0 {
                return Ok(lines.whole);
            }
            lines.feed(&buffer[..read]);
        }
    });
    let (status, finished) = loop {
        if let Some(status) = child.try_wait()? {
            break (status, true);
        }
        if started.elapsed() > limit {
            child.kill()?;
            break (child.wait()?, false);
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let elapsed = started.elapsed();
    let lines = counter.join().map_err(|_| anyhow::anyhow!("the line counter panicked"))??;
    if finished && !status.success() {
        bail!("{:?} failed with {status}", command.get_program());
    }
    Ok(Counted { elapsed, lines, finished })
}

/// The lines of a flood as they stream in: counts those that are whole and new.
#[derive(Default)]
struct FloodLines {
    /// The start of a line whose end has not arrived yet.
    partial: Vec<u8>,
    /// One bit per line ID seen.
    seen: Vec<u64>,
    whole: u64,
}

impl FloodLines {
    fn feed(&mut self, mut bytes: &[u8]) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            if self.partial.is_empty() {
                self.line(&bytes[..end]);
            } else {
                self.partial.extend_from_slice(&bytes[..end]);
                let line = std::mem::take(&mut self.partial);
                self.line(&line);
            }
            bytes = &bytes[end + 1..];
        }
        self.partial.extend_from_slice(bytes);
    }

    fn line(&mut self, line: &[u8]) {
        let Some(id) = flood_line_id(line) else { return };
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        if self.seen[word] & bit == 0 {
            self.seen[word] |= bit;
            self.whole += 1;
        }
    }
}

/// The ID of `line ID from thread T of block B`, if the line is exactly that with ID = B × 1024 + T.
fn flood_line_id(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    let rest = text.strip_prefix("line ")?;
    let (id, rest) = rest.split_once(" from thread ")?;
    let (thread, block) = rest.split_once(" of block ")?;
    let [id, thread, block] = [id, thread, block].map(|n| n.parse::<u64>().ok());
    let (id, thread, block) = (id?, thread?, block?);
    (thread < 1024 && id == block * 1024 + thread).then_some(id)
}

/// The `vprintf` comparator: one line per thread, the same text `print-flood` prints.
fn vprintf_child(blocks: u32, fifo: usize) -> Result<()> {
    let format = b"line %u from thread %u of block %u\n\0";
    let bytes = format.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(", ");
    let ptx = format!(
        r#".version 7.8
.target sm_90
.address_size 64
.extern .func (.param .b32 func_retval0) vprintf (.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.global .align 1 .b8 line_format[{len}] = {{{bytes}}};
.visible .entry print_lines()
{{
	.local .align 8 .b8 depot[16];
	.reg .b32 %r<6>;
	.reg .b64 %rd<6>;
	mov.u64 %rd1, depot;
	cvta.local.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mad.lo.u32 %r4, %r2, %r3, %r1;
	st.local.u32 [%rd1], %r4;
	st.local.u32 [%rd1+4], %r1;
	st.local.u32 [%rd1+8], %r2;
	mov.u64 %rd3, line_format;
	cvta.global.u64 %rd4, %rd3;
	{{
	.param .b64 param0;
	st.param.b64 [param0], %rd4;
	.param .b64 param1;
	st.param.b64 [param1], %rd2;
	.param .b32 retval0;
	call.uni (retval0), vprintf, (param0, param1);
	}}
	ret;
}}
"#,
        len = format.len()
    );
    result::init()?;
    let device = result::device::get(0)?;
    // SAFETY: the primary context of device 0, kept until the process exits.
    let context = unsafe { result::primary_ctx::retain(device) }?;
    // SAFETY: the context was just retained.
    unsafe { result::ctx::set_current(context) }?;
    if fifo > 0 {
        // SAFETY: a plain setting, before any launch.
        unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_PRINTF_FIFO_SIZE, fifo) }.result()?;
    }
    let module = load_module(ptx)?;
    // SAFETY: the module has this kernel, which takes no parameters.
    unsafe {
        let function = result::module::get_function(module, CString::new("print_lines")?)?;
        result::launch_kernel(function, (blocks, 1, 1), (1024, 1, 1), 0, std::ptr::null_mut(), &mut [])?;
    }
    // The driver writes the FIFO out at synchronisation.
    result::ctx::synchronize()?;
    Ok(())
}

/// Benchmark 6: Host CPU the loader's RPC server uses while a kernel runs for a second without asking anything of it.
fn idle_cpu(images: &Path, repeat: usize) -> Result<Row> {
    let mut session = session(images, "idle", &["1000"])?;
    let single = LaunchParams::SINGLE;
    let mut samples = Vec::new();
    for _ in 0..repeat {
        let before = cpu_seconds();
        let wall = run_ok(&mut session, &single)?;
        samples.push((cpu_seconds() - before) / wall.as_secs_f64());
    }
    Ok(row(
        "idle-cpu",
        "host CPU while the kernel idles 1 s (getrusage / wall)",
        "cores",
        Stats::of(samples),
        None,
        "≤ 0.1 core",
    ))
}

/// Benchmark 7: One thread's first RPC after the host's serve loop went idle (50 ms without a message, so it sleeps
/// between its passes), timed on the device (`rpc-latency N after-idle 50`), against the round trip that follows it
/// at once, while the loop is busy again. Several samples per `gpu-test-loader` process (`loader`).
fn rpc_after_idle(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    const SAMPLES_PER_PROCESS: usize = 10;
    let image = images.join("rpc-latency.ptx");
    let mut command = Command::new(loader);
    command.args(["--timeout", "60"]).arg(&image).args([&SAMPLES_PER_PROCESS.to_string(), "after-idle", "50"]);
    let (mut firsts, mut nexts) = (Vec::new(), Vec::new());
    for process in 0..=repeat {
        let output = command.stderr(Stdio::inherit()).output()?;
        if !output.status.success() {
            bail!("{} after-idle failed with {}", image.display(), output.status);
        }
        let text = String::from_utf8_lossy(&output.stdout);
        let samples: Vec<(f64, f64)> = text
            .lines()
            .map(|line| {
                let rest = line.strip_prefix("after idle ns: first ")?;
                let (first, next) = rest.split_once(" next ")?;
                Some((first.parse::<f64>().ok()? / 1e9, next.parse::<f64>().ok()? / 1e9))
            })
            .collect::<Option<_>>()
            .filter(|samples: &Vec<_>| samples.len() == SAMPLES_PER_PROCESS)
            .with_context(|| format!("unexpected output of rpc-latency after-idle: {text:?}"))?;
        // The first process warms the JIT cache; it is reported but not counted.
        let worst = samples.iter().map(|&(first, _)| first).fold(0.0, f64::max);
        eprintln!("gpu-bench:   process {process}: first round trip after idle up to {:.1} µs", worst * 1e6);
        if process > 0 {
            firsts.extend(samples.iter().map(|&(first, _)| first));
            nexts.extend(samples.iter().map(|&(_, next)| next));
        }
    }
    Ok(row(
        "rpc-after-idle",
        "one thread's first RPC after 50 ms without messages (test noop, device clock)",
        "µs",
        Stats::of(firsts),
        Some((Stats::of(nexts), "the round trip right after it, the serve loop busy again")),
        "≤ 100 µs (max)",
    ))
}

fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    // SAFETY: initialised by getrusage (or zeroed, had it failed).
    let usage = unsafe { usage.assume_init() };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn row(name: &str, what: &str, unit: &'static str, ours: Stats, baseline: Option<(Stats, &str)>, goal: &str) -> Row {
    let ratio = baseline.as_ref().map(|(b, _)| ours.median / b.median);
    Row {
        name: name.to_owned(),
        what: what.to_owned(),
        unit,
        baseline_what: baseline.as_ref().map(|(_, w)| w.to_string()).unwrap_or_default(),
        baseline: baseline.map(|(b, _)| b),
        ours,
        ratio,
        goal: goal.to_owned(),
        note: String::new(),
    }
}

fn scaled(value: f64, unit: &str) -> f64 {
    match unit {
        "µs" => value * 1e6,
        "ms" => value * 1e3,
        _ => value,
    }
}

fn format_stats(stats: &Stats, unit: &str) -> String {
    format!("{:.2} [{:.2}, {:.2}]", scaled(stats.median, unit), scaled(stats.min, unit), scaled(stats.max, unit))
}

fn print_table(rows: &[Row]) {
    println!();
    println!("| benchmark | measured | unit | ours: median [min, max] | baseline: median [min, max] | ratio | goal |");
    println!("|---|---|---|---|---|---|---|");
    for row in rows {
        let baseline = row.baseline.as_ref().map_or("—".to_owned(), |b| format_stats(b, row.unit));
        let ratio = row.ratio.map_or("—".to_owned(), |r| format!("{r:.2}×"));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.name,
            row.what,
            row.unit,
            format_stats(&row.ours, row.unit),
            baseline,
            ratio,
            row.goal
        );
    }
    for row in rows.iter().filter(|r| !r.baseline_what.is_empty() || !r.note.is_empty()) {
        let parts: Vec<String> = [
            (!row.baseline_what.is_empty()).then(|| format!("baseline = {}", row.baseline_what)),
            (!row.note.is_empty()).then(|| row.note.clone()),
        ]
        .into_iter()
        .flatten()
        .collect();
        println!("- {} ({}): {}", row.name, row.what, parts.join("; "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flood_lines_count_only_whole_new_lines() {
        let mut lines = FloodLines::default();
        // A line split across reads still counts; a repeated, cut, garbled or inconsistent one does not.
        lines.feed(b"line 0 from thread 0 of block 0\nline 1025 from thr");
        lines.feed(b"ead 1 of block 1\nline 0 from thread 0 of block 0\n");
        lines.feed(
            b"line 7 from thread 7 of blo\nline 5 from thread 6 of block 0\nline 2048 from thread 0 of block 2 \n",
        );
        lines.feed(b"line 3 from thread 3 of block 0");
        assert_eq!(lines.whole, 2);
        assert_eq!(flood_line_id(b"line 1048575 from thread 1023 of block 1023"), Some(1_048_575));
        assert_eq!(flood_line_id(b"line 1024 from thread 1024 of block 0"), None);
    }
}
