//! The test runner's benchmark: what a test of a test binary costs, against a process per test.

use std::path::Path;
use std::process::Command;

use anyhow::{Result, bail};

use crate::report::{Row, Stats, row, seconds};
use crate::runs::time_process;

/// The 1,000 tests of `thousand-tests`: a run of them all, less a run of one, over 999, is what a test costs once the
/// context exists and the image is loaded; against `gpu-loader IMAGE --exact NAME` for one test in a process of its
/// own (how lit runs LLVM libc's GPU tests, and how nextest runs each test).
pub fn per_test(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    let image = images.join("thousand-tests.ptx");
    let run = |filter: &[&str]| {
        let mut command = Command::new(loader);
        command.arg(&image).args(filter);
        command
    };
    let (mut all, mut one) = (run(&[]), run(&["--exact", "m00::t0"]));
    // Warm the loader's linked-cubin cache.
    time_process(&mut one)?;
    let mut per_test = Vec::new();
    for _ in 0..repeat {
        let (whole, single) = (time_process(&mut all)?, time_process(&mut one)?);
        if whole <= single {
            bail!("1,000 tests took {whole:?}, one test {single:?}: the runner did not run them all");
        }
        per_test.push((whole - single) / 999);
    }
    let mut per_process = Vec::new();
    for index in 0..repeat.max(10) {
        let name = format!("m{:02}::t{}", index % 100, index % 10);
        per_process.push(time_process(&mut run(&["--exact", &name]))?);
    }
    let (ours, baseline) = (Stats::of(seconds(per_test)), Stats::of(seconds(per_process)));
    let faster = baseline.median / ours.median;
    let mut row = row(
        "tests-per-test",
        "a test of a 1,000-test binary: (run of all − run of one) / 999",
        "ms",
        ours,
        Some((baseline, "gpu-loader IMAGE --exact NAME: one test per process")),
        "≤ 1 ms, and ≥ 200× faster than the baseline",
    );
    row.note = format!("a process per test costs {faster:.0}× as much");
    Ok(row)
}
