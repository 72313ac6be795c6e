//! The host's RPC server: a handler per opcode over the protocol in `startup_common::rpc`.
//!
//! [`HostServer::poll`] serves every port that has a message waiting, once, and reports the program's
//! [`Outcome`] once an `EXIT` or `ABORT` arrived. The loop that calls it (waiting for the kernels, timeouts,
//! signals) is the loader's. Output is buffered and flushed whenever a pass finds no work (and at least every
//! [`FLUSH_INTERVAL`]), so it appears while the kernel runs.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::io::{self, BufWriter, Write};
use std::time::{Duration, Instant};

use startup_common::io::Stream;
use startup_common::rpc::{Server, ServerPort, WriteHead, opcode};

/// The longest output may wait in the server's buffers while the ports stay busy.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(20);

/// How many of the latest ports a pass looks at again between its groups of 64 ([`HostServer::poll_watched`]).
const RECENT_PORTS: usize = 4;

/// An empty slot of the recent ports.
const NO_PORT: u32 = u32::MAX;

/// How the program ended, as the first `EXIT` or `ABORT` message said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Exit(i32),
    Abort,
}

/// A message the server cannot serve. The client that sent it waits forever, so the loader should end the program.
#[derive(Debug)]
pub enum ServerError {
    /// No handler is registered for the opcode.
    UnknownOpcode { opcode: u32, port: u32 },
    /// A `WRITE` named a stream that does not exist.
    BadStream { stream: u8, port: u32 },
    /// Writing the program's output failed.
    Io(io::Error),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownOpcode { opcode, port } => write!(f, "RPC: no handler for opcode {opcode:#x} (port {port})"),
            Self::BadStream { stream, port } => write!(f, "RPC: write to unknown stream {stream} (port {port})"),
            Self::Io(error) => write!(f, "RPC: writing the program's output failed: {error}"),
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(error) => Some(error),
            _ => None,
        }
    }
}

impl From<io::Error> for ServerError {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}

/// What handlers share: the output streams, the partly received messages, and the outcome.
pub struct Context {
    stdout: BufWriter<Box<dyn Write + Send>>,
    stderr: BufWriter<Box<dyn Write + Send>>,
    /// Chunks of messages whose last chunk has not arrived, per writing thread and stream.
    pending: HashMap<(u64, u64, u8), Vec<u8>>,
    outcome: Option<Outcome>,
    last_flush: Instant,
    /// Whether anything was written since the last flush: an idle pass then has nothing to flush and skips it.
    written: bool,
}

impl Context {
    fn new(stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>) -> Self {
        Self {
            stdout: BufWriter::with_capacity(1 << 16, stdout),
            stderr: BufWriter::with_capacity(1 << 16, stderr),
            pending: HashMap::new(),
            outcome: None,
            last_flush: Instant::now(),
            written: false,
        }
    }

    /// The (buffered) writer of `stream`.
    pub fn writer(&mut self, stream: Stream) -> &mut dyn Write {
        self.written = true;
        match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        }
    }

    /// Records how the program ended; the first report wins.
    pub fn set_outcome(&mut self, outcome: Outcome) {
        self.outcome.get_or_insert(outcome);
    }

    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome
    }

    /// Writes out the messages still waiting for their last chunk (a thread stopped mid-message), each ending its
    /// line so that two cut-short messages do not run together, then flushes.
    fn finish(&mut self) -> io::Result<()> {
        let mut pending: Vec<_> = self.pending.drain().collect();
        pending.sort_by_key(|(key, _)| *key);
        for ((_, _, stream), mut bytes) in pending {
            let stream = Stream::from_number(u32::from(stream)).unwrap_or(Stream::Stderr);
            if bytes.last() != Some(&b'\n') {
                bytes.push(b'\n');
            }
            self.writer(stream).write_all(&bytes)?;
        }
        self.flush()
    }

    fn flush(&mut self) -> io::Result<()> {
        if !std::mem::take(&mut self.written) {
            return Ok(());
        }
        self.last_flush = Instant::now();
        self.stdout.flush()?;
        self.stderr.flush()
    }
}

/// Serves one message on `port`; called with the port open and the message's first packet waiting.
pub type Handler = Box<dyn FnMut(&mut ServerPort<'_>, &mut Context) -> Result<(), ServerError> + Send>;

/// The RPC server with its handler table.
pub struct HostServer {
    server: Server,
    handlers: HashMap<u32, Handler>,
    context: Context,
    /// Whether the last `poll` found any message.
    served: bool,
    /// Whether a message was given up since the caller last asked ([`HostServer::poll_watched`]).
    abandoned: bool,
    /// The last [`RECENT_PORTS`] ports served, each once ([`NO_PORT`] where none yet), and the slot to replace next.
    recent: [u32; RECENT_PORTS],
    next_recent: usize,
    stats: ServeStats,
}

/// What the server has served since it was made: messages, and the lanes that sent them. Lanes per message tell
/// whether warps reach the RPC together (32 on NVIDIA) or diverged into several groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeStats {
    pub messages: u64,
    pub lanes: u64,
}

impl HostServer {
    /// A server for the region at `region` (its host address) with `port_count` ports of `lane_size` lanes, with the
    /// built-in handlers, writing to the process's stdout and stderr.
    ///
    /// # Safety
    /// As for [`Server::new`]: the region is laid out by `rpc::Layout::new(port_count, lane_size)`, was zeroed before
    /// the program started, stays valid while the server lives, and no other server serves it.
    pub unsafe fn new(region: *mut c_void, port_count: u32, lane_size: u32) -> Self {
        // SAFETY: the caller's contract is `Server::new`'s.
        let server = unsafe { Server::new(region, port_count, lane_size) };
        let mut this = Self {
            server,
            handlers: HashMap::new(),
            context: Context::new(Box::new(io::stdout()), Box::new(io::stderr())),
            served: false,
            abandoned: false,
            recent: [NO_PORT; RECENT_PORTS],
            next_recent: 0,
            stats: ServeStats::default(),
        };
        this.register(opcode::WRITE, Box::new(handle_write));
        this.register(opcode::EXIT, Box::new(handle_exit));
        this.register(opcode::ABORT, Box::new(handle_abort));
        this.register(opcode::TEST_INCREMENT, Box::new(handle_increment));
        this.register(opcode::TEST_ECHO, Box::new(handle_echo));
        this.register(opcode::TEST_NOOP, Box::new(handle_noop));
        this.register(opcode::TEST_INTERFACE, Box::new(handle_interface));
        this.register(opcode::TEST_HAND_OFFS, Box::new(handle_hand_offs));
        this
    }

    /// Sends the program's output to `stdout` and `stderr` instead of the process's streams.
    pub fn with_output(mut self, stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>) -> Self {
        self.context = Context::new(stdout, stderr);
        self
    }

    /// Adds (or replaces) the handler of `opcode`; returns the one it replaces.
    pub fn register(&mut self, opcode: u32, handler: Handler) -> Option<Handler> {
        self.handlers.insert(opcode, handler)
    }

    /// Serves every port with a waiting message once. Returns the outcome once the program reported one (and on
    /// every later call); serving goes on if the caller keeps polling, so threads still waiting can finish. A
    /// message whose client stops answering midway is waited for for ever: see [`HostServer::poll_watched`].
    pub fn poll(&mut self) -> Result<Option<Outcome>, ServerError> {
        self.poll_watched(&mut || false)
    }

    /// Like [`HostServer::poll`], but a wait for a client in the middle of a message asks `give_up` now and then
    /// (about every 50 µs at first, then every millisecond) whether it is worth going on: a client whose kernel
    /// faulted or was stopped never answers. A message given up is left as it is, its output so far kept for
    /// [`HostServer::flush`]; [`HostServer::abandoned_a_message`] tells the caller, who should end the run.
    pub fn poll_watched(&mut self, give_up: &mut dyn FnMut() -> bool) -> Result<Option<Outcome>, ServerError> {
        let had_outcome = self.context.outcome.is_some();
        let mut served = false;
        for group in 0..self.server.port_groups() {
            let mut pending = self.server.pending_in_group(group);
            while pending != 0 {
                let index = group * 64 + pending.trailing_zeros();
                pending &= pending - 1;
                served |= self.serve_port(index, give_up)?;
            }
            // A group that just got its reply tends to send its next message within microseconds, while a pass over
            // a thousand idle ports takes about half a microsecond: look at the latest ports again after each 64.
            for slot in 0..RECENT_PORTS {
                let index = self.recent[slot];
                if index != NO_PORT && self.server.is_pending(index) {
                    served |= self.serve_port(index, give_up)?;
                }
            }
        }
        self.served = served;
        if !had_outcome && self.context.outcome.is_some() {
            // Complete messages go out now; messages still missing chunks wait: other threads may finish them
            // while the loader drains the ports, and `flush` writes whatever is left at the very end.
            self.context.flush()?;
        } else if !served || self.context.last_flush.elapsed() >= FLUSH_INTERVAL {
            self.context.flush()?;
        }
        Ok(self.context.outcome)
    }

    /// Serves the message waiting on port `index`, if one is; returns whether one was.
    fn serve_port(&mut self, index: u32, give_up: &mut dyn FnMut() -> bool) -> Result<bool, ServerError> {
        let Some(port) = self.server.open(index) else { return Ok(false) };
        let mut port = port.watched(give_up);
        self.stats.messages += 1;
        self.stats.lanes += u64::from(port.lane_mask().count_ones());
        let op = port.opcode();
        let handler = self.handlers.get_mut(&op).ok_or(ServerError::UnknownOpcode { opcode: op, port: index })?;
        handler(&mut port, &mut self.context)?;
        self.abandoned |= port.is_abandoned();
        if !self.recent.contains(&index) {
            self.recent[self.next_recent] = index;
            self.next_recent = (self.next_recent + 1) % RECENT_PORTS;
        }
        Ok(true)
    }

    /// Writes out everything buffered, including messages whose last chunk never came.
    pub fn flush(&mut self) -> Result<(), ServerError> {
        Ok(self.context.finish()?)
    }

    pub fn outcome(&self) -> Option<Outcome> {
        self.context.outcome
    }

    /// Forgets the outcome of an earlier run of the same program, so that the server reports the next one.
    pub fn start_run(&mut self) {
        self.context.outcome = None;
    }

    /// Messages and lanes served so far.
    pub fn stats(&self) -> ServeStats {
        self.stats
    }

    /// Whether a message was given up since the last call ([`HostServer::poll_watched`]).
    pub fn abandoned_a_message(&mut self) -> bool {
        std::mem::take(&mut self.abandoned)
    }

    /// Whether the last [`poll`](Self::poll) found any message: a caller draining the ports polls until it is false.
    pub fn served_last_poll(&self) -> bool {
        self.served
    }
}

fn handle_write(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let index = port.index();
    let chunks = port.recv_n_vec::<{ WriteHead::WORDS }>();
    // A stream the client abandoned is part of a message: kept with the unfinished ones, which `flush` writes last.
    let cut_short = port.is_abandoned();
    for chunk in chunks {
        let head = WriteHead::decode(chunk.head);
        let stream = Stream::from_number(u32::from(head.stream))
            .ok_or(ServerError::BadStream { stream: head.stream, port: index })?;
        if head.flags & WriteHead::MORE != 0 || cut_short {
            context.pending.entry(head.key()).or_default().extend_from_slice(&chunk.data);
            continue;
        }
        let mut message = context.pending.remove(&head.key()).unwrap_or_default();
        if message.is_empty() && head.flags & WriteHead::NEWLINE == 0 {
            message = chunk.data;
        } else {
            message.extend_from_slice(&chunk.data);
        }
        if head.flags & WriteHead::NEWLINE != 0 {
            message.push(b'\n');
        }
        context.writer(stream).write_all(&message)?;
    }
    // The acknowledgement: the chunk is in the server's buffers, so the thread's next chunk comes after it.
    port.send(|_, packet| packet.set(0, 0));
    Ok(())
}

fn handle_exit(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let mut status = None;
    port.recv(|_, packet| {
        status.get_or_insert(packet.get(0) as i64 as i32);
    });
    context.set_outcome(Outcome::Exit(status.unwrap_or(0)));
    Ok(())
}

fn handle_abort(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    port.recv(|_, _| {});
    context.set_outcome(Outcome::Abort);
    Ok(())
}

fn handle_increment(port: &mut ServerPort<'_>, _: &mut Context) -> Result<(), ServerError> {
    let mut values = [0u64; 64];
    port.recv(|lane, packet| values[lane as usize] = packet.get(0));
    port.send(|lane, packet| packet.set(0, values[lane as usize].wrapping_add(1)));
    Ok(())
}

fn handle_echo(port: &mut ServerPort<'_>, _: &mut Context) -> Result<(), ServerError> {
    let received = port.recv_n_vec::<0>();
    let mut by_lane: [&[u8]; 64] = [&[]; 64];
    for entry in &received {
        by_lane[entry.lane as usize] = &entry.data;
    }
    port.send_n(|lane| by_lane[lane as usize]);
    Ok(())
}

fn handle_noop(port: &mut ServerPort<'_>, _: &mut Context) -> Result<(), ServerError> {
    port.recv(|_, _| {});
    port.send(|_, _| {});
    Ok(())
}

/// The host's half of `Client::test_hand_offs`: hands the buffers back, empty, as soon as it has them, `rounds + 1`
/// times.
fn handle_hand_offs(port: &mut ServerPort<'_>, _: &mut Context) -> Result<(), ServerError> {
    let mut rounds = 0;
    port.recv(|_, packet| rounds = packet.get(0));
    for _ in 0..=rounds {
        if port.is_abandoned() {
            break;
        }
        port.send(|_, _| {});
    }
    Ok(())
}

/// The host's half of `Client::test_interface`: answers each lane's value with its successor, checking that every
/// packet carries the id of the lane whose slot it arrived in; the last packet says whether all did.
fn handle_interface(port: &mut ServerPort<'_>, _: &mut Context) -> Result<(), ServerError> {
    let mut values = [0u64; startup_common::rpc::MAX_LANES as usize];
    let mut rounds = 0;
    let mut lanes_right = true;
    port.recv(|lane, packet| {
        rounds = packet.get(0);
        lanes_right &= packet.get(1) == u64::from(lane);
    });
    for _ in 0..rounds {
        if port.is_abandoned() {
            break;
        }
        port.send(|lane, packet| {
            packet.set(0, values[lane as usize] + 1);
            packet.set(1, u64::from(lane));
        });
        port.recv(|lane, packet| {
            values[lane as usize] = packet.get(0);
            lanes_right &= packet.get(1) == u64::from(lane);
        });
    }
    port.send(|_, packet| packet.set(0, if lanes_right { u64::MAX } else { 0 }));
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use startup_common::gpu::HostThread;
    use startup_common::io as gpu_io;
    use startup_common::rpc::{Client, HostRegion, Layout};
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Runs `clients` host threads against a `HostServer` until every thread is done and an outcome arrived;
    /// returns the outcome and the captured output.
    fn run(clients: usize, body: impl Fn(&Client<HostThread>, usize) + Sync) -> (Outcome, String, String) {
        let layout = Layout::new(8, 1);
        let region = HostRegion::new(layout);
        let client = Client::<HostThread>::new();
        // SAFETY: a fresh zeroed region laid out for 8 ports of one lane, outliving the threads below.
        unsafe { client.reset(region.as_ptr(), 8) };
        let (out, err) = (Capture::default(), Capture::default());
        // SAFETY: same region; this is its only server.
        let mut server =
            unsafe { HostServer::new(region.as_ptr(), 8, 1) }.with_output(Box::new(out.clone()), Box::new(err.clone()));
        let outcome = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..clients)
                .map(|n| {
                    scope.spawn({
                        let client = &client;
                        let body = &body;
                        move || body(client, n)
                    })
                })
                .collect();
            let mut outcome = None;
            loop {
                let done = workers.iter().all(|w| w.is_finished());
                outcome = server.poll().unwrap().or(outcome);
                if done {
                    break;
                }
            }
            outcome.expect("a client reported exit or abort")
        });
        server.flush().unwrap();
        let text = |c: Capture| String::from_utf8(c.0.lock().unwrap().clone()).unwrap();
        (outcome, text(out), text(err))
    }

    /// A region of two ports of one lane and a client reset on it; the region's words stay put when it moves.
    fn two_ports() -> (HostRegion, Client<HostThread>) {
        let region = HostRegion::new(Layout::new(2, 1));
        let client = Client::<HostThread>::new();
        // SAFETY: a fresh zeroed region laid out for 2 ports of one lane; the caller keeps it as long as the client.
        unsafe { client.reset(region.as_ptr(), 2) };
        (region, client)
    }

    #[test]
    fn serves_prints_tests_and_exit() {
        let (outcome, out, err) = run(4, |client, n| {
            assert_eq!(client.test_increment(n as u64), n as u64 + 1);
            assert!(client.test_interface(5 + n as u32));
            client.test_hand_offs(3 + n as u32);
            let mut echo = [0u8; 300];
            let input: Vec<u8> = (0..200 + n).map(|i| i as u8).collect();
            assert_eq!(client.test_echo(&input, &mut echo), input.len());
            assert_eq!(&echo[..input.len()], &input[..]);
            let long = "x".repeat(1000 + n);
            gpu_io::print(client, gpu_io::Stream::Stdout, format_args!("thread {n}: {long}\n"));
            gpu_io::write_line(client, gpu_io::Stream::Stderr, format!("err {n}").as_bytes());
            if n == 0 {
                std::thread::sleep(std::time::Duration::from_millis(50));
                client.exit(7);
            }
        });
        assert_eq!(outcome, Outcome::Exit(7));
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort();
        let expected: Vec<String> = (0..4).map(|n| format!("thread {n}: {}", "x".repeat(1000 + n))).collect();
        assert_eq!(lines, expected);
        let mut lines: Vec<&str> = err.lines().collect();
        lines.sort();
        assert_eq!(lines, ["err 0", "err 1", "err 2", "err 3"]);
    }

    #[test]
    fn counts_messages_and_lanes() {
        let (region, client) = two_ports();
        // SAFETY: same region; this is its only server.
        let mut server = unsafe { HostServer::new(region.as_ptr(), 2, 1) };
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| (0..5).for_each(|n| assert_eq!(client.test_increment(n), n + 1)));
            while !worker.is_finished() {
                server.poll().unwrap();
            }
        });
        assert_eq!(server.stats(), ServeStats { messages: 5, lanes: 5 });
    }

    #[test]
    fn abort_is_reported_and_first_outcome_wins() {
        // Thread 0 aborts; thread 1 exits well after the server took the abort.
        let (outcome, _, _) = run(2, |client, n| {
            if n == 0 {
                client.abort();
            } else {
                std::thread::sleep(std::time::Duration::from_millis(100));
                client.exit(3);
            }
        });
        assert_eq!(outcome, Outcome::Abort);
    }

    #[test]
    fn unknown_opcode_is_an_error() {
        let (region, client) = two_ports();
        let mut port = client.open(0x4242);
        port.send(|_| {});
        port.close();
        // SAFETY: same region; this is its only server.
        let mut server = unsafe { HostServer::new(region.as_ptr(), 2, 1) };
        assert!(matches!(server.poll(), Err(ServerError::UnknownOpcode { opcode: 0x4242, .. })));
    }

    /// Sends the first packet of a `WRITE` stream of `len` bytes to `stream` and stops, as a thread whose kernel
    /// faults between two packets does: `text` (at most a packet's worth) is what arrives.
    pub(crate) fn first_packet_of_a_write(
        client: &Client<HostThread>,
        stream: gpu_io::Stream,
        len: usize,
        text: &[u8],
    ) {
        let head = startup_common::rpc::WriteHead { stream: stream as u8, flags: 0, thread: 0, group: 0 };
        let mut port = client.open(opcode::WRITE);
        port.send(|packet| {
            packet.set(0, len as u64);
            for (word, value) in head.encode().into_iter().enumerate() {
                packet.set(1 + word, value);
            }
            for (word, bytes) in text.chunks(8).enumerate() {
                let mut padded = [0u8; 8];
                padded[..bytes.len()].copy_from_slice(bytes);
                packet.set(1 + WriteHead::WORDS + word, u64::from_le_bytes(padded));
            }
        });
        port.close();
    }

    /// A client that stops in the middle of a stream (its kernel faulted) does not keep the server waiting once
    /// `give_up` says so; the bytes that did arrive are written at the end, and the port is never served again.
    #[test]
    fn a_stream_cut_short_is_given_up_and_its_bytes_kept() {
        let (region, client) = two_ports();
        let out = Capture::default();
        // SAFETY: same region; this is its only server.
        let mut server =
            unsafe { HostServer::new(region.as_ptr(), 2, 1) }.with_output(Box::new(out.clone()), Box::new(io::sink()));
        first_packet_of_a_write(&client, gpu_io::Stream::Stdout, 1000, b"the first forty bytes of a longer line..");
        let mut asked = 0;
        let outcome = server.poll_watched(&mut || {
            asked += 1;
            asked == 3
        });
        assert_eq!(outcome.unwrap(), None);
        assert_eq!(asked, 3, "the server asked until told to give up");
        assert!(server.abandoned_a_message());
        assert!(!server.abandoned_a_message(), "reported once");
        server.poll_watched(&mut || panic!("nothing is waiting")).unwrap();
        assert!(!server.served_last_poll(), "the abandoned port is not served again");
        assert!(out.0.lock().unwrap().is_empty(), "an unfinished message waits for the end");
        server.flush().unwrap();
        assert_eq!(&out.0.lock().unwrap()[..], b"the first forty bytes of a longer line..\n");
    }

    /// Posts a one-packet `FIRST_USER` message of one lane on `port` of the region at `region`, as a client would,
    /// straight through the layout's words.
    fn post_raw(region: usize, layout: Layout, port: u32) {
        // SAFETY: each index is a word of the region's layout, inside the live region, and every access is atomic.
        let word = |index: usize| unsafe { std::sync::atomic::AtomicU64::from_ptr((region as *mut u64).add(index)) };
        word(layout.header(port)).store(u64::from(opcode::FIRST_USER), std::sync::atomic::Ordering::Relaxed);
        word(layout.header(port) + 1).store(1, std::sync::atomic::Ordering::Relaxed);
        word(layout.client_outbox(port)).fetch_xor(1, std::sync::atomic::Ordering::Release);
    }

    /// A message on one of the latest ports is served in the same pass even when it arrives after the scan went
    /// past that port's group: here the handler of a message on port 70 (second group) posts one on port 0 (first
    /// group, served just before), and one poll serves both.
    #[test]
    fn a_latest_port_is_looked_at_again_within_the_pass() {
        let layout = Layout::new(128, 1);
        let region = HostRegion::new(layout);
        let address = region.as_ptr() as usize;
        // SAFETY: a fresh zeroed region laid out for 128 ports of one lane, outliving the server; its only server.
        let mut server = unsafe { HostServer::new(region.as_ptr(), 128, 1) };
        server.register(
            opcode::FIRST_USER,
            Box::new(move |port, _| {
                port.recv(|_, _| {});
                if port.index() == 70 {
                    post_raw(address, layout, 0);
                }
                Ok(())
            }),
        );
        post_raw(address, layout, 0);
        server.poll().unwrap();
        assert_eq!(server.stats().messages, 1);
        post_raw(address, layout, 70);
        server.poll().unwrap();
        assert_eq!(server.stats().messages, 3, "port 0's second message waited for the next pass");
    }

    #[test]
    fn new_operations_join_through_the_table() {
        let (region, client) = two_ports();
        // SAFETY: same region; this is its only server.
        let mut server = unsafe { HostServer::new(region.as_ptr(), 2, 1) };
        server.register(
            opcode::FIRST_USER,
            Box::new(|port, _| {
                let mut value = 0;
                port.recv(|_, packet| value = packet.get(0));
                port.send(|_, packet| packet.set(0, value * 3));
                Ok(())
            }),
        );
        let result = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                let mut port = client.open(opcode::FIRST_USER);
                port.send(|packet| packet.set(0, 14));
                let mut value = 0;
                port.recv(|packet| value = packet.get(0));
                value
            });
            while !worker.is_finished() {
                server.poll().unwrap();
            }
            worker.join().unwrap()
        });
        assert_eq!(result, 42);
    }
}
