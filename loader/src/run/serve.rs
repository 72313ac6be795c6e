//! The serve loop of a run: RPC served until the program ends, with the device asked now and then whether the
//! kernels finished or faulted, and the timeout and signals checked; how it waits while nothing happens; and what
//! it reports of the messages it gave up.

use std::time::{Duration, Instant};

use gpu_startup_protocol::abi::{self, Control, Kernel, PANIC_EXIT_CODE, ProgramEnd};

use super::{PANIC_GRACE, RunReport, panicked_threads, pending_signal};
use crate::backend::{Backend, Progress};
use crate::error::{LoaderError, Result};
use crate::server::{GiveUpReason, GivenUp, HostServer};
use crate::status::RunStatus;

/// Serves RPC until the program reports its end (in the control block, read before each pass), faults, runs past
/// `timeout`, panics and does not end within [`PANIC_GRACE`], or the loader is interrupted.
///
/// While messages come, the loop polls the ports flat out: a reply goes out as soon as a pass finds the message.
/// After [`SPIN_WINDOW`] without one it sleeps [`IDLE_SLEEP`] between passes, with the thread's timer slack at its
/// minimum ([`PreciseSleeps`]), so an idle program costs under a tenth of a core and the first message after a pause
/// waits at most about one sleep. It asks the device whether the kernels finished or faulted, and checks the timeout
/// and signals, every [`LOOK_UP_INTERVAL`] while spinning, every [`IDLE_LOOK_UP_INTERVAL`] while sleeping, and every
/// 256 busy passes.
pub(super) fn serve<B: Backend>(
    backend: &mut B,
    server: &mut HostServer,
    timeout: Option<Duration>,
    control: *const Control,
) -> Result<RunReport> {
    let deadline = timeout.map(|timeout| Instant::now() + timeout);
    // Set when a thread first reports a panic: threads that wait for a panicked one never end.
    let mut panic_deadline: Option<Instant> = None;
    // Set when the loop first sleeps: a run that never does (most short ones) makes no system call for it.
    let mut precise_sleeps: Option<PreciseSleeps> = None;
    let mut lost = LostMessages::default();
    let mut last_look = Instant::now();
    // When the ports went idle: `None` while the last pass found work.
    let mut idle_since: Option<Instant> = None;
    let mut busy_passes = 0u32;
    loop {
        // Read before the pass, so that the pass, which starts after the end was seen, counts as the first of the
        // drain below.
        let end = reported_end(backend, server, &mut lost, control)?;
        server.poll_watched(&mut || client_cannot_answer(backend, deadline))?;
        let worked = server.served_last_poll();
        let client_stopped = lost.collect(server)?;
        if let Some(end) = end {
            // Messages other threads posted before the end still count: serve until a pass finds nothing.
            if worked || client_stopped {
                drain(backend, server, &mut lost)?;
            } else {
                server.flush()?;
            }
            // Once `_end` runs, `_start` is over and no thread waits for an answer: the kernels are only asked
            // whether they are done, without a pass over the ports between the questions.
            let threads_may_send = progress(control) != abi::progress::END_STARTED;
            let finished = settle(backend, server, &mut lost, threads_may_send)?;
            return Ok(lost.into_report(end_status(end), finished));
        }
        if client_stopped {
            // A client stopped answering in the middle of a message: find out why now.
        } else if worked {
            idle_since = None;
            busy_passes += 1;
            // A program that never stops printing must still be stoppable by `--timeout` and signals, and a fault
            // still noticed: look up from the ports now and then even while they are busy.
            if !busy_passes.is_multiple_of(256) {
                continue;
            }
        } else {
            busy_passes = 0;
            let now = Instant::now();
            if now.duration_since(*idle_since.get_or_insert(now)) < SPIN_WINDOW {
                // Querying the device costs more than a pass over idle ports, and a message that arrives meanwhile
                // waits for it: look up only every `LOOK_UP_INTERVAL`.
                if now.duration_since(last_look) < LOOK_UP_INTERVAL {
                    std::hint::spin_loop();
                    continue;
                }
            } else {
                precise_sleeps.get_or_insert_with(PreciseSleeps::new);
                std::thread::sleep(IDLE_SLEEP);
                if last_look.elapsed() < IDLE_LOOK_UP_INTERVAL {
                    continue;
                }
            }
        }
        last_look = Instant::now();
        match backend.poll()? {
            Progress::Running => {}
            Progress::Finished => {
                drain(backend, server, &mut lost)?;
                // The end may have been written since this pass read it; the kernels' end makes it visible now.
                return match reported_end(backend, server, &mut lost, control)? {
                    Some(end) => Ok(lost.into_report(end_status(end), true)),
                    // A destructor or `atexit` handler panicked in `_end`: its thread ended before the exit.
                    None if panicked_threads(control) > 0 => {
                        Ok(lost.into_report(RunStatus::Exited(PANIC_EXIT_CODE.into()), true))
                    }
                    None => Err(LoaderError::NoExitReported),
                };
            }
            Progress::Faulted(message) => {
                drain(backend, server, &mut lost)?;
                let status = RunStatus::Faulted { kernel: faulted_kernel(progress(control)), message };
                return Ok(lost.into_report(status, false));
            }
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            drain(backend, server, &mut lost)?;
            return Ok(lost.into_report(RunStatus::TimedOut, false));
        }
        if let Some(signal) = pending_signal() {
            drain(backend, server, &mut lost)?;
            return Ok(lost.into_report(RunStatus::Interrupted(signal), false));
        }
        if panic_deadline.is_none() && panicked_threads(control) > 0 {
            panic_deadline = Some(Instant::now() + PANIC_GRACE);
        }
        if panic_deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            drain(backend, server, &mut lost)?;
            return Ok(lost.into_report(RunStatus::Exited(PANIC_EXIT_CODE.into()), false));
        }
    }
}

/// The end the program reported in its control block, if it did. A word the startup never writes (the program
/// wrote over the block) ends the run with an error, after the output already sent.
fn reported_end<B: Backend>(
    backend: &mut B,
    server: &mut HostServer,
    lost: &mut LostMessages,
    control: *const Control,
) -> Result<Option<ProgramEnd>> {
    // SAFETY: the control block is host-mapped memory the backend keeps alive, 8-byte aligned; the device writes the
    // word with one atomic store.
    let word = unsafe { std::sync::atomic::AtomicU64::from_ptr(std::ptr::addr_of!((*control).end).cast_mut()) }
        .load(std::sync::atomic::Ordering::Relaxed);
    match ProgramEnd::from_word(word) {
        Ok(end) => Ok(end),
        Err(word) => {
            drain(backend, server, lost)?;
            Err(LoaderError::CorruptEnd { word })
        }
    }
}

/// The startup's latest progress marker.
fn progress(control: *const Control) -> u32 {
    // SAFETY: the control block is host-mapped memory the backend keeps alive; the kernels only write it.
    unsafe { std::ptr::addr_of!((*control).progress).read_volatile() }
}

fn end_status(end: ProgramEnd) -> RunStatus {
    match end {
        ProgramEnd::Exit(status) => RunStatus::Exited(status.into()),
        ProgramEnd::Abort => RunStatus::Aborted,
    }
}

/// How often a serve loop that spins on idle ports asks the device whether the kernels finished or faulted, and
/// checks the timeout and signals: rarely enough that the queries take a small part of the loop, often enough that
/// nobody waits on them.
const LOOK_UP_INTERVAL: Duration = Duration::from_micros(20);

/// How long the serve loop polls idle ports flat out after the last message before it starts sleeping between
/// passes: a program that messages often (a reply, then the next request within microseconds) is served without a
/// sleep's delay, and the first message of a run usually comes within it.
const SPIN_WINDOW: Duration = Duration::from_micros(200);

/// The serve loop's sleep between passes over idle ports: the most a message that ends a pause waits for the host
/// to look (plus the wake-up, a few microseconds with [`PreciseSleeps`]). Each wake-up costs a pass over the ports
/// and a system call: under a tenth of a core at this rate, where a system call costs several microseconds (a virtual machine).
const IDLE_SLEEP: Duration = Duration::from_micros(70);

/// How often a sleeping serve loop asks the device about the kernels and checks the timeout and signals: each query
/// costs more than a pass over the ports, and nothing needs an answer sooner.
const IDLE_LOOK_UP_INTERVAL: Duration = Duration::from_millis(1);

/// Sets the calling thread's timer slack to its minimum for as long as it lives, and back after. Linux lets a
/// thread's sleep run over by its timer slack, 50 µs by default, which would double the idle serve loop's wake-up
/// latency; with a slack of 1 ns a sleep takes a few microseconds more than asked.
struct PreciseSleeps {
    previous: Option<libc::c_ulong>,
}

impl PreciseSleeps {
    fn new() -> Self {
        // SAFETY: PR_GET_TIMERSLACK takes no pointer and only reads the calling thread's slack.
        let previous = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
        // SAFETY: PR_SET_TIMERSLACK takes the slack by value and changes only the calling thread's timers.
        let set = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        // A slack that cannot be read or set leaves sleeps as precise as they were: slower to wake, still correct.
        Self { previous: (previous > 0 && set == 0).then_some(previous as libc::c_ulong) }
    }
}

impl Drop for PreciseSleeps {
    fn drop(&mut self) {
        if let Some(previous) = self.previous {
            // SAFETY: as in `new`, on the same thread (the guard lives in one stack frame of the serve loop).
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, previous) };
        }
    }
}

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
        server.flush_complete_messages()?;
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
        if !matches!(status, RunStatus::TimedOut | RunStatus::Interrupted(_) | RunStatus::Faulted { .. }) {
            for message in &self.unreported {
                eprintln!("gpu-loader: {message}");
            }
        }
        RunReport {
            status,
            finished,
            messages_given_up: self.count,
            panicked_threads: 0,
            constructors_ran: true,
            panic_message: None,
        }
    }
}

/// After the program reported its end: whether the kernels finish within a short grace period (they do when `_end`
/// reported; threads still running after an `exit` elsewhere may not), serving RPC meanwhile where `threads_may_send`.
fn settle<B: Backend>(
    backend: &mut B,
    server: &mut HostServer,
    lost: &mut LostMessages,
    threads_may_send: bool,
) -> Result<bool> {
    const GRACE: Duration = Duration::from_millis(20);
    let deadline = Instant::now() + GRACE;
    loop {
        match backend.poll()? {
            Progress::Finished => return Ok(true),
            Progress::Faulted(_) => return Ok(false),
            Progress::Running if Instant::now() >= deadline => return Ok(false),
            Progress::Running if threads_may_send => drain(backend, server, lost)?,
            Progress::Running => std::hint::spin_loop(),
        }
    }
}

/// Serves until a pass over the ports finds no work, so that messages sent before the end still arrive; but for at
/// most [`DRAIN_LIMIT`]: threads that go on printing after another thread's `exit` would otherwise keep the loader
/// serving forever.
fn drain<B: Backend>(backend: &mut B, server: &mut HostServer, lost: &mut LostMessages) -> Result<()> {
    let deadline = Instant::now() + DRAIN_LIMIT;
    loop {
        server.poll_watched(&mut || client_cannot_answer(backend, Some(deadline)))?;
        lost.collect(server)?;
        if !server.served_last_poll() || Instant::now() >= deadline {
            break;
        }
    }
    Ok(server.flush()?)
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
