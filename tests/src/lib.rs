//! The GPU suite: every program in `tests/programs` declares in `expect.toml`, next to its source, how it is
//! launched and what it must do; [`Expectation::check`] compares a run with that, and `gpu-suite` runs them all
//! through `gpu-loader`, or `gpu-test-loader` for those that use the test operations. `docs/testing.md` describes
//! the format.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// One dimension given as `n` (x only) or `[x, y, z]`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Dims {
    X(u32),
    Xyz([u32; 3]),
}

impl Default for Dims {
    fn default() -> Self {
        Dims::X(1)
    }
}

impl Dims {
    pub fn xyz(self) -> [u32; 3] {
        match self {
            Dims::X(x) => [x, 1, 1],
            Dims::Xyz(xyz) => xyz,
        }
    }
}

/// How to run a program and what it must do: the contents of its `expect.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Expectation {
    #[serde(default)]
    pub threads: Dims,
    #[serde(default)]
    pub blocks: Dims,
    /// Arguments after argv[0].
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment added to the loader's.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `--timeout` for the loader, in seconds.
    pub timeout: Option<f64>,
    /// Further loader options, before the image.
    #[serde(default)]
    pub loader_args: Vec<String>,
    /// Targets the program runs on (`nvptx`, `amdgpu`); all when absent.
    pub targets: Option<Vec<String>>,
    /// Run with `gpu-test-loader`, which serves the test operations (`startup_common::rpc::testing`), instead of
    /// `gpu-loader`, which has no handler for them.
    #[serde(default)]
    pub test_operations: bool,
    #[serde(default)]
    pub exit_code: i32,
    /// The whole of stdout.
    pub stdout: Option<String>,
    /// Strings stdout must contain.
    #[serde(default)]
    pub stdout_contains: Vec<String>,
    /// Regular expressions stdout must match.
    #[serde(default)]
    pub stdout_matches: Vec<String>,
    /// How many lines stdout has.
    pub stdout_lines: Option<usize>,
    /// Lines of stdout, in any order, as a multiset: for output from many threads.
    pub stdout_unordered: Option<String>,
    pub stderr: Option<String>,
    #[serde(default)]
    pub stderr_contains: Vec<String>,
    #[serde(default)]
    pub stderr_matches: Vec<String>,
    /// Longest the whole run may take, in seconds (a hang guard, not a benchmark).
    pub max_seconds: Option<f64>,
    /// Send this signal (`INT` or `TERM`) to the loader `interrupt-after` seconds after it started, or, with
    /// `interrupt-after-output`, after its first output on stdout.
    pub interrupt: Option<String>,
    pub interrupt_after: Option<f64>,
    #[serde(default)]
    pub interrupt_after_output: bool,
    /// `false`: the case needs no GPU (a test binary's `--list`), so it runs on every machine.
    #[serde(default = "yes")]
    pub needs_gpu: bool,
    /// What the loader reads on its stdin (without it, stdin is empty: `/dev/null`).
    pub stdin: Option<String>,
    /// How the case is judged under compute-sanitizer (`gpu-suite --sanitize`).
    #[serde(default)]
    pub sanitize: UnderSanitizer,
}

/// The `[sanitize]` table of an `expect.toml`: how the case is judged when it runs under compute-sanitizer.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct UnderSanitizer {
    /// The program faults on purpose (a trap, a bad address): memcheck must report that fault and nothing else, the
    /// other tools nothing.
    #[serde(default)]
    pub faults: bool,
    /// The driver API call that the case makes fail on purpose (`cuCtxSetLimit` for a stack no device holds):
    /// memcheck reports a failing API call as an error, so it must report that call's failure and nothing else.
    pub refused_call: Option<String>,
    /// Replaces `stderr-matches` under the tools: one that stops a faulting kernel itself makes the driver report
    /// another error than the hardware would.
    pub stderr_matches: Option<Vec<String>>,
    /// Replaces `stdout-matches` under the tools: a test binary's report of what a tool slowed past the loader's own
    /// time limits (the panic grace).
    pub stdout_matches: Option<Vec<String>>,
    /// Replaces `stdout-lines` under the tools: the line count of the smaller grid of `blocks`.
    pub stdout_lines: Option<usize>,
    /// Replaces `loader-args` under the tools: a longer default test timeout (`--timeout`) for a test binary whose
    /// tests a tool slows past theirs.
    pub loader_args: Option<Vec<String>>,
    /// Replaces `args` under the tools: a filter that runs some of a test binary's many alike tests.
    pub args: Option<Vec<String>>,
    /// Tools that cannot run the case (by tool name, or `all`), each with the reason, which the suite prints.
    #[serde(default)]
    pub skip: BTreeMap<String, String>,
    /// The grid's blocks under the tools, for a case whose whole grid takes a tool longer than the per-case limit:
    /// the same program and checks on fewer threads.
    pub blocks: Option<Dims>,
}

fn yes() -> bool {
    true
}

/// What one run of the loader produced.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Expectation {
    pub fn parse(text: &str) -> Result<Self> {
        let expectation: Expectation = toml::from_str(text)?;
        if let Some(signal) = &expectation.interrupt {
            signal_number(signal)?;
        }
        let under_tools = expectation.sanitize.stderr_matches.iter().flatten();
        for pattern in expectation.stdout_matches.iter().chain(&expectation.stderr_matches).chain(under_tools) {
            regex::Regex::new(pattern).with_context(|| format!("bad pattern {pattern:?}"))?;
        }
        Ok(expectation)
    }

    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("bad expectations in {}", path.display()))
    }

    pub fn runs_on(&self, target: &str) -> bool {
        self.targets.as_ref().is_none_or(|targets| targets.iter().any(|t| t == target))
    }

    /// The loader's command line for `image`, without the loader itself.
    pub fn loader_arguments(&self, image: &Path) -> Vec<OsString> {
        let [tx, ty, tz] = self.threads.xyz();
        let [bx, by, bz] = self.blocks.xyz();
        let mut args: Vec<OsString> = [
            "--threads-x",
            &tx.to_string(),
            "--threads-y",
            &ty.to_string(),
            "--threads-z",
            &tz.to_string(),
            "--blocks-x",
            &bx.to_string(),
            "--blocks-y",
            &by.to_string(),
            "--blocks-z",
            &bz.to_string(),
        ]
        .iter()
        .map(OsString::from)
        .collect();
        if let Some(timeout) = self.timeout {
            args.extend(["--timeout".into(), timeout.to_string().into()]);
        }
        args.extend(self.loader_args.iter().map(OsString::from));
        args.push(image.into());
        args.extend(self.args.iter().map(OsString::from));
        args
    }

    /// Every way `outcome` differs from the expectation, one per line; empty when it matches.
    pub fn check(&self, outcome: &Outcome) -> Vec<String> {
        let mut problems = Vec::new();
        if outcome.exit_code != Some(self.exit_code) {
            problems.push(format!("exit code {:?}, expected {}", outcome.exit_code, self.exit_code));
        }
        check_stream(
            "stdout",
            &outcome.stdout,
            self.stdout.as_deref(),
            &self.stdout_contains,
            &self.stdout_matches,
            &mut problems,
        );
        check_stream(
            "stderr",
            &outcome.stderr,
            self.stderr.as_deref(),
            &self.stderr_contains,
            &self.stderr_matches,
            &mut problems,
        );
        if let Some(lines) = self.stdout_lines {
            let actual = outcome.stdout.lines().count();
            if actual != lines {
                problems.push(format!("stdout has {actual} lines, expected {lines}"));
            }
        }
        if let Some(expected) = &self.stdout_unordered {
            let mut expected: Vec<&str> = expected.lines().collect();
            let mut actual: Vec<&str> = outcome.stdout.lines().collect();
            expected.sort_unstable();
            actual.sort_unstable();
            if expected != actual {
                problems.push(format!(
                    "stdout lines differ as a set: {} expected, {} got; first difference: {:?}",
                    expected.len(),
                    actual.len(),
                    expected.iter().zip(&actual).find(|(e, a)| e != a).map(|(e, a)| (*e, *a))
                ));
            }
        }
        if let Some(limit) = self.max_seconds
            && outcome.elapsed.as_secs_f64() > limit
        {
            problems.push(format!("took {:.1?}, more than {limit} s", outcome.elapsed));
        }
        problems
    }
}

fn check_stream(
    name: &str,
    actual: &str,
    exact: Option<&str>,
    contains: &[String],
    matches: &[String],
    problems: &mut Vec<String>,
) {
    if let Some(exact) = exact
        && actual != exact
    {
        problems.push(format!("{name} differs:\n--- expected\n{exact}--- got\n{actual}---"));
    }
    for needle in contains {
        if !actual.contains(needle.as_str()) {
            problems.push(format!("{name} lacks {needle:?}; it was:\n{}", excerpt(actual)));
        }
    }
    for pattern in matches {
        let regex = regex::Regex::new(pattern).expect("checked in parse");
        if !regex.is_match(actual) {
            problems.push(format!("{name} does not match {pattern:?}; it was:\n{}", excerpt(actual)));
        }
    }
}

fn excerpt(text: &str) -> String {
    const LIMIT: usize = 2000;
    if text.len() <= LIMIT {
        return text.to_owned();
    }
    let cut = (0..=LIMIT).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    format!("{}... ({} bytes in all)", &text[..cut], text.len())
}

/// The number of a signal the harness can send.
fn signal_number(name: &str) -> Result<i32> {
    match name {
        "INT" => Ok(libc::SIGINT),
        "TERM" => Ok(libc::SIGTERM),
        _ => bail!("cannot send signal {name:?} (INT or TERM)"),
    }
}

/// A program of the suite, found as `<name>.<ext>` with `<name>.expect.toml` beside it (or, for a further way to
/// run the same program, `<name>.<variant>.expect.toml`), once per kind of image of it in the folder.
#[derive(Clone, Debug)]
pub struct Case {
    /// `<program>[.<variant>]`, then `[<kind>]` for an image other than the target's first kind (`hello[cubin]`).
    pub name: String,
    pub target: String,
    pub image: PathBuf,
    /// The image's kind, as the suffix of the name: empty for the program as built (PTX, an AMD code object).
    pub kind: &'static str,
    pub expectation: Expectation,
}

/// The kinds of image a program may have in a folder: the file name's ending after `<program>`, and the suffix of
/// the case's name. PTX and AMD code objects are the programs as built; the cubins are made from the PTX by ptxas
/// (`-c`: relocatable) and then nvlink (linked), when those are installed.
pub const IMAGE_KINDS: [(&str, &str); 4] =
    [(".ptx", ""), (".elf", ""), (".cubin", "[cubin]"), (".linked.cubin", "[linked-cubin]")];

/// Every case in an image folder (`target/gpu/<target>/<arch>` or a bundle's `images/<target>`).
pub fn discover(dir: &Path, target: &str) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".expect.toml")) else {
            continue;
        };
        let program = name.split('.').next().unwrap_or(name);
        let images: Vec<_> = IMAGE_KINDS
            .iter()
            .map(|&(ending, suffix)| (dir.join(format!("{program}{ending}")), suffix))
            .filter(|(image, _)| image.is_file())
            .collect();
        if images.is_empty() {
            bail!("{} has no image next to it", path.display());
        }
        let expectation = Expectation::load(&path)?;
        if expectation.runs_on(target) {
            for (image, suffix) in images {
                let name = format!("{name}{suffix}");
                cases.push(Case {
                    name,
                    target: target.to_owned(),
                    image,
                    kind: suffix,
                    expectation: expectation.clone(),
                });
            }
        }
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(cases)
}

/// The loaders the suite runs cases with.
#[derive(Clone, Debug)]
pub struct Loaders {
    /// `gpu-loader`.
    pub plain: PathBuf,
    /// `gpu-test-loader`: `gpu-loader` with the test operations' handlers.
    pub testing: PathBuf,
}

impl Loaders {
    /// `plain`, and `testing` or else the `gpu-test-loader` next to `plain` (where builds and bundles put it).
    pub fn new(plain: PathBuf, testing: Option<PathBuf>) -> Self {
        let testing = testing.unwrap_or_else(|| plain.with_file_name("gpu-test-loader"));
        Self { plain, testing }
    }

    /// The loader `expectation` asks for.
    pub fn for_case(&self, expectation: &Expectation) -> &Path {
        if expectation.test_operations { &self.testing } else { &self.plain }
    }
}

/// Runs a case with the loader it asks for, with a hard limit so a hanging loader cannot stall the suite. The loader
/// runs in a new, empty working directory of the case's own (removed afterwards), where the program may create files.
pub fn run_case(loaders: &Loaders, case: &Case) -> Result<Outcome> {
    let limit = Duration::from_secs_f64(case.expectation.timeout.unwrap_or(0.0) + 120.0);
    run_case_with(loaders, case, &Wrapper::default(), limit)
}

/// A program that runs the loader (compute-sanitizer with its options), and how a case's signal reaches the loader.
#[derive(Clone, Debug, Default)]
pub struct Wrapper {
    /// The program and its arguments before the loader's command line; none: the loader runs itself.
    pub command: Vec<OsString>,
}

/// Like [`run_case`], with the loader's command line after `wrapper`'s and the limit `limit`. A wrapped loader runs
/// in a process group of its own with its wrapper: the case's signal goes to the loader alone (found among the
/// wrapper's descendants by its executable's name), and at the limit, or when the suite itself is interrupted
/// ([`interrupted`]), the whole group is killed, every process the wrapper or the loader started included. (A loader
/// that runs itself stays in the suite's group, where a terminal's Ctrl-C reaches it.)
pub fn run_case_with(loaders: &Loaders, case: &Case, wrapper: &Wrapper, limit: Duration) -> Result<Outcome> {
    let started = Instant::now();
    let loader = loaders.for_case(&case.expectation);
    let work_dir = process::WorkDir::new(&case.name)?;
    let image = std::path::absolute(&case.image).with_context(|| format!("no path to {}", case.image.display()))?;
    // A path with a folder in it would be taken from the new working directory; a bare name is looked up in PATH.
    let loader = if loader.components().count() > 1 { std::path::absolute(loader)? } else { loader.to_owned() };
    // The loader as the wrapper's descendant shows it: by its executable's name, a link followed.
    let wrapped_loader = (!wrapper.command.is_empty())
        .then(|| std::fs::canonicalize(&loader).unwrap_or_else(|_| loader.clone()))
        .and_then(|path| path.file_name().map(ToOwned::to_owned));
    let mut command = match wrapper.command.split_first() {
        Some((program, options)) => {
            let mut command = Command::new(program);
            command.args(options).arg(loader);
            command
        }
        None => Command::new(loader),
    };
    command.args(case.expectation.loader_arguments(&image)).envs(&case.expectation.env).current_dir(&work_dir.0);
    let interrupt = match &case.expectation.interrupt {
        Some(signal) => Some(process::Interrupt {
            after: Duration::from_secs_f64(case.expectation.interrupt_after.unwrap_or(1.0)),
            signal: signal_number(signal)?,
            after_output: case.expectation.interrupt_after_output,
        }),
        None => None,
    };
    let stdin = case.expectation.stdin.as_deref();
    let output = process::run_with_limit(command, limit, interrupt, stdin, wrapped_loader.as_deref())?;
    Ok(Outcome {
        exit_code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        elapsed: started.elapsed(),
    })
}

mod process;
pub mod sanitize;

pub use process::{interrupted, stop_wrapped_cases_on_signals};

#[cfg(test)]
mod tests;
