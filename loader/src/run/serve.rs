//! The serve loop of a run: RPC served until the program ends, with the device asked now and then whether the
//! kernels finished or faulted, and the timeout and signals checked; how it waits while nothing happens; and what
//! it reports of the messages it gave up.

use std::time::{Duration, Instant};

use startup_common::abi::{self, Control};

use super::{Backend, Kernel, Progress, RunOptions, RunReport, pending_signal};
use crate::error::{LoaderError, Result};
use crate::server::{GiveUpReason, GivenUp, HostServer, Outcome};
use crate::status::RunStatus;

/// Serves RPC until the program reports its end, faults, times out or the loader is interrupted.
pub(super) fn serve<B: Backend>(
    backend: &mut B,
    server: &mut HostServer,
    options: &RunOptions,
    control: *const Control,
) -> Result<RunReport> {
    let deadline = options.timeout.map(|timeout| Instant::now() + timeout);
    let mut lost = LostMessages::default();
    let mut last_look = Instant::now();
    let mut busy_passes = 0u32;
    loop {
        let outcome = server
            .poll_watched(&mut || client_cannot_answer(backend, deadline))
            .map_err(|error| LoaderError::Rpc(error.to_string()))?;
        let worked = server.served_last_poll();
        let client_stopped = lost.collect(server)?;
        if let Some(outcome) = outcome {
            // Messages other threads posted before the exit still count: serve until a pass finds nothing.
            drain(backend, server, &mut lost)?;
            let status = match outcome {
                Outcome::Exit(code) => RunStatus::Exited(code),
                Outcome::Abort => RunStatus::Aborted,
            };
            let finished = settle(backend, server, &mut lost)?;
            return Ok(lost.into_report(status, finished));
        }
        if client_stopped {
            // A client stopped answering in the middle of a message: find out why now.
        } else if worked {
            busy_passes += 1;
            // A program that never stops printing must still be stoppable by `--timeout` and signals, and a fault
            // still noticed: look up from the ports now and then even while they are busy.
            if !busy_passes.is_multiple_of(256) {
                continue;
            }
        } else {
            busy_passes = 0;
            // Querying the device costs more than a pass over idle ports, and a message that arrives meanwhile
            // waits for it: look up only every `LOOK_UP_INTERVAL`.
            if last_look.elapsed() < LOOK_UP_INTERVAL {
                std::hint::spin_loop();
                continue;
            }
        }
        last_look = Instant::now();
        match backend.poll()? {
            Progress::Running => {}
            Progress::Finished => {
                drain(backend, server, &mut lost)?;
                return match server.outcome() {
                    Some(Outcome::Exit(code)) => Ok(lost.into_report(RunStatus::Exited(code), true)),
                    Some(Outcome::Abort) => Ok(lost.into_report(RunStatus::Aborted, true)),
                    None => Err(LoaderError::NoExitReported),
                };
            }
            Progress::Faulted(message) => {
                drain(backend, server, &mut lost)?;
                // SAFETY: the control block is host-mapped memory the backend keeps alive; the kernels only write it.
                let progress = unsafe { std::ptr::addr_of!((*control).progress).read_volatile() };
                return Err(LoaderError::DeviceFault { kernel: faulted_kernel(progress).name(), message });
            }
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            drain(backend, server, &mut lost)?;
            eprintln!(
                "gpu-loader: the program ran past its {:?} timeout and was stopped",
                options.timeout.unwrap_or_default()
            );
            return Ok(lost.into_report(RunStatus::TimedOut, false));
        }
        if let Some(signal) = pending_signal() {
            drain(backend, server, &mut lost)?;
            return Ok(lost.into_report(RunStatus::Interrupted(signal), false));
        }
    }
}

/// How often an idle serve loop asks the device whether the kernels finished or faulted, and checks the timeout and
/// signals: rarely enough that the queries take a small part of the loop, often enough that nobody waits on them.
const LOOK_UP_INTERVAL: Duration = Duration::from_micros(20);

/// The RPC messages the server gave up during a run. One that stalled is reported on stderr at once, as the run goes
/// on without it; one whose client stopped is reported when the run ends, unless it ends with a fault, a timeout or a
/// signal, whose own line explains it.
#[derive(Default)]
struct LostMessages {
    count: usize,
    unreported: Vec<GivenUp>,
}

impl LostMessages {
    /// Takes what the server gave up since the last call. Returns whether a client stopped in the middle of a
    /// message, which the loop should look into at once.
    fn collect(&mut self, server: &mut HostServer) -> Result<bool> {
        let given_up = server.take_given_up();
        if given_up.is_empty() {
            return Ok(false);
        }
        server.flush_complete_messages().map_err(|error| LoaderError::Rpc(error.to_string()))?;
        let mut client_stopped = false;
        for message in given_up {
            self.count += 1;
            match message.why {
                GiveUpReason::Stalled(_) => eprintln!("gpu-loader: {message}"),
                GiveUpReason::ClientGone => {
                    client_stopped = true;
                    self.unreported.push(message);
                }
            }
        }
        Ok(client_stopped)
    }

    /// The report of a run that ended with `status`: messages not yet reported are now, when nothing else explains
    /// them.
    fn into_report(self, status: RunStatus, finished: bool) -> RunReport {
        if !matches!(status, RunStatus::TimedOut | RunStatus::Interrupted(_)) {
            for message in &self.unreported {
                eprintln!("gpu-loader: {message}");
            }
        }
        RunReport { status, finished, messages_given_up: self.count }
    }
}

/// After the program reported its end: whether the kernels finish within a short grace period (they do when `_end`
/// reported; threads still running after an `exit` elsewhere may not), serving RPC meanwhile.
fn settle<B: Backend>(backend: &mut B, server: &mut HostServer, lost: &mut LostMessages) -> Result<bool> {
    const GRACE: Duration = Duration::from_millis(20);
    let deadline = Instant::now() + GRACE;
    loop {
        match backend.poll()? {
            Progress::Finished => return Ok(true),
            Progress::Faulted(_) => return Ok(false),
            Progress::Running if Instant::now() >= deadline => return Ok(false),
            Progress::Running => drain(backend, server, lost)?,
        }
    }
}

/// Serves until a pass over the ports finds no work, so that messages sent before the end still arrive; but for at
/// most [`DRAIN_LIMIT`]: threads that go on printing after another thread's `exit` would otherwise keep the loader
/// serving forever.
fn drain<B: Backend>(backend: &mut B, server: &mut HostServer, lost: &mut LostMessages) -> Result<()> {
    let deadline = Instant::now() + DRAIN_LIMIT;
    loop {
        server
            .poll_watched(&mut || client_cannot_answer(backend, Some(deadline)))
            .map_err(|error| LoaderError::Rpc(error.to_string()))?;
        lost.collect(server)?;
        if !server.served_last_poll() || Instant::now() >= deadline {
            break;
        }
    }
    server.flush().map_err(|error| LoaderError::Rpc(error.to_string()))
}

/// Whether a client that keeps the server waiting in the middle of a message may never answer, so that the server
/// should give up on it: its kernels are no longer running (a fault ends them all), `deadline` has passed, or the
/// loader was interrupted. The serve loop then finds out which and ends the run.
fn client_cannot_answer<B: Backend>(backend: &mut B, deadline: Option<Instant>) -> bool {
    !matches!(backend.poll(), Ok(Progress::Running))
        || deadline.is_some_and(|deadline| Instant::now() >= deadline)
        || pending_signal().is_some()
}

/// How long the loader goes on serving after the program's end, for messages already on their way.
const DRAIN_LIMIT: Duration = Duration::from_millis(100);

/// The kernel that was running when the device faulted, from the startup's progress markers.
pub(super) fn faulted_kernel(progress: u32) -> Kernel {
    match progress {
        abi::progress::NOT_STARTED => Kernel::Begin,
        abi::progress::BEGIN_DONE => Kernel::Start,
        _ => Kernel::End,
    }
}
