//! The test runner's benchmark: what a test of a test binary costs, against a process per test.

use std::path::Path;
use std::process::Command;

use anyhow::{Result, bail};

use crate::report::{Row, Stats, row, seconds};
use crate::runs::time_process;

/// The 1,000 tests of `thousand-tests` (`#[gpu_startup::test]`s): a run of them all, less a run of one, over 999, is
/// what a test costs once the context exists and the image is loaded; against `gpu-loader IMAGE --exact NAME` for one
/// test in a process of its own (how lit runs LLVM libc's GPU tests, and how nextest runs each test).
pub fn per_test(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    per_test_of(images, loader, repeat, "tests-per-test", "thousand-tests", "a test of a 1,000-test binary")
}

/// The same for `thousand-std`'s 1,000 plain `#[test]`s under libtest, the loader playing libtest's parent.
pub fn per_std_test(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    per_test_of(images, loader, repeat, "tests-per-test-std", "thousand-std", "a std #[test] of a 1,000-test binary")
}

fn per_test_of(images: &Path, loader: &Path, repeat: usize, name: &str, program: &str, what: &str) -> Result<Row> {
    let image = images.join(format!("{program}.ptx"));
    let run = |filter: &[&str]| {
        let mut command = Command::new(loader);
        command.arg(&image).args(filter);
        command
    };
    let (mut all, mut one) = (run(&[]), run(&["--exact", "m00::t0"]));
    // Timing cannot tell whether the runner ran every test (a test costs less than a process start varies by): its
    // summary says.
    let output = run(&[]).output()?;
    let summary = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !summary.contains("test result: ok. 1000 passed; 0 failed") {
        bail!("gpu-loader {program}.ptx did not pass 1,000 tests ({}):\n{summary}", output.status);
    }
    // Warm the loader's linked-cubin cache.
    time_process(&mut one)?;
    let (mut wholes, mut singles) = (Vec::new(), Vec::new());
    for _ in 0..repeat {
        wholes.push(time_process(&mut all)?);
        singles.push(time_process(&mut one)?);
    }
    // From the medians of each kind of run: a difference of single samples is mostly the noise of two process
    // starts. The range pairs the extremes, so it holds whatever the noise was.
    let (whole, single) = (Stats::of(seconds(wholes)), Stats::of(seconds(singles)));
    let per_test = |whole: f64, single: f64| ((whole - single) / 999.0).max(0.0);
    let ours = Stats {
        median: per_test(whole.median, single.median),
        min: per_test(whole.min, single.max),
        max: per_test(whole.max, single.min),
        samples: repeat,
    };
    let mut per_process = Vec::new();
    for index in 0..repeat.max(10) {
        let name = format!("m{:02}::t{}", index % 100, index % 10);
        per_process.push(time_process(&mut run(&["--exact", &name]))?);
    }
    let baseline = Stats::of(seconds(per_process));
    let faster = baseline.median / ours.median;
    let mut row = row(
        name,
        &format!("{what}: (run of all − run of one) / 999, medians"),
        "ms",
        ours,
        Some((baseline, "gpu-loader IMAGE --exact NAME: one test per process")),
        "≤ 1 ms, and ≥ 200× faster than the baseline",
    );
    row.note = format!("a process per test costs {faster:.0}× as much");
    Ok(row)
}
