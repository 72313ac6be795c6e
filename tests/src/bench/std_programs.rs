//! std programs against the startup's own API, in the same run: std's `println!` from a full grid against the
//! startup's `println!` of the same lines, and a `Mutex<u64>` that every thread of a grid increments against an
//! atomic add of the same count.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::print::count_lines;
use crate::report::{Row, Stats, row};

/// A million lines, one per thread, through std's `println!` (`print-flood-std`) against the startup's
/// (`print-flood`), whole processes, each line checked to arrive whole, once. Throughput is lines arrived per
/// second; a run still going after [`LIMIT`] is stopped and rated by what had arrived.
pub fn print_throughput_std(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    const BLOCKS: u32 = 977; // × 1024 threads = 1,000,448 lines
    const LIMIT: Duration = Duration::from_secs(60);
    let expected = u64::from(BLOCKS) * 1024;
    let flood = |image: &str| {
        let mut command = Command::new(loader);
        command.args(["--threads", "1024", "--blocks", &BLOCKS.to_string()]).arg(images.join(image));
        command
    };
    let (mut std_command, mut ours_command) = (flood("print-flood-std.ptx"), flood("print-flood.ptx"));
    let (mut std_rates, mut our_rates, mut std_lines, mut our_lines) = (Vec::new(), Vec::new(), u64::MAX, u64::MAX);
    // The first pair warms the JIT caches; it is reported but not counted. The two alternate.
    for sample in 0..=repeat {
        for (command, label, rates, lines) in [
            (&mut std_command, "std println!", &mut std_rates, &mut std_lines),
            (&mut ours_command, "println!", &mut our_rates, &mut our_lines),
        ] {
            let counted = count_lines(command, LIMIT)?;
            let stopped = if counted.finished { "" } else { " (stopped at the limit)" };
            eprintln!("gpu-bench:   {label}: {} lines in {:.2?}{stopped}", counted.lines, counted.elapsed);
            if counted.finished && counted.lines != expected {
                bail!("{label}: {} of {expected} lines arrived whole", counted.lines);
            }
            if sample > 0 {
                rates.push(counted.lines as f64 / counted.elapsed.as_secs_f64());
                *lines = (*lines).min(counted.lines);
            }
        }
    }
    let mut std_row = row(
        "print-throughput-std",
        &format!("{expected} lines, one per thread, std's println! (whole process)"),
        "lines/s",
        Stats::of(std_rates),
        Some((Stats::of(our_rates), "the startup's println!, same grid and text, same run")),
        "≥ 0.9×",
    );
    std_row.note = format!("lines arrived whole: std {std_lines}/{expected}, ours {our_lines}/{expected}");
    Ok(std_row)
}

/// Every thread of a grid of one 1024-thread block per multiprocessor adds 1 to one count ROUNDS times, through a
/// `Mutex<u64>` and, as the baseline, an atomic add (`contention-std`); the time from the first thread's start to
/// the last thread's end, on the GPU's clock, as the program reports it.
pub fn mutex_contention(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    const ROUNDS: u32 = 4;
    let blocks = crate::kernel_phase::multiprocessors()?;
    let threads = blocks * 1024;
    let run = |how: &str| -> Result<f64> {
        let output = Command::new(loader)
            .args(["--threads", "1024", "--blocks", &blocks.to_string()])
            .arg(images.join("contention-std.ptx"))
            .args([how, &ROUNDS.to_string(), &threads.to_string()])
            .output()?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            bail!("contention-std {how} failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
        }
        let nanoseconds: f64 = stdout
            .trim()
            .strip_suffix(" ns")
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|number| number.parse().ok())
            .with_context(|| format!("contention-std {how} printed {stdout:?}"))?;
        Ok(nanoseconds * 1e-9)
    };
    run("mutex")?;
    run("atomic")?;
    let (mut mutex, mut atomic) = (Vec::new(), Vec::new());
    for _ in 0..repeat {
        mutex.push(run("mutex")?);
        atomic.push(run("atomic")?);
    }
    Ok(row(
        "mutex-std",
        &format!(
            "{threads} threads ({blocks} blocks of 1024) each lock a std Mutex<u64>, add 1, unlock, {ROUNDS} times"
        ),
        "ms",
        Stats::of(mutex),
        Some((Stats::of(atomic), "the same additions as atomic adds (fetch_add), same grid")),
        "≤ 100×",
    ))
}
