//! Real crates' own suites (itoa's and semver's, `xtask/src/real_crates.rs`): the wall time of a crate's whole suite
//! on the GPU, each test binary and doc example a `gpu-loader` process as `cargo test` runs them, against the same
//! tests built for the host and run on its CPU, one after the other.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use crate::report::{Row, Stats, row, seconds};

/// The crates, as their images' names begin (`itoa-test.ptx`, `semver-doc-src_lib_rs_19_0.ptx`).
const CRATES: [&str; 2] = ["itoa", "semver"];

/// One test binary or doc example: its GPU image, its host executable, and the exit code the suite expects of both
/// (a `should_panic` doc example ends with Rust's panic code).
struct Part {
    image: PathBuf,
    executable: PathBuf,
    exit_code: i32,
}

/// A row per crate: its suite's wall time on the GPU against on the host CPU.
pub fn suite_wall_time(images: &Path, loader: &Path, host: &Path, repeat: usize) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for name in CRATES {
        let parts = parts(images, host, name)?;
        let gpu_run = || -> Result<Duration> {
            time_all(&parts, |part| {
                let mut command = Command::new(loader);
                command.arg(&part.image);
                command
            })
        };
        let host_run = || time_all(&parts, |part| Command::new(&part.executable));
        // The first GPU run fills the loader's linked-cubin cache and the driver's JIT cache.
        gpu_run()?;
        host_run()?;
        let (mut gpu, mut cpu) = (Vec::new(), Vec::new());
        for _ in 0..repeat {
            gpu.push(gpu_run()?);
            cpu.push(host_run()?);
        }
        let what = format!("{name}'s own tests: its {} test binaries and doc examples, a process each", parts.len());
        rows.push(row(
            "real-crate-suite",
            &what,
            "s",
            Stats::of(seconds(gpu)),
            Some((Stats::of(seconds(cpu)), "the same tests built for the host, run on its CPU")),
            "reported",
        ));
    }
    Ok(rows)
}

/// The parts of crate `name`'s suite: every image of it in `images` with its host executable in `host`.
fn parts(images: &Path, host: &Path, name: &str) -> Result<Vec<Part>> {
    let prefix = format!("{name}-");
    let mut parts = Vec::new();
    for entry in std::fs::read_dir(images).with_context(|| format!("cannot read {}", images.display()))? {
        let image = entry?.path();
        let Some(stem) = image.file_name().and_then(|f| f.to_str()).and_then(|f| f.strip_suffix(".ptx")) else {
            continue;
        };
        if !stem.starts_with(&prefix) {
            continue;
        }
        let executable = host.join(stem);
        ensure!(executable.is_file(), "{} has no host build {}", image.display(), executable.display());
        let expectation = image.with_file_name(format!("{stem}.expect.toml"));
        let exit_code = expected_exit_code(&expectation)?;
        parts.push(Part { image, executable, exit_code });
    }
    ensure!(!parts.is_empty(), "{} holds no image of {name}'s tests", images.display());
    parts.sort_by(|a, b| a.image.cmp(&b.image));
    Ok(parts)
}

/// The `exit-code` of an expectation file.
fn expected_exit_code(path: &Path) -> Result<i32> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .find_map(|line| line.strip_prefix("exit-code = ")?.trim().parse().ok())
        .with_context(|| format!("{} sets no exit-code", path.display()))
}

/// Runs every part with `command`, one after the other; each must end with its expected code.
fn time_all(parts: &[Part], command: impl Fn(&Part) -> Command) -> Result<Duration> {
    let started = Instant::now();
    for part in parts {
        let mut command = command(part);
        let output = command.output().with_context(|| format!("cannot run {:?}", command.get_program()))?;
        if output.status.code() != Some(part.exit_code) {
            bail!(
                "{:?} {:?} ended with {}, not exit code {}:\n{}",
                command.get_program(),
                command.get_args().collect::<Vec<_>>(),
                output.status,
                part.exit_code,
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    Ok(started.elapsed())
}
