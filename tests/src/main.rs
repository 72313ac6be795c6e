//! `gpu-suite --loader PATH --images DIR [--target nvptx] [FILTER]`: runs every program in an image folder through
//! gpu-loader (or gpu-test-loader, for the programs that use the test operations) and checks its expectations; ends
//! with `gpu: N passed, N failed`. `cargo xtask test` and the bundle's `run-tests` call it.

use std::path::PathBuf;

use clap::Parser;
use libtest_mimic::{Arguments, Failed, Trial};

#[derive(Parser)]
#[command(name = "gpu-suite", about = "Run the GPU test programs through gpu-loader")]
struct Cli {
    /// The gpu-loader binary.
    #[arg(long)]
    loader: PathBuf,
    /// The gpu-test-loader binary, for the programs that use the test operations [default: next to --loader].
    #[arg(long)]
    test_loader: Option<PathBuf>,
    /// A folder of images with their `<name>.expect.toml`.
    #[arg(long)]
    images: PathBuf,
    /// The images' target (nvptx or amdgpu), for the programs that run on one target only.
    #[arg(long, default_value = "nvptx")]
    target: String,
    /// Only the cases that need no GPU (`needs-gpu = false`): on a machine without one.
    #[arg(long)]
    without_gpu: bool,
    /// libtest options (filter, --exact, --list, --test-threads, ...).
    #[command(flatten)]
    libtest: Arguments,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let cases = match gpu_suite::discover(&cli.images, &cli.target) {
        Ok(cases) => {
            cases.into_iter().filter(|case| !cli.without_gpu || !case.expectation.needs_gpu).collect::<Vec<_>>()
        }
        Err(error) => {
            eprintln!("gpu-suite: {error:#}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut libtest = cli.libtest;
    // The GPU serialises kernels of different processes anyway, and timing-sensitive programs (timeouts, grids
    // larger than residency) should not compete: one at a time unless asked otherwise.
    libtest.test_threads.get_or_insert(1);
    let loaders = gpu_suite::Loaders::new(cli.loader, cli.test_loader);
    let trials = cases
        .into_iter()
        .map(|case| {
            let loaders = loaders.clone();
            Trial::test(format!("{}::{}", case.target, case.name), move || {
                let outcome = gpu_suite::run_case(&loaders, &case).map_err(|e| Failed::from(format!("{e:#}")))?;
                let problems = case.expectation.check(&outcome);
                if problems.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{}\n(stderr was: {})", problems.join("\n"), outcome.stderr.trim_end()).into())
                }
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&libtest, trials);
    println!("gpu: {} passed, {} failed", conclusion.num_passed, conclusion.num_failed);
    conclusion.exit_code()
}
