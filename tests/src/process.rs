//! Running a case's process: in a working directory of its own, with a time limit, a signal at a set time, and (for
//! a wrapped loader) a process group of its own that the limit or the suite's own interruption kills whole.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Whether the suite received SIGINT or SIGTERM since [`stop_wrapped_cases_on_signals`]: the cases that run in
/// process groups of their own (which a terminal's Ctrl-C does not reach) are then killed.
pub fn interrupted() -> bool {
    SUITE_INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}

static SUITE_INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes SIGINT and SIGTERM set [`interrupted`] instead of ending the suite, so that the cases in process groups of
/// their own are killed rather than left running.
pub fn stop_wrapped_cases_on_signals() -> Result<()> {
    extern "C" fn note(_: libc::c_int) {
        SUITE_INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        if unsafe { libc::signal(signal, note as extern "C" fn(libc::c_int) as *const () as libc::sighandler_t) }
            == libc::SIG_ERR
        {
            bail!("cannot handle signal {signal}: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A case's working directory, removed with what the program left in it.
pub(crate) struct WorkDir(pub(crate) PathBuf);

impl WorkDir {
    pub(crate) fn new(case: &str) -> Result<Self> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name: String = case.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("gpu-suite-{}-{n}-{name}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A signal a case sends its loader: `signal`, `after` the loader started, or after the case's first output on stdout
/// when `after_output` (a program that prints before it waits is then signalled while it waits, however long a busy
/// machine takes to start it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Interrupt {
    pub after: Duration,
    pub signal: i32,
    pub after_output: bool,
}

pub(crate) fn run_with_limit(
    mut command: Command,
    limit: Duration,
    mut interrupt: Option<Interrupt>,
    stdin: Option<&str>,
    own_group: bool,
) -> Result<std::process::Output> {
    use std::os::unix::process::CommandExt;
    let started = Instant::now();
    let program = Path::new(command.get_program()).display().to_string();
    command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    if own_group {
        // A group of its own, whose id is the child's: signals and the kill at the limit reach every process in it.
        command.process_group(0);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {program}"))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let text = text.to_owned();
        // A loader that stops reading (or never starts) closes the pipe: the write fails and the thread ends.
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = pipe.write_all(text.as_bytes());
        });
    }
    let (stdout, stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    // When the first bytes came on stdout, for an interrupt that waits for them.
    let first_output = std::sync::Arc::new(std::sync::OnceLock::new());
    let read = |mut pipe: Box<dyn std::io::Read + Send>,
                first: Option<std::sync::Arc<std::sync::OnceLock<Instant>>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let mut chunk = [0; 4096];
            while let Ok(count @ 1..) = pipe.read(&mut chunk) {
                bytes.extend_from_slice(&chunk[..count]);
                if let Some(first) = &first {
                    first.get_or_init(Instant::now);
                }
            }
            bytes
        })
    };
    let (out_reader, err_reader) = (read(Box::new(stdout), Some(first_output.clone())), read(Box::new(stderr), None));
    let deadline = Instant::now() + limit;
    // The child, or its whole group: `kill` takes a group as its negated id.
    let pid = child.id() as libc::pid_t;
    let target = if own_group { -pid } else { pid };
    // When the loader started: at once where it runs itself; a wrapped one when the wrapper's child first shows.
    let mut loader_started = (!own_group).then_some(started);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if let Some(Interrupt { after, signal, after_output }) = interrupt {
            // A wrapper passes the signal on to the loader it started, where the case's signal is meant to land: a
            // wrapper that gets it itself may end by it (compute-sanitizer does, with no report, leaving behind a
            // loader that waits for it forever). So the signal waits for the loader, and its delay counts from then.
            let loaders = if own_group { children_of(pid) } else { Vec::new() };
            if loader_started.is_none() && !loaders.is_empty() {
                loader_started = Some(Instant::now());
            }
            let counted_from = if after_output { first_output.get().copied() } else { loader_started };
            if loader_started.is_some() && counted_from.is_some_and(|at| at.elapsed() >= after) {
                // A wrapped loader that already ended gets nothing: the wrapper is about to end too.
                let recipients = if own_group { &loaders[..] } else { std::slice::from_ref(&target) };
                for &process in recipients {
                    // SAFETY: sends a signal to our own child or a child of it: the child has not been reaped
                    // (try_wait saw it running), so its id cannot have been reused, and its children are its own.
                    unsafe { libc::kill(process, signal) };
                }
                interrupt = None;
            }
        }
        let stopped = own_group && interrupted();
        if Instant::now() >= deadline || stopped {
            // SAFETY: as above; SIGKILL ends the child, or every process of its group.
            unsafe { libc::kill(target, libc::SIGKILL) };
            let _ = child.wait();
            if stopped {
                bail!("the suite was interrupted: {program}'s process group was killed");
            }
            bail!("{program} did not finish within {limit:?} and was killed");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // A process the child left behind may hold its output open (a loader whose wrapper died): the readers end only
    // when it does, so they too wait no longer than the limit, and the group is killed then.
    while !(out_reader.is_finished() && err_reader.is_finished()) {
        if Instant::now() >= deadline {
            if own_group {
                // SAFETY: the group's id is the reaped child's, which the kernel does not hand out again while a
                // process of the group lives (one holds the pipes), so only the case's leftovers get the signal.
                unsafe { libc::kill(target, libc::SIGKILL) };
            }
            bail!("{program} ended, but a process it started still held its output open at the limit of {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(std::process::Output {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    })
}

/// The processes whose parent is `parent`, from `/proc`; none where it cannot be read.
fn children_of(parent: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|&pid| {
            // `/proc/PID/stat`: the pid, the command in parentheses (which may hold any byte), the state, the parent.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok()) == Some(parent)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// A process's children are found through `/proc`, and nothing else is.
    #[test]
    fn children_are_found_by_their_parent() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let found = super::children_of(std::process::id() as libc::pid_t);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(found.contains(&(child.id() as libc::pid_t)), "{found:?}");
        assert!(!found.contains(&(std::process::id() as libc::pid_t)));
    }

    /// A wrapped case whose wrapper ends while a process it started holds the output open ends at the limit, its group
    /// killed, rather than waiting for that process.
    #[test]
    fn a_wrapped_case_left_holding_its_output_ends_at_the_limit() {
        let mut command = std::process::Command::new("sh");
        command.args(["-c", "sleep 60 & echo started"]);
        let started = std::time::Instant::now();
        let error = super::run_with_limit(command, std::time::Duration::from_secs(1), None, None, true).unwrap_err();
        assert!(error.to_string().contains("held its output open"), "{error}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
    }

    /// A wrapped case's signal goes to the loader its wrapper starts, once it started, and never to the wrapper.
    #[test]
    fn a_wrapped_case_signals_its_loader_once_the_wrapper_started_it() {
        let mut command = std::process::Command::new("bash");
        // The wrapper starts its "loader" only after longer than the signal's delay without a child of its own (a
        // loop of bash's, about a second), and reports how the loader ended; a SIGINT to the wrapper would end it
        // with nothing printed.
        command.args([
            "-c",
            "for ((i = 0; i < 1000000; i++)); do :; done; sh -c 'trap \"exit 7\" INT; while :; do sleep 0.01; done'; echo $?",
        ]);
        let interrupt = Some(super::Interrupt {
            after: std::time::Duration::from_millis(100),
            signal: libc::SIGINT,
            after_output: false,
        });
        let output = super::run_with_limit(command, std::time::Duration::from_secs(20), interrupt, None, true).unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "7\n");
    }

    #[test]
    fn an_interrupt_after_output_waits_for_the_first_output_however_late() {
        // The program prints only after 0.4 s, then waits for the signal; one sent 0.1 s after the start would end
        // it before it printed (and before its trap), one counted from the output finds it waiting.
        let mut command = std::process::Command::new("sh");
        command.args(["-c", "sleep 0.4; trap 'exit 7' INT; echo ready; while :; do sleep 0.01; done"]);
        let interrupt = Some(super::Interrupt {
            after: std::time::Duration::from_millis(100),
            signal: libc::SIGINT,
            after_output: true,
        });
        let output =
            super::run_with_limit(command, std::time::Duration::from_secs(20), interrupt, None, false).unwrap();
        assert_eq!((String::from_utf8_lossy(&output.stdout).as_ref(), output.status.code()), ("ready\n", Some(7)));
    }
}
