//! The runner's side of a worker process ([`worker`](super::worker)): starting it, sending it tests and reading
//! what it reports, with a guard in case it stops answering.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::pool::Worker;
use super::protocol::{Report, RunRequest, RunResult};

/// How long a worker may take to load the image (the JIT link of a large test binary takes seconds).
const SETUP_LIMIT: Duration = Duration::from_secs(300);

/// How to start workers: `PROGRAM ARGS... --device N IMAGE`.
#[derive(Clone, Debug)]
pub struct WorkerCommand {
    pub program: PathBuf,
    /// `--test-worker` and the loader options every worker gets (`--rpc-ports`, `--stack-size`, ...).
    pub args: Vec<OsString>,
    pub image: PathBuf,
    /// How long past a test's own timeout (which the worker enforces) the runner waits for its report before it
    /// gives the worker up.
    pub answer_slack: Duration,
}

/// A running worker process.
pub struct ProcessWorker {
    child: Child,
    /// `None` once closed, which tells the worker to exit.
    stdin: Option<ChildStdin>,
    reports: Receiver<io::Result<Report>>,
    device: usize,
    answer_slack: Duration,
}

impl ProcessWorker {
    /// Starts a worker on GPU `device` and waits until it loaded the image; returns it with the number of GPUs its
    /// platform has.
    pub fn start(command: &WorkerCommand, device: usize) -> Result<(Self, u32), String> {
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .arg("--device")
            .arg(device.to_string())
            .arg(&command.image)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", command.program.display()))?;
        let (stdin, mut stdout) = (child.stdin.take(), child.stdout.take().expect("piped"));
        let (sender, reports) = mpsc::channel();
        // A thread reads the reports, so that the runner can wait for them with a limit.
        std::thread::spawn(move || {
            loop {
                let report = Report::read(&mut stdout).transpose();
                let Some(report) = report else { break };
                let failed = report.is_err();
                if sender.send(report).is_err() || failed {
                    break;
                }
            }
        });
        let mut worker = Self { child, stdin, reports, device, answer_slack: command.answer_slack };
        match worker.next_report(SETUP_LIMIT)? {
            Report::Ready { gpus } => Ok((worker, gpus)),
            Report::SetupFailed(message) => Err(message),
            other => Err(format!("the worker sent {other:?} before it was ready")),
        }
    }

    /// The next report, or why there is none: the worker exited, sent something corrupt, or was silent for `limit`
    /// (then it is killed).
    fn next_report(&mut self, limit: Duration) -> Result<Report, String> {
        match self.reports.recv_timeout(limit) {
            Ok(Ok(report)) => Ok(report),
            Ok(Err(error)) => Err(error.to_string()),
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                Err(format!("the test worker on GPU {} did not answer within {limit:?} and was killed", self.device))
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().map_or_else(|error| error.to_string(), |status| status.to_string());
                Err(format!("the test worker on GPU {} exited ({status})", self.device))
            }
        }
    }
}

impl Worker for ProcessWorker {
    fn run(&mut self, request: &RunRequest, output: &mut dyn FnMut(bool, &[u8])) -> Result<RunResult, String> {
        let stdin = self.stdin.as_mut().ok_or("the test worker's input is closed")?;
        request
            .write(stdin)
            .map_err(|error| format!("cannot reach the test worker on GPU {}: {error}", self.device))?;
        let deadline = Instant::now() + request.timeout + self.answer_slack;
        loop {
            match self.next_report(deadline.saturating_duration_since(Instant::now()))? {
                Report::Output { stderr, bytes } => output(stderr, &bytes),
                Report::Finished(result) => return Ok(result),
                other => return Err(format!("the test worker sent {other:?} while a test ran")),
            }
        }
    }
}

impl Drop for ProcessWorker {
    fn drop(&mut self) {
        // Closing its input ends a worker that waits for a test; one that ended itself has exited or is exiting.
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::super::protocol::Ending;
    use super::*;

    /// A worker played by `sh -c SCRIPT` (the device and image arguments become the script's `$0`, `$1`, ...), which
    /// writes frames with `printf`.
    fn shell(script: &str) -> WorkerCommand {
        WorkerCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            image: "image.ptx".into(),
            answer_slack: Duration::from_millis(300),
        }
    }

    /// `Ready { gpus: 2 }`.
    const READY: &str = r"printf '\002\004\000\000\000\002\000\000\000'";

    fn request() -> RunRequest {
        RunRequest { entry_symbol: "entry".into(), threads: [1; 3], blocks: [1; 3], timeout: Duration::from_millis(10) }
    }

    #[test]
    fn a_worker_reports_ready_then_output_and_its_tests_ending() {
        // Output `hi` on stderr, then `Finished`: exited with 0, 3 panicked threads, finished, the worker goes on, the
        // constructors ran, no message given up, no panic message.
        let script = format!(
            r"{READY}; sleep 0.05; printf '\005\002\000\000\000hi'; \
              printf '\006\025\000\000\000\000\001\000\001'; printf '\000\000\000\000\000\000\000\000'; \
              printf '\003\000\000\000\000\000\000\000\000'; cat >/dev/null"
        );
        let (mut worker, gpus) = ProcessWorker::start(&shell(&script), 0).unwrap();
        assert_eq!(gpus, 2);
        let mut output = Vec::new();
        let result = worker.run(&request(), &mut |stderr, bytes| output.push((stderr, bytes.to_vec()))).unwrap();
        assert_eq!(output, [(true, b"hi".to_vec())]);
        assert_eq!(
            result,
            RunResult {
                ending: Ending::Exited(0),
                panicked_threads: 3,
                finished: true,
                worker_ends: false,
                constructors_ran: true,
                messages_given_up: 0,
                panic_message: None,
            }
        );
    }

    #[test]
    fn a_worker_that_cannot_start_says_why() {
        let error = ProcessWorker::start(&shell(r"printf '\003\006\000\000\000no GPU'"), 0).err().unwrap();
        assert_eq!(error, "no GPU");
        let error = ProcessWorker::start(&shell("exit 3"), 1).err().unwrap();
        assert_eq!(error, "the test worker on GPU 1 exited (exit status: 3)");
        let error = ProcessWorker::start(&shell(r"printf '\011\000\000\000\000'"), 0).err().unwrap();
        assert!(error.starts_with("corrupt message between the test runner and a worker"), "{error}");
        let missing = WorkerCommand { program: "/nonexistent/gpu-loader".into(), ..shell("") };
        assert!(ProcessWorker::start(&missing, 0).err().unwrap().starts_with("cannot start /nonexistent/gpu-loader"));
    }

    #[test]
    fn a_worker_that_dies_or_goes_silent_during_a_test_is_given_up() {
        let (mut worker, _) = ProcessWorker::start(&shell(&format!("{READY}; sleep 0.05; exit 7")), 0).unwrap();
        let error = worker.run(&request(), &mut |_, _| {}).unwrap_err();
        assert_eq!(error, "the test worker on GPU 0 exited (exit status: 7)");
        let (mut worker, _) = ProcessWorker::start(&shell(&format!("{READY}; sleep 30")), 0).unwrap();
        let started = Instant::now();
        let error = worker.run(&request(), &mut |_, _| {}).unwrap_err();
        assert!(error.contains("did not answer within"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    }
}
