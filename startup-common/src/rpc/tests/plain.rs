//! Sequences on one region from one host thread (quick under Miri), and a few threads at once.

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
    send_only(&client, -5i64 as u64);
    let index = server.next_pending(0).expect("the send-only message is waiting");
    let mut sport = server.open(index).unwrap();
    assert_eq!(sport.opcode(), SEND_ONLY);
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
    let mut first = client.open(SEND_ONLY);
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
