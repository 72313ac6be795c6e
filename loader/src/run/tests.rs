//! The shared run path on a backend without a device: the program is a host thread with a real RPC client on the
//! session's region (or writing over it), so the serve loop, its give-up and idle paths and the exit codes are tested
//! as `gpu-loader` runs them.

use super::*;
use crate::backend::{Progress, ResourceUsage};
use crate::server::tests::{Capture, Scribbler, first_packet_of_a_write};
use crate::status::RunStatus;
use gpu_startup_protocol::abi::{self, ProgramEnd};
use gpu_startup_protocol::messages::Stream;
use gpu_startup_protocol::messages::WriteHead;
use gpu_startup_protocol::opcode;
use startup_common::gpu::HostThread;
use startup_common::libc::io as gpu_io;
use startup_common::rpc::Client;
use startup_common::rpc::testing::{self, TestOperations};
use startup_common::{Gpu, ThreadIds};
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;

mod heap;

/// What `_start` does on a [`StandIn`]: runs on a thread of its own with a client reset on the session's region,
/// and a scribbler for the region's words.
type Program = Box<dyn FnOnce(&'static Client<HostThread>, Scribbler) + Send>;

/// A backend without a device. Its `_start` runs a [`Program`] on a host thread; the kernels run while that thread
/// does, and then do what `then` says: finish, fault, or run on for ever (as a GPU thread waiting for an answer
/// that never comes would).
struct StandIn {
    region: Option<usize>,
    ports: u32,
    program: Option<Program>,
    running: Option<JoinHandle<()>>,
    then: Progress,
    torn_down: Arc<AtomicBool>,
    /// The device address of each copy to the device, in order.
    copied_to: Vec<u64>,
    /// The control block `_begin` was given, where the program reports its end.
    control: usize,
}

std::thread_local! {
    /// The session's control block, on the stand-in program's thread, as the runtime keeps it on the device.
    static CONTROL: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The program's `exit`, on a [`StandIn`]: reports the end in the session's control block, as the runtime does.
fn exit(status: i32) {
    report_end(ProgramEnd::Exit(status));
}

fn report_end(end: ProgramEnd) {
    // SAFETY: the session's control block, which the stand-in program's thread got from `_begin`'s argument and
    // which lives as long as the session.
    CONTROL.with(|control| unsafe { end.report(control.get() as *mut abi::Control) });
}

impl StandIn {
    fn new(options: &RunOptions, then: Progress, program: Program) -> Self {
        Self {
            region: None,
            ports: options.rpc_ports,
            program: Some(program),
            running: None,
            then,
            torn_down: Arc::default(),
            copied_to: Vec::new(),
            control: 0,
        }
    }
}

impl Backend for StandIn {
    fn gpu_count(&self) -> Result<u32> {
        Ok(1)
    }
    fn lane_size(&self) -> u32 {
        HostThread::LANE_SIZE
    }
    fn check_launch(&self, _: &LaunchParams) -> Result<()> {
        Ok(())
    }
    fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMapped> {
        let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: a non-zero size (every allocation the session makes has one); leaked, as the test ends.
        let host = unsafe { std::alloc::alloc_zeroed(layout) };
        self.region.get_or_insert(host as usize);
        Ok(HostMapped { host, device: host as u64, len })
    }
    fn alloc_device(&mut self, len: usize) -> Result<u64> {
        Ok(self.alloc_host_mapped(len.max(8))?.device)
    }
    fn copy_to_device(&mut self, address: u64, _: &[u8]) -> Result<()> {
        self.copied_to.push(address);
        Ok(())
    }
    fn launch(&mut self, kernel: Kernel, _: &LaunchParams, args: &[u8]) -> Result<()> {
        if kernel == Kernel::Begin {
            assert_eq!(args.len(), size_of::<BeginArgs>());
            // SAFETY: `_begin`'s argument is a `BeginArgs`, as many bytes as checked; read unaligned from bytes.
            let begin = unsafe { args.as_ptr().cast::<BeginArgs>().read_unaligned() };
            self.control = begin.control as usize;
        }
        if kernel == Kernel::Start {
            // The last run's program has ended (a session runs one program at a time).
            if let Some(thread) = self.running.take() {
                thread.join().unwrap();
            }
            let (region, ports, control) = (self.region.unwrap(), self.ports, self.control);
            let program = self.program.take().expect("one run");
            self.running = Some(std::thread::spawn(move || {
                CONTROL.with(|cell| cell.set(control));
                let client = Box::leak(Box::new(Client::<HostThread>::new()));
                // SAFETY: the first allocation is the session's zeroed RPC region, for `ports` ports of one lane,
                // and it is never freed.
                unsafe { client.reset(region as *mut c_void, ports) };
                program(client, Scribbler::new(region as *mut c_void, region::Layout::new(ports, 1)));
            }));
        }
        Ok(())
    }
    fn poll(&mut self) -> Result<Progress> {
        Ok(match &self.running {
            Some(thread) if !thread.is_finished() => Progress::Running,
            _ => self.then.clone(),
        })
    }
    fn resource_usage(&self, _: Kernel) -> Result<ResourceUsage> {
        Ok(ResourceUsage::default())
    }
    fn global_address(&mut self, _: &str) -> Result<u64> {
        Ok(0)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.torn_down.store(true, Ordering::SeqCst);
    }
}

fn options() -> RunOptions {
    let mut options = RunOptions::new(PathBuf::from("stand-in.ptx"));
    // The stand-in's device memory is host memory: a megabyte of heap will do.
    options.heap_size = Some(1 << 20);
    options
}

fn arguments() -> ArgBlock {
    ArgBlock::new(&[OsString::from("stand-in.ptx")], &[]).unwrap()
}

/// Runs `program` on a [`StandIn`] whose kernels do `then` after it; returns the report and the program's output
/// (stdout and stderr together).
fn run_stand_in(options: &RunOptions, then: Progress, program: Program) -> (Result<RunReport>, String) {
    let backend = StandIn::new(options, then, program);
    let output = Capture::default();
    let mut session = Session::new(backend, options, &arguments())
        .unwrap()
        .with_output(Box::new(output.clone()), Box::new(output.clone()));
    let report = session.run(&options.launch);
    // As `run_on` does: a kernel may still use what the session allocated.
    std::mem::forget(session);
    (report, output.text())
}

/// `_end` leaves `main`'s result word zeroed for the next run, so the loader copies a zero there only after a run
/// that did not finish (here a fault), which may have left a result behind.
#[test]
fn the_loader_zeroes_the_result_word_only_after_a_run_that_did_not_finish() {
    let options = options();
    let backend = StandIn::new(&options, Progress::Finished, Box::new(|_, _| exit(0)));
    let mut session = Session::new(backend, &options, &arguments())
        .unwrap()
        .with_output(Box::new(Capture::default()), Box::new(Capture::default()));
    let result = session.result;
    let mut run = |then: Progress, program: Program| {
        let backend = session.backend();
        (backend.then, backend.program) = (then, Some(program));
        backend.copied_to.clear();
        let report = session.run(&LaunchParams::SINGLE).unwrap();
        (report.finished, session.backend().copied_to.contains(&result))
    };
    let [finished, faulted, after_fault] =
        [Progress::Finished, Progress::Faulted("CUDA_ERROR_ILLEGAL_ADDRESS".into()), Progress::Finished]
            .map(|then| run(then, Box::new(|_: &'static Client<HostThread>, _: Scribbler| exit(0))));
    assert_eq!(finished, (true, false), "the allocation is zeroed: no copy before the first run");
    assert_eq!(faulted, (false, false), "the finished run's `_end` zeroed the word");
    assert_eq!(after_fault, (true, true), "the faulted run may have left a result: the loader zeroes it");
    std::mem::forget(session);
}

/// A message no handler serves ends the run with an error, and the loader does not tear the context down under
/// the thread that waits for the answer (on a GPU that teardown waits for the kernel: the loader would hang).
#[test]
fn an_unserved_message_is_an_error_and_the_waiting_kernel_is_left_alone() {
    let options = options();
    let backend = StandIn::new(
        &options,
        Progress::Running,
        Box::new(|client, _| {
            let mut port = client.open(0x4242);
            port.send(|_| {});
            port.close();
        }),
    );
    let torn_down = Arc::clone(&backend.torn_down);
    let error = run_on(backend, &options, &arguments(), Instant::now()).unwrap_err();
    let torn_down = torn_down.load(Ordering::SeqCst);
    assert!(error.to_string().starts_with("RPC: no handler for opcode 0x4242 (port "), "{error}");
    // The server's error travels whole: a caller can tell which message failed without parsing the text.
    assert!(
        matches!(error, LoaderError::Rpc(crate::server::ServerError::UnknownOpcode { opcode: 0x4242, .. })),
        "{error:?}"
    );
    assert!(!torn_down, "the backend was torn down while a kernel waits");
}

/// What the suite's `host-call` program does (tests/programs/host-call), on a stand-in whose program is a host thread:
/// typed host calls and a byte stream, served by the handlers the options give the session, the host keeping its
/// state from call to call.
#[test]
fn host_calls_of_ones_own_are_served_through_the_session() {
    let mut options = options();
    options.host_calls = testing::operations();
    let (report, output) = run_stand_in(
        &options,
        Progress::Finished,
        Box::new(|client, _| {
            for number in [1, 2, 3, u64::from(u32::MAX)] {
                assert_eq!(client.call(testing::SQUARE, number), number * number);
            }
            let mut port = client.open(testing::REVERSE.number());
            port.send_n(b"a stream longer than one packet, reversed by the host that serves it");
            let mut reversed = [0u8; 100];
            let len = port.recv_n(&mut reversed);
            port.close();
            gpu_io::write(client, Stream::Stdout, &reversed[..len]);
            let seen = client.call(testing::SQUARES_SEEN, ());
            gpu_io::print(client, Stream::Stdout, format_args!("\nthe host squared {seen} numbers\n"));
            exit(0);
        }),
    );
    assert_eq!(report.unwrap().exit_code(), 0);
    assert_eq!(
        output,
        "ti sevres taht tsoh eht yb desrever ,tekcap eno naht regnol maerts a\nthe host squared 4 numbers\n"
    );
}

/// A host call whose handler fails ends the run with the handler's error in one line, and one whose opcode has no
/// handler (a plain loader registers none) with the opcode; the thread waiting for the answer is left alone.
#[test]
fn a_failing_or_unserved_host_call_ends_the_run() {
    for (host_calls, expected) in [
        (
            testing::operations(),
            "RPC: host call `square` (opcode 0xffff0100, port P) failed: 4294967296 squared does not fit in 64 bits",
        ),
        (HostCalls::new(), "RPC: no handler for opcode 0xffff0100 (port P)"),
    ] {
        let mut options = options();
        options.host_calls = host_calls;
        let port = Arc::new(std::sync::Mutex::new(None));
        let used = Arc::clone(&port);
        let (report, _) = run_stand_in(
            &options,
            Progress::Running,
            Box::new(move |client, _| {
                // `client.call` as far as the device gets: the request goes out, the answer never comes.
                let mut port = client.open(testing::SQUARE.opcode().number());
                port.send_value(&(1u64 << 32));
                *used.lock().unwrap() = Some(port.index());
                port.close();
            }),
        );
        let error = report.unwrap_err();
        let port = port.lock().unwrap().expect("the program sent its request");
        assert_eq!(error.to_string().replace(&format!("port {port})"), "port P)"), expected);
        assert_eq!(crate::status::error_exit_code(&error), 1);
    }
}

/// A kernel that faults while the server waits for the rest of a message ends the run as a device fault: the
/// server does not wait for the message for ever. The fault is how the program ended, exit code and all, named
/// after the kernel the progress markers point at.
#[test]
fn a_fault_in_the_middle_of_a_message_ends_the_run() {
    let (report, _) = run_stand_in(
        &options(),
        Progress::Faulted("stand-in fault".into()),
        Box::new(|client, _| first_packet_of_a_write(client, Stream::Stderr, 500, b"cut short")),
    );
    let report = report.unwrap();
    assert_eq!(report.status, RunStatus::Faulted { kernel: Kernel::Begin, message: "stand-in fault".into() });
    assert_eq!(report.status.to_string(), "device fault in kernel `_begin`: stand-in fault");
    assert_eq!(report.exit_code(), 139);
    assert!(!report.finished, "a faulted context is left to the process exit");
}

#[test]
fn progress_markers_name_the_faulting_kernel() {
    assert_eq!(serve::faulted_kernel(abi::progress::NOT_STARTED), Kernel::Begin);
    assert_eq!(serve::faulted_kernel(abi::progress::BEGIN_DONE), Kernel::Start);
    assert_eq!(serve::faulted_kernel(abi::progress::END_STARTED), Kernel::End);
}

/// A port count outside what the protocol lays out is an error through the library, not a panic.
#[test]
fn a_bad_port_count_is_an_error() {
    for ports in [0, region::MAX_PORTS + 1, u32::MAX] {
        let mut options = options();
        options.rpc_ports = ports;
        let error = run(&options).unwrap_err();
        assert_eq!(error.to_string(), format!("bad RPC port count {ports}: it must be 1 to 4096"));
        let backend = StandIn::new(&options, Progress::Finished, Box::new(|_, _| {}));
        let error = Session::new(backend, &options, &arguments()).err().expect("refused");
        assert!(matches!(error, LoaderError::BadRpcPorts(n) if n == ports));
    }
}

/// Through the library a test binary is refused as a program, before any GPU work: its tests run through the test
/// runner.
#[test]
fn a_test_binary_is_not_run_as_a_program() {
    let image = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tests-min.ptx");
    let error = run(&RunOptions::new(&image)).unwrap_err().to_string();
    assert!(error.ends_with("tests-min.ptx: is a test binary (it has tests, or no `main` of its own): `gpu-loader IMAGE [libtest options]` runs its tests"), "{error}");
}

/// A thread that stalls in the middle of a line while the kernels run is given up after the stall limit; the other
/// threads' output and the exit still come, and the run, which lost a message, does not exit with 0.
#[test]
fn a_stalled_message_is_given_up_and_the_run_goes_on() {
    let mut options = options();
    options.rpc_stall_limit = Duration::from_millis(100);
    let (report, output) = run_stand_in(
        &options,
        Progress::Finished,
        Box::new(|client, _| {
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    let mut port = client.open(opcode::WRITE);
                    crate::server::tests::send_first_packet_of_a_write(
                        &mut port,
                        Stream::Stderr,
                        100,
                        b"this line stalls after its first packet.",
                        ThreadIds::default(),
                    );
                    // Holds its port for good, as a stuck GPU thread would.
                    std::mem::forget(port);
                });
            });
            startup_common::libc::io::write_line(client, Stream::Stdout, b"served while another thread stalls");
            // The kernels run on well past the stall limit: the message is given up for making no progress, not
            // because the kernels ended.
            std::thread::sleep(Duration::from_millis(400));
            exit(0);
        }),
    );
    let report = report.unwrap();
    assert_eq!((report.status.clone(), report.messages_given_up), (RunStatus::Exited(0), 1));
    assert_eq!(report.exit_code(), 1);
    let mut lines: Vec<&str> = output.lines().collect();
    lines.sort();
    assert_eq!(lines, ["served while another thread stalls", "this line stalls after its first packet."]);
}

/// A device that writes over its region (a `WRITE` of 2^62 bytes behind a client word of u64::MAX, then keeps
/// toggling that word as fast as it can, so that the server never waits) is stopped by `--timeout` in bounded time,
/// holding next to nothing.
#[test]
fn a_scribbling_device_is_stopped_by_the_timeout() {
    let mut options = options();
    options.timeout = Some(Duration::from_millis(300));
    let stop = Arc::new(AtomicBool::new(false));
    let scribbling = Arc::clone(&stop);
    let started = Instant::now();
    let (report, _) = run_stand_in(
        &options,
        Progress::Running,
        Box::new(move |_, scribbler| {
            let head = WriteHead::for_thread(1, 0, ThreadIds::default()).encode();
            scribbler.post(3, u64::from(opcode::WRITE), 1, &[1 << 62, head[0], head[1]], u64::MAX);
            let mut word = u64::MAX;
            while !scribbling.load(Ordering::Relaxed) {
                word ^= 1;
                scribbler.set(region::Layout::new(region::DEFAULT_PORT_COUNT, 1).client_outbox(3), word);
            }
        }),
    );
    stop.store(true, Ordering::Relaxed);
    let report = report.unwrap();
    assert_eq!(report.status, RunStatus::TimedOut);
    assert_eq!(report.exit_code(), 124);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

/// A status whose low 8 bits are 0 is not a success.
#[test]
fn a_wide_exit_status_is_not_zero() {
    for status in [256, -256] {
        let (report, _) = run_stand_in(&options(), Progress::Finished, Box::new(move |_, _| exit(status)));
        let report = report.unwrap();
        assert_eq!((report.status.clone(), report.exit_code()), (RunStatus::Exited(status.into()), 255));
    }
}

/// An abort reported in the control block ends the run with 134, after the output sent before it.
#[test]
fn an_abort_ends_the_run_after_the_output_sent_before_it() {
    let (report, output) = run_stand_in(
        &options(),
        Progress::Finished,
        Box::new(|client, _| {
            gpu_io::write_line(client, Stream::Stdout, b"before the abort");
            report_end(ProgramEnd::Abort);
        }),
    );
    let report = report.unwrap();
    assert_eq!((report.status.clone(), report.exit_code()), (RunStatus::Aborted, 134));
    assert_eq!(output, "before the abort\n");
}

/// A program that writes over its control block's end word ends the run with an error naming it, after its output.
#[test]
fn a_corrupt_end_word_is_an_error_not_an_exit() {
    let (report, output) = run_stand_in(
        &options(),
        Progress::Finished,
        Box::new(|client, _| {
            gpu_io::write_line(client, Stream::Stdout, b"before the scribble");
            CONTROL.with(|control| {
                // SAFETY: the session's control block, as in `report_end`; the loader reads the word atomically.
                let end = unsafe { &*std::ptr::addr_of!((*(control.get() as *const abi::Control)).end) };
                // SAFETY: as above: an aligned word of live memory.
                unsafe { std::sync::atomic::AtomicU64::from_ptr(end as *const u64 as *mut u64) }
                    .store(0xdead_beef_0000_0001, Ordering::Relaxed);
            });
        }),
    );
    let error = report.unwrap_err();
    assert_eq!(error.to_string(), "the program wrote over its control block: its end word reads 0xdeadbeef00000001");
    assert_eq!(crate::status::error_exit_code(&error), 1);
    assert_eq!(output, "before the scribble\n");
}

/// The CPU time of the calling thread.
fn thread_cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) }, 0);
    // SAFETY: filled by getrusage, which succeeded.
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// While the kernels run and nobody sends a message, the serve loop sleeps rather than spin: it uses a small part
/// of a core; and a message after a pause is still answered quickly. (The bounds leave room for a loaded machine;
/// the benchmark measures the real ones on a GPU.)
#[test]
fn an_idle_run_sleeps_and_still_answers_soon() {
    let round_trips = Arc::new(std::sync::Mutex::new(Vec::new()));
    let measured = Arc::clone(&round_trips);
    let started = Instant::now();
    let cpu_before = thread_cpu_time();
    let mut options = options();
    options.host_calls = testing::operations();
    let (report, _) = run_stand_in(
        &options,
        Progress::Finished,
        Box::new(move |client, _| {
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(40));
                let sent = Instant::now();
                client.test_noop();
                measured.lock().unwrap().push(sent.elapsed());
            }
            exit(0);
        }),
    );
    let cpu = thread_cpu_time() - cpu_before;
    let wall = started.elapsed();
    assert_eq!(report.unwrap().exit_code(), 0);
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    // A serve loop that spins uses a whole core; one that sleeps far less (on a GPU machine about 0.05: the
    // benchmark's `idle-cpu`), though a virtual machine's timers may cost it several times that.
    assert!(share < 0.6, "the idle serve loop used {share:.2} of a core");
    let fastest = round_trips.lock().unwrap().iter().copied().min().unwrap();
    assert!(fastest < Duration::from_millis(2), "the first message after a pause took at least {fastest:?}");
}
