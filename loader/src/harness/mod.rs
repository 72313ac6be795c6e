//! The test runner: `gpu-loader [LOADER OPTIONS] IMAGE [LIBTEST OPTIONS]` for an image with a test table (a test
//! binary). The options after the image are libtest's, so that `cargo test`'s runner, nextest and IDEs drive it as a
//! host test binary: filters, `--exact`, `--skip`, `--ignored`, `--include-ignored`, `--list` (with `--format
//! terse`), `--nocapture` (`--no-capture`), `--show-output`, `-q`, `--test-threads`, `--format json`. [`arguments`]
//! parses them, for both runners, and libtest-mimic prints libtest's report; the exit code is 0, or 101 when a test
//! failed.
//!
//! Listing and filtering read the image only. Running starts a worker process per GPU ([`worker`]), which loads the
//! image once and runs each test as its own `_begin`/`_start`/`_end` sequence; [`pool`] spreads the tests over the
//! GPUs, and a test that leaves its worker unusable (a fault, a timeout) fails alone while a new worker takes over.

pub mod arguments;
pub mod child;
pub mod discovery;
pub mod libtest;
pub mod pool;
pub mod protocol;
pub mod verdict;
pub mod worker;

use std::ffi::OsString;
use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gpu_startup_targets::Target;
use libtest_mimic::{Arguments, Failed, Trial};

use self::arguments::{LibtestArguments, parse_arguments};
use self::child::{ProcessWorker, WorkerCommand};
use self::pool::{Pool, Spawn};
use self::protocol::RunRequest;
use crate::run::RunOptions;
use crate::status::{LOADER_ERROR_EXIT_CODE, USAGE_EXIT_CODE};
use crate::test_list::TestCase;

/// A test's time limit when neither the test nor `--timeout` gives one: a test that never returns must not stall
/// the suite.
pub const DEFAULT_TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// libtest's exit code when a test failed.
pub const TEST_FAILED_EXIT_CODE: i32 = 101;

/// libtest's options for a test runner (ours or libtest's parent), with SIGPIPE's default restored; `Err` with the
/// exit code once clap printed its error (or `--help`).
fn runner_arguments(image: &std::path::Path, args: &[OsString]) -> Result<LibtestArguments, i32> {
    // libtest-mimic's report panics when stdout is a closed pipe (`gpu-loader IMAGE --list | head`); a test binary
    // then ends as other commands do, quietly by SIGPIPE.
    // SAFETY: restores the default disposition of one signal; no handler of the loader's is involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    parse_arguments(image, args).map_err(|error| {
        let _ = error.print();
        if error.use_stderr() { USAGE_EXIT_CODE } else { 0 }
    })
}

/// Runs (or lists) the tests of the test binary `options.image` for `target`; returns the exit code. `device`
/// pins one GPU; otherwise the tests spread over all of them (under nextest, see [`nextest_device`]).
pub fn run(
    options: &RunOptions,
    device: Option<usize>,
    target: &'static Target,
    tests: Vec<TestCase>,
    args: &[OsString],
) -> i32 {
    let parsed = match runner_arguments(&options.image, args) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    if parsed.lists_json() {
        return list_json(&parsed, &tests);
    }
    let mut arguments = parsed.select(tests.iter().map(|test| test.name.as_str()));
    let runner = Arc::new(OnceLock::new());
    let trials: Vec<Trial> = tests.iter().map(|test| trial(test, options, &arguments, &runner)).collect();
    // libtest-mimic's `is_filtered_out` and `is_ignored`, from the selection: its own check goes through every skip.
    let filtered_out = |test: &TestCase| !parsed.selects(&test.name) || (arguments.ignored && !test.ignore);
    let ignored = |test: &TestCase| test.ignore && !arguments.ignored && !arguments.include_ignored;
    let selected = tests.iter().filter(|test| !filtered_out(test) && !ignored(test)).count();
    if !arguments.list {
        if selected == 0 && !tests.is_empty() && tests.iter().all(filtered_out) {
            eprintln!(
                "gpu-loader: no test of {} matches the filters ({} test{} in the binary)",
                options.image.display(),
                trials.len(),
                if trials.len() == 1 { "" } else { "s" }
            );
        }
        if selected > 0 {
            let device = device.or_else(|| nextest_device(target));
            let first = device.unwrap_or(0);
            let command = worker_command(options);
            let (worker, gpus) = match ProcessWorker::start(&command, first) {
                Ok(started) => started,
                Err(message) => {
                    eprintln!("gpu-loader: {}", message.replace('\n', "\\n"));
                    return LOADER_ERROR_EXIT_CODE;
                }
            };
            let devices: Vec<usize> = match device {
                Some(device) => vec![device],
                None => (0..gpus as usize).collect(),
            };
            let wanted = arguments.test_threads.unwrap_or(usize::MAX).max(1);
            arguments.test_threads = Some(devices.len().min(wanted).min(selected).max(1));
            let spawn: Spawn<ProcessWorker> =
                Box::new(move |device| ProcessWorker::start(&command, device).map(|(worker, _)| worker));
            let pool = Pool::new(&devices, Some((first, worker)), spawn);
            let _ = runner.set(Runner { pool, several_gpus: devices.len() > 1 });
        }
    }
    let conclusion = libtest_mimic::run(&arguments, trials);
    // The trials, and their references to the runner, are gone: dropping it closes the workers' input, and a worker
    // waiting for a test exits.
    drop(runner);
    if conclusion.has_failed() { TEST_FAILED_EXIT_CODE } else { 0 }
}

/// libtest's JSON list of the selected tests (`--list --format json`), from the image: with `--ignored` the ignored
/// ones only, and, as libtest reports them, none ignored with `--ignored` or `--include-ignored`.
fn list_json(parsed: &LibtestArguments, tests: &[TestCase]) -> i32 {
    let arguments = &parsed.arguments;
    let run_ignored = arguments.ignored || arguments.include_ignored;
    let listed = tests.iter().filter(|test| parsed.selects(&test.name) && (!arguments.ignored || test.ignore));
    let listed = listed.map(|test| discovery::Discovered {
        name: &test.name,
        ignore: test.ignore && !run_ignored,
        source: &test.source,
    });
    match discovery::write_list(&mut std::io::stdout().lock(), listed) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("gpu-loader: writing the list of tests failed: {error}");
            LOADER_ERROR_EXIT_CODE
        }
    }
}

/// The GPU for a test that nextest runs in a test group: nextest runs each test in a process of its own, and numbers
/// the tests of a group that run at once from 0 (`NEXTEST_TEST_GROUP_SLOT`); slot `n` takes GPU `n` modulo the
/// GPUs found, so a group with as many threads as GPUs keeps one test on each. NVIDIA only: for AMD (and outside a
/// group) the tests take GPU 0 unless `--device` says otherwise.
pub fn nextest_device(target: &Target) -> Option<usize> {
    let slot: usize = std::env::var("NEXTEST_TEST_GROUP_SLOT").ok()?.parse().ok()?;
    crate::platform::gpus_before_loading(target).map(|gpus| slot % gpus.max(1) as usize)
}

/// What the trials share once the tests run.
struct Runner {
    pool: Pool<ProcessWorker>,
    several_gpus: bool,
}

/// How long past a test's own timeout (which the worker enforces) the runner waits for the worker's report: the
/// serve loop's drain, the panic grace and some slack.
const ANSWER_SLACK: Duration = Duration::from_secs(30);

/// How workers start: this very binary, with the loader options that apply to every test.
fn worker_command(options: &RunOptions) -> WorkerCommand {
    let program = std::env::current_exe().unwrap_or_else(|_| "gpu-loader".into());
    let mut args: Vec<OsString> = vec![
        "--test-worker".into(),
        "--rpc-ports".into(),
        options.rpc_ports.to_string().into(),
        "--stack-size".into(),
        options.stack_size.to_string().into(),
    ];
    if let Some(bytes) = options.heap_size {
        args.extend(["--heap-size".into(), bytes.to_string().into()]);
    }
    WorkerCommand { program, args, image: options.image.clone(), answer_slack: ANSWER_SLACK }
}

/// The trial for one test: its run on a GPU, judged by [`verdict::verdict`].
fn trial(test: &TestCase, options: &RunOptions, arguments: &Arguments, runner: &Arc<OnceLock<Runner>>) -> Trial {
    let request = RunRequest {
        entry_symbol: test.entry_symbol.clone(),
        threads: test.threads.unwrap_or(options.launch.threads),
        blocks: test.blocks.unwrap_or(options.launch.blocks),
        timeout: test.timeout.or(options.timeout).unwrap_or(DEFAULT_TEST_TIMEOUT),
    };
    // libtest-mimic prints nothing of a passing test's output: with `--show-output` it is shown as it arrives, as
    // with `--nocapture`.
    let live = arguments.nocapture || arguments.show_output;
    let runner = Arc::clone(runner);
    let test_case = test.clone();
    Trial::test(test.name.clone(), move || {
        let threads = request.threads.iter().chain(&request.blocks).map(|&n| u64::from(n)).product();
        let mut output = Vec::new();
        let mut sink = |stderr: bool, bytes: &[u8]| {
            if live {
                // The report's own lines go to stdout too; a failed write only loses output.
                let _ = if stderr { std::io::stderr().write_all(bytes) } else { std::io::stdout().write_all(bytes) };
            } else {
                output.extend_from_slice(bytes);
            }
        };
        // Set before any test runs: only tests that run need workers.
        let runner = runner.get().ok_or("the test runner has no GPU workers")?;
        let (device, result) = runner.pool.run(&request, &mut sink);
        let output = String::from_utf8_lossy(&output);
        let reason = match result {
            Ok(result) => match verdict::verdict(&test_case, threads, request.timeout, &result) {
                Ok(()) => return Ok(()),
                Err(reason) => reason,
            },
            Err(reason) => reason,
        };
        let reason = if runner.several_gpus { format!("{reason} (on GPU {device})") } else { reason };
        Err(Failed::from(verdict::failure_message(&output, &reason)))
    })
    .with_ignored_flag(test.ignore)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_get_the_loader_options_that_apply_to_every_test() {
        let mut options = RunOptions::new("tests.ptx");
        options.rpc_ports = 5;
        options.stack_size = 16384;
        let args = |options: &RunOptions| worker_command(options).args;
        assert_eq!(args(&options), ["--test-worker", "--rpc-ports", "5", "--stack-size", "16384"]);
        options.heap_size = Some(1 << 20);
        assert_eq!(args(&options)[5..], ["--heap-size", "1048576"]);
    }
}
