//! `gpu-suite --loader PATH --images DIR [--target nvptx] [--sanitize[=TOOLS]] [FILTER]`: runs every program in an
//! image folder through gpu-loader (or gpu-test-loader, for the programs that use the test operations) and checks its
//! expectations; ends with `gpu: N passed, N failed`. With `--sanitize`, runs them under compute-sanitizer's tools
//! instead (`gpu_suite::sanitize`), one line `TOOL: N passed, N failed, N skipped` per tool before that. `cargo xtask
//! test` and the bundle's `run-tests` call it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use gpu_suite::sanitize::{self, Sanitizer, Tool};
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
    /// Run each case of the programs as built (not their cubins) under these compute-sanitizer tools, comma-separated
    /// (memcheck, racecheck, synccheck, initcheck); all four without a list.
    #[arg(long, value_name = "TOOLS", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    sanitize: Option<String>,
    /// The compute-sanitizer program [default: on PATH, or /usr/local/cuda/bin].
    #[arg(long)]
    sanitizer: Option<PathBuf>,
    /// The longest a case may take under a tool, in seconds; then its whole process tree is killed.
    #[arg(long, default_value_t = 300.0)]
    sanitize_limit: f64,
    /// Keep each case's report in this folder, as `<tool>-<case>.log`, and its verdict as `<tool>-<case>.verdict`.
    #[arg(long)]
    sanitize_logs: Option<PathBuf>,
    /// libtest options (filter, --exact, --list, --test-threads, ...).
    #[command(flatten)]
    libtest: Arguments,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("gpu-suite: {error:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    let cases = gpu_suite::discover(&cli.images, &cli.target)?;
    let cases: Vec<_> = cases.into_iter().filter(|case| !cli.without_gpu || !case.expectation.needs_gpu).collect();
    let mut libtest = cli.libtest;
    // The GPU serialises kernels of different processes anyway, and timing-sensitive programs (timeouts, grids
    // larger than residency) should not compete: one at a time unless asked otherwise.
    libtest.test_threads.get_or_insert(1);
    let loaders = gpu_suite::Loaders::new(cli.loader, cli.test_loader);
    let Some(tools) = cli.sanitize else {
        let trials = cases.into_iter().map(|case| plain_trial(&loaders, case)).collect();
        let conclusion = libtest_mimic::run(&libtest, trials);
        println!("gpu: {} passed, {} failed", conclusion.num_passed, conclusion.num_failed);
        return Ok(conclusion.exit_code());
    };
    if cli.target != "nvptx" {
        anyhow::bail!("--sanitize: compute-sanitizer checks NVIDIA GPUs only, and these are {} images", cli.target);
    }
    let tools = Tool::parse_list(&tools)?;
    for case in &cases {
        sanitize::check_skip_names(&case.expectation).map_err(|e| anyhow::anyhow!("{}: {e}", case.name))?;
    }
    let sanitizer = Sanitizer {
        program: sanitize::find_program(cli.sanitizer.as_deref())?,
        limit: Duration::from_secs_f64(cli.sanitize_limit),
        log_dir: cli.sanitize_logs,
    };
    if let Some(dir) = &sanitizer.log_dir {
        std::fs::create_dir_all(dir)?;
    }
    gpu_suite::stop_wrapped_cases_on_signals()?;
    let tally = Arc::new(Mutex::new(BTreeMap::<Tool, Tally>::new()));
    let mut trials = Vec::new();
    // The sanitizers instrument the code the driver makes of an image, whichever kind: the programs as built stand
    // for their cubins.
    for case in cases.into_iter().filter(|case| case.kind.is_empty()) {
        for &tool in &tools {
            let name = format!("{}::{}::{}", tool.name(), case.target, case.name);
            let reason = match sanitize::skip_reason(&case.expectation, tool) {
                Some(reason) => Some(reason),
                None if !case.expectation.needs_gpu => Some(NO_KERNEL),
                None => None,
            };
            if let Some(reason) = reason {
                if selected(&libtest, &name) {
                    println!("{name}: skipped: {reason}");
                    tally.lock().unwrap().entry(tool).or_default().skipped += 1;
                }
                trials.push(Trial::test(name, || Ok(())).with_ignored_flag(true));
                continue;
            }
            let (loaders, sanitizer, case, tally) = (loaders.clone(), sanitizer.clone(), case.clone(), tally.clone());
            trials.push(Trial::test(name, move || {
                let result = sanitize::run(&sanitizer, tool, &loaders, &case);
                let mut tally = tally.lock().unwrap();
                let counts = tally.entry(tool).or_default();
                match result {
                    Ok(()) => counts.passed += 1,
                    Err(_) => counts.failed += 1,
                }
                result.map_err(Failed::from)
            }));
        }
    }
    let conclusion = libtest_mimic::run(&libtest, trials);
    for (tool, counts) in tally.lock().unwrap().iter() {
        println!("{}: {} passed, {} failed, {} skipped", tool.name(), counts.passed, counts.failed, counts.skipped);
    }
    println!("gpu: {} passed, {} failed", conclusion.num_passed, conclusion.num_failed);
    Ok(conclusion.exit_code())
}

/// Whether libtest's filters select the trial `name` (as libtest-mimic applies them), so that only the skipped cases
/// of a filtered run are counted.
fn selected(libtest: &Arguments, name: &str) -> bool {
    let matches = |pattern: &str| if libtest.exact { name == pattern } else { name.contains(pattern) };
    libtest.filter.as_deref().is_none_or(matches) && !libtest.skip.iter().any(|skip| matches(skip))
}

/// Why a case that needs no GPU is not run under the tools: compute-sanitizer fails a process that makes no CUDA call
/// ("Target application terminated before first instrumented API call").
const NO_KERNEL: &str =
    "the case needs no GPU (a test binary's list, read from its image): no kernel runs for the tool to check";

/// What one tool's cases came to.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    skipped: u64,
}

/// A case run by the loader itself.
fn plain_trial(loaders: &gpu_suite::Loaders, case: gpu_suite::Case) -> Trial {
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
}
