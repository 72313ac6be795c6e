//! The host's reassembly of the chunked messages of `WRITE` and `FILE_WRITE` ([`WriteHead`]): each thread's message is
//! held until its last chunk arrives and is then written whole, so that lines from different threads never
//! interleave; but only up to a cap per thread and a cap in all, past which the bytes are written out as they come.
//! The GPU decides what it sends, so nothing it sends can make the host hold more than [`HELD_IN_ALL`] bytes.
//! `gpu-loader`'s server and the protocol's host tests both reassemble through [`Reassembly`].

use std::collections::HashMap;
use std::vec::Vec;

use crate::io::Destination;
use crate::rpc::WriteHead;

/// The most bytes of one thread's unfinished message held back to be written whole. A message longer than this
/// (`print!` output of over a MiB, or a longer `fwrite`) is written out in pieces of about this size as it arrives,
/// so other threads' lines may come between its pieces.
pub const HELD_PER_THREAD: usize = 1 << 20;

/// The most bytes held for all unfinished messages together, each counted with [`ENTRY_COST`]. A message whose
/// bytes would go past it is written out at once, in pieces, as one longer than [`HELD_PER_THREAD`] is.
pub const HELD_IN_ALL: usize = 64 << 20;

/// What one held message costs besides its bytes (its key, its vector and its slot in the table), so that a client
/// cannot make the host hold millions of tiny messages (the key is the client's to choose) beyond the cap.
pub const ENTRY_COST: usize = 64;

/// The thread that writes a message (its [`WriteHead`]'s thread and group), and where the message goes.
pub type WriterKey = (u64, u64, Destination);

/// The key of the message that the writer of `head` writes to `destination`.
pub fn writer_key(head: &WriteHead, destination: Destination) -> WriterKey {
    (head.thread, head.group, destination)
}

/// The unfinished messages, held by writer until their last chunk.
#[derive(Debug, Default)]
pub struct Reassembly {
    held: HashMap<WriterKey, Vec<u8>>,
    /// The bytes of `held` with [`ENTRY_COST`] for each entry.
    held_bytes: usize,
}

/// Bytes of one message to write now, in this order: what was held for it, the chunk that let them go, and a line
/// break when the message asked for one.
#[derive(Debug)]
pub struct Release<'a> {
    pub held: Vec<u8>,
    pub chunk: &'a [u8],
    pub newline: bool,
}

impl Release<'_> {
    /// The bytes as pieces to write one after the other (some may be empty).
    pub fn pieces(&self) -> [&[u8]; 3] {
        [&self.held, self.chunk, if self.newline { b"\n" } else { b"" }]
    }

    /// The bytes in one vector.
    pub fn to_vec(&self) -> Vec<u8> {
        self.pieces().concat()
    }
}

impl Reassembly {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes held for unfinished messages, with [`ENTRY_COST`] each: never over [`HELD_IN_ALL`].
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// A chunk of the message that `key` writes, not its last: held, or, past a cap, released at once after the bytes
    /// held before it.
    pub fn append<'a>(&mut self, key: WriterKey, chunk: &'a [u8]) -> Option<Release<'a>> {
        if chunk.is_empty() {
            return None;
        }
        let held = self.held.get(&key).map(Vec::len);
        let cost = chunk.len() + if held.is_none() { ENTRY_COST } else { 0 };
        if held.unwrap_or(0) + chunk.len() > HELD_PER_THREAD || self.held_bytes + cost > HELD_IN_ALL {
            return Some(Release { held: self.take(key), chunk, newline: false });
        }
        self.held_bytes += cost;
        self.held.entry(key).or_default().extend_from_slice(chunk);
        None
    }

    /// The last chunk of the message that `key` writes: the whole message, with a line break after it when
    /// `newline`.
    pub fn complete<'a>(&mut self, key: WriterKey, chunk: &'a [u8], newline: bool) -> Release<'a> {
        Release { held: self.take(key), chunk, newline }
    }

    /// The bytes held for the message that `key` writes, no longer held: what arrived of a message that will not be
    /// finished (its thread stopped, or the server gave it up).
    pub fn take(&mut self, key: WriterKey) -> Vec<u8> {
        // Most messages are one chunk, with nothing held for anyone: no need to hash the key.
        if self.held.is_empty() {
            return Vec::new();
        }
        let bytes = self.held.remove(&key).unwrap_or_default();
        if !bytes.is_empty() {
            self.held_bytes -= bytes.len() + ENTRY_COST;
        }
        bytes
    }

    /// The writers of the messages still waiting for their last chunk, in the order of their keys.
    pub fn unfinished(&self) -> Vec<WriterKey> {
        let mut keys: Vec<WriterKey> = self.held.keys().copied().collect();
        keys.sort_unstable();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Stream;

    const OUT: Destination = Destination::Stream(Stream::Stdout);

    /// Chunks are held until their message completes, which releases them all, in order, with the line break the
    /// message asked for; an empty chunk holds nothing.
    #[test]
    fn chunks_are_released_whole_when_their_message_completes() {
        let mut messages = Reassembly::new();
        let (a, b) = ((1, 0, OUT), (2, 0, OUT));
        assert!(messages.append(a, b"a1 ").is_none());
        assert!(messages.append(b, b"b1 ").is_none());
        assert!(messages.append(a, b"a2 ").is_none());
        assert!(messages.append(b, b"").is_none());
        assert_eq!(messages.held_bytes(), 9 + 2 * ENTRY_COST);
        assert_eq!(messages.unfinished(), [a, b]);
        assert_eq!(messages.complete(b, b"b2", true).to_vec(), b"b1 b2\n");
        assert_eq!(messages.complete(a, b"a3", false).to_vec(), b"a1 a2 a3");
        assert_eq!(messages.complete((3, 0, OUT), b"alone", true).to_vec(), b"alone\n");
        assert_eq!(messages.held_bytes(), 0);
        assert!(messages.append(a, b"cut").is_none());
        assert_eq!(messages.take(a), b"cut");
        assert!(messages.unfinished().is_empty() && messages.held_bytes() == 0);
    }

    /// A thread's message past [`HELD_PER_THREAD`] is released in pieces: what was held, then the new bytes.
    #[test]
    fn a_message_past_the_thread_cap_is_released_in_pieces() {
        let mut messages = Reassembly::new();
        let key = (7, 7, OUT);
        let piece = [b'x'; 64];
        let mut sent = 0;
        while sent + 64 <= HELD_PER_THREAD {
            assert!(messages.append(key, &piece).is_none());
            sent += 64;
        }
        assert_eq!(messages.held_bytes(), sent + ENTRY_COST);
        let release = messages.append(key, &[b'y'; 65]).expect("past the cap");
        assert_eq!((release.held.len(), release.chunk, release.newline), (sent, &[b'y'; 65][..], false));
        assert_eq!(messages.held_bytes(), 0);
        assert_eq!(messages.complete(key, b"z", true).to_vec(), b"z\n");
    }

    /// However many threads hold unfinished messages (each key is the client's to choose), the held bytes with their
    /// entries never pass [`HELD_IN_ALL`]; what would is released at once, and no byte is lost.
    #[test]
    fn what_all_threads_hold_is_capped() {
        let mut messages = Reassembly::new();
        let chunk = [b'c'; 200];
        let threads = HELD_IN_ALL / (chunk.len() + ENTRY_COST) + 1000;
        let mut released = 0;
        for thread in 0..threads as u64 {
            if let Some(release) = messages.append((thread, 0, OUT), &chunk) {
                assert!(release.held.is_empty(), "a new message has nothing held");
                released += release.chunk.len();
            }
            assert!(messages.held_bytes() <= HELD_IN_ALL);
        }
        assert!(messages.held_bytes() > HELD_IN_ALL - chunk.len() - ENTRY_COST);
        assert_eq!(released, 1000 * chunk.len(), "the messages past the cap were released at once");
        let held: usize = messages.unfinished().into_iter().map(|key| messages.take(key).len()).sum();
        assert_eq!(held + released, threads * chunk.len());
        assert_eq!(messages.held_bytes(), 0);
    }
}
