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
    wrapped_loader: Option<&std::ffi::OsStr>,
) -> Result<std::process::Output> {
    use std::os::unix::process::CommandExt;
    let started = Instant::now();
    let program = Path::new(command.get_program()).display().to_string();
    let own_group = wrapped_loader.is_some();
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
    // When the loader started: at once where it runs itself; a wrapped one when it first shows among the wrapper's
    // descendants.
    let mut loader_started = (!own_group).then_some(started);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if let Some(Interrupt { after, signal, after_output }) = interrupt {
            // The case's signal is meant for the loader the wrapper started, and only for it: a wrapper, or a process
            // of its own between it and the loader, may end by it (compute-sanitizer does, with no report, leaving
            // behind a loader that runs on). So the signal waits for the loader, and its delay counts from then.
            let loaders = wrapped_loader.map(|name| descendants_running(pid, name)).unwrap_or_default();
            if loader_started.is_none() && !loaders.is_empty() {
                loader_started = Some(Instant::now());
            }
            let counted_from = if after_output { first_output.get().copied() } else { loader_started };
            if loader_started.is_some() && counted_from.is_some_and(|at| at.elapsed() >= after) {
                // A wrapped loader that already ended gets nothing: the wrapper is about to end too.
                let recipients = if own_group { &loaders[..] } else { std::slice::from_ref(&target) };
                for &process in recipients {
                    // SAFETY: sends a signal to our own child or a descendant of it, found just now under the child,
                    // which has not been reaped (try_wait saw it running): the ids are of processes of the case.
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

/// The descendants of `root` whose executable's file name is `program`, from `/proc`; none where it cannot be read.
/// A process that forked but has not yet run `program` is not one of them.
fn descendants_running(root: libc::pid_t, program: &std::ffi::OsStr) -> Vec<libc::pid_t> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let parents: Vec<(libc::pid_t, libc::pid_t)> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(|pid| {
            // `/proc/PID/stat`: the pid, the command in parentheses (which may hold any byte), the state, the parent.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?))
        })
        .collect();
    let mut descendants = vec![root];
    let mut next = 0;
    while let Some(&parent) = descendants.get(next) {
        descendants.extend(parents.iter().filter(|&&(_, of)| of == parent).map(|&(pid, _)| pid));
        next += 1;
    }
    descendants.retain(|&pid| {
        pid != root && std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe.file_name() == Some(program))
    });
    descendants
}

#[cfg(test)]
mod tests {
    /// A process's descendants running a program are found through `/proc`, a grandchild too, and nothing else is:
    /// not the process itself, though it runs a program of that name too.
    #[test]
    fn descendants_are_found_by_their_program() {
        let mut child = std::process::Command::new("sh").args(["-c", "sleep 30 & wait"]).spawn().unwrap();
        let root = child.id() as libc::pid_t;
        let sleep = std::ffi::OsStr::new("sleep");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut found = Vec::new();
        while found.is_empty() && std::time::Instant::now() < deadline {
            found = super::descendants_running(root, sleep);
        }
        let shell = std::fs::read_link(format!("/proc/{root}/exe")).unwrap();
        let shells = super::descendants_running(root, shell.file_name().unwrap());
        for &pid in &found {
            // SAFETY: the sleep is the shell's child, which the shell, still running, has not reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(shells.is_empty(), "{shells:?}");
    }

    /// A wrapped case whose wrapper ends while a process it started holds the output open ends at the limit, its group
    /// killed, rather than waiting for that process.
    #[test]
    fn a_wrapped_case_left_holding_its_output_ends_at_the_limit() {
        let mut command = std::process::Command::new("sh");
        command.args(["-c", "sleep 60 & echo started"]);
        let started = std::time::Instant::now();
        let error =
            super::run_with_limit(command, std::time::Duration::from_secs(1), None, None, Some("sleep".as_ref()))
                .unwrap_err();
        assert!(error.to_string().contains("held its output open"), "{error}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
    }

    /// A wrapped case's signal goes to the loader its wrapper starts, once it started, and never to the wrapper or to
    /// a process between them.
    #[test]
    fn a_wrapped_case_signals_its_loader_once_the_wrapper_started_it() {
        // The "loader": a shell under a name of its own, which ends with 7 on SIGINT.
        let dir = std::env::temp_dir().join(format!("gpu-suite-wrapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let loader = dir.join("fake-loader");
        std::fs::copy(std::fs::canonicalize("/bin/sh").unwrap(), &loader).unwrap();
        let mut command = std::process::Command::new("bash");
        // The wrapper starts a shell of its own only after longer than the signal's delay (a loop of bash's, about a
        // second), which starts the loader and reports how it ended; a SIGINT to the wrapper would end it with
        // nothing printed, one to the shell between with 130.
        let script = format!(
            "for ((i = 0; i < 1000000; i++)); do :; done; \
             sh -c \"'{}' -c 'trap \\\"exit 7\\\" INT; while :; do sleep 0.01; done'; exit \\$?\"; echo $?",
            loader.display()
        );
        command.args(["-c", &script]);
        let interrupt = Some(super::Interrupt {
            after: std::time::Duration::from_millis(100),
            signal: libc::SIGINT,
            after_output: false,
        });
        let name = std::ffi::OsStr::new("fake-loader");
        let output = super::run_with_limit(command, std::time::Duration::from_secs(20), interrupt, None, Some(name));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(String::from_utf8_lossy(&output.unwrap().stdout), "7\n");
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
        let output = super::run_with_limit(command, std::time::Duration::from_secs(20), interrupt, None, None).unwrap();
        assert_eq!((String::from_utf8_lossy(&output.stdout).as_ref(), output.status.code()), ("ready\n", Some(7)));
    }
}
