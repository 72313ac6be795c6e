//! `gpu-loader [OPTIONS] IMAGE [ARGS]...`: runs a GPU program like an ordinary program. Its exit code is the
//! program's; the table of exit codes is in `docs/failures.md`. An image with tests (a test binary) runs its tests
//! instead, and then ARGS are libtest's options (`crate::harness`; `docs/testing-your-code.md`).
//!
//! The command line is here rather than in the binary so that a program can be `gpu-loader` with host calls of its
//! own: its `main` is `gpu_loader::cli::main(calls)`, and it takes every option `gpu-loader` takes.
//!
//! ```no_run
//! use gpu_loader::{HostCall, HostCalls};
//!
//! const SQUARE: HostCall<u64, u64> = HostCall::new(0x1_0000, "square");
//!
//! fn main() {
//!     let mut calls = HostCalls::new();
//!     calls.on_call(SQUARE, |n| n.checked_mul(n).ok_or_else(|| format!("{n} squared overflows").into())).unwrap();
//!     gpu_loader::cli::main(calls)
//! }
//! ```

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_startup_protocol::abi::LaunchParams;
use startup_common::rpc::HostCalls;

use crate::image::Image;
use crate::status::{USAGE_EXIT_CODE, error_exit_code};
use crate::{LoaderError, RunOptions, RunReport, RunStatus, harness};

/// Run a GPU program built with the GPU startup: every thread of the grid runs `main`. A test binary (an image with
/// tests) runs its tests: then the arguments after IMAGE are libtest's (a filter, --exact, --list, --nocapture, ...),
/// the launch options and --timeout are the defaults of tests that give none, and without --device the tests spread
/// over every GPU.
#[derive(Parser, Debug)]
#[command(name = "gpu-loader", version, about, trailing_var_arg = true)]
struct Cli {
    /// Threads per block in x.
    #[arg(long, visible_alias = "threads-x", default_value_t = 1, value_name = "N")]
    threads: u32,
    /// Threads per block in y.
    #[arg(long, default_value_t = 1, value_name = "N")]
    threads_y: u32,
    /// Threads per block in z.
    #[arg(long, default_value_t = 1, value_name = "N")]
    threads_z: u32,
    /// Blocks in x.
    #[arg(long, visible_alias = "blocks-x", default_value_t = 1, value_name = "N")]
    blocks: u32,
    /// Blocks in y.
    #[arg(long, default_value_t = 1, value_name = "N")]
    blocks_y: u32,
    /// Blocks in z.
    #[arg(long, default_value_t = 1, value_name = "N")]
    blocks_z: u32,
    /// GPU ordinal (default 0; a test binary: every GPU).
    #[arg(long, value_name = "N")]
    device: Option<usize>,
    /// Stop the program after this many seconds (exit code 124).
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    timeout: Option<Duration>,
    /// Ports of the RPC channel between the GPU and the host (1 to 4096). With at least as many as the grid has
    /// warps (wavefronts), each warp uses a port of its own; otherwise lane groups share them.
    #[arg(long, default_value_t = gpu_startup_protocol::region::DEFAULT_PORT_COUNT, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(gpu_startup_protocol::region::MAX_PORTS)))]
    rpc_ports: u32,
    /// Bytes of stack per GPU thread.
    #[arg(long, default_value_t = crate::run::DEFAULT_STACK_SIZE, value_name = "BYTES")]
    stack_size: usize,
    /// Bytes of device memory for the program's heap (`malloc`, Rust's `alloc`), with an optional K, M or G
    /// (binary) suffix; 0 for none. Default: 1G, or less when the device cannot spare it.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    heap_size: Option<u64>,
    /// Print each kernel's registers, shared and local memory.
    #[arg(long)]
    print_resource_usage: bool,
    /// Print phase timings: init and load (with the backend's steps), heap and RPC set-up, run, each kernel.
    #[arg(short, long)]
    verbose: bool,
    /// Run tests of IMAGE as the test runner asks on its stdin (the test runner starts this itself).
    #[arg(long, hide = true)]
    test_worker: bool,
    /// Run a std test binary as a program: libtest's parent (the loader) runs its tests so (`harness::libtest`).
    #[arg(long, hide = true)]
    libtest_child: bool,
    /// The GPU image: PTX, an NVIDIA cubin or an AMD code object.
    image: PathBuf,
    /// Arguments for the program (argv[1..]); argv[0] is IMAGE as given. For a test binary: libtest's options.
    #[arg(allow_hyphen_values = true)]
    args: Vec<OsString>,
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text.parse().map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(seconds > 0.0 && seconds.is_finite() && seconds < 1e9) {
        return Err(format!("`{text}` is not a positive number of seconds"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A number of bytes: digits, then optionally `K`, `M` or `G` (KiB, MiB, GiB; either case).
fn parse_bytes(text: &str) -> Result<u64, String> {
    let (digits, shift) = match text.char_indices().last() {
        Some((at, 'k' | 'K')) => (&text[..at], 10),
        Some((at, 'm' | 'M')) => (&text[..at], 20),
        Some((at, 'g' | 'G')) => (&text[..at], 30),
        _ => (text, 0),
    };
    let number: u64 = match digits.parse() {
        Ok(number) if digits.bytes().all(|b| b.is_ascii_digit()) => number,
        _ => return Err(format!("`{text}` is not a number of bytes (digits, then optionally K, M or G)")),
    };
    number.checked_mul(1 << shift).ok_or_else(|| format!("`{text}` is more bytes than 2^64"))
}

/// Runs the program, or the tests of a test binary; returns the exit code.
/// Runs the image (or the test binary's tests); returns the exit code and whether every kernel the run launched has
/// ended.
fn run_or_test(
    options: &RunOptions,
    device: Option<usize>,
    args: &[OsString],
    libtest_child: bool,
) -> Result<(i32, bool), LoaderError> {
    let started = Instant::now();
    crate::launch::validate(&options.launch)?;
    let image = Image::read(&options.image)?;
    // Checked before anything else, a test binary's list included: an image the startup cannot run has no tests.
    image.check_startup_abi()?;
    let constructors = crate::ctors::ConstructorTable::of(&image)?;
    let tests = crate::test_list::read(&image)?;
    if image.links_libtest() && !libtest_child {
        // libtest's parent starts runs of its own, one per test (and two to list them).
        return Ok((harness::libtest::run(options, device, args), true));
    }
    if crate::test_list::is_test_binary(&image, &tests)? {
        // The runner launches nothing itself: its workers are processes of their own.
        return Ok((harness::run(options, device, image.kind.target(), tests, args), true));
    }
    crate::install_signal_handlers()?;
    // Checked above: the run reads the same parse, with the same constructor table.
    let report = crate::run::run_checked(options, &image, &constructors, started)?;
    match report.status {
        RunStatus::TimedOut => eprintln!(
            "gpu-loader: the program ran past its {:?} timeout and was stopped",
            options.timeout.unwrap_or_default()
        ),
        // The fault is the whole story: threads that panicked before it are not counted.
        RunStatus::Faulted { .. } => {
            eprintln!("gpu-loader: {}", one_line(&report.status.to_string()));
            return Ok((report.exit_code(), report.finished));
        }
        _ => {}
    }
    report_panics(&report);
    Ok((report.exit_code(), report.finished))
}

/// How many threads panicked, when the startup's own message (the first thread's) does not say enough.
fn report_panics(report: &RunReport) {
    let panic_ended_it = report.status == RunStatus::Exited(gpu_startup_protocol::abi::PANIC_EXIT_CODE.into());
    match (report.panicked_threads, report.finished) {
        (0 | 1, true) | (0, false) => {}
        (count, true) => eprintln!("gpu-loader: {count} threads panicked"),
        (count, false) if panic_ended_it => eprintln!(
            "gpu-loader: at least {count} thread{} panicked; threads still running {:?} after the first panic were \
             stopped",
            if count == 1 { "" } else { "s" },
            crate::run::PANIC_GRACE
        ),
        (count, false) => {
            eprintln!("gpu-loader: at least {count} thread{} panicked", if count == 1 { "" } else { "s" })
        }
    }
}

/// The message with its line breaks escaped: a path or a driver message may hold one, and the error is one line.
pub fn one_line(message: &str) -> String {
    message.replace('\r', "\\r").replace('\n', "\\n")
}

/// Runs `gpu-loader` with the command line of this process, serving `host_calls` (none for `gpu-loader` itself), and
/// exits with the program's exit code.
pub fn main(host_calls: HostCalls) -> ! {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { USAGE_EXIT_CODE } else { 0 };
            let _ = error.print();
            std::process::exit(code);
        }
    };
    let mut options = RunOptions::new(cli.image);
    options.args = cli.args.clone();
    options.launch = LaunchParams {
        threads: [cli.threads, cli.threads_y, cli.threads_z],
        blocks: [cli.blocks, cli.blocks_y, cli.blocks_z],
    };
    options.device = cli.device.unwrap_or(0);
    options.timeout = cli.timeout;
    options.verbose = cli.verbose;
    options.print_resource_usage = cli.print_resource_usage;
    options.stack_size = cli.stack_size;
    options.rpc_ports = cli.rpc_ports;
    options.heap_size = cli.heap_size;
    options.host_calls = host_calls;
    // The process exits right after the run: the driver's teardown at exit releases the GPU faster than freeing
    // each allocation first.
    options.teardown = false;

    if cli.test_worker {
        std::process::exit(harness::worker::serve(&options));
    }

    let (code, finished) = match run_or_test(&options, cli.device, &cli.args, cli.libtest_child) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("gpu-loader: {}", one_line(&error.to_string()));
            (error_exit_code(&error), false)
        }
    };
    if !finished {
        crate::run::exit_at_once(code);
    }
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(code);
}
