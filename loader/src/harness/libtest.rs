//! libtest's parent, for a std test binary (`cargo test` of `#[test]`s built for the GPU, which the bitcode linker
//! marks with [`LIBTEST_MARKER`]): built with `panic = "abort"`, libtest runs each test in a child process of its own
//! that it starts with `__RUST_TEST_INVOKE` naming the test. A GPU program cannot start processes, so the loader
//! plays the parent: it asks the binary for its tests (a run with `--list`), and runs each test as a run of its own,
//! one GPU thread, with `__RUST_TEST_INVOKE` set, in a child `gpu-loader`. libtest in that run calls the test and
//! exits with its success code ([`TEST_PASSED_EXIT_CODE`]), or prints why it failed and aborts. A test that panics,
//! traps, faults or times out fails alone. libtest-mimic takes libtest's options and prints libtest's report;
//! `--list --format json` is libtest's own list, which a listing run prints.
//!
//! [`LIBTEST_MARKER`]: gpu_startup_protocol::abi::LIBTEST_MARKER

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Write;
use std::process::{Command, Stdio};

use libtest_mimic::{Failed, Trial};

use super::{DEFAULT_TEST_TIMEOUT, TEST_FAILED_EXIT_CODE, runner_arguments, verdict};
use crate::run::RunOptions;
use crate::status::LOADER_ERROR_EXIT_CODE;

/// The environment variable that makes libtest run one test, the named one, and exit.
const INVOKE_VARIABLE: &str = "__RUST_TEST_INVOKE";

/// libtest's exit code from a child that ran its test and passed (libtest's `TR_OK`).
pub const TEST_PASSED_EXIT_CODE: i32 = 50;

/// The least stack a test's one GPU thread gets: libtest's run of a test (its panic hook, the report of a failure)
/// takes more than the default of a program's threads, and one thread's stack costs little.
pub const MIN_TEST_STACK_SIZE: usize = 64 * 1024;

/// The loader option that runs a libtest binary as a program (the parent's children), not as a test runner.
pub const CHILD_OPTION: &str = "--libtest-child";

/// Lists (or runs) the tests of the libtest binary `options.image`, as libtest's `args` ask; the exit code.
pub fn run(options: &RunOptions, device: Option<usize>, args: &[OsString]) -> i32 {
    let parsed = match runner_arguments(&options.image, args) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let child = Child { options: options.clone(), device };
    if parsed.lists_json() {
        return match child.list_json(&parsed.selection_args()) {
            Ok(list) => match std::io::stdout().lock().write_all(&list) {
                Ok(()) => 0,
                Err(error) => {
                    eprintln!("gpu-loader: writing the list of tests failed: {error}");
                    LOADER_ERROR_EXIT_CODE
                }
            },
            Err(message) => {
                eprintln!("gpu-loader: {}", message.replace('\n', "\\n"));
                LOADER_ERROR_EXIT_CODE
            }
        };
    }
    let (tests, ignored) = match child.list() {
        Ok(listed) => listed,
        Err(message) => {
            eprintln!("gpu-loader: {}", message.replace('\n', "\\n"));
            return LOADER_ERROR_EXIT_CODE;
        }
    };
    let mut arguments = parsed.select(tests.iter().map(String::as_str));
    // One test at a time unless `--test-threads` asks for more: each is a context and a heap of its own on the GPU.
    arguments.test_threads.get_or_insert(1);
    let live = arguments.nocapture || arguments.show_output;
    let trials: Vec<Trial> = tests
        .into_iter()
        .map(|name| {
            let is_ignored = ignored.contains(&name);
            let child = child.clone();
            let test = name.clone();
            Trial::test(name, move || child.run_test(&test, live)).with_ignored_flag(is_ignored)
        })
        .collect();
    let conclusion = libtest_mimic::run(&arguments, trials);
    if conclusion.has_failed() { TEST_FAILED_EXIT_CODE } else { 0 }
}

/// How the parent starts a run of the binary: this very loader, with the options that apply to every run.
#[derive(Clone)]
struct Child {
    options: RunOptions,
    device: Option<usize>,
}

impl Child {
    /// The binary's tests, in its order, and the names of the ignored ones: two runs of libtest's `--list`.
    fn list(&self) -> Result<(Vec<String>, HashSet<String>), String> {
        let all = self.listing(&[])?;
        let ignored = self.listing(&["--ignored"])?;
        Ok((all, ignored.into_iter().collect()))
    }

    /// The tests that libtest's `--list --format terse` with `extra` names (`NAME: test` lines; benchmarks left out).
    fn listing(&self, extra: &[&str]) -> Result<Vec<String>, String> {
        let stdout = self.listing_run(["--list", "--format", "terse"].iter().chain(extra).copied())?;
        Ok(parse_listing(&String::from_utf8_lossy(&stdout)))
    }

    /// libtest's list in JSON of the tests that `selection` (libtest's options) selects, as libtest prints it (it
    /// takes the format with `-Z unstable-options` only, and the binary's libtest is a nightly's).
    fn list_json(&self, selection: &[String]) -> Result<Vec<u8>, String> {
        self.listing_run(
            ["-Z", "unstable-options", "--list", "--format", "json"]
                .iter()
                .copied()
                .chain(selection.iter().map(String::as_str)),
        )
    }

    /// What a run of the binary with libtest's listing options `args` printed on stdout; an error unless it
    /// exited with 0.
    fn listing_run<'a>(&self, args: impl IntoIterator<Item = &'a str>) -> Result<Vec<u8>, String> {
        let mut command = self.command(None);
        command.args(args);
        let output =
            command.stdin(Stdio::null()).output().map_err(|error| format!("cannot run {command:?}: {error}"))?;
        if output.status.code() != Some(0) {
            return Err(format!(
                "listing the tests of {} failed ({}): {}",
                self.options.image.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim_end()
            ));
        }
        Ok(output.stdout)
    }

    /// Runs the test `name` in a run of its own: `Ok` when libtest reported it passed.
    fn run_test(&self, name: &str, live: bool) -> Result<(), Failed> {
        let timeout = self.options.timeout.unwrap_or(DEFAULT_TEST_TIMEOUT);
        let mut command = self.command(Some(name));
        command.stdin(Stdio::null());
        let (code, output) = if live {
            let status = command.status().map_err(|error| format!("cannot run {command:?}: {error}"))?;
            (status.code(), String::new())
        } else {
            let output = command.output().map_err(|error| format!("cannot run {command:?}: {error}"))?;
            let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&output.stderr));
            (output.status.code(), text)
        };
        let reason = match code {
            Some(TEST_PASSED_EXIT_CODE) => return Ok(()),
            Some(124) => format!("the test ran past its {timeout:?} timeout and was stopped"),
            Some(code) => format!("the test failed: its run exited with {code}"),
            None => "the test's run was killed by a signal".to_owned(),
        };
        let _ = std::io::stdout().flush();
        Err(Failed::from(verdict::failure_message(&output, &reason)))
    }

    /// A child `gpu-loader` for one run: one GPU thread, the parent's device, stack, heap and ports, the test's
    /// timeout; `test` names the test it runs (`None`: a listing).
    fn command(&self, test: Option<&str>) -> Command {
        let program = std::env::current_exe().unwrap_or_else(|_| "gpu-loader".into());
        let options = &self.options;
        let mut command = Command::new(program);
        command.arg(CHILD_OPTION).args(["--threads", "1", "--blocks", "1"]);
        command.arg("--device").arg(self.device.unwrap_or(options.device).to_string());
        command.arg("--rpc-ports").arg(options.rpc_ports.to_string());
        command.arg("--stack-size").arg(options.stack_size.max(MIN_TEST_STACK_SIZE).to_string());
        if let Some(bytes) = options.heap_size {
            command.arg("--heap-size").arg(bytes.to_string());
        }
        if let Some(test) = test {
            let timeout = options.timeout.unwrap_or(DEFAULT_TEST_TIMEOUT);
            command.arg("--timeout").arg(timeout.as_secs_f64().to_string());
            command.env(INVOKE_VARIABLE, test);
        } else {
            command.env_remove(INVOKE_VARIABLE);
        }
        command.arg(&options.image);
        command
    }
}

/// The test names of libtest's `--list --format terse` output: `NAME: test` lines (benchmarks, `NAME: bench`, are
/// left out: they do not run on the GPU).
fn parse_listing(stdout: &str) -> Vec<String> {
    stdout.lines().filter_map(|line| line.strip_suffix(": test")).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terse_listing_gives_the_tests_in_order_without_benchmarks() {
        let listing = "tests::adds: test\ntests::fails: test\nbenches::fast: bench\nmod::a: b: test\n";
        assert_eq!(parse_listing(listing), ["tests::adds", "tests::fails", "mod::a: b"]);
        assert!(parse_listing("").is_empty());
    }

    #[test]
    fn a_child_runs_one_thread_with_the_parents_options_and_names_its_test() {
        let mut options = RunOptions::new("tests.ptx");
        options.heap_size = Some(1 << 20);
        let child = Child { options, device: Some(2) };
        let command = child.command(Some("tests::adds"));
        let args: Vec<_> = command.get_args().map(|arg| arg.to_string_lossy().into_owned()).collect();
        assert_eq!(args[..5], [CHILD_OPTION, "--threads", "1", "--blocks", "1"]);
        assert!(args.windows(2).any(|pair| pair == ["--device", "2"]));
        assert!(args.windows(2).any(|pair| pair == ["--heap-size", "1048576"]));
        assert!(args.windows(2).any(|pair| pair == ["--timeout", "60"]));
        assert_eq!(args.last().map(String::as_str), Some("tests.ptx"));
        let invoke = command.get_envs().find(|(key, _)| *key == INVOKE_VARIABLE).and_then(|(_, value)| value);
        assert_eq!(invoke, Some(std::ffi::OsStr::new("tests::adds")));
        let listing = child.command(None);
        assert!(listing.get_envs().any(|(key, value)| key == INVOKE_VARIABLE && value.is_none()), "removed");
    }
}
