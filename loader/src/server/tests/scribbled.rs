//! The server on a region whose words a test writes directly, as a GPU program that writes over its RPC region does.

use super::*;

/// Writes a region's words directly, as a GPU program that writes over its RPC region does.
#[derive(Clone, Copy)]
pub(crate) struct Scribbler {
    base: usize,
    layout: Layout,
}

impl Scribbler {
    pub(crate) fn new(region: *mut c_void, layout: Layout) -> Self {
        Self { base: region as usize, layout }
    }

    pub(crate) fn set(&self, index: usize, value: u64) {
        assert!(index < self.layout.words());
        // SAFETY: the index is a word of the region's layout, inside the live region, and every access is atomic.
        unsafe { std::sync::atomic::AtomicU64::from_ptr((self.base as *mut u64).add(index)) }
            .store(value, std::sync::atomic::Ordering::Release);
    }

    /// A message on `port`: `opcode` and `mask` in its header, `packet` in the first words of every lane's packet,
    /// then the client outbox set to `client_word`.
    pub(crate) fn post(&self, port: u32, opcode: u64, mask: u64, packet: &[u64], client_word: u64) {
        Scribble { port, opcode, mask, packet, client_word }.write(&self.layout, |index, value| self.set(index, value));
    }
}

/// The user opcode the tests post raw messages with.
const REPOST: UserOpcode = UserOpcode::new(opcode::FIRST_USER, "repost");

/// Posts a one-packet [`REPOST`] message of one lane on `port` of the region at `region`, as a client would,
/// straight through the layout's words.
fn post_raw(region: usize, layout: Layout, port: u32) {
    let scribbler = Scribbler { base: region, layout };
    // SAFETY: the index is a word of the live region; reading it atomically is how the client reads its outbox.
    let out = unsafe { std::sync::atomic::AtomicU64::from_ptr((region as *mut u64).add(layout.client_outbox(port))) }
        .load(std::sync::atomic::Ordering::Relaxed);
    scribbler.post(port, u64::from(REPOST.number()), 1, &[], out ^ 1);
}

/// A message on one of the latest ports is served in the same pass even when it arrives after the scan went
/// past that port's group: here the handler of a message on port 70 (second group) posts one on port 0 (first
/// group, served just before), and one poll serves both.
#[test]
fn a_latest_port_is_looked_at_again_within_the_pass() {
    let layout = Layout::new(128, 1);
    let region = HostRegion::new(layout);
    let address = region.as_ptr() as usize;
    let mut calls = HostCalls::new();
    calls
        .on_message(REPOST, move |port| {
            port.recv(|_, _| {});
            if port.index() == 70 {
                post_raw(address, layout, 0);
            }
            Ok(())
        })
        .unwrap();
    // SAFETY: a fresh zeroed region laid out for 128 ports of one lane, outliving the server; its only server.
    let mut server = unsafe { HostServer::new(region.as_ptr(), 128, 1) }.with_host_calls(calls);
    post_raw(address, layout, 0);
    server.poll().unwrap();
    assert_eq!(server.stats().messages, 1);
    post_raw(address, layout, 70);
    server.poll().unwrap();
    assert_eq!(server.stats().messages, 3, "port 0's second message waited for the next pass");
}

/// A host call of one's own is served by its handler, which keeps its state from one message to the next; its
/// error ends the run with a one-line message naming the call and the error.
#[test]
fn host_calls_are_served_by_their_handlers() {
    const TRIPLE: HostCall<u64, u64> = HostCall::new(0x1_0000, "triple");
    let (region, client) = two_ports();
    let mut calls = HostCalls::new();
    let mut served = 0;
    calls
        .on_call(TRIPLE, move |value| {
            served += 1;
            if value == 0 { Err(format!("nothing to triple in call {served}").into()) } else { Ok(value * 3) }
        })
        .unwrap();
    // SAFETY: same region; this is its only server.
    let mut server = unsafe { HostServer::new(region.as_ptr(), 2, 1) }.with_host_calls(calls);
    let (results, error) = std::thread::scope(|scope| {
        let worker = scope.spawn(|| [client.call(TRIPLE, 14), client.call(TRIPLE, 5)]);
        while !worker.is_finished() {
            server.poll().unwrap();
        }
        let results = worker.join().unwrap();
        // The failing call never gets its answer: its thread stays behind, as a GPU thread would.
        let mut port = client.open(TRIPLE.opcode().number());
        port.send_value(&0u64);
        let index = port.index();
        core::mem::forget(port);
        (results, server.poll().unwrap_err().to_string().replace(&format!("port {index})"), "port P)"))
    });
    assert_eq!(results, [42, 15]);
    assert_eq!(error, "RPC: host call `triple` (opcode 0x10000, port P) failed: nothing to triple in call 3");
}

/// A server on a fresh region of `ports` ports of `lanes` lanes whose output goes to `out`, with the region and a
/// scribbler for it. The region's words stay put when the tuple moves.
fn scribbled(ports: u32, lanes: u32, out: &Capture) -> (HostRegion, Scribbler, HostServer) {
    let layout = Layout::new(ports, lanes);
    let region = HostRegion::new(layout);
    let scribbler = Scribbler::new(region.as_ptr(), layout);
    // SAFETY: a fresh zeroed region of this layout, which the caller keeps as long as the server; its only server.
    let server = unsafe { HostServer::new(region.as_ptr(), ports, lanes) }
        .with_output(Box::new(out.clone()), Box::new(out.clone()))
        .with_stall_limit(Duration::from_millis(50))
        .with_host_calls(testing::operations());
    (region, scribbler, server)
}

/// Messages whose lengths and round counts are absurd, behind a client outbox of u64::MAX (which reads as 1, so
/// the waits inside the message still wait): each ends in bounded time, holding next to nothing, and the port is
/// retired. With nothing to say the client is gone, the stall limit ends them; a test echo that announces more
/// than the server holds is refused at once.
#[test]
fn absurd_lengths_and_rounds_end_in_bounded_time_and_memory() {
    let stdout = WriteHead::for_thread(1, 0, ThreadIds::default()).encode()[0];
    let panic = WriteHead::for_thread(0, 0, ThreadIds::default()).encode()[0];
    let cases: [(u32, &[u64]); 6] = [
        (opcode::WRITE, &[1 << 62, stdout, 0, u64::from_le_bytes(*b"first 8.")]),
        (opcode::WRITE, &[u64::MAX, stdout | u64::from(WriteHead::MORE) << 8, 0]),
        (opcode::PANIC_LOCATION, &[1 << 62, panic, 0, 7 | 3 << 32, u64::from_le_bytes(*b"src/a.rs")]),
        (opcode::PANIC_MESSAGE, &[u64::MAX, panic | u64::from(WriteHead::MORE) << 8, 0]),
        (testing::HAND_OFFS.number(), &[u64::MAX]),
        (testing::INTERFACE.number(), &[u64::MAX, 0]),
    ];
    for (op, packet) in cases {
        for lanes in [1, 32] {
            let out = Capture::default();
            let (_region, scribbler, mut server) = scribbled(2, lanes, &out);
            scribbler.post(1, u64::from(op), u64::MAX, packet, u64::MAX);
            let started = Instant::now();
            server.poll_watched(&mut || false).unwrap();
            let took = started.elapsed();
            assert!(took >= Duration::from_millis(50) && took < Duration::from_secs(5), "{op:#x}: {took:?}");
            let given_up = server.take_given_up();
            assert_eq!(given_up.len(), 1, "{op:#x}");
            assert_eq!((given_up[0].port, given_up[0].why), (1, GiveUpReason::Stalled(Duration::from_millis(50))));
            assert_eq!(server.held_output_bytes(), 0, "{op:#x}: a message given up holds nothing");
            assert!(out.0.lock().unwrap().len() <= 64 * 40, "{op:#x}: only what the first packet carried");
            // The port stays retired whatever the device writes next.
            scribbler.set(Layout::new(2, lanes).client_outbox(1), 0);
            server.poll_watched(&mut || panic!("nothing to wait for")).unwrap();
            assert!(!server.served_last_poll());
        }
    }
    let out = Capture::default();
    let (_region, scribbler, mut server) = scribbled(2, 32, &out);
    scribbler.post(0, u64::from(testing::ECHO.number()), 1 << 7, &[1 << 62], 1);
    let refused = server.poll_watched(&mut || panic!("refused before any wait")).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "RPC: host call `test echo` (opcode 0xffff0002, port 0) failed: lane 7 announced a stream of \
         4611686018427387904 bytes, over the limit of 65536 a lane"
    );
}

/// Numbers a test handler does arithmetic on wrap, rather than panic in a debug build.
#[test]
fn test_handlers_wrap_on_absurd_values() {
    let out = Capture::default();
    let (region, scribbler, mut server) = scribbled(1, 1, &out);
    let layout = region.layout();
    scribbler.post(0, u64::from(testing::INCREMENT.opcode().number()), 1, &[u64::MAX], 1);
    server.poll().unwrap();
    // The reply is in the packet, and the port handed back (both outboxes at 1).
    let reply = Scribbler::new(region.as_ptr(), layout);
    let word = |index: usize| {
        // SAFETY: a word of the live region, read atomically.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(region.as_ptr().cast::<u64>().add(index)) }
            .load(std::sync::atomic::Ordering::Acquire)
    };
    assert_eq!((word(layout.packet_word(0, 0, 0)), word(layout.server_outbox(0))), (0, 1));
    // Two rounds of the interface test where the client answers u64::MAX: the server's successor wraps to 0.
    reply.post(0, u64::from(testing::INTERFACE.number()), 1, &[2, 0], 0);
    let mut answered = 0;
    server
        .poll_watched(&mut || {
            // Each time the server waits for the client's answer: give it u64::MAX.
            if word(layout.server_outbox(0)) != word(layout.client_outbox(0)) {
                return false;
            }
            answered += 1;
            reply.set(layout.packet_word(0, 0, 0), u64::MAX);
            reply.set(layout.client_outbox(0), word(layout.client_outbox(0)) ^ 1);
            answered > 5
        })
        .unwrap();
    assert_eq!(answered, 2, "both rounds answered, the verdict sent");
    assert_eq!(word(layout.packet_word(0, 0, 0)), u64::MAX, "every lane id was right");
    assert!(server.take_given_up().is_empty());
}

/// A message from no lanes is an error, not a message nobody sent.
#[test]
fn a_message_needs_a_lane() {
    let out = Capture::default();
    let (_region, scribbler, mut server) = scribbled(2, 32, &out);
    // Lanes above the group's size do not count: this mask names none of the 32.
    scribbler.post(1, u64::from(opcode::FILE_CLOSE), 0xffff_ffff_0000_0000, &[0], 1);
    let error = server.poll().unwrap_err();
    assert_eq!(error.to_string(), "RPC: a message from no lanes (opcode 0x5, port 1): the RPC region was written over");
}

/// Output as a [`Capture`] receives it: every write call's length.
#[derive(Clone, Default)]
struct WriteSizes(Arc<Mutex<Vec<usize>>>, Capture);

impl Write for WriteSizes {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().push(bytes.len());
        self.1.write(bytes)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A message far over the per-thread cap goes out in pieces as it arrives, never held whole; every byte arrives, in
/// order. Other threads' lines, within the cap, are written whole, between the long message's chunks.
#[test]
fn a_long_write_streams_out_as_it_arrives() {
    let (region, client) = two_ports();
    let sizes = WriteSizes::default();
    // SAFETY: same region; this is its only server.
    let mut server =
        unsafe { HostServer::new(region.as_ptr(), 2, 1) }.with_output(Box::new(sizes.clone()), Box::new(io::sink()));
    // Three chunks of 1.25 MiB each (`print!` sends a long piece as a chunk of its own).
    let part = |letter: u8| String::from_utf8(vec![letter; HELD_PER_THREAD + HELD_PER_THREAD / 4]).unwrap();
    let (a, b, c) = (part(b'a'), part(b'b'), part(b'c'));
    let line = |n: usize| format!("short line {n}: {}\n", "-".repeat(n));
    let client = &client;
    let mut most_held = 0;
    std::thread::scope(|scope| {
        let writers = [
            scope.spawn(|| gpu_io::print(client, gpu_io::Stream::Stdout, format_args!("{a}{b}{c}"))),
            scope.spawn(|| (0..100).for_each(|n| gpu_io::write(client, gpu_io::Stream::Stdout, line(n).as_bytes()))),
        ];
        while !writers.iter().all(|writer| writer.is_finished()) {
            server.poll().unwrap();
            most_held = most_held.max(server.held_output_bytes());
        }
    });
    server.flush().unwrap();
    let mut text = sizes.1.text();
    for n in 0..100 {
        let at = text.find(&line(n)).unwrap_or_else(|| panic!("line {n} is not whole"));
        text.replace_range(at..at + line(n).len(), "");
    }
    assert!(text == [a, b, c].concat(), "the long message lost or changed bytes");
    let writes = sizes.0.lock().unwrap();
    assert!(writes.len() >= 3, "written in pieces: {writes:?}");
    assert!(writes.iter().all(|&n| n <= HELD_PER_THREAD), "a piece larger than the cap: {writes:?}");
    assert!(most_held <= HELD_PER_THREAD + 4096, "one message held, with its entry and a small table: {most_held}");
    assert_eq!(server.held_output_bytes(), 0);
}
