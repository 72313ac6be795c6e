//! The RPC channel's latency: one thread's round trip against a raw mapped-memory ping-pong, against bare hand-offs
//! in the same kernel, and the first round trip after the host's serve loop went idle.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use startup_common::abi::LaunchParams;

use crate::baselines::PingPong;
use crate::report::{Row, Stats, row};
use crate::runs::{run_ok, session};

/// One thread's RPC round trip, against a raw mapped-memory ping-pong in the same context: an RPC that
/// carries nothing (the protocol's own cost: port lock, hand-off both ways) and one that carries a number each way
/// (one more read of host memory by the device for the reply). The ping-pong runs on the outbox words of the port
/// that the RPC of the same row uses ([`PingPong::sample`]). Each sample of ours is followed by a sample of the
/// baseline, so that both see the same state of the machine.
pub fn rpc_round_trip(images: &Path, repeat: usize) -> Result<Vec<Row>> {
    let rounds = PingPong::ROUNDS;
    let single = LaunchParams::SINGLE;
    let arg = rounds.to_string();
    let mut none = session(images, "rpc-latency", &["0"])?;
    let mut empty = session(images, "rpc-latency", &[&arg, "empty"])?;
    let mut increment = session(images, "rpc-latency", &[&arg])?;
    let ping_pong = PingPong::load()?;
    // Warm-up: the first launch of each pays for loading and caching.
    run_ok(&mut none, &single)?;
    run_ok(&mut empty, &single)?;
    run_ok(&mut increment, &single)?;
    ping_pong.sample(&empty)?;
    let (mut empties, mut increments) = (Vec::new(), Vec::new());
    let (mut raw_empty, mut raw_increment) = (Vec::new(), Vec::new());
    for _ in 0..repeat {
        let base = run_ok(&mut none, &single)?;
        let with_empty = run_ok(&mut empty, &single)?;
        raw_empty.push(ping_pong.sample(&empty)?);
        let with_increment = run_ok(&mut increment, &single)?;
        raw_increment.push(ping_pong.sample(&increment)?);
        empties.push(with_empty.saturating_sub(base).as_secs_f64() / f64::from(rounds));
        increments.push(with_increment.saturating_sub(base).as_secs_f64() / f64::from(rounds));
    }
    let baseline = "raw ping-pong through the same port's outbox words";
    Ok(vec![
        row(
            "rpc-round-trip",
            "one thread, an RPC that carries nothing (test noop)",
            "µs",
            Stats::of(empties),
            Some((Stats::of(raw_empty), baseline)),
            "≤ 1.3×",
        ),
        row(
            "rpc-round-trip-data",
            "one thread, an RPC that carries a number each way (test increment)",
            "µs",
            Stats::of(increments),
            Some((Stats::of(raw_increment), baseline)),
            "≤ 1.7×",
        ),
    ])
}

/// One thread's empty RPC against bare hand-offs of the same port's buffers, alternating in one kernel
/// and timed with the device's clock (`rpc-latency N compare`): the same SM, port words and host thread for both, so
/// the ratio is the protocol's cost alone. Across processes the raw round trip itself differs by a few tenths of a
/// microsecond (where the kernel and the region land), which the separate-kernel baseline of benchmark 4 mixes into
/// its ratio. One sample per `gpu-test-loader` process (`loader`), so the samples are draws of that placement.
pub fn rpc_round_trip_in_kernel(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    let image = images.join("rpc-latency.ptx");
    let rounds = PingPong::ROUNDS.to_string();
    let mut command = Command::new(loader);
    command.args(["--timeout", "60"]).arg(&image).args([rounds.as_str(), "compare"]);
    let (mut messages, mut hand_offs) = (Vec::new(), Vec::new());
    for sample in 0..=repeat {
        let output = command.stderr(Stdio::inherit()).output()?;
        if !output.status.success() {
            bail!("{} {rounds} compare failed with {}", image.display(), output.status);
        }
        let text = String::from_utf8_lossy(&output.stdout);
        let parsed = text.trim_end().strip_prefix("round trip ps: message ").and_then(|rest| {
            let (message, hand_off) = rest.split_once(" hand-off ")?;
            Some((message.parse::<f64>().ok()?, hand_off.parse::<f64>().ok()?))
        });
        let Some((message, hand_off)) = parsed else { bail!("unexpected output of rpc-latency compare: {text:?}") };
        eprintln!("gpu-bench:   message {:.3} µs, hand-off {:.3} µs", message / 1e6, hand_off / 1e6);
        // The first process warms the JIT cache; it is reported but not counted.
        if sample > 0 {
            messages.push(message / 1e12);
            hand_offs.push(hand_off / 1e12);
        }
    }
    let mut row = row(
        "rpc-round-trip-in-kernel",
        "one thread, an RPC that carries nothing, alternating with bare hand-offs in one kernel",
        "µs",
        Stats::of(messages.clone()),
        Some((Stats::of(hand_offs.clone()), "bare hand-offs of the same port's buffers, same kernel (test hand-offs)")),
        "≤ 1.3×",
    );
    let mut ratios: Vec<f64> = messages.iter().zip(&hand_offs).map(|(m, h)| m / h).collect();
    ratios.sort_by(f64::total_cmp);
    row.note = format!(
        "per process: ratio {:.2}–{:.2}×, ours − bare {:.2}–{:.2} µs",
        ratios[0],
        ratios[ratios.len() - 1],
        messages.iter().zip(&hand_offs).map(|(m, h)| (m - h) * 1e6).fold(f64::INFINITY, f64::min),
        messages.iter().zip(&hand_offs).map(|(m, h)| (m - h) * 1e6).fold(f64::NEG_INFINITY, f64::max),
    );
    Ok(row)
}

/// One thread's first RPC after the host's serve loop went idle (50 ms without a message, so it sleeps
/// between its passes), timed on the device (`rpc-latency N after-idle 50`), against the round trip that follows it
/// at once, while the loop is busy again. Several samples per `gpu-test-loader` process (`loader`).
pub fn rpc_after_idle(images: &Path, loader: &Path, repeat: usize) -> Result<Row> {
    const SAMPLES_PER_PROCESS: usize = 10;
    let image = images.join("rpc-latency.ptx");
    let mut command = Command::new(loader);
    command.args(["--timeout", "60"]).arg(&image).args([&SAMPLES_PER_PROCESS.to_string(), "after-idle", "50"]);
    let (mut firsts, mut nexts) = (Vec::new(), Vec::new());
    for process in 0..=repeat {
        let output = command.stderr(Stdio::inherit()).output()?;
        if !output.status.success() {
            bail!("{} after-idle failed with {}", image.display(), output.status);
        }
        let text = String::from_utf8_lossy(&output.stdout);
        let samples: Vec<(f64, f64)> = text
            .lines()
            .map(|line| {
                let rest = line.strip_prefix("after idle ns: first ")?;
                let (first, next) = rest.split_once(" next ")?;
                Some((first.parse::<f64>().ok()? / 1e9, next.parse::<f64>().ok()? / 1e9))
            })
            .collect::<Option<_>>()
            .filter(|samples: &Vec<_>| samples.len() == SAMPLES_PER_PROCESS)
            .with_context(|| format!("unexpected output of rpc-latency after-idle: {text:?}"))?;
        // The first process warms the JIT cache; it is reported but not counted.
        let worst = samples.iter().map(|&(first, _)| first).fold(0.0, f64::max);
        eprintln!("gpu-bench:   process {process}: first round trip after idle up to {:.1} µs", worst * 1e6);
        if process > 0 {
            firsts.extend(samples.iter().map(|&(first, _)| first));
            nexts.extend(samples.iter().map(|&(_, next)| next));
        }
    }
    Ok(row(
        "rpc-after-idle",
        "one thread's first RPC after 50 ms without messages (test noop, device clock)",
        "µs",
        Stats::of(firsts),
        Some((Stats::of(nexts), "the round trip right after it, the serve loop busy again")),
        "≤ 100 µs (max)",
    ))
}
