//! The GPU suite: every program in `tests/programs` declares in `expect.toml`, next to its source, how it is
//! launched and what it must do; [`Expectation::check`] compares a run with that, and `gpu-suite` runs them all
//! through `gpu-loader`. `docs/testing.md` describes the format.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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
#[derive(Clone, Debug, Default, Deserialize)]
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
    /// Send this signal (`INT` or `TERM`) to the loader `interrupt-after` seconds after it started.
    pub interrupt: Option<String>,
    pub interrupt_after: Option<f64>,
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
        for pattern in expectation.stdout_matches.iter().chain(&expectation.stderr_matches) {
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
            .map(|(ending, suffix)| (dir.join(format!("{program}{ending}")), suffix))
            .filter(|(image, _)| image.is_file())
            .collect();
        if images.is_empty() {
            bail!("{} has no image next to it", path.display());
        }
        let expectation = Expectation::load(&path)?;
        if expectation.runs_on(target) {
            for (image, suffix) in images {
                let name = format!("{name}{suffix}");
                cases.push(Case { name, target: target.to_owned(), image, expectation: expectation.clone() });
            }
        }
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(cases)
}

/// Runs `loader` on a case, with a hard limit so a hanging loader cannot stall the suite.
pub fn run_case(loader: &Path, case: &Case) -> Result<Outcome> {
    let started = Instant::now();
    let mut command = Command::new(loader);
    command.args(case.expectation.loader_arguments(&case.image)).envs(&case.expectation.env).stdin(Stdio::null());
    let limit = Duration::from_secs_f64(case.expectation.timeout.unwrap_or(0.0) + 120.0);
    let interrupt = match &case.expectation.interrupt {
        Some(signal) => {
            Some((Duration::from_secs_f64(case.expectation.interrupt_after.unwrap_or(1.0)), signal_number(signal)?))
        }
        None => None,
    };
    let output = run_with_limit(command, limit, interrupt)?;
    Ok(Outcome {
        exit_code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        elapsed: started.elapsed(),
    })
}

fn run_with_limit(
    mut command: Command,
    limit: Duration,
    mut interrupt: Option<(Duration, i32)>,
) -> Result<std::process::Output> {
    let started = Instant::now();
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().context("cannot start gpu-loader")?;
    let (stdout, stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let (out_reader, err_reader) = (read(Box::new(stdout)), read(Box::new(stderr)));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if let Some((after, signal)) = interrupt
            && started.elapsed() >= after
        {
            // SAFETY: sends a signal to our own child, which has not been reaped (try_wait saw it running).
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
            interrupt = None;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("gpu-loader did not finish within {limit:?} and was killed");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok(std::process::Output {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(code: i32, stdout: &str, stderr: &str) -> Outcome {
        Outcome {
            exit_code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            elapsed: Duration::from_millis(5),
        }
    }

    #[test]
    fn parses_the_full_format() {
        let expectation = Expectation::parse(
            r#"
            threads = [4, 4, 4]
            blocks = 2
            args = ["1", "2"]
            env = { FRANCE = "Paris" }
            timeout = 5
            exit-code = 3
            stdout-contains = ["x"]
            stderr-matches = ['^a\d$']
            targets = ["nvptx"]
            "#,
        )
        .unwrap();
        assert_eq!(expectation.threads.xyz(), [4, 4, 4]);
        assert_eq!(expectation.blocks.xyz(), [2, 1, 1]);
        assert!(expectation.runs_on("nvptx") && !expectation.runs_on("amdgpu"));
        let args = expectation.loader_arguments(Path::new("p.ptx"));
        let args: Vec<_> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(args[..2], ["--threads-x", "4"]);
        assert_eq!(args[args.len() - 5..], ["--timeout", "5", "p.ptx", "1", "2"]);
    }

    #[test]
    fn rejects_unknown_keys_and_bad_patterns() {
        assert!(Expectation::parse("exit_code = 1").is_err());
        assert!(Expectation::parse("stdout-matches = ['(']").is_err());
    }

    #[test]
    fn each_check_can_fail() {
        let expectation = Expectation::parse(
            "exit-code = 0\nstdout = \"a\\nb\\n\"\nstderr-contains = [\"warn\"]\nstdout-lines = 2\nstdout-matches = ['^a']",
        )
        .unwrap();
        assert!(expectation.check(&outcome(0, "a\nb\n", "a warning")).is_empty());
        let problems = expectation.check(&outcome(1, "b\na\nc\n", ""));
        assert_eq!(problems.len(), 5, "{problems:#?}");
    }

    #[test]
    fn unordered_output_compares_as_a_multiset() {
        let expectation = Expectation::parse("stdout-unordered = \"x\\ny\\ny\\n\"").unwrap();
        assert!(expectation.check(&outcome(0, "y\nx\ny\n", "")).is_empty());
        assert_eq!(expectation.check(&outcome(0, "y\nx\nx\n", "")).len(), 1);
        assert_eq!(expectation.check(&outcome(0, "y\nx\n", "")).len(), 1);
    }

    #[test]
    fn each_kind_of_image_is_a_case_of_its_own() {
        let dir = std::env::temp_dir().join(format!("gpu-suite-discover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["hello.ptx", "hello.cubin", "hello.linked.cubin", "idle.ptx", "only-amd.elf", "stray.cubin"] {
            std::fs::write(dir.join(file), b"").unwrap();
        }
        std::fs::write(dir.join("hello.expect.toml"), "exit-code = 0").unwrap();
        std::fs::write(dir.join("hello.twice.expect.toml"), "exit-code = 1").unwrap();
        std::fs::write(dir.join("idle.expect.toml"), "").unwrap();
        std::fs::write(dir.join("only-amd.expect.toml"), "targets = [\"amdgpu\"]").unwrap();
        let cases = discover(&dir, "nvptx").unwrap();
        let names: Vec<_> = cases.iter().map(|case| case.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "hello",
                "hello.twice",
                "hello.twice[cubin]",
                "hello.twice[linked-cubin]",
                "hello[cubin]",
                "hello[linked-cubin]",
                "idle"
            ]
        );
        let image = |name: &str| cases.iter().find(|case| case.name == name).unwrap().image.clone();
        assert_eq!(image("hello.twice[linked-cubin]"), dir.join("hello.linked.cubin"));
        assert_eq!(image("hello[cubin]"), dir.join("hello.cubin"));
        assert_eq!(image("hello"), dir.join("hello.ptx"));
        assert_eq!(cases.iter().find(|case| case.name == "hello.twice").unwrap().expectation.exit_code, 1);
        std::fs::write(dir.join("lost.expect.toml"), "").unwrap();
        assert!(discover(&dir, "nvptx").unwrap_err().to_string().contains("lost.expect.toml has no image"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_program_in_the_repository_has_valid_expectations() {
        let mut count = 0;
        for folder in ["programs", "programs-c", "programs-cpp"] {
            let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
            for entry in std::fs::read_dir(programs).unwrap() {
                let dir = entry.unwrap().path();
                if !dir.is_dir() {
                    continue;
                }
                for file in std::fs::read_dir(&dir).unwrap() {
                    let path = file.unwrap().path();
                    let name = path.file_name().unwrap().to_string_lossy().into_owned();
                    if name.starts_with("expect") && name.ends_with(".toml") {
                        Expectation::load(&path).unwrap();
                        count += 1;
                    }
                }
            }
        }
        assert!(count >= 25, "only {count} expectation files");
    }
}
