//! The startup's cost: the three kernels of an empty `main` against one empty launch and against a CUDA graph of
//! three, the same over grid sizes against LLVM libc's first design, and a whole `gpu-loader` run against a bare
//! program.

use std::path::Path;
use std::process::Command;

use anyhow::Result;
use cudarc::driver::{result, sys};
use startup_common::abi::LaunchParams;

use crate::baselines::{BarrierKernel, EmptyKernel, GraphOfThree};
use crate::report::{Row, Stats, row, seconds};
use crate::runs::{run_ok, session, time_process};

/// `_begin` + `_start` + `_end` for an empty `main`, with RPC served, against one empty launch +
/// synchronize, and against a CUDA graph of three empty kernels + synchronize (the floor for three kernels).
pub fn kernel_phase(images: &Path, repeat: usize) -> Result<Vec<Row>> {
    let mut session = session(images, "empty", &[])?;
    let empty = EmptyKernel::load()?;
    let graph = GraphOfThree::capture(&EmptyKernel::load()?)?;
    let single = LaunchParams::SINGLE;
    for _ in 0..10 {
        run_ok(&mut session, &single)?;
        empty.launch_and_wait(&single)?;
        graph.launch_and_wait()?;
    }
    let (mut ours, mut bare, mut graphs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeat {
        ours.push(run_ok(&mut session, &single)?);
        bare.push(empty.launch_and_wait(&single)?);
        graphs.push(graph.launch_and_wait()?);
    }
    let what = "_begin + _start + _end, empty main, 1 thread, RPC served";
    let ours = Stats::of(seconds(ours));
    Ok(vec![
        row(
            "kernel-phase",
            what,
            "µs",
            ours.clone(),
            Some((Stats::of(seconds(bare)), "one empty kernel launch + synchronize, same context")),
            "≤ 1.3×",
        ),
        row(
            "kernel-phase-graph",
            what,
            "µs",
            ours,
            Some((Stats::of(seconds(graphs)), "a CUDA graph of three empty kernels: launch + synchronize")),
            "≤ 1.3×",
        ),
    ])
}

/// The whole loader run, process start to exit, for an empty `main`, against a bare program.
pub fn loader_run(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    let image = images.join("empty.ptx");
    let me = std::env::current_exe()?;
    let mut ours_cmd = Command::new(loader);
    ours_cmd.arg(&image);
    let mut bare_cmd = Command::new(&me);
    bare_cmd.arg("bare-run").arg(&image);
    // Warm both: the driver's JIT cache for the bare program, the loader's linked-cubin cache for ours.
    for _ in 0..2 {
        time_process(&mut ours_cmd)?;
        time_process(&mut bare_cmd)?;
    }
    let mut ours = Vec::new();
    let mut bare = Vec::new();
    for _ in 0..repeat {
        ours.push(time_process(&mut ours_cmd)?);
        bare.push(time_process(&mut bare_cmd)?);
    }
    Ok(row(
        "loader-run",
        "gpu-loader empty.ptx, process start to exit, warm caches",
        "ms",
        Stats::of(seconds(ours)),
        Some((Stats::of(seconds(bare)), "cudarc program: context, load the same image, one empty launch")),
        "≤ 1.05×",
    ))
}

/// Startup cost against grid size, up to 16 times what the device holds at once; the barrier design as the
/// comparator up to the largest grid it can run (beyond residency it never finishes).
pub fn grid_scaling(images: &Path, repeat: usize) -> Result<Vec<Row>> {
    let mut session = session(images, "empty", &[])?;
    let barrier = BarrierKernel::load()?;
    let sms = multiprocessors()?;
    let resident = sms * barrier.blocks_per_sm()?;
    let mut rows = Vec::new();
    let sizes: Vec<(String, LaunchParams)> = [
        ("1 thread".to_owned(), LaunchParams::SINGLE),
        ("1 block × 1024".to_owned(), LaunchParams { threads: [1024, 1, 1], blocks: [1, 1, 1] }),
        (format!("{sms} blocks × 1024 (1 per SM)"), LaunchParams { threads: [1024, 1, 1], blocks: [sms, 1, 1] }),
    ]
    .into_iter()
    .chain([1u32, 4, 16].map(|times| {
        (
            format!("{} blocks × 1024 ({times}× resident)", resident * times),
            LaunchParams { threads: [1024, 1, 1], blocks: [resident * times, 1, 1] },
        )
    }))
    .collect();
    for (label, launch) in sizes {
        run_ok(&mut session, &launch)?;
        let ours = (0..repeat).map(|_| run_ok(&mut session, &launch)).collect::<Result<Vec<_>>>()?;
        let fits = launch.blocks[0] <= resident;
        let baseline = if fits {
            let mut samples = (0..=repeat).map(|_| barrier.launch_and_wait(&launch)).collect::<Result<Vec<_>>>()?;
            samples.remove(0);
            Some((Stats::of(seconds(samples)), "one kernel with a global atomic barrier (LLVM libc's first design)"))
        } else {
            None
        };
        let mut row =
            row("grid-scaling", &format!("empty main, {label}"), "µs", Stats::of(seconds(ours)), baseline, "flat");
        if !fits {
            row.note = format!("the barrier design cannot run: only {resident} blocks of 1024 are resident");
        }
        rows.push(row);
    }
    Ok(rows)
}

/// How many multiprocessors device 0 has.
pub fn multiprocessors() -> Result<u32> {
    let device = result::device::get(0)?;
    // SAFETY: a plain query.
    let count = unsafe {
        result::device::get_attribute(device, sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    }?;
    Ok(count as u32)
}
