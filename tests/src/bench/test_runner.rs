//! The test runner's benchmarks: what a test of a test binary costs, against a process per test, and the floor for
//! one `_begin`/`_start`/`_end` sequence, a CUDA graph of three empty kernels.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use cudarc::driver::{result, sys};

use super::{EmptyKernel, Row, Stats, row, seconds, time_process};

/// A CUDA graph of three empty kernels, instantiated once: launched and waited for, the least that running the three
/// kernels of a program can cost.
pub struct GraphOfThree {
    exec: sys::CUgraphExec,
    stream: sys::CUstream,
}

impl GraphOfThree {
    /// Captures three launches of `empty` on its stream.
    pub fn capture(empty: &EmptyKernel) -> Result<Self> {
        let stream = empty.stream;
        // SAFETY: the stream is ours and idle; capture records the launches instead of running them.
        unsafe { sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) }
            .result()?;
        for _ in 0..3 {
            // SAFETY: the kernel takes no parameters; the stream is capturing.
            unsafe { result::launch_kernel(empty.function, (1, 1, 1), (1, 1, 1), 0, stream, &mut []) }?;
        }
        let mut graph = std::ptr::null_mut();
        // SAFETY: ends the capture begun above; `graph` receives it.
        unsafe { sys::cuStreamEndCapture(stream, &mut graph) }.result()?;
        let mut exec = std::ptr::null_mut();
        // SAFETY: `graph` is the captured graph; it and its instance live as long as the process.
        unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) }.result()?;
        Ok(Self { exec, stream })
    }

    /// One launch of the graph and a wait for it.
    pub fn launch_and_wait(&self) -> Result<Duration> {
        let started = Instant::now();
        // SAFETY: the instance and the stream are ours.
        unsafe {
            sys::cuGraphLaunch(self.exec, self.stream).result()?;
            result::stream::synchronize(self.stream)?;
        }
        Ok(started.elapsed())
    }
}

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
