//! The host's cost of serving `WRITE` messages, with no GPU: every port of a region in ordinary memory holds what a
//! warp's `println!` of a 40-byte line leaves there (32 lanes, one packet each), and one `HostServer::poll` serves
//! them all. Prints nanoseconds per message and per line. The output goes to a sink, so writing to a pipe or a
//! terminal is not included; on the GPU the packets also come from memory the device wrote (cache misses here are
//! fewer).
//!
//! Then the cost of one pass over idle ports, which bounds how long a new message waits to be noticed.
//!
//! `cargo bench -p loader --bench serve_write`

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gpu_loader::server::HostServer;
use gpu_startup_protocol::messages::WriteHead;
use gpu_startup_protocol::opcode;
use gpu_startup_protocol::region::Layout;
use startup_common::rpc::HostRegion;

const PORTS: u32 = 1024;
const LANES: u32 = 32;
const ROUNDS: u32 = 200;
const LINE: &[u8; 40] = b"line 123456 from thread 1023 of block 97";

fn main() {
    let layout = Layout::new(PORTS, LANES);
    let region = HostRegion::new(layout);
    // SAFETY: the region is `layout.words()` atomics that live as long as `region`, below.
    let word = |index: usize| unsafe { &*region.as_ptr().cast::<AtomicU64>().add(index) };
    // SAFETY: the region is laid out for these counts, zeroed, outlives the server, and nothing else serves it.
    let mut server = unsafe { HostServer::new(region.as_ptr(), PORTS, LANES) }
        .with_output(Box::new(std::io::sink()), Box::new(std::io::sink()));
    let data: Vec<u64> = LINE.chunks(8).map(|bytes| u64::from_le_bytes(bytes.try_into().expect("8 bytes"))).collect();

    let mut serving = Duration::ZERO;
    for round in 0..ROUNDS {
        // What the device would do: header, each lane's packet, then the client outbox toggled.
        for port in 0..PORTS {
            word(layout.header(port)).store(u64::from(opcode::WRITE), Ordering::Relaxed);
            word(layout.header(port) + 1).store(u64::from(u32::MAX), Ordering::Relaxed);
            for lane in 0..LANES {
                let head =
                    WriteHead { stream: 1, flags: WriteHead::NEWLINE, thread: u64::from(lane), group: port.into() };
                let [head0, head1] = head.encode();
                let words = [LINE.len() as u64, head0, head1].into_iter().chain(data.iter().copied());
                for (index, value) in words.enumerate() {
                    word(layout.packet_word(port, index, lane)).store(value, Ordering::Relaxed);
                }
            }
            word(layout.client_outbox(port)).store(u64::from((round + 1) % 2), Ordering::Release);
        }
        let started = Instant::now();
        server.poll().expect("the messages are well formed");
        serving += started.elapsed();
        assert!(server.served_last_poll(), "the server found the messages");
    }
    let stats = server.stats();
    assert_eq!(stats.messages, u64::from(PORTS * ROUNDS), "every message was served once");
    let per_message = serving.as_nanos() as f64 / stats.messages as f64;
    println!(
        "serve_write: {} messages of {LANES} lines of {} bytes: {per_message:.0} ns per message, {:.1} ns per line",
        stats.messages,
        LINE.len(),
        per_message / f64::from(LANES)
    );
    idle_pass();
}

/// Nanoseconds per `HostServer::poll` that finds nothing, for a few port counts.
fn idle_pass() {
    const PASSES: u32 = 100_000;
    for ports in [64, PORTS, 4096] {
        let region = HostRegion::new(Layout::new(ports, LANES));
        // SAFETY: the region is laid out for these counts, zeroed, outlives the server, and nothing else serves it.
        let mut server = unsafe { HostServer::new(region.as_ptr(), ports, LANES) };
        let started = Instant::now();
        for _ in 0..PASSES {
            server.poll().expect("nothing to serve");
        }
        let per_pass = started.elapsed().as_nanos() as f64 / f64::from(PASSES);
        println!("idle pass: {ports} ports: {per_pass:.0} ns ({:.2} ns per port)", per_pass / f64::from(ports));
    }
}
