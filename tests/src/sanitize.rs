//! The GPU suite under NVIDIA's compute-sanitizer (`gpu-suite --sanitize`): each case runs with the loader under one
//! tool at a time (memcheck, racecheck, synccheck, initcheck), in a process group of its own that a per-case limit
//! kills whole, and passes when the run meets the case's expectations and the tool's report is what the case allows:
//! nothing, or for a case that faults on purpose (`[sanitize] faults = true`), that fault under memcheck, and for one
//! whose driver call fails on purpose (`[sanitize] refused-call`), that call's failure under memcheck. A tool
//! that cannot run a case (`[sanitize] skip`) lists it as skipped with the reason. `docs/failures.md` has the results.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::{Case, Expectation, Loaders, Outcome, Wrapper};

/// One of compute-sanitizer's tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tool {
    Memcheck,
    Racecheck,
    Synccheck,
    Initcheck,
}

impl Tool {
    pub const ALL: [Tool; 4] = [Tool::Memcheck, Tool::Racecheck, Tool::Synccheck, Tool::Initcheck];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Memcheck => "memcheck",
            Tool::Racecheck => "racecheck",
            Tool::Synccheck => "synccheck",
            Tool::Initcheck => "initcheck",
        }
    }

    /// The tools of a comma-separated list (`memcheck,racecheck`); an empty list is all of them.
    pub fn parse_list(text: &str) -> Result<Vec<Tool>> {
        if text.is_empty() {
            return Ok(Self::ALL.to_vec());
        }
        let mut tools = Vec::new();
        for name in text.split(',') {
            let tool = Self::ALL.into_iter().find(|tool| tool.name() == name).with_context(|| {
                format!("`{name}` is not a compute-sanitizer tool (memcheck, racecheck, synccheck, initcheck)")
            })?;
            if !tools.contains(&tool) {
                tools.push(tool);
            }
        }
        tools.sort();
        Ok(tools)
    }

    /// The tool's options beyond its name: racecheck also reports the hazards between lanes of one warp (warp-level
    /// programming), which its default leaves as warnings that still count.
    fn options(self) -> &'static [&'static str] {
        match self {
            Tool::Racecheck => &["--racecheck-report", "hazard"],
            _ => &[],
        }
    }
}

/// How the suite runs compute-sanitizer.
#[derive(Clone, Debug)]
pub struct Sanitizer {
    /// The `compute-sanitizer` program.
    pub program: PathBuf,
    /// The longest one case may take under a tool; then its whole process group is killed.
    pub limit: Duration,
    /// Where each case's report and verdict are kept (`<tool>-<case>.log`, `.verdict`); none: only a failure shows
    /// them.
    pub log_dir: Option<PathBuf>,
}

/// Why `tool` does not run `case`, if the case says it cannot.
pub fn skip_reason(expectation: &Expectation, tool: Tool) -> Option<&str> {
    let skip = &expectation.sanitize.skip;
    skip.get(tool.name()).or_else(|| skip.get("all")).map(String::as_str)
}

/// Checks that a case's `[sanitize] skip` names only tools there are (or `all`).
pub fn check_skip_names(expectation: &Expectation) -> Result<()> {
    for name in expectation.sanitize.skip.keys() {
        if name != "all" && !Tool::ALL.iter().any(|tool| tool.name() == name) {
            bail!(
                "`[sanitize] skip` names `{name}`, which is not a tool (memcheck, racecheck, synccheck, initcheck, all)"
            );
        }
    }
    Ok(())
}

/// Runs `case` under `tool` and judges it; `Err` holds every problem, one per line.
pub fn run(sanitizer: &Sanitizer, tool: Tool, loaders: &Loaders, case: &Case) -> Result<(), String> {
    let log = tempfile_path(tool, &case.name);
    let mut command = vec![sanitizer.program.clone().into_os_string()];
    for option in ["--tool", tool.name()].into_iter().chain(tool.options().iter().copied()) {
        command.push(option.into());
    }
    // Every record of a report names its place once, not the host's backtrace: the logs of a whole suite stay short.
    command.extend(["--show-backtrace", "device", "--print-limit", "1000", "--log-file"].map(Into::into));
    command.push(log.clone().into_os_string());
    let wrapper = Wrapper { command };
    let case = &Case { expectation: expectation_under_tools(&case.expectation), ..case.clone() };
    let outcome = crate::run_case_with(loaders, case, &wrapper, sanitizer.limit);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let verdict = match outcome {
        Ok(outcome) => {
            let problems = judge(tool, &case.expectation, &outcome, &text);
            if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
        }
        Err(error) => Err(format!("{error:#}\n{}", excerpt_of_report(&text))),
    };
    if let Some(dir) = &sanitizer.log_dir {
        // The verdict beside the report: a suite stopped before its summary still leaves each finished case's reasons.
        let name: String =
            case.name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        let _ = std::fs::write(dir.join(format!("{}-{name}.log", tool.name())), &text);
        let judged = match &verdict {
            Ok(()) => "passed\n".to_owned(),
            Err(problems) => format!("failed:\n{problems}\n"),
        };
        let _ = std::fs::write(dir.join(format!("{}-{name}.verdict", tool.name())), judged);
    }
    verdict
}

fn tempfile_path(tool: Tool, case: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name: String = case.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("gpu-suite-{}-{n}-{}-{name}.log", std::process::id(), tool.name()))
}

/// Every way a run under `tool` differs from what `expectation` allows, one per line; empty when it passes.
pub fn judge(tool: Tool, expectation: &Expectation, outcome: &Outcome, log: &str) -> Vec<String> {
    let mut problems = expectation_under_tools(expectation).check(outcome);
    let report = match Report::parse(log) {
        Ok(report) => report,
        Err(error) => {
            problems.push(format!("{error}\n{}", excerpt_of_report(log)));
            return problems;
        }
    };
    let faults = expectation.sanitize.faults && tool == Tool::Memcheck;
    if faults {
        let device_faults = report.records.iter().filter(|record| is_device_fault(record)).count();
        let others: Vec<&String> =
            report.records.iter().filter(|record| !is_device_fault(record) && !is_fault_aftermath(record)).collect();
        if device_faults == 0 {
            problems.push("memcheck reported no device fault, and the program faults on purpose".into());
        }
        if !others.is_empty() {
            problems.push(format!("memcheck reported more than the program's fault: {others:?}"));
        }
    } else if let Some(call) = expectation.sanitize.refused_call.as_deref().filter(|_| tool == Tool::Memcheck) {
        let suffix = format!(" on CUDA API call to {call}.");
        let (refusals, others): (Vec<&String>, Vec<&String>) =
            report.records.iter().partition(|record| record.starts_with("Program hit ") && record.ends_with(&suffix));
        if refusals.is_empty() {
            problems.push(format!("memcheck reported no failing call to {call}, and the program makes one on purpose"));
        }
        if !others.is_empty() {
            problems.push(format!("memcheck reported more than the refused call to {call}: {others:?}"));
        }
    } else if report.errors > 0 || !report.records.is_empty() {
        problems.push(format!(
            "{} reported {} error(s): {:?}\n{}",
            tool.name(),
            report.errors,
            report.records,
            excerpt_of_report(log)
        ));
    }
    problems
}

/// The expectation as the tools run the case: no time limit of its own (the per-case limit replaces it: a tool slows
/// a program by orders of magnitude), and the grid, output checks and loader arguments of its `[sanitize]` table
/// where it has them.
fn expectation_under_tools(expectation: &Expectation) -> Expectation {
    let mut under_tools = expectation.clone();
    under_tools.max_seconds = None;
    if let Some(blocks) = expectation.sanitize.blocks {
        under_tools.blocks = blocks;
    }
    if let Some(patterns) = &expectation.sanitize.stderr_matches {
        under_tools.stderr_matches = patterns.clone();
    }
    if let Some(patterns) = &expectation.sanitize.stdout_matches {
        under_tools.stdout_matches = patterns.clone();
    }
    if let Some(lines) = expectation.sanitize.stdout_lines {
        under_tools.stdout_lines = Some(lines);
    }
    if let Some(args) = &expectation.sanitize.loader_args {
        under_tools.loader_args = args.clone();
    }
    if let Some(args) = &expectation.sanitize.args {
        under_tools.args = args.clone();
    }
    under_tools
}

/// What a device fault looks like in a memcheck report: the bad access or the trap, where it happened.
fn is_device_fault(record: &str) -> bool {
    [
        "Invalid __global__ ",
        "Invalid __local__ ",
        "Invalid __shared__ ",
        "Invalid __generic__ ",
        "Trace/breakpoint trap",
    ]
    .iter()
    .any(|start| record.starts_with(start))
}

/// The driver's error that follows a device fault, at the host's next call: the fault itself, seen from the host.
fn is_fault_aftermath(record: &str) -> bool {
    [
        "Program hit CUDA_ERROR_LAUNCH_FAILED",
        "Program hit CUDA_ERROR_ILLEGAL_ADDRESS",
        "Program hit CUDA_ERROR_ILLEGAL_INSTRUCTION",
    ]
    .iter()
    .any(|start| record.starts_with(start))
}

/// A compute-sanitizer report (`--log-file`): the first line of each record it printed, and the error count of its
/// summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub records: Vec<String>,
    pub errors: u64,
}

impl Report {
    /// Reads a report; a report without its summary line (the tool was killed, or crashed) is an error.
    pub fn parse(log: &str) -> Result<Self> {
        let mut records = Vec::new();
        let mut errors = None;
        for line in log.lines() {
            let Some(text) = line.strip_prefix("========= ") else { continue };
            // A record's further lines are indented; an empty text separates records.
            if text.is_empty() || text.starts_with(' ') {
                continue;
            }
            if let Some(summary) = text.strip_prefix("ERROR SUMMARY: ") {
                errors = Some(leading_number(summary)?);
            } else if let Some(summary) = text.strip_prefix("RACECHECK SUMMARY: ") {
                errors = Some(racecheck_count(summary)?);
            } else if !NOT_RECORDS.iter().any(|note| text.starts_with(note)) {
                records.push(text.to_owned());
            }
        }
        let errors = errors.context("compute-sanitizer wrote no summary: it was killed, or failed")?;
        Ok(Self { records, errors })
    }
}

/// Lines of a report that are notes, not records of errors.
const NOT_RECORDS: [&str; 3] = ["COMPUTE-SANITIZER", "Target application returned an error", "LEAK SUMMARY"];

fn leading_number(text: &str) -> Result<u64> {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().with_context(|| format!("a summary without its count: {text:?}"))
}

/// Racecheck's count: its errors and its warnings (`N hazards displayed (E errors, W warnings)`); the hazards between
/// lanes of one warp are warnings.
fn racecheck_count(summary: &str) -> Result<u64> {
    let within = summary
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(inside, _)| inside)
        .with_context(|| format!("a racecheck summary without its counts: {summary:?}"))?;
    let mut total = 0;
    for part in within.split(", ") {
        total += leading_number(part)?;
    }
    Ok(total)
}

/// The start of a report, for a failure's message.
fn excerpt_of_report(log: &str) -> String {
    const LINES: usize = 40;
    let lines: Vec<&str> = log.lines().collect();
    let shown = lines.len().min(LINES);
    let mut excerpt = lines[..shown].join("\n");
    if lines.len() > shown {
        excerpt.push_str(&format!("\n... ({} more lines)", lines.len() - shown));
    }
    excerpt
}

/// The sanitizer on this machine: `program` if given, else `compute-sanitizer` on `PATH` or in CUDA's usual place.
pub fn find_program(program: Option<&Path>) -> Result<PathBuf> {
    if let Some(program) = program {
        return Ok(program.to_owned());
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/local/cuda/bin")])
        .map(|dir| dir.join("compute-sanitizer"))
        .find(|candidate| candidate.is_file());
    on_path.context("compute-sanitizer is not on PATH nor in /usr/local/cuda/bin: install CUDA's toolkit, or name it with --sanitizer")
}

#[cfg(test)]
mod tests;
