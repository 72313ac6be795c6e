//! The loader's RPC server (`HostServer::poll_watched`, with every built-in handler and the test operations' host
//! calls; the file operations with the file system denied and an empty stdin) on a region whose words a script
//! writes, as a buggy GPU program can: mailboxes, headers, lane masks, lengths, round counts, at any moment. Nothing
//! may panic, every call must return in a bounded number of steps, and the output held back never passes its cap.
//!
//! The input: byte 0 picks the port count (1 to 70: one or two groups of 64), byte 1 the lanes per group (1, 2, 32
//! or 64); then a script of records, each a tag byte and its operands:
//! - tag % 4 == 0 or 1: word index (u16, modulo the region's words) and a value (u64, little-endian);
//! - tag % 4 == 2: word index (u16) and the small value `tag >> 2` (0 to 63: mailboxes, opcodes, short lengths);
//! - tag % 4 == 3: the end of a batch.
//!
//! The first batch is written before the first poll. Every time the server asks its watcher (a wait for the client
//! in the middle of a message, or a long message's progress check), the next batch is written, as a client would
//! send its next packet meanwhile; once the script is done the watcher says the client is gone. Between polls, too,
//! the next batch is written. So a run takes at most as many steps as the script has batches, plus a few polls.

#![no_main]

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpu_loader::server::{HELD_IN_ALL, HostServer};
use gpu_startup_protocol::region::Layout;
use libfuzzer_sys::fuzz_target;
use startup_common::rpc::{HostRegion, testing};

/// Polls after the script is done, to see that given-up ports stay retired.
const EXTRA_POLLS: usize = 2;

/// Counts the bytes written, keeps none.
#[derive(Clone, Default)]
struct Counter(Arc<Mutex<u64>>);

impl Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        *self.0.lock().unwrap() += bytes.len() as u64;
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The script, read a batch at a time.
struct Script<'a> {
    bytes: &'a [u8],
    words: &'a [AtomicU64],
}

impl Script<'_> {
    fn done(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Writes the next batch into the region.
    fn next_batch(&mut self) {
        while let Some((&tag, rest)) = self.bytes.split_first() {
            self.bytes = rest;
            if tag % 4 == 3 {
                return;
            }
            let Some(index) = self.take::<2>().map(u16::from_le_bytes) else { return };
            let value = match tag % 4 {
                2 => u64::from(tag >> 2),
                _ => match self.take::<8>() {
                    Some(value) => u64::from_le_bytes(value),
                    None => return,
                },
            };
            self.words[usize::from(index) % self.words.len()].store(value, Ordering::Release);
        }
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (first, rest) = self.bytes.split_first_chunk::<N>()?;
        self.bytes = rest;
        Some(*first)
    }
}

fuzz_target!(|data: &[u8]| {
    let [ports, lanes, script @ ..] = data else { return };
    let ports = 1 + u32::from(*ports) % 70;
    let lanes = [1, 2, 32, 64][usize::from(*lanes % 4)];
    let layout = Layout::new(ports, lanes);
    let region = HostRegion::new(layout);
    // SAFETY: the region's words are `layout.words()` atomics that live as long as `region`, past every use below.
    let words = unsafe { std::slice::from_raw_parts(region.as_ptr().cast::<AtomicU64>(), layout.words()) };
    let output = Counter::default();
    // SAFETY: a fresh zeroed region of this layout, outliving the server; its only server.
    let mut server = unsafe { HostServer::new(region.as_ptr(), ports, lanes) }
        .with_output(Box::new(output.clone()), Box::new(output.clone()))
        .with_stall_limit(Duration::ZERO)
        .with_host_calls(testing::operations())
        // The file operations check every request as usual, but must not open, remove or rename the machine's files.
        .with_stdin(Box::new(io::empty()))
        .deny_file_system();
    let script = Mutex::new(Script { bytes: script, words });
    let mut retired = Vec::new();
    let mut polls_after_the_script = 0;
    while polls_after_the_script <= EXTRA_POLLS {
        if script.lock().unwrap().done() {
            polls_after_the_script += 1;
        }
        script.lock().unwrap().next_batch();
        let polled = server.poll_watched(&mut || {
            let mut script = script.lock().unwrap();
            script.next_batch();
            script.done()
        });
        for message in server.take_given_up() {
            assert!(message.port < ports);
            assert!(!retired.contains(&message.port), "port {} given up twice: it was retired", message.port);
            retired.push(message.port);
        }
        assert!(server.held_output_bytes() <= HELD_IN_ALL);
        if polled.is_err() {
            // A message the server cannot serve ends the run.
            break;
        }
    }
    let _ = server.flush();
    assert_eq!(server.held_output_bytes(), 0);
});
