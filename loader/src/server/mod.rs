//! The host's RPC server: one dispatch table from opcode to handler, for the startup's own operations and the host
//! calls of one's own alike, over the protocol in `startup_common::rpc`.
//!
//! [`HostServer::poll`] serves every port that has a message waiting, once. The loop that calls it (watching for the
//! program's end, waiting for the kernels, timeouts, signals) is the loader's. Output is buffered and flushed whenever a pass finds no work (and at least every
//! [`FLUSH_INTERVAL`]), so it appears while the kernel runs.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use gpu_startup_protocol::abi::ThreadIds;
use gpu_startup_protocol::messages::Stream;
use gpu_startup_protocol::opcode;
use startup_common::rpc::{HostCallError, HostCalls, Server, ServerPort};

pub mod files;
mod first_panic;
mod handlers;
mod output;
pub mod reassembly;
#[cfg(test)]
pub(crate) mod tests;

pub use first_panic::MAX_PANIC_MESSAGE;
pub use reassembly::{HELD_IN_ALL, HELD_PER_THREAD};

use files::{Files, StdinSource};

/// The longest output may wait in the server's buffers while the ports stay busy.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(20);

/// How long a message may go without a hand-off from its client, while the kernels run, before the server gives it
/// up (and retires its port) to serve the others. A client in the middle of a message sends its next packet within
/// microseconds even when thousands of threads print at once; one that stops for this long is stuck (or scribbled
/// over its port), and every other thread's output would wait behind it.
pub const STALL_LIMIT: Duration = Duration::from_secs(1);

/// How many of the latest ports a pass looks at again between its groups of 64 ([`HostServer::poll_watched`]).
const RECENT_PORTS: usize = 4;

/// An empty slot of the recent ports.
const NO_PORT: u32 = u32::MAX;

/// A message the server cannot serve. The client that sent it waits forever, so the loader should end the program.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// No handler is registered for the opcode.
    #[error("RPC: no handler for opcode {opcode:#x} (port {port})")]
    UnknownOpcode { opcode: u32, port: u32 },
    /// A message came from no lane at all: its header was written over.
    #[error("RPC: a message from no lanes (opcode {opcode:#x}, port {port}): the RPC region was written over")]
    NoLanes { opcode: u32, port: u32 },
    /// A `WRITE` named a stream that does not exist.
    #[error("RPC: write to unknown stream {stream} (port {port})")]
    BadStream { stream: u8, port: u32 },
    /// The handler of a host call of one's own failed.
    #[error("RPC: host call `{name}` (opcode {opcode:#x}, port {port}) failed: {source}")]
    HostCall { name: &'static str, opcode: u32, port: u32, source: HostCallError },
    /// Writing the program's output failed.
    #[error("RPC: writing the program's output failed: {0}")]
    Io(#[from] io::Error),
    /// A file the program left open could not be written out when the run ended.
    #[error("writing `{path}` failed when the run ended: {message}", path = .path.display())]
    FileAtEnd { path: std::path::PathBuf, message: String },
}

/// A message the server gave up in the middle ([`HostServer::take_given_up`]): its port is retired for the rest of
/// the run. Shown as one line naming the port, the opcode and the sending thread where the message says which.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GivenUp {
    pub port: u32,
    pub opcode: u32,
    /// The name of a host call of one's own, as registered (the startup's operations have theirs).
    pub host_call: Option<&'static str>,
    /// The lanes that sent it.
    pub lanes: u64,
    /// The first writing thread of a `WRITE` (other messages do not say).
    pub sender: Option<ThreadIds>,
    pub why: GiveUpReason,
}

/// Why a message was given up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUpReason {
    /// No hand-off from its client for this long while the kernels ran.
    Stalled(Duration),
    /// The watcher said the client cannot answer any more: the kernels ended, the run timed out or was interrupted.
    ClientGone,
}

impl fmt::Display for GivenUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RPC: gave up a message on port {} (", self.port)?;
        match (opcode::name(self.opcode), self.host_call) {
            (Some(name), _) => f.write_str(name)?,
            (None, Some(name)) => write!(f, "host call `{name}`, opcode {:#x},", self.opcode)?,
            (None, None) => write!(f, "opcode {:#x}", self.opcode)?,
        }
        match self.sender {
            Some(ThreadIds { thread: [tx, ty, tz], block: [bx, by, bz] }) => {
                write!(f, " from thread ({tx}, {ty}, {tz}) of block ({bx}, {by}, {bz})")?
            }
            None => write!(f, " from lanes {:#x}", self.lanes)?,
        }
        match self.why {
            GiveUpReason::Stalled(limit) => write!(f, "): its client made no progress for {limit:?}"),
            GiveUpReason::ClientGone => f.write_str("): its client stopped in the middle of it"),
        }
    }
}

/// What handlers share: the output streams with the messages they hold, who sent the message being served, and the
/// run's first panic message.
pub struct Context {
    output: output::Output,
    /// The thread that sent the message being served, where the message says (for [`GivenUp`]).
    sender: Option<ThreadIds>,
    first_panic: first_panic::FirstPanic,
}

impl Context {
    fn new(stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>, stdin: StdinSource) -> Self {
        Self {
            output: output::Output::new(stdout, stderr, Files::new(stdin)),
            sender: None,
            first_panic: first_panic::FirstPanic::default(),
        }
    }

    /// The (buffered) writer of `stream`.
    pub fn writer(&mut self, stream: Stream) -> &mut dyn Write {
        self.output.writer(stream)
    }

    /// Names the thread that sent the message being served, for the report should the message be given up.
    pub fn set_sender(&mut self, thread: ThreadIds) {
        self.sender = Some(thread);
    }
}

/// Serves one message on `port`; called with the port open and the message's first packet waiting.
pub type Handler = Box<dyn FnMut(&mut ServerPort<'_>, &mut Context) -> Result<(), ServerError> + Send>;

/// The handler of one of the startup's own operations: each group's handler file lists its opcodes with theirs
/// (`HANDLERS` in `handlers` and in `files::handlers`).
type BuiltIn = fn(&mut ServerPort<'_>, &mut Context) -> Result<(), ServerError>;

/// The handlers of the startup's own operations, every group's.
fn built_ins() -> impl Iterator<Item = (u32, BuiltIn)> {
    handlers::HANDLERS.iter().chain(files::handlers::HANDLERS).copied()
}

/// An entry of the dispatch table: the handler of one opcode, and the name of a host call of one's own (the
/// startup's operations have theirs in the opcode list).
struct Route {
    handler: Handler,
    host_call: Option<&'static str>,
}

/// The RPC server with its dispatch table: the startup's operations, and the host calls of one's own it was given.
pub struct HostServer {
    server: Server,
    /// Every opcode served, built-in or a host call of one's own, with its handler.
    routes: HashMap<u32, Route>,
    context: Context,
    /// Whether the last `poll` found any message.
    served: bool,
    /// The messages given up since the caller last asked ([`HostServer::take_given_up`]); at most one per port, as
    /// giving a message up retires its port.
    given_up: Vec<GivenUp>,
    stall_limit: Duration,
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
    /// built-in handlers, writing to the process's stdout and stderr and reading its stdin.
    ///
    /// # Safety
    /// As for [`Server::new`]: the region is laid out by `region::Layout::new(port_count, lane_size)`, was zeroed before
    /// the program started, stays valid while the server lives, and no other server serves it.
    pub unsafe fn new(region: *mut c_void, port_count: u32, lane_size: u32) -> Self {
        // SAFETY: the caller's contract is `Server::new`'s.
        let server = unsafe { Server::new(region, port_count, lane_size) };
        let mut this = Self {
            server,
            routes: HashMap::new(),
            context: Context::new(Box::new(io::stdout()), Box::new(io::stderr()), StdinSource::process()),
            served: false,
            given_up: Vec::new(),
            stall_limit: STALL_LIMIT,
            recent: [NO_PORT; RECENT_PORTS],
            next_recent: 0,
            stats: ServeStats::default(),
        };
        for (opcode, handler) in built_ins() {
            this.register(opcode, Box::new(handler));
        }
        this
    }

    /// Serves the opcodes of `host_calls` with their handlers, instead of those given before (a message of another
    /// user opcode has none).
    pub fn with_host_calls(mut self, host_calls: HostCalls) -> Self {
        self.routes.retain(|_, route| route.host_call.is_none());
        for (call, handler) in host_calls.handlers() {
            let (name, number) = (call.name(), call.number());
            let handler: Handler = Box::new(move |port, _| {
                handler.serve(port).map_err(|source| ServerError::HostCall {
                    name,
                    opcode: number,
                    port: port.index(),
                    source,
                })
            });
            self.routes.insert(number, Route { handler, host_call: Some(name) });
        }
        self
    }

    /// Gives up a message whose client makes no progress for `limit` while the kernels run, instead of
    /// [`STALL_LIMIT`].
    pub fn with_stall_limit(mut self, limit: Duration) -> Self {
        self.stall_limit = limit;
        self
    }

    /// Sends the program's output to `stdout` and `stderr` instead of the process's streams.
    pub fn with_output(mut self, stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>) -> Self {
        self.set_output(stdout, stderr);
        self
    }

    /// Sends the program's output to `stdout` and `stderr` from now on; output still buffered is dropped.
    pub fn set_output(&mut self, stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>) {
        self.context.output.set_streams(stdout, stderr);
    }

    /// Gives the program `stdin` to read instead of the process's stdin.
    pub fn with_stdin(mut self, stdin: Box<dyn std::io::Read + Send>) -> Self {
        self.context.output.files.set_stdin(StdinSource::new(stdin));
        self
    }

    /// Adds (or replaces) the handler of one of the startup's operations; returns the one it replaces. Host calls of
    /// one's own come with [`HostServer::with_host_calls`].
    pub(crate) fn register(&mut self, opcode: u32, handler: Handler) -> Option<Handler> {
        debug_assert!(opcode::is_reserved(opcode), "{opcode:#x} is a user opcode");
        self.routes.insert(opcode, Route { handler, host_call: None }).map(|route| route.handler)
    }

    /// Serves every port with a waiting message once. A message whose client stops answering midway is waited for while the watcher lets it (see
    /// [`HostServer::poll_watched`]), here for up to the stall limit.
    pub fn poll(&mut self) -> Result<(), ServerError> {
        self.poll_watched(&mut || false)
    }

    /// Like [`HostServer::poll`], but a wait for a client in the middle of a message asks `client_gone` now and then
    /// (about every 50 µs at first, then every millisecond, and every 1,024 hand-offs of a long message) whether it is
    /// worth going on: a client whose kernel faulted or was stopped never answers. Whatever `client_gone` says, a
    /// message whose client makes no progress for the stall limit is given up too, and the rest served. A message
    /// given up keeps the output that arrived, and [`HostServer::take_given_up`] tells the caller.
    pub fn poll_watched(&mut self, client_gone: &mut dyn FnMut() -> bool) -> Result<(), ServerError> {
        let mut served = false;
        for group in 0..self.server.port_groups() {
            let mut pending = self.server.pending_in_group(group);
            while pending != 0 {
                let index = group * 64 + pending.trailing_zeros();
                pending &= pending - 1;
                served |= self.serve_port(index, client_gone)?;
            }
            // A group that just got its reply tends to send its next message within microseconds, while a pass over
            // a thousand idle ports takes about half a microsecond: look at the latest ports again after each 64.
            for slot in 0..RECENT_PORTS {
                let index = self.recent[slot];
                if index != NO_PORT && self.server.is_pending(index) {
                    served |= self.serve_port(index, client_gone)?;
                }
            }
        }
        self.served = served;
        let output = &mut self.context.output;
        if !served || output.last_flush.elapsed() >= FLUSH_INTERVAL {
            output.flush()?;
        }
        Ok(())
    }

    /// Serves the message waiting on port `index`, if one is; returns whether one was.
    fn serve_port(&mut self, index: u32, client_gone: &mut dyn FnMut() -> bool) -> Result<bool, ServerError> {
        let Some(port) = self.server.open(index) else { return Ok(false) };
        let (op, lanes) = (port.opcode(), port.lane_mask());
        if lanes == 0 {
            return Err(ServerError::NoLanes { opcode: op, port: index });
        }
        self.stats.messages += 1;
        self.stats.lanes += u64::from(lanes.count_ones());
        let Some(route) = self.routes.get_mut(&op) else {
            return Err(ServerError::UnknownOpcode { opcode: op, port: index });
        };
        let host_call = route.host_call;
        let stall_limit = self.stall_limit;
        let mut why = None;
        // The client's progress as last seen: its hand-offs in this message so far, and since when.
        let mut progress: Option<(u64, Instant)> = None;
        let mut watch = |hand_offs: u64| {
            if client_gone() {
                why = Some(GiveUpReason::ClientGone);
                return true;
            }
            let now = Instant::now();
            match progress {
                Some((seen, since)) if seen == hand_offs => {
                    if now.duration_since(since) >= stall_limit {
                        why = Some(GiveUpReason::Stalled(stall_limit));
                        return true;
                    }
                }
                _ => progress = Some((hand_offs, now)),
            }
            false
        };
        self.context.sender = None;
        let mut port = port.watched(&mut watch);
        let handled = (route.handler)(&mut port, &mut self.context);
        let abandoned = port.is_abandoned();
        drop(port);
        handled?;
        if abandoned {
            let why = why.unwrap_or(GiveUpReason::ClientGone);
            self.given_up.push(GivenUp { port: index, opcode: op, host_call, lanes, sender: self.context.sender, why });
        }
        if !self.recent.contains(&index) {
            self.recent[self.next_recent] = index;
            self.next_recent = (self.next_recent + 1) % RECENT_PORTS;
        }
        Ok(true)
    }

    /// Writes out everything buffered, including messages whose last chunk never came.
    pub fn flush(&mut self) -> Result<(), ServerError> {
        Ok(self.context.output.finish()?)
    }

    /// Writes out the output buffered so far, but not the messages still held for their last chunk: before the
    /// loader reports something on stderr, so that the report comes after the output that came before it.
    pub fn flush_complete_messages(&mut self) -> Result<(), ServerError> {
        Ok(self.context.output.flush()?)
    }

    /// Closes any file an earlier run of the same program left open, and forgets its panic message.
    pub fn start_run(&mut self) {
        self.close_files_quietly();
        self.context.first_panic.take();
    }

    /// The message of the run's first panic, as its thread reported it (`PANIC_MESSAGE`), without the location and
    /// the thread that the panic's line on stderr adds: `None` when no thread reported one. Asked once per run.
    pub fn take_panic_message(&mut self) -> Option<String> {
        self.context.first_panic.take()
    }

    /// Closes the files the program left open, writing out what they hold, as the run ends; the first that could
    /// not be written out is an error (after every file is closed). Output held for a file is written first.
    pub fn close_files(&mut self) -> Result<(), ServerError> {
        self.flush()?;
        match self.context.output.files.close_all().into_iter().next() {
            None => Ok(()),
            Some((path, error)) => {
                let mut buffer = [0; 32];
                let message = gpu_startup_protocol::errno::describe(error, &mut buffer).to_owned();
                Err(ServerError::FileAtEnd { path, message: format!("{message} (os error {error})") })
            }
        }
    }

    fn close_files_quietly(&mut self) {
        let _ = self.context.output.files.close_all();
    }

    /// Refuses the program every request that names a path (open, remove, rename: `EACCES`), for a program that
    /// must not touch the host's files; stdin still reads.
    pub fn deny_file_system(mut self) -> Self {
        self.context.output.files.deny_file_system();
        self
    }

    /// How many files the program has open now.
    pub fn open_files(&self) -> usize {
        self.context.output.files.open_count()
    }

    /// Messages and lanes served so far.
    pub fn stats(&self) -> ServeStats {
        self.stats
    }

    /// The messages given up since the last call ([`HostServer::poll_watched`]).
    pub fn take_given_up(&mut self) -> Vec<GivenUp> {
        std::mem::take(&mut self.given_up)
    }

    /// The heap that unfinished messages take on the server, their bookkeeping included: never over [`HELD_IN_ALL`].
    pub fn held_output_bytes(&self) -> usize {
        self.context.output.held_bytes()
    }

    /// Whether the last [`poll`](Self::poll) found any message: a caller draining the ports polls until it is false.
    pub fn served_last_poll(&self) -> bool {
        self.served
    }
}
