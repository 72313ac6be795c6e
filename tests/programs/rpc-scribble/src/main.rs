//! Writes over its own RPC region, as a buggy program can, so that the suite checks how the loader ends such a run:
//! in bounded time, with the code `docs/failures.md` gives. Thread 0 writes on ports 1 to 5, which no warp of a
//! one-warp grid uses (its warp has port 0 of its own); `argv[1]` says what:
//!
//! - `garbage`: a `WRITE` announcing 2^62 bytes behind a client outbox of u64::MAX (its lowest bit says "handed
//!   over"), a test hand-offs of 2^64 - 1 rounds behind 3, a test interface of as many rounds from every lane behind
//!   0xffff_ffff (test operations: `gpu-test-loader` serves them), an unknown opcode behind 2 (which reads as idle),
//!   and a server outbox written over; then it returns. The loader gives up the three messages when the kernels end,
//!   writes the 40 bytes that arrived, and exits 1: the program's 0 would hide the lost messages.
//! - `stall`: a `WRITE` announcing 1,000 bytes of which the first 40 arrive; then thread 0 waits 2.5 s on the
//!   device and prints. The loader gives the message up after a second without progress, reports it, serves the
//!   line after it, and exits 1.
//! - `unknown-opcode`: a message with opcode 0x42420000: the loader stops with its error, exit 1.
//! - `no-lanes`: a `FILE_CLOSE` from no lanes: the loader stops with its error, exit 1.
//! - `end-scribble`: a word no startup writes in the control block's end word (where `exit`, `abort` and `_end`
//!   report the program's end), after a line: the loader prints the line, then its error, exit 1.
#![no_std]
#![no_main]

use core::ffi::c_void;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;

use gpu_startup::time::Instant;
use gpu_startup::{println, rpc, thread};
use gpu_startup_protocol::abi::ThreadIds;
use gpu_startup_protocol::messages::WriteHead;
use gpu_startup_protocol::opcode;
use gpu_startup_protocol::region::Layout;
use startup_common::rpc::{Scribble, testing};

/// The program's RPC region, written word by word.
struct Region {
    base: *mut c_void,
    layout: Layout,
}

impl Region {
    fn word(&self, index: usize) -> &AtomicU64 {
        assert!(index < self.layout.words());
        // SAFETY: the index is a word of the region's layout, inside the region the loader keeps for the whole run;
        // every access to it, the host's included, is atomic.
        unsafe { AtomicU64::from_ptr(self.base.cast::<u64>().add(index)) }
    }

    fn set(&self, index: usize, value: u64) {
        self.word(index).store(value, Ordering::Release);
    }

    fn post(&self, port: u32, opcode: u64, mask: u64, packet: &[u64], client_word: u64) {
        Scribble { port, opcode, mask, packet, client_word }.write(&self.layout, |index, value| self.set(index, value));
    }
}

/// The first packet of a `WRITE` to stdout from thread (0, 0, 0) of block (0, 0, 0) announcing `len` bytes, with
/// the 40 that fit.
fn first_packet_of_a_write(len: u64, text: &[u8; 40]) -> [u64; 8] {
    let [head, group] = WriteHead::for_thread(1, 0, ThreadIds::default()).encode();
    let mut packet = [len, head, group, 0, 0, 0, 0, 0];
    for (word, bytes) in text.chunks_exact(8).enumerate() {
        packet[3 + word] =
            u64::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]]);
    }
    packet
}

/// Waits `duration` on the device's clock, or until `done` says so.
fn wait(duration: Duration, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() && start.elapsed() < duration {
        thread::sleep(Duration::from_micros(1));
    }
}

#[gpu_startup::main]
fn main() -> i32 {
    if !thread::is_first() {
        return 0;
    }
    let Some(mode) = gpu_startup::env::args().nth(1) else { return 0 };
    let Some((base, layout)) = rpc::testing::client().region_for_testing() else { return 3 };
    if layout.port_count() < 6 {
        return 3;
    }
    let region = Region { base, layout };
    match mode {
        "garbage" => {
            region.post(
                1,
                opcode::WRITE.into(),
                1,
                &first_packet_of_a_write(1 << 62, b"a line that announces 2^62 bytes, cut..."),
                u64::MAX,
            );
            region.post(2, testing::HAND_OFFS.number().into(), 1, &[u64::MAX], 3);
            region.post(3, testing::INTERFACE.number().into(), u64::MAX, &[u64::MAX, 0], 0xffff_ffff);
            region.post(4, 0xdead, 1, &[], 2);
            region.set(layout.server_outbox(5), 0xdead_beef);
            0
        }
        "stall" => {
            region.post(
                3,
                opcode::WRITE.into(),
                1,
                &first_packet_of_a_write(1000, b"a line that stalls after its 40 bytes..."),
                1,
            );
            wait(Duration::from_millis(2500), || false);
            println!("still served after the stall");
            0
        }
        "unknown-opcode" => {
            region.post(1, 0x4242_0000, 1, &[], 1);
            0
        }
        "no-lanes" => {
            region.post(1, opcode::FILE_CLOSE.into(), 0, &[0], 1);
            0
        }
        "end-scribble" => {
            println!("the line before the scribble");
            let control = rpc::testing::control_block();
            // SAFETY: the loader's control block, which lives for the whole run; the loader reads the word atomically.
            let end = unsafe { AtomicU64::from_ptr(core::ptr::addr_of_mut!((*control).end)) };
            end.store(0xdead_beef_0000_0001, Ordering::Relaxed);
            // The loader stops the run when it sees the word: wait for that (at most 5 s), so that `_end` does not
            // write over it first.
            wait(Duration::from_secs(5), || false);
            0
        }
        _ => 2,
    }
}
