//! The server against real clients (host threads); `scribbled` against a region whose words a test writes directly, as
//! a buggy GPU program can.

use super::*;
use gpu_startup_protocol::messages::WriteHead;
use gpu_startup_protocol::region::Layout;
use startup_common::gpu::HostThread;
use startup_common::libc::io as gpu_io;
use startup_common::rpc::testing::{self, TestOperations};
use startup_common::rpc::{Client, HostCall, HostRegion, Scribble, UserOpcode};
use std::sync::{Arc, Mutex};

mod scribbled;

pub(crate) use scribbled::Scribbler;

/// Output captured for a test to read.
#[derive(Clone, Default)]
pub(crate) struct Capture(pub(crate) Arc<Mutex<Vec<u8>>>);

impl Capture {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `clients` host threads against a `HostServer` until every thread is done; returns the captured output.
fn run(clients: usize, body: impl Fn(&Client<HostThread>, usize) + Sync) -> (String, String) {
    let layout = Layout::new(8, 1);
    let region = HostRegion::new(layout);
    let client = Client::<HostThread>::new();
    // SAFETY: a fresh zeroed region laid out for 8 ports of one lane, outliving the threads below.
    unsafe { client.reset(region.as_ptr(), 8) };
    let (out, err) = (Capture::default(), Capture::default());
    // SAFETY: same region; this is its only server.
    let mut server = unsafe { HostServer::new(region.as_ptr(), 8, 1) }
        .with_output(Box::new(out.clone()), Box::new(err.clone()))
        .with_host_calls(testing::operations());
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|n| {
                scope.spawn({
                    let client = &client;
                    let body = &body;
                    move || body(client, n)
                })
            })
            .collect();
        loop {
            let done = workers.iter().all(|w| w.is_finished());
            server.poll().unwrap();
            if done {
                break;
            }
        }
    });
    server.flush().unwrap();
    let text = |c: Capture| String::from_utf8(c.0.lock().unwrap().clone()).unwrap();
    (text(out), text(err))
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
fn serves_prints_and_tests() {
    let (out, err) = run(4, |client, n| {
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
    });
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
    let mut server = unsafe { HostServer::new(region.as_ptr(), 2, 1) }.with_host_calls(testing::operations());
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| (0..5).for_each(|n| assert_eq!(client.test_increment(n), n + 1)));
        while !worker.is_finished() {
            server.poll().unwrap();
        }
    });
    assert_eq!(server.stats(), ServeStats { messages: 5, lanes: 5 });
}

/// A panic's report: its line on stderr, as the host puts it together from the location and the message, and its
/// message alone, kept for the test runner; each run's own, the first reporter's, and a long message whole.
#[test]
fn a_panic_reports_its_line_and_its_message_alone() {
    let (region, client) = two_ports();
    let err = Capture::default();
    // SAFETY: same region; this is its only server.
    let mut server =
        unsafe { HostServer::new(region.as_ptr(), 2, 1) }.with_output(Box::new(io::sink()), Box::new(err.clone()));
    fn serve(server: &mut HostServer, body: &(dyn Fn() + Sync)) {
        std::thread::scope(|scope| {
            let worker = scope.spawn(body);
            while !worker.is_finished() {
                server.poll().unwrap();
            }
        });
        server.flush().unwrap();
    }
    // On the host the coordinates' x are numbers per OS thread (`HostThread`, `gpu_io`'s heads): only their form
    // is known.
    fn lines(text: String) -> String {
        let (mut lines, mut rest) = (String::new(), text.as_str());
        let number = |text: &str| text.find(|c: char| !c.is_ascii_digit()).filter(|&digits| digits > 0);
        while let Some(at) = rest.find("(thread (") {
            lines.push_str(&rest[..at]);
            let after = &rest[at + "(thread (".len()..];
            let after = after[number(after).expect("x")..].strip_prefix(", 0, 0) of block (").expect("thread");
            rest = after[number(after).expect("x")..].strip_prefix(", 0, 0))").expect("block");
            lines.push_str("(THREAD)");
        }
        lines + rest
    }
    let here = std::panic::Location::caller();
    serve(&mut server, &|| gpu_io::report_panic(&client, Some(here), format_args!("two and two\n  left: {}", 4)));
    let expected =
        format!("panicked at {}:{}:{}: two and two\n  left: 4 (THREAD)\n", here.file(), here.line(), here.column());
    assert_eq!(lines(err.text()), expected);
    assert_eq!(server.take_panic_message().as_deref(), Some("two and two\n  left: 4"));
    assert_eq!(server.take_panic_message(), None, "once per run");

    // Longer than a thread's print buffer: it travels in chunks, to both.
    let long = "x".repeat(3 * gpu_io::PRINT_BUFFER + 7);
    serve(&mut server, &|| {
        gpu_io::print(&client, gpu_io::Stream::Stdout, format_args!("expected text printed"));
        gpu_io::report_panic(&client, Some(here), &long);
        gpu_io::report_panic(&client, None, "a second report");
    });
    let second = format!(
        "panicked at {}:{}:{}: {long} (THREAD)\npanicked at <unknown location>: a second report (THREAD)\n",
        here.file(),
        here.line(),
        here.column()
    );
    assert!(lines(err.text()).ends_with(&second), "{}", err.text());
    assert_eq!(server.take_panic_message(), Some(long.clone()), "the first reporter's, whole");

    serve(&mut server, &|| gpu_io::report_panic(&client, Some(here), ""));
    assert_eq!(server.take_panic_message().as_deref(), Some(""), "an empty message is reported too");
    assert!(lines(err.text()).ends_with(":  (THREAD)\n"), "{}", err.text());
    serve(&mut server, &|| gpu_io::report_panic(&client, Some(here), "left over"));
    server.start_run();
    assert_eq!(server.take_panic_message(), None, "a new run starts without one");
}

/// One table serves every opcode: each operation of the opcode list has its built-in handler, the host calls given
/// join them, and host calls given again replace those before.
#[test]
fn one_table_serves_the_opcode_list_and_the_host_calls() {
    let (region, _client) = two_ports();
    // SAFETY: same region; this is its only server.
    let server = unsafe { HostServer::new(region.as_ptr(), 2, 1) };
    let mut served: Vec<u32> = server.routes.keys().copied().collect();
    served.sort();
    assert_eq!(served, gpu_startup_protocol::opcode::ALL);
    let server = server.with_host_calls(testing::operations());
    let increment = testing::INCREMENT.opcode().number();
    assert_eq!(server.routes[&increment].host_call, Some("test increment"));
    assert_eq!(server.routes.len(), gpu_startup_protocol::opcode::ALL.len() + testing::operations().opcodes().count());
    let mut only_square = HostCalls::new();
    only_square.on_call(testing::SQUARE, Ok).unwrap();
    let server = server.with_host_calls(only_square);
    assert!(!server.routes.contains_key(&increment));
    assert_eq!(server.routes.len(), gpu_startup_protocol::opcode::ALL.len() + 1);
}

/// A message whose opcode has no handler ends the run, in the startup's range and in the users': a plain loader
/// serves no test operation.
#[test]
fn unknown_opcode_is_an_error() {
    for op in [0x4242, testing::INCREMENT.opcode().number()] {
        let (region, client) = two_ports();
        let mut port = client.open(op);
        let index = port.index();
        port.send(|_| {});
        port.close();
        // SAFETY: same region; this is its only server.
        let mut server = unsafe { HostServer::new(region.as_ptr(), 2, 1) };
        let error = server.poll().unwrap_err();
        assert!(matches!(error, ServerError::UnknownOpcode { opcode, port } if (opcode, port) == (op, index)));
        assert_eq!(error.to_string(), format!("RPC: no handler for opcode {op:#x} (port {index})"));
    }
}

/// Sends, on `port`, the first packet of a `WRITE` stream of `len` bytes to `stream` from the thread at `writer`:
/// `text` (at most a packet's worth) is what arrives. The rest never comes, as from a thread whose kernel faults or
/// that stalls between two packets.
pub(crate) fn send_first_packet_of_a_write(
    port: &mut startup_common::rpc::Port<'_, HostThread>,
    stream: gpu_io::Stream,
    len: usize,
    text: &[u8],
    writer: ThreadIds,
) {
    let head = WriteHead::for_thread(stream as u8, 0, writer);
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
}

/// Opens a port and sends the first packet of a `WRITE` from thread (0, 0, 0) of block (0, 0, 0) there, then lets
/// the port go, as a thread whose kernel faults between two packets does: nothing uses the port after it.
pub(crate) fn first_packet_of_a_write(client: &Client<HostThread>, stream: gpu_io::Stream, len: usize, text: &[u8]) {
    let mut port = client.open(opcode::WRITE);
    send_first_packet_of_a_write(&mut port, stream, len, text, ThreadIds::default());
    port.close();
}

/// A client that stops in the middle of a stream (its kernel faulted) does not keep the server waiting once
/// `client_gone` says so; the bytes that did arrive are written at once, ending their line, and the port is never
/// served again.
#[test]
fn a_stream_cut_short_is_given_up_and_its_bytes_kept() {
    let (region, client) = two_ports();
    let out = Capture::default();
    // SAFETY: same region; this is its only server.
    let mut server = unsafe { HostServer::new(region.as_ptr(), 2, 1) }
        .with_output(Box::new(out.clone()), Box::new(io::sink()))
        // What is tested is `client_gone`: a loaded machine that stops this thread for a second between two asks
        // must not make the stall limit give the message up first.
        .with_stall_limit(Duration::from_secs(3600));
    first_packet_of_a_write(&client, gpu_io::Stream::Stdout, 1000, b"the first forty bytes of a longer line..");
    let mut asked = 0;
    server
        .poll_watched(&mut || {
            asked += 1;
            asked == 3
        })
        .unwrap();
    assert_eq!(asked, 3, "the server asked until told to give up");
    let given_up = server.take_given_up();
    assert_eq!(
        given_up,
        [GivenUp {
            port: given_up[0].port,
            opcode: opcode::WRITE,
            host_call: None,
            lanes: 1,
            sender: Some(ThreadIds::default()),
            why: GiveUpReason::ClientGone
        }]
    );
    assert_eq!(
        given_up[0].to_string(),
        format!(
            "RPC: gave up a message on port {} (WRITE from thread (0, 0, 0) of block (0, 0, 0)): its client stopped in \
             the middle of it",
            given_up[0].port
        )
    );
    assert!(server.take_given_up().is_empty(), "reported once");
    server.poll_watched(&mut || panic!("nothing is waiting")).unwrap();
    assert!(!server.served_last_poll(), "the abandoned port is not served again");
    assert_eq!(&out.0.lock().unwrap()[..], b"the first forty bytes of a longer line..\n");
    server.flush().unwrap();
    assert_eq!(&out.0.lock().unwrap()[..], b"the first forty bytes of a longer line..\n", "nothing more at the end");
}

/// A client that stalls in the middle of a message while its kernel still runs is given up after the stall limit,
/// reported with its port and thread, and every other thread is served on: nothing tells the server that the client
/// is gone, yet the other thread's output does not wait for ever.
#[test]
fn a_stalled_message_is_given_up_and_the_rest_served() {
    let (region, client) = two_ports();
    let out = Capture::default();
    let limit = Duration::from_millis(100);
    // SAFETY: same region; this is its only server.
    let mut server = unsafe { HostServer::new(region.as_ptr(), 2, 1) }
        .with_output(Box::new(out.clone()), Box::new(io::sink()))
        .with_stall_limit(limit);
    let writer = ThreadIds { thread: [5, 1, 0], block: [3, 0, 2] };
    // What the first packet of a WRITE carries: 40 bytes.
    const TEXT: &[u8; 40] = b"this line stalls after its first packet.";
    let client = &client;
    let stalled_port = std::thread::scope(|scope| {
        let (opened, stalled_port) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let stalled = scope.spawn(move || {
            let mut port = client.open(opcode::WRITE);
            send_first_packet_of_a_write(&mut port, gpu_io::Stream::Stdout, 500, TEXT, writer);
            opened.send(port.index()).unwrap();
            // The client keeps its port (and so its lock) while it stalls, as a GPU thread inside `send_n` does.
            released.recv().unwrap();
            drop(port);
        });
        let stalled_port = stalled_port.recv().unwrap();
        let started = Instant::now();
        let other = scope.spawn(|| gpu_io::write_line(client, gpu_io::Stream::Stdout, b"another thread goes on"));
        while !other.is_finished() {
            server.poll_watched(&mut || false).unwrap();
            assert!(started.elapsed() < limit * 50, "the other thread waits behind the stalled one");
        }
        assert!(started.elapsed() >= limit, "given up before the limit");
        release.send(()).unwrap();
        stalled.join().unwrap();
        stalled_port
    });
    let given_up = server.take_given_up();
    assert_eq!(
        given_up,
        [GivenUp {
            port: stalled_port,
            opcode: opcode::WRITE,
            host_call: None,
            lanes: 1,
            sender: Some(writer),
            why: GiveUpReason::Stalled(limit)
        }]
    );
    assert_eq!(
        given_up[0].to_string(),
        format!(
            "RPC: gave up a message on port {stalled_port} (WRITE from thread (5, 1, 0) of block (3, 0, 2)): its \
             client made no progress for 100ms"
        )
    );
    assert!(server.server.is_retired(stalled_port));
    server.flush().unwrap();
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    assert_eq!(lines, ["another thread goes on", "this line stalls after its first packet."]);
}

/// A message given up is named by what it is: the startup's operation, the host call as registered, or the number.
#[test]
fn a_message_given_up_is_named_by_its_operation() {
    let given_up = |opcode, host_call| GivenUp {
        port: 2,
        opcode,
        host_call,
        lanes: 0x5,
        sender: None,
        why: GiveUpReason::ClientGone,
    };
    let end = "from lanes 0x5): its client stopped in the middle of it";
    assert_eq!(
        given_up(opcode::FILE_READ, None).to_string(),
        format!("RPC: gave up a message on port 2 (FILE_READ {end}")
    );
    assert_eq!(
        given_up(0x1_0001, Some("reverse")).to_string(),
        format!("RPC: gave up a message on port 2 (host call `reverse`, opcode 0x10001, {end}")
    );
    assert_eq!(given_up(0x1_0001, None).to_string(), format!("RPC: gave up a message on port 2 (opcode 0x10001 {end}"));
}
