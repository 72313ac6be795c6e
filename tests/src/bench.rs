//! `gpu-bench --images DIR --loader PATH [--test-loader PATH] [--repeat N] [--json FILE] [--markdown FILE]
//! [--commit C]`: the startup and the RPC channel measured against bare baselines in the same run, on an NVIDIA GPU.
//! `cargo xtask bench` and the bundle's `bench` script run it; `docs/performance.md` holds the results of one run as
//! it prints them (`cargo xtask bench --write-docs` writes them there) and what they mean.
//!
//! Every number is a median over repeated runs, with min and max; the baselines run in the same process (or, for
//! whole-process timings, the same machine) right next to what they are compared with.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use cudarc::driver::{result, sys};

// One module per family of benchmarks; the baselines they are measured against in one of their own.
#[path = "bench/baselines.rs"]
mod baselines;
#[path = "bench/cold_run.rs"]
mod cold_run;
#[path = "bench/heap.rs"]
mod heap;
#[path = "bench/idle.rs"]
mod idle;
#[path = "bench/image_sizes.rs"]
mod image_sizes;
#[path = "bench/kernel_phase.rs"]
mod kernel_phase;
#[path = "bench/print.rs"]
mod print;
#[path = "bench/real_crates.rs"]
mod real_crates;
#[path = "bench/report.rs"]
mod report;
#[path = "bench/rpc.rs"]
mod rpc;
#[path = "bench/runs.rs"]
mod runs;
#[path = "bench/std_programs.rs"]
mod std_programs;
#[path = "bench/test_runner.rs"]
mod test_runner;

#[derive(Parser)]
#[command(name = "gpu-bench", about = "Benchmarks of the GPU startup and its RPC channel against bare baselines")]
struct Cli {
    #[command(subcommand)]
    child: Option<Child>,
    /// The folder of NVIDIA images (`empty.ptx`, `rpc-latency.ptx`, `idle.ptx`, `print-flood.ptx`,
    /// `printf-flood-c.ptx`, `heap-throughput-c.ptx`, and the std programs `print-flood-std.ptx` and
    /// `contention-std.ptx`).
    #[arg(long)]
    images: Option<PathBuf>,
    /// The gpu-loader binary, for the whole-process benchmarks.
    #[arg(long)]
    loader: Option<PathBuf>,
    /// The gpu-test-loader binary, for the whole-process benchmarks of the test operations [default: next to
    /// --loader].
    #[arg(long)]
    test_loader: Option<PathBuf>,
    /// The real crates' tests built for the host, named as their images (`itoa-test`, `semver-doc-...`), for
    /// `real-crate-suite` (a bundle's `host` folder).
    #[arg(long)]
    host_tests: Option<PathBuf>,
    /// Samples per measurement.
    #[arg(long, default_value_t = 30)]
    repeat: usize,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the results as Markdown here, as `docs/performance.md` shows them.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// The commit the images and binaries were built from, for the results' heading.
    #[arg(long)]
    commit: Option<String>,
    /// Run only the benchmarks whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Leave out the benchmarks whose name contains this (`--only print-throughput --skip std`).
    #[arg(long)]
    skip: Option<String>,
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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.child {
        Some(Child::BareRun { image }) => baselines::bare_run(image),
        Some(Child::Vprintf { blocks, fifo }) => baselines::vprintf_child(*blocks, *fifo),
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
    // A benchmark runs when `--only` is part of its name or of a row it makes (`name` lists them, space-separated),
    // and `--skip` is part of none of them.
    let wanted = |name: &str| {
        let names = || name.split(' ');
        let wanted = cli.only.as_deref().is_none_or(|only| names().any(|row| row.contains(only)))
            && cli.skip.as_deref().is_none_or(|skip| !names().any(|row| row.contains(skip)));
        if wanted {
            eprintln!("gpu-bench: {name}...");
        }
        wanted
    };
    let mut rows = Vec::new();
    let repeat = cli.repeat.max(1);
    if wanted("kernel-phase kernel-phase-graph") {
        rows.extend(kernel_phase::kernel_phase(&images, repeat)?);
    }
    if wanted("tests-per-test") {
        rows.push(test_runner::per_test(&images, &loader, repeat.min(10))?);
    }
    if wanted("tests-per-test-std") {
        rows.push(test_runner::per_std_test(&images, &loader, repeat.min(10))?);
    }
    if wanted("loader-run") {
        rows.push(kernel_phase::loader_run(&images, &loader, repeat.min(10))?);
    }
    if wanted("cold-run cold-run-bare") {
        rows.extend(cold_run::cold_run(&images, &loader, repeat, false)?);
    }
    if wanted("cold-run-std cold-run-std-bare") {
        rows.extend(cold_run::cold_run(&images, &loader, repeat, true)?);
    }
    if wanted("grid-scaling") {
        rows.extend(kernel_phase::grid_scaling(&images, repeat.min(10))?);
    }
    if wanted("rpc-round-trip rpc-round-trip-data") {
        rows.extend(rpc::rpc_round_trip(&images, repeat.min(10))?);
    }
    if wanted("rpc-round-trip-in-kernel") {
        rows.push(rpc::rpc_round_trip_in_kernel(&images, &test_loader, repeat.min(10))?);
    }
    if wanted("print-throughput printf-throughput") {
        rows.extend(print::print_throughput(&images, &loader, repeat.min(3))?);
    }
    if wanted("image-size") {
        rows.extend(image_sizes::image_sizes(&images)?);
    }
    if wanted("print-throughput-std") {
        rows.push(std_programs::print_throughput_std(&images, &loader, repeat.min(3))?);
    }
    if wanted("mutex-std") {
        rows.push(std_programs::mutex_contention(&images, &loader, repeat.min(5))?);
    }
    if wanted("idle-cpu") {
        rows.push(idle::idle_cpu(&images, repeat.min(3))?);
    }
    if wanted("rpc-after-idle") {
        rows.push(rpc::rpc_after_idle(&images, &test_loader, repeat.min(3))?);
    }
    if wanted("real-crate-suite") {
        let host = cli.host_tests.as_deref().context("real-crate-suite needs --host-tests (a bundle's host folder)")?;
        rows.extend(real_crates::suite_wall_time(&images, &loader, host, repeat.min(3))?);
    }
    if wanted("heap-throughput heap-throughput-8mib") {
        rows.extend(heap::heap_throughput(&images, repeat.min(3))?);
    }
    let date = report::utc_date(std::time::SystemTime::now());
    let commit = cli.commit.as_deref().map_or("an unnamed commit".to_owned(), |commit| format!("commit `{commit}`"));
    let selection = [("--only", &cli.only), ("--skip", &cli.skip)]
        .iter()
        .filter_map(|(flag, value)| value.as_deref().map(|value| format!(" {flag} {value}")))
        .collect::<String>();
    let heading = format!("{device}, {commit}, {date} (UTC): `gpu-bench --repeat {repeat}{selection}`.");
    let markdown = report::markdown(&heading, &rows);
    println!("\n{markdown}");
    if let Some(path) = &cli.markdown {
        std::fs::write(path, &markdown)?;
        println!("gpu-bench: wrote {}", path.display());
    }
    if let Some(path) = &cli.json {
        let json = serde_json::json!({ "device": device, "commit": cli.commit, "date": date, "results": rows });
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
