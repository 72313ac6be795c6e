//! A worker: `gpu-loader --test-worker [--device N ...] IMAGE`, started by the test runner, one per GPU. It loads the
//! image once into a context on its GPU, then runs the tests the runner asks for, one at a time, each as its own
//! `_begin`/`_start`/`_end` sequence on the same module, sending the test's output and its ending back
//! ([`protocol`](super::protocol)). After a run that may have left the context unusable or kernels running (a
//! fault, a timeout, a panic whose grid did not end, a loader error) it exits: the driver tears the context down with
//! the process, and the runner starts a new worker for the next test.

use std::collections::HashMap;
use std::io;
use std::time::Instant;

use gpu_startup_protocol::abi::LaunchParams;

use super::protocol::{Ending, OutputFrames, Report, RunRequest, RunResult};
use crate::args::ArgBlock;
use crate::backend::Backend;
use crate::error::{LoaderError, Result};
use crate::image::Image;
use crate::run::{RunOptions, Session};
use crate::status::RunStatus;

/// Runs the worker to the end; returns its exit code (0 once the runner closes the stream, 1 after an error).
pub fn serve(options: &RunOptions) -> i32 {
    match start(options) {
        Ok(()) => 0,
        Err(error) => {
            let _ = Report::SetupFailed(error.to_string()).write(&mut io::stdout().lock());
            1
        }
    }
}

fn start(options: &RunOptions) -> Result<()> {
    let image = Image::read(&options.image)?;
    image.check_startup_abi()?;
    let constructors = crate::ctors::ConstructorTable::of(&image)?;
    let arguments = ArgBlock::new(&[options.image.clone().into_os_string()], &options.env)?;
    let backend = crate::platform::open_backend(&image, &constructors, &options.device_options())?;
    let gpus = backend.gpu_count()?;
    run_tests(backend, gpus, options, &arguments)
}

fn run_tests<B: Backend>(backend: B, gpus: u32, options: &RunOptions, arguments: &ArgBlock) -> Result<()> {
    let mut session = Session::new(backend, options, arguments)?
        .with_output(Box::new(OutputFrames { stderr: false }), Box::new(OutputFrames { stderr: true }));
    let reply_failed =
        |error: io::Error| LoaderError::Driver { api: "writing to the test runner", message: error.to_string() };
    Report::Ready { gpus }.write(&mut io::stdout().lock()).map_err(reply_failed)?;
    let mut entries = HashMap::new();
    let mut input = io::stdin().lock();
    let read_failed =
        |error: io::Error| LoaderError::Driver { api: "reading from the test runner", message: error.to_string() };
    while let Some(request) = RunRequest::read(&mut input).map_err(read_failed)? {
        let result = run_one(&mut session, &mut entries, &request);
        Report::Finished(result.clone()).write(&mut io::stdout().lock()).map_err(reply_failed)?;
        if result.worker_ends {
            // Kernels may still run, or the context is broken: tearing it down here could wait for them for ever.
            crate::run::exit_at_once(0);
        }
    }
    // The runner is done: the process exit releases the GPU faster than tearing everything down first.
    std::mem::forget(session);
    Ok(())
}

/// Runs one test; any error becomes the test's ending.
fn run_one<B: Backend>(
    session: &mut Session<B>,
    entries: &mut HashMap<String, u64>,
    request: &RunRequest,
) -> RunResult {
    let launch = LaunchParams { threads: request.threads, blocks: request.blocks };
    // Refused before anything is launched: the worker goes on.
    let checked = crate::launch::validate(&launch).and_then(|()| session.backend().check_launch(&launch));
    let entry = checked.and_then(|()| match entries.get(&request.entry_symbol) {
        Some(&address) => Ok(address),
        None => {
            let address = session.backend().global_address(&request.entry_symbol)?;
            entries.insert(request.entry_symbol.clone(), address);
            Ok(address)
        }
    });
    let entry = match entry {
        Ok(entry) => entry,
        Err(error) => {
            return RunResult {
                ending: Ending::Error(error.to_string()),
                panicked_threads: 0,
                finished: true,
                worker_ends: false,
                constructors_ran: false,
                messages_given_up: 0,
                panic_message: None,
            };
        }
    };
    let started = Instant::now();
    match session.run_test(&launch, entry, Some(request.timeout)) {
        Ok(report) => {
            let ending = match report.status {
                RunStatus::Exited(code) => Ending::Exited(code),
                RunStatus::Aborted => Ending::Aborted,
                RunStatus::TimedOut => Ending::TimedOut,
                RunStatus::Interrupted(signal) => {
                    Ending::Error(format!("interrupted by signal {signal} after {:.1?}", started.elapsed()))
                }
                // A fault names its kernel; the context is lost with it.
                ref fault @ RunStatus::Faulted { .. } => return context_lost(Ending::Fault(fault.to_string())),
            };
            let messages_given_up = u32::try_from(report.messages_given_up).unwrap_or(u32::MAX);
            RunResult {
                ending,
                panicked_threads: report.panicked_threads,
                finished: report.finished,
                // A message given up leaves its port retired and the device's side of it stuck: the next test
                // needs a fresh RPC region.
                worker_ends: !report.finished || messages_given_up > 0,
                constructors_ran: report.constructors_ran,
                messages_given_up,
                panic_message: report.panic_message,
            }
        }
        Err(error) => context_lost(Ending::Error(error.to_string())),
    }
}

/// A test that started and ended with `ending` (a fault, or the loader's failure around it), leaving a context that
/// the next test must not use: the test counts as having run, and the worker ends.
fn context_lost(ending: Ending) -> RunResult {
    RunResult {
        ending,
        panicked_threads: 0,
        finished: false,
        worker_ends: true,
        constructors_ran: true,
        messages_given_up: 0,
        panic_message: None,
    }
}
