//! Printing throughput: a million lines from a full grid through `println!` and C's `printf`, against CUDA's
//! `vprintf`; every line is checked to arrive whole, once.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::report::{Row, Stats, row};

/// A million lines from a full grid through `println!` and through C's `printf` (`printf-flood-c`),
/// against CUDA's `vprintf` with the driver's FIFO and an enlarged one; every line must arrive whole, once.
/// Throughput is lines arrived per second of the whole process. `vprintf` with the driver's FIFO drains at a few
/// thousand lines a second (the kernel waits on a full FIFO), so that run is stopped after [`SLOW_LIMIT`] and rated
/// by the lines that had arrived by then.
pub fn print_throughput(images: &Path, loader: &Path, repeat: usize) -> Result<Vec<Row>> {
    const BLOCKS: u32 = 977; // × 1024 threads = 1,000,448 lines
    const LIMIT: Duration = Duration::from_secs(90);
    const SLOW_LIMIT: Duration = Duration::from_secs(20);
    let expected = u64::from(BLOCKS) * 1024;
    let flood = |image: &str| {
        let mut command = Command::new(loader);
        command.args(["--threads", "1024", "--blocks", &BLOCKS.to_string()]).arg(images.join(image));
        command
    };
    let me = std::env::current_exe()?;
    let mut rows = Vec::new();
    let measure = |command: &mut Command, label: &str, limit: Duration, may_stop: bool| -> Result<(Stats, u64)> {
        let mut samples = Vec::new();
        let mut lines = u64::MAX;
        // The first run warms the JIT cache and the driver; it is reported but not counted.
        for sample in 0..=repeat {
            let counted = count_lines(command, limit)?;
            let stopped = if counted.finished { "" } else { " (stopped at the limit)" };
            eprintln!("gpu-bench:   {label}: {} lines in {:.2?}{stopped}", counted.lines, counted.elapsed);
            if !counted.finished && !may_stop {
                bail!("{label} did not finish within {limit:?}");
            }
            if counted.finished && counted.lines != expected {
                bail!("{label}: {} of {expected} lines arrived whole", counted.lines);
            }
            if sample > 0 {
                samples.push(counted.lines as f64 / counted.elapsed.as_secs_f64());
                lines = lines.min(counted.lines);
            }
        }
        Ok((Stats::of(samples), lines))
    };
    let (println, println_lines) = measure(&mut flood("print-flood.ptx"), "println!", LIMIT, false)?;
    let (printf, printf_lines) = measure(&mut flood("printf-flood-c.ptx"), "C printf", LIMIT, false)?;
    let println_what = format!("{expected} lines, one per thread, println! (whole process)");
    let printf_what = format!("{expected} lines, one per thread, C printf (whole process)");
    for (fifo, label) in [(0usize, "driver's default FIFO"), (512 << 20, "512 MiB FIFO")] {
        let mut vprintf_cmd = Command::new(&me);
        vprintf_cmd.args(["vprintf", &BLOCKS.to_string(), &fifo.to_string()]);
        let (limit, may_stop) = if fifo == 0 { (SLOW_LIMIT, true) } else { (LIMIT, false) };
        let (theirs, their_lines) = measure(&mut vprintf_cmd, &format!("vprintf, {label}"), limit, may_stop)?;
        let baseline = if fifo == 0 { "vprintf, driver's default FIFO" } else { "vprintf, 512 MiB FIFO" };
        // Higher is better here; the ratio stays ours / theirs.
        let mut println_row = row(
            "print-throughput",
            &println_what,
            "lines/s",
            println.clone(),
            Some((theirs.clone(), baseline)),
            "≥ vprintf, no line lost",
        );
        let stopped = if their_lines < expected && may_stop {
            format!(" when stopped after {SLOW_LIMIT:?}")
        } else {
            String::new()
        };
        println_row.note = format!(
            "lines arrived whole: ours {println_lines}/{expected}, vprintf ({label}) {their_lines}/{expected}{stopped}"
        );
        rows.push(println_row);
        if fifo != 0 {
            let mut printf_row = row(
                "printf-throughput",
                &printf_what,
                "lines/s",
                printf.clone(),
                Some((theirs, baseline)),
                "≥ vprintf, no line lost",
            );
            printf_row.note = format!(
                "lines arrived whole: ours {printf_lines}/{expected}, vprintf ({label}) {their_lines}/{expected}"
            );
            rows.push(printf_row);
        }
    }
    let mut against_println = row(
        "printf-throughput",
        &printf_what,
        "lines/s",
        printf,
        Some((println, "println!, same grid and text, same run")),
        "≥ println!",
    );
    against_println.note =
        format!("lines arrived whole: printf {printf_lines}/{expected}, println! {println_lines}/{expected}");
    rows.push(against_println);
    Ok(rows)
}

/// What [`count_lines`] saw of one run.
pub(crate) struct Counted {
    pub(crate) elapsed: Duration,
    /// Lines that arrived whole: `line ID from thread T of block B` with ID = B × 1024 + T, each ID once.
    pub(crate) lines: u64,
    /// Whether the command exited (successfully) within the limit, rather than being killed at it.
    pub(crate) finished: bool,
}

/// Runs `command`, a flood of `line ID from thread T of block B` lines, counting the lines of its standard output
/// that arrived whole ([`FloodLines`]); kills it once `limit` has passed.
pub(crate) fn count_lines(command: &mut Command, limit: Duration) -> Result<Counted> {
    let started = Instant::now();
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
    let mut stdout = child.stdout.take().context("piped stdout")?;
    let counter = std::thread::spawn(move || -> std::io::Result<u64> {
        let mut buffer = vec![0u8; 1 << 20];
        let mut lines = FloodLines::default();
        loop {
            let read = stdout.read(&mut buffer)?;
            if read == 0 {
                return Ok(lines.whole);
            }
            lines.feed(&buffer[..read]);
        }
    });
    let (status, finished) = loop {
        if let Some(status) = child.try_wait()? {
            break (status, true);
        }
        if started.elapsed() > limit {
            child.kill()?;
            break (child.wait()?, false);
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let elapsed = started.elapsed();
    let lines = counter.join().map_err(|_| anyhow::anyhow!("the line counter panicked"))??;
    if finished && !status.success() {
        bail!("{:?} failed with {status}", command.get_program());
    }
    Ok(Counted { elapsed, lines, finished })
}

/// The lines of a flood as they stream in: counts those that are whole and new.
#[derive(Default)]
struct FloodLines {
    /// The start of a line whose end has not arrived yet.
    partial: Vec<u8>,
    /// One bit per line ID seen.
    seen: Vec<u64>,
    whole: u64,
}

impl FloodLines {
    fn feed(&mut self, mut bytes: &[u8]) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            if self.partial.is_empty() {
                self.line(&bytes[..end]);
            } else {
                self.partial.extend_from_slice(&bytes[..end]);
                let line = std::mem::take(&mut self.partial);
                self.line(&line);
            }
            bytes = &bytes[end + 1..];
        }
        self.partial.extend_from_slice(bytes);
    }

    fn line(&mut self, line: &[u8]) {
        let Some(id) = flood_line_id(line) else { return };
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        if self.seen[word] & bit == 0 {
            self.seen[word] |= bit;
            self.whole += 1;
        }
    }
}

/// The ID of `line ID from thread T of block B`, if the line is exactly that with ID = B × 1024 + T.
fn flood_line_id(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    let rest = text.strip_prefix("line ")?;
    let (id, rest) = rest.split_once(" from thread ")?;
    let (thread, block) = rest.split_once(" of block ")?;
    let [id, thread, block] = [id, thread, block].map(|n| n.parse::<u64>().ok());
    let (id, thread, block) = (id?, thread?, block?);
    (thread < 1024 && id == block * 1024 + thread).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flood_lines_count_only_whole_new_lines() {
        let mut lines = FloodLines::default();
        // A line split across reads still counts; a repeated, cut, garbled or inconsistent one does not.
        lines.feed(b"line 0 from thread 0 of block 0\nline 1025 from thr");
        lines.feed(b"ead 1 of block 1\nline 0 from thread 0 of block 0\n");
        lines.feed(
            b"line 7 from thread 7 of blo\nline 5 from thread 6 of block 0\nline 2048 from thread 0 of block 2 \n",
        );
        lines.feed(b"line 3 from thread 3 of block 0");
        assert_eq!(lines.whole, 2);
        assert_eq!(flood_line_id(b"line 1048575 from thread 1023 of block 1023"), Some(1_048_575));
        assert_eq!(flood_line_id(b"line 1024 from thread 1024 of block 0"), None);
    }
}
