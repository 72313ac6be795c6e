//! The host's cost of a program that runs without asking anything of it: the CPU the loader's RPC server uses.

use std::path::Path;

use anyhow::Result;
use startup_common::abi::LaunchParams;

use crate::report::{Row, Stats, row};
use crate::runs::{run_ok, session};

/// Host CPU the loader's RPC server uses while a kernel runs for a second without asking anything of it.
pub fn idle_cpu(images: &Path, repeat: usize) -> Result<Row> {
    let mut session = session(images, "idle", &["1000"])?;
    let single = LaunchParams::SINGLE;
    let mut samples = Vec::new();
    for _ in 0..repeat {
        let before = cpu_seconds();
        let wall = run_ok(&mut session, &single)?;
        samples.push((cpu_seconds() - before) / wall.as_secs_f64());
    }
    Ok(row(
        "idle-cpu",
        "host CPU while the kernel idles 1 s (getrusage / wall)",
        "cores",
        Stats::of(samples),
        None,
        "≤ 0.1 core",
    ))
}

/// CPU seconds this process has used, user and system.
fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    // SAFETY: initialised by getrusage (or zeroed, had it failed).
    let usage = unsafe { usage.assume_init() };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
