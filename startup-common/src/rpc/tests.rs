//! Protocol tests on one region in ordinary memory: single-threaded sequences (quick under Miri), a few threads, and
//! the loom models of the port hand-off.

use super::testing::TestOperations;
use super::*;
use crate::gpu::HostThread;

/// The test operations' opcodes, as message headers carry them.
const TEST_INCREMENT: u32 = testing::INCREMENT.opcode().number();
const TEST_NOOP: u32 = testing::NOOP.opcode().number();
const TEST_ECHO: u32 = testing::ECHO.number();

#[cfg(not(loom))]
mod plain {
    use super::*;
    use std::sync::Arc;
    use std::vec::Vec;

    fn setup(ports: u32) -> (HostRegion, Client<HostThread>) {
        let region = HostRegion::new(Layout::new(ports, 1));
        let client = Client::new();
        // SAFETY: a fresh zeroed region laid out for `ports` ports of one lane; the tests keep it alive while the
        // client is used.
        unsafe { client.reset(region.as_ptr(), ports) };
        (region, client)
    }

    /// Serves the increment waiting on port `index`: the server's half of `Client::test_increment`.
    fn answer_increment(server: &mut Server, index: u32) {
        let mut sport = server.open(index).expect("a message is waiting");
        let mut value = 0;
        sport.recv(|_, packet| value = packet.get(0));
        sport.send(|_, packet| packet.set(0, value + 1));
    }

    fn server(region: &HostRegion) -> Server {
        let layout = region.layout();
        // SAFETY: the region outlives the server in every test, and each test has one server.
        unsafe { Server::new(region.as_ptr(), layout.port_count(), layout.lane_size()) }
    }

    #[test]
    fn layout_sizes_and_offsets() {
        let layout = Layout::new(4, 32);
        // 2 mailbox blocks of 8 words (rounded up), then 4 ports of a header line and 8 words × 32 lanes.
        assert_eq!(layout.words(), 2 * 8 + 4 * (8 + 8 * 32));
        assert_eq!(layout.size(), layout.words() * 8);
        assert_eq!(layout.client_outbox(3), 3);
        assert_eq!(layout.server_outbox(0), 8);
        assert_eq!(layout.header(1), 16 + 264);
        assert_eq!(layout.packet_word(1, 2, 5), 16 + 264 + 8 + 2 * 32 + 5);
        assert_eq!(region_size(DEFAULT_PORT_COUNT, 32), 2 * 1024 * 8 + 1024 * (64 + 2048));
        assert_eq!(region_size(MAX_PORTS, 64), 2 * 4096 * 8 + 4096 * (64 + 4096));
        assert_eq!(region_size(1, 1), 2 * 64 + 128);
        // Every port's packet block starts on a cache line, so a warp's store of one word is whole lines.
        for lanes in [1, 32, 64] {
            let layout = Layout::new(13, lanes);
            for port in 0..13 {
                assert_eq!(layout.header(port) * 8 % Layout::ALIGN, 0);
            }
            assert_eq!(layout.size() % Layout::ALIGN, 0);
        }
    }

    #[test]
    #[should_panic(expected = "port count out of range")]
    fn too_many_ports_are_refused() {
        let _ = Layout::new(MAX_PORTS + 1, 32);
    }

    #[test]
    fn stream_packet_counts() {
        assert_eq!(first_packet_bytes(0), 56);
        assert_eq!(first_packet_bytes(2), 40);
        assert_eq!(stream_packets(0, 0), 1);
        assert_eq!(stream_packets(56, 0), 1);
        assert_eq!(stream_packets(57, 0), 2);
        assert_eq!(stream_packets(56 + 64, 0), 2);
        assert_eq!(stream_packets(56 + 65, 0), 3);
        assert_eq!(stream_packets(41, 2), 2);
    }

    #[test]
    fn write_head_round_trips() {
        let head = WriteHead {
            stream: 2,
            flags: WriteHead::MORE | WriteHead::NEWLINE,
            thread: 0x1234_5678_9abc,
            group: u64::MAX,
        };
        assert_eq!(WriteHead::decode(head.encode()), head);
        // The thread's coordinates come back from a head for reports: x, y, z of the thread in 16 bits each, the
        // block's x whole and its y and z in 16 bits.
        let ids = ThreadIds { thread: [1023, 2, 63], block: [0x8_0001, 65535, 7] };
        let head = WriteHead::decode(WriteHead::for_thread(1, 0, ids).encode());
        assert_eq!((head.stream, head.flags, head.writer()), (1, 0, ids));
        let wide = ThreadIds { thread: [0x1_0001, 0, 0], block: [0, 0x1_0002, 0] };
        assert_eq!(WriteHead::for_thread(1, 0, wide).writer(), ThreadIds { thread: [1, 0, 0], block: [0, 2, 0] });
    }

    #[test]
    fn unready_client_reports_it() {
        let client = Client::<HostThread>::new();
        assert!(!client.is_ready());
        let (_region, client) = setup(1);
        assert!(client.is_ready());
    }

    /// One thread plays both sides; each wait is already satisfied when it comes, so this is quick under Miri.
    #[test]
    fn request_reply_in_one_thread() {
        let (region, client) = setup(2);
        let mut server = server(&region);
        assert_eq!(server.next_pending(0), None);

        let mut port = client.open(TEST_INCREMENT);
        let index = port.index();
        port.send(|packet| packet.set(0, 41));
        assert!(server.is_pending(index));
        {
            let mut sport = server.open(index).expect("pending");
            assert_eq!((sport.opcode(), sport.lane_mask()), (TEST_INCREMENT, 1));
            let mut value = 0;
            sport.recv(|lane, packet| {
                assert_eq!(lane, 0);
                value = packet.get(0);
            });
            sport.send(|_, packet| packet.set(0, value + 1));
        }
        assert!(!server.is_pending(index));
        let mut reply = 0;
        port.recv(|packet| reply = packet.get(0));
        port.close();
        assert_eq!(reply, 42);

        // The port is free again: the next open may take it.
        let mut port = client.open(opcode::EXIT);
        port.send(|packet| packet.set(0, -5i64 as u64));
        port.close();
        let index = server.next_pending(0).expect("the exit is waiting");
        let mut sport = server.open(index).unwrap();
        assert_eq!(sport.opcode(), opcode::EXIT);
        sport.recv(|_, packet| assert_eq!(packet.get(0) as i64, -5));
        sport.close();
        assert_eq!(server.next_pending(0), None);
    }

    /// A run that ends while a group holds a port (another thread called `exit`) leaves the port's lock taken; the
    /// next run's `reset` frees it without clearing anything, and the stale memo is not trusted.
    #[test]
    fn reset_frees_ports_an_earlier_run_left_locked() {
        let (region, client) = setup(1);
        let mut port = client.open(TEST_INCREMENT);
        port.send(|packet| packet.set(0, 1));
        // The run ends here: the port stays locked, the server never answers.
        core::mem::forget(port);

        let region_again = HostRegion::new(region.layout());
        // SAFETY: a fresh zeroed region of the same layout; no other thread uses the client.
        unsafe { client.reset(region_again.as_ptr(), 1) };
        let mut server = server(&region_again);
        let mut port = client.open(TEST_INCREMENT);
        port.send(|packet| packet.set(0, 41));
        answer_increment(&mut server, 0);
        let mut reply = 0;
        port.recv(|packet| reply = packet.get(0));
        port.close();
        assert_eq!(reply, 42);
    }

    /// The server keeps its outboxes' values itself: a server made on a region an earlier server left at 1 must start
    /// from there, or it would take the idle port for a pending one.
    #[test]
    fn a_new_server_starts_from_the_outboxes_it_finds() {
        let (region, client) = setup(2);
        let mut first = server(&region);
        // One message leaves both outboxes of its port at 1.
        let mut port = client.open(TEST_INCREMENT);
        let index = port.index();
        port.send(|packet| packet.set(0, 1));
        answer_increment(&mut first, index);
        port.recv(|_| {});
        port.close();
        let mut second = server(&region);
        assert_eq!(second.pending_in_group(0), 0);
        assert_eq!(second.next_pending(0), None);
        let mut port = client.open(TEST_INCREMENT);
        port.send(|packet| packet.set(0, 7));
        assert_eq!(second.pending_in_group(0), 1 << port.index());
        answer_increment(&mut second, port.index());
        let mut reply = 0;
        port.recv(|packet| reply = packet.get(0));
        assert_eq!(reply, 8);
    }

    /// A send-only message leaves the port with the server until it is served: other opens skip it.
    #[test]
    fn busy_port_is_skipped() {
        let (region, client) = setup(2);
        let mut server = server(&region);
        let mut first = client.open(opcode::ABORT);
        first.send(|_| {});
        let busy = first.index();
        first.close();
        let second = client.open(TEST_NOOP);
        assert_ne!(second.index(), busy);
        drop(second);
        server.open(busy).unwrap().recv(|_, _| {});
    }

    #[test]
    fn streams_of_every_boundary_length() {
        let (region, client) = setup(1);
        let mut server = server(&region);
        for len in [0, 1, 7, 8, 55, 56, 57, 120, 121, 200] {
            let input: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            // Each packet after the first waits for the other side to take the previous one: a client thread.
            std::thread::scope(|scope| {
                let worker = scope.spawn(|| {
                    let mut output = [0u8; 256];
                    let n = client.test_echo(&input, &mut output);
                    (n, output)
                });
                let mut served = false;
                while !served {
                    if let Some(mut port) = server.open(0) {
                        let received = port.recv_n_vec::<0>(u64::MAX).unwrap();
                        assert_eq!(received.len(), 1);
                        assert_eq!(received[0].data, input);
                        port.send_n(|_| &received[0].data);
                        served = true;
                    }
                }
                let (n, output) = worker.join().unwrap();
                assert_eq!(n, len);
                assert_eq!(&output[..len], &input[..]);
            });
        }
    }

    /// Writes `value` into word `index` of `region`, as a device program that scribbles over its RPC region does.
    fn scribble(region: &HostRegion, index: usize, value: u64) {
        // SAFETY: `index` is a word of the region's layout; every word is an atomic, and only atomic stores touch it.
        unsafe { &*region.as_ptr().cast::<crate::sync::AtomicU64>().add(index) }
            .store(value, core::sync::atomic::Ordering::Release);
    }

    /// A client outbox that holds neither 0 nor 1 is read by its lowest bit everywhere: the scan, `is_pending` and
    /// `open` agree whether a message waits, and a wait inside the message still waits (and asks its watcher) when the
    /// word keeps a value whose bit says the client has the buffers.
    #[test]
    fn a_corrupt_mailbox_word_is_read_one_way() {
        let (region, _client) = setup(2);
        let layout = region.layout();
        let mut server = server(&region);
        for (value, pending) in [(2, false), (0xdead_beef_0000_0000, false), (3, true), (u64::MAX, true)] {
            scribble(&region, layout.client_outbox(1), value);
            assert_eq!(server.is_pending(1), pending, "{value:#x}");
            assert_eq!(server.pending_in_group(0), u64::from(pending) << 1, "{value:#x}");
            assert_eq!(server.next_pending(0), pending.then_some(1), "{value:#x}");
        }
        // A stream of 2^62 bytes announced in the first packet; the word stays at u64::MAX (bit 1): once the server
        // has handed the buffers back it must wait for the client, asking its watcher, not read on for ever.
        let echo = Scribble { port: 1, opcode: TEST_ECHO.into(), mask: 1, packet: &[1 << 62], client_word: u64::MAX };
        echo.write(&layout, |index, value| scribble(&region, index, value));
        let mut asked = 0;
        let mut watch = |hand_offs: u64| {
            assert_eq!(hand_offs, 0, "no hand-off came");
            asked += 1;
            asked == 2
        };
        let mut port = server.open(1).expect("bit 1 is pending").watched(&mut watch);
        let mut pieces = 0;
        let outcome = port.recv_n(|piece| {
            assert_eq!((piece.total, piece.offset, piece.bytes.len()), (1 << 62, 0, 56));
            pieces += 1;
            Ok::<(), ()>(())
        });
        assert_eq!((outcome, pieces), (Ok(()), 1));
        assert!(port.is_abandoned());
        drop(port);
        assert_eq!(asked, 2);
        // The port is retired: whatever its words say from now on, it is never served again.
        assert!(server.is_retired(1) && !server.is_retired(0));
        for value in [0, 1, 2, 3] {
            scribble(&region, layout.client_outbox(1), value);
            assert!(!server.is_pending(1));
            assert_eq!(server.pending_in_group(0), 0);
            assert!(server.open(1).is_none());
        }
    }

    /// An error from a stream's sink stops the stream at once, whatever length the client announced, and abandons
    /// the message.
    #[test]
    fn a_sink_error_stops_the_stream() {
        let (region, _client) = setup(1);
        let layout = region.layout();
        let mut server = server(&region);
        // A test echo from one lane announcing `len` bytes, written into `region`.
        let echo = |region: &HostRegion, len: u64| {
            let message = Scribble { port: 0, opcode: TEST_ECHO.into(), mask: 1, packet: &[len], client_word: 1 };
            message.write(&layout, |index, value| scribble(region, index, value));
        };
        echo(&region, u64::MAX);
        let mut port = server.open(0).unwrap();
        let mut calls = 0;
        let outcome = port.recv_n(|piece| {
            calls += 1;
            if piece.total > 1000 { Err(piece.total) } else { Ok(()) }
        });
        assert_eq!((outcome, calls), (Err(u64::MAX), 1));
        assert!(port.is_abandoned());
        drop(port);
        assert!(server.open(0).is_none(), "retired");
        // Owned reception refuses such a stream the same way, before holding anything.
        let (fresh, _client) = setup(1);
        let mut fresh_server = self::server(&fresh);
        echo(&fresh, 1 << 40);
        let refused = fresh_server.open(0).unwrap().recv_n_vec::<0>(4096);
        assert_eq!(refused, Err(StreamTooLong { lane: 0, len: 1 << 40, limit: 4096 }));
    }

    /// A client that never keeps the server waiting (it streams on and on) still lets the watcher decide every
    /// 1,024 hand-offs, so the loader notices a fault, a timeout or a signal in the middle of an endless message.
    #[test]
    #[cfg_attr(miri, ignore = "tens of thousands of hand-offs between threads")]
    fn a_long_stream_asks_its_watcher_as_it_goes() {
        let (region, client) = setup(1);
        let mut server = server(&region);
        let data = std::vec![7u8; 56 + 64 * 3000];
        let mut seen = Vec::new();
        let mut received = 0u64;
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                let mut port = client.open(TEST_ECHO);
                port.send_n(&data);
                // The server gives the message up before the end: the client stops here, as a stopped kernel would.
                core::mem::forget(port);
            });
            let mut watch = |hand_offs: u64| {
                seen.push(hand_offs);
                hand_offs >= 2048
            };
            let mut port = loop {
                if let Some(port) = server.open(0) {
                    break port.watched(&mut watch);
                }
            };
            port.recv_n(|piece| {
                received += piece.bytes.len() as u64;
                Ok::<(), ()>(())
            })
            .unwrap();
            assert!(port.is_abandoned());
            drop(port);
            // The client waits for a hand-back that never comes; a scoped thread must end, so answer it by hand.
            scribble(&region, region.layout().server_outbox(0), 0);
            while !worker.is_finished() {
                scribble(&region, region.layout().server_outbox(0), region_client_bit(&region));
                std::thread::yield_now();
            }
        });
        assert!(seen.contains(&1024) && seen.contains(&2048), "asked at {seen:?}");
        // The first packet, then 2,047 more: the 2,048th hand-off asked, and the stream stopped without reading it.
        assert_eq!(received, 56 + 64 * 2047, "the stream stopped when the watcher said so");
    }

    /// The client outbox of port 0, as the server reads it.
    fn region_client_bit(region: &HostRegion) -> u64 {
        // SAFETY: word 0 is port 0's client outbox, an atomic of the live region.
        mailbox_bit(
            unsafe { &*region.as_ptr().cast::<crate::sync::AtomicU64>() }.load(core::sync::atomic::Ordering::Acquire),
        )
    }

    /// A few threads against one server thread over 2 ports: every increment answered exactly once.
    #[test]
    fn few_threads_increment() {
        let threads = if cfg!(miri) { 3 } else { 8 };
        let rounds = if cfg!(miri) { 4 } else { 500 };
        let (region, client) = setup(2);
        let client = Arc::new(client);
        let mut server = server(&region);
        std::thread::scope(|scope| {
            for t in 0..threads {
                let client = &client;
                scope.spawn(move || {
                    for r in 0..rounds {
                        let value = (t * 1_000_000 + r) as u64;
                        assert_eq!(client.test_increment(value), value + 1);
                    }
                });
            }
            let mut served = 0;
            while served < threads * rounds {
                for index in 0..2 {
                    if let Some(mut port) = server.open(index) {
                        let mut value = 0;
                        port.recv(|_, packet| value = packet.get(0));
                        port.send(|_, packet| packet.set(0, value + 1));
                        served += 1;
                    }
                }
                std::thread::yield_now();
            }
        });
    }
}

/// Loom models of the hand-off: `RUSTFLAGS="--cfg loom" cargo test -p startup-common --release --features host loom`.
#[cfg(loom)]
mod loom_models {
    use super::*;
    use loom::thread;
    use std::sync::Arc;

    fn builder() -> loom::model::Builder {
        let mut builder = loom::model::Builder::new();
        // The clients and the server poll, and loom explores every value each poll may read: the full space of the
        // one-port models is beyond a small machine's hours. So the defaults bound it (2 preemptions, the first
        // 20 000 executions); `LOOM_MAX_PREEMPTIONS` and `LOOM_MAX_PERMUTATIONS` (0: no limit) widen it.
        if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
            builder.preemption_bound = Some(2);
        }
        builder.max_permutations = match std::env::var("LOOM_MAX_PERMUTATIONS") {
            Ok(limit) => Some(limit.parse().expect("a number")).filter(|&limit| limit > 0),
            Err(_) => Some(20_000),
        };
        builder.max_branches = 100_000;
        builder
    }

    fn setup(ports: u32) -> (Arc<HostRegion>, Arc<Client<HostThread>>) {
        let region = Arc::new(HostRegion::new(Layout::new(ports, 1)));
        let client = Arc::new(Client::new());
        // SAFETY: a fresh region of loom atomics for `ports` ports of one lane, kept alive by the `Arc`s until every
        // thread of the model is joined.
        unsafe { client.reset(region.as_ptr(), ports) };
        (region, client)
    }

    /// Serves `messages` increments (or one-packet sends, answered when `reply`) and returns what was received.
    fn serve(region: &HostRegion, messages: usize) -> std::vec::Vec<(u32, u64)> {
        let layout = region.layout();
        // SAFETY: the region outlives this function; the model has one server.
        let mut server = unsafe { Server::new(region.as_ptr(), layout.port_count(), layout.lane_size()) };
        let mut seen = std::vec::Vec::new();
        while seen.len() < messages {
            let mut any = false;
            for index in 0..layout.port_count() {
                if let Some(mut port) = server.open(index) {
                    any = true;
                    let opcode = port.opcode();
                    let mut value = 0;
                    port.recv(|_, packet| value = packet.get(0));
                    if opcode == TEST_INCREMENT {
                        port.send(|_, packet| packet.set(0, value + 1));
                    }
                    seen.push((opcode, value));
                }
            }
            if !any {
                thread::yield_now();
            }
        }
        seen
    }

    /// Two clients share one port: the lock and the ownership check serialize them, and each reply reaches the
    /// client that asked.
    #[test]
    fn loom_two_clients_one_port() {
        builder().check(|| {
            let (region, client) = setup(1);
            let workers: std::vec::Vec<_> = (0..2u64)
                .map(|n| {
                    let client = client.clone();
                    thread::spawn(move || assert_eq!(client.test_increment(10 * n + 1), 10 * n + 2))
                })
                .collect();
            let mut seen = serve(&region, 2);
            seen.sort();
            assert_eq!(seen, [(TEST_INCREMENT, 1), (TEST_INCREMENT, 11)]);
            for worker in workers {
                worker.join().unwrap();
            }
        });
    }

    /// Two clients, two ports: they may pick either port; nothing is lost or duplicated.
    #[test]
    fn loom_two_clients_two_ports() {
        builder().check(|| {
            let (region, client) = setup(2);
            let workers: std::vec::Vec<_> = (0..2u64)
                .map(|n| {
                    let client = client.clone();
                    thread::spawn(move || assert_eq!(client.test_increment(n + 5), n + 6))
                })
                .collect();
            let mut seen = serve(&region, 2);
            seen.sort();
            assert_eq!(seen, [(TEST_INCREMENT, 5), (TEST_INCREMENT, 6)]);
            for worker in workers {
                worker.join().unwrap();
            }
        });
    }

    /// A fire-and-forget message (EXIT) leaves the port with the server; a second client on the only port must wait
    /// for the server to finish it, and must not see or clobber its packet.
    #[test]
    fn loom_send_only_then_request_on_one_port() {
        builder().check(|| {
            let (region, client) = setup(1);
            let exiting = {
                let client = client.clone();
                thread::spawn(move || client.exit(3))
            };
            let asking = {
                let client = client.clone();
                thread::spawn(move || assert_eq!(client.test_increment(7), 8))
            };
            let mut seen = serve(&region, 2);
            seen.sort();
            assert_eq!(seen, [(opcode::EXIT, 3), (TEST_INCREMENT, 7)]);
            exiting.join().unwrap();
            asking.join().unwrap();
        });
    }

    /// Two lane groups of one warp (a divergent branch): lane 0 and lane 1 of a two-lane warp, each a group of its
    /// own, in a block with block memory and a region with a port for every warp.
    struct TwoLaneWarp;

    loom::thread_local! {
        static LANE: std::cell::Cell<u32> = std::cell::Cell::new(0);
    }

    loom::lazy_static! {
        /// The block's memory, for its one warp; fresh in every execution of a model.
        static ref BLOCK_MEMORY: HostBlockMemory<1> = HostBlockMemory::default();
    }

    // SAFETY: every group is one lane, so every lane operation is trivially uniform across it.
    unsafe impl crate::Gpu for TwoLaneWarp {
        const LANE_SIZE: u32 = 2;

        fn lane_id() -> u32 {
            LANE.with(|lane| lane.get())
        }

        fn lane_mask() -> u64 {
            1 << Self::lane_id()
        }

        fn broadcast_first(_mask: u64, value: u32) -> u32 {
            value
        }

        fn ballot(mask: u64, predicate: bool) -> u64 {
            if predicate { mask } else { 0 }
        }

        fn sync_lanes(_mask: u64) {}

        fn sleep_briefly() {
            thread::yield_now();
        }

        fn thread_ids() -> crate::ThreadIds {
            crate::ThreadIds { thread: [Self::lane_id(), 0, 0], block: [0; 3] }
        }

        fn launch_shape() -> crate::abi::LaunchParams {
            crate::abi::LaunchParams { threads: [2, 1, 1], blocks: [1, 1, 1] }
        }

        fn block_memory() -> Option<core::ptr::NonNull<crate::BlockMemory>> {
            Some(BLOCK_MEMORY.as_block_memory())
        }

        /// The models prepare the block on their main thread, as lane 0, before they start the lanes.
        fn sync_block() {}

        fn nanoseconds() -> u64 {
            crate::gpu::host_nanoseconds()
        }

        fn end_thread() -> ! {
            unreachable!("no lane ends in the models")
        }

        fn trap() -> ! {
            panic!("a lane trapped")
        }
    }

    fn spawn_lane(lane: u32, body: impl FnOnce() + Send + 'static) -> thread::JoinHandle<()> {
        thread::spawn(move || {
            LANE.with(|cell| cell.set(lane));
            body()
        })
    }

    fn setup_two_lanes() -> (Arc<HostRegion>, Arc<Client<TwoLaneWarp>>) {
        let region = Arc::new(HostRegion::new(Layout::new(1, 2)));
        let client = Arc::new(Client::new());
        // SAFETY: a fresh region of loom atomics for one port of two lanes, kept alive by the `Arc`s until every
        // thread of the model is joined.
        unsafe { client.reset(region.as_ptr(), 1) };
        // SAFETY: as the block's lane 0 (the main thread's lane), before any lane uses the client; spawning the lanes
        // orders it before them, as the barrier would.
        unsafe { client.prepare_block() };
        (region, client)
    }

    /// The two groups of the warp share its own port through the block-memory lock: each reply reaches the group that
    /// asked.
    #[test]
    fn loom_two_groups_of_a_warp_on_its_own_port() {
        builder().check(|| {
            let (region, client) = setup_two_lanes();
            let workers: std::vec::Vec<_> = (0..2u32)
                .map(|lane| {
                    let client = client.clone();
                    let value = 10 * u64::from(lane) + 1;
                    spawn_lane(lane, move || {
                        let mut port = client.open(TEST_INCREMENT);
                        assert_eq!(port.index(), 0, "the warp's own port");
                        port.send(|packet| packet.set(0, value));
                        let mut reply = 0;
                        port.recv(|packet| reply = packet.get(0));
                        port.close();
                        assert_eq!(reply, value + 1);
                    })
                })
                .collect();
            let mut seen = serve(&region, 2);
            seen.sort();
            assert_eq!(seen, [(TEST_INCREMENT, 1), (TEST_INCREMENT, 11)]);
            for worker in workers {
                worker.join().unwrap();
            }
        });
    }

    /// On the warp's own port, a group that follows a fire-and-forget message (EXIT) waits for the server to finish
    /// it instead of moving to another port, and does not see or clobber its packet.
    #[test]
    fn loom_send_only_then_request_on_a_warps_own_port() {
        builder().check(|| {
            let (region, client) = setup_two_lanes();
            let exiting = {
                let client = client.clone();
                spawn_lane(0, move || client.exit(3))
            };
            let asking = {
                let client = client.clone();
                spawn_lane(1, move || assert_eq!(client.test_increment(7), 8))
            };
            let mut seen = serve(&region, 2);
            seen.sort();
            assert_eq!(seen, [(opcode::EXIT, 3), (TEST_INCREMENT, 7)]);
            exiting.join().unwrap();
            asking.join().unwrap();
        });
    }

    /// A two-packet stream each way between one client and the server.
    #[test]
    fn loom_multi_packet_echo() {
        builder().check(|| {
            let (region, client) = setup(1);
            let worker = thread::spawn(move || {
                let input: std::vec::Vec<u8> = (0..70).collect();
                let mut output = [0u8; 70];
                assert_eq!(client.test_echo(&input, &mut output), 70);
                assert_eq!(&output[..], &input[..]);
            });
            // SAFETY: the region outlives the server; the model has one server.
            let mut server = unsafe { Server::new(region.as_ptr(), 1, 1) };
            loop {
                if let Some(mut port) = server.open(0) {
                    let received = port.recv_n_vec::<0>(u64::MAX).unwrap();
                    assert_eq!(received[0].data.len(), 70);
                    port.send_n(|_| &received[0].data);
                    break;
                }
                thread::yield_now();
            }
            worker.join().unwrap();
        });
    }
}
