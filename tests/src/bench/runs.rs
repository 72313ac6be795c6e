//! How the benchmarks run our programs: loaded once into a session and run again and again, or as whole processes.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use gpu_loader::args::ArgBlock;
use gpu_loader::ctors::ConstructorTable;
use gpu_loader::cuda::CudaBackend;
use gpu_loader::image::Image;
use gpu_loader::run::{RunOptions, Session};
use startup_common::abi::LaunchParams;

/// A program loaded into a session, ready to run again and again.
pub fn session(images: &Path, program: &str, args: &[&str]) -> Result<Session<CudaBackend>> {
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

/// One run of `session`, which must exit with 0: how long it took.
pub fn run_ok(session: &mut Session<CudaBackend>, launch: &LaunchParams) -> Result<Duration> {
    let started = Instant::now();
    let report = session.run(launch)?;
    let elapsed = started.elapsed();
    if report.status != gpu_loader::RunStatus::Exited(0) || !report.finished {
        bail!("the benchmark program ended with {} (finished: {})", report.status, report.finished);
    }
    Ok(elapsed)
}

/// One run of `command`, which must succeed, its output discarded: how long it took, process start to exit.
pub fn time_process(command: &mut Command) -> Result<Duration> {
    let started = Instant::now();
    let status = command.stdout(Stdio::null()).stderr(Stdio::null()).status()?;
    let elapsed = started.elapsed();
    if !status.success() {
        bail!("{:?} failed with {status}", command.get_program());
    }
    Ok(elapsed)
}
