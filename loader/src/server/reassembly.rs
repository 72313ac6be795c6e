//! The host's reassembly of the chunked messages of `WRITE` and `FILE_WRITE` ([`WriteHead`]): each thread's message is
//! held until its last chunk arrives and is then written whole, so that lines from different threads never
//! interleave; but only up to a cap per thread and a cap in all, past which the bytes are written out as they come.
//! The GPU decides what it sends, so nothing it sends can make the host hold more than [`HELD_IN_ALL`] bytes.
//! The server holds the program's unfinished messages here as it writes its output.

use std::collections::HashMap;

use gpu_startup_protocol::messages::{Destination, WriteHead};

/// The most bytes of one thread's unfinished message held back to be written whole. A message longer than this
/// (`print!` output of over a MiB, or a longer `fwrite`) is written out in pieces of about this size as it arrives,
/// so other threads' lines may come between its pieces.
pub const HELD_PER_THREAD: usize = 1 << 20;

/// The most heap the unfinished messages take together, as [`Reassembly::held_bytes`] counts it: each message's
/// vector at its capacity, with [`ALLOCATION_OVERHEAD`], and the table that finds them. The key is the client's to
/// choose, and a one-byte message takes 100 to 160 bytes, nearly all of them bookkeeping, so all of it is counted. A
/// message whose bytes would go past it is written out at once, in pieces, as one longer than [`HELD_PER_THREAD`] is.
pub const HELD_IN_ALL: usize = 64 << 20;

/// What the allocator keeps with a heap block besides the bytes asked for, at most: glibc's `malloc` adds a word of
/// header and rounds a block up to 16 bytes, 32 at least, so a block of 8 bytes or more costs at most 24 more.
pub const ALLOCATION_OVERHEAD: usize = 24;

/// The least capacity a held message's vector gets: `Vec`'s own least for bytes, and enough that
/// [`ALLOCATION_OVERHEAD`] covers the block.
const LEAST_CAPACITY: usize = 8;

/// One slot of the table: a key and a vector's header side by side, and the slot's control byte.
const TABLE_SLOT: usize = size_of::<(WriterKey, Vec<u8>)>() + 1;

/// The control bytes at the end of the table, one group past its last slot.
const TABLE_TRAILER: usize = 16;

/// A table shrinks once it is a quarter full or less, if it has room for more than this many messages: a small table
/// stays, so that a few threads that print in pieces do not reallocate it again and again.
const SHRINK_ABOVE: usize = 64;

/// What std's `HashMap` allocates for a table of `capacity`, or a slot more: a SwissTable has a power of two of slots,
/// at most 7/8 of them used (all but one under 8), each with a control byte, and a group of control bytes more.
const fn table_bytes(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    (capacity * 8 / 7 + 1) * TABLE_SLOT + TABLE_TRAILER + ALLOCATION_OVERHEAD
}

/// The most a table of `capacity` grows to when it is full: twice the slots (4 from none).
const fn grown_table_capacity(capacity: usize) -> usize {
    2 * capacity + 3
}

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
    /// The capacity of `held`'s table as allocated. `HashMap::capacity` is less while removed entries' slots wait to
    /// be reused, so this is the most it said since the table was last made.
    table_capacity: usize,
    /// What `held` takes of the heap: [`table_bytes`] of `table_capacity`, and each vector's capacity with
    /// [`ALLOCATION_OVERHEAD`].
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

    /// The heap the unfinished messages take, their table's included: never over [`HELD_IN_ALL`], and 0 when none is
    /// held.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// A chunk of the message that `key` writes, not its last: held, or, past a cap, released at once after the bytes
    /// held before it.
    pub fn append<'a>(&mut self, key: WriterKey, chunk: &'a [u8]) -> Option<Release<'a>> {
        if chunk.is_empty() {
            return None;
        }
        let (length, capacity) = self.held.get(&key).map_or((0, 0), |bytes| (bytes.len(), bytes.capacity()));
        let needed = length + chunk.len();
        let Some(reserved) = self.room_for(length == 0, capacity, needed) else {
            return Some(Release { held: self.take(key), chunk, newline: false });
        };
        let bytes = self.held.entry(key).or_default();
        bytes.reserve_exact(reserved - bytes.len());
        bytes.extend_from_slice(chunk);
        self.held_bytes += bytes.capacity() - capacity + if length == 0 { ALLOCATION_OVERHEAD } else { 0 };
        self.recount_table(self.table_capacity.max(self.held.capacity()));
        None
    }

    /// The capacity to reserve for a message that needs `needed` bytes and has `capacity` (a `new` one, with no entry
    /// yet, has none): twice as much when it grows, so that a message of many chunks is not copied again and again,
    /// or just enough, or `None` when that passes a cap.
    fn room_for(&self, new: bool, capacity: usize, needed: usize) -> Option<usize> {
        if needed > HELD_PER_THREAD {
            return None;
        }
        if needed <= capacity {
            return Some(capacity);
        }
        let full = self.held.len() >= self.held.capacity();
        let entry = match (new, full) {
            (false, _) => 0,
            (true, false) => ALLOCATION_OVERHEAD,
            (true, true) => {
                let grown = table_bytes(grown_table_capacity(self.table_capacity));
                ALLOCATION_OVERHEAD + grown - table_bytes(self.table_capacity)
            }
        };
        let room = HELD_IN_ALL.checked_sub(self.held_bytes + entry)?;
        let doubled = needed.max(2 * capacity).clamp(LEAST_CAPACITY, HELD_PER_THREAD);
        [doubled, needed.max(LEAST_CAPACITY)].into_iter().find(|&reserved| reserved - capacity <= room)
    }

    /// Counts the table at `capacity` from now on.
    fn recount_table(&mut self, capacity: usize) {
        self.held_bytes = self.held_bytes - table_bytes(self.table_capacity) + table_bytes(capacity);
        self.table_capacity = capacity;
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
        let Some(bytes) = self.held.remove(&key) else { return Vec::new() };
        self.held_bytes -= bytes.capacity() + ALLOCATION_OVERHEAD;
        if self.held.is_empty() {
            self.held = HashMap::new();
            self.recount_table(0);
        } else if self.table_capacity > SHRINK_ABOVE && self.held.len() <= self.table_capacity / 4 {
            self.held.shrink_to(2 * self.held.len());
            self.recount_table(self.held.capacity());
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
    use gpu_startup_protocol::messages::Stream;

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
        let table = table_bytes(messages.held.capacity());
        assert_eq!(messages.held_bytes(), 2 * (LEAST_CAPACITY + ALLOCATION_OVERHEAD) + table);
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
        let table = table_bytes(messages.held.capacity());
        assert_eq!(messages.held_bytes(), sent + ALLOCATION_OVERHEAD + table, "grown to the cap, not past it");
        let release = messages.append(key, &[b'y'; 65]).expect("past the cap");
        assert_eq!((release.held.len(), release.chunk, release.newline), (sent, &[b'y'; 65][..], false));
        assert_eq!(messages.held_bytes(), 0);
        assert_eq!(messages.complete(key, b"z", true).to_vec(), b"z\n");
    }

    /// However many threads hold unfinished messages (each key is the client's to choose), the held bytes with their
    /// entries and table never pass [`HELD_IN_ALL`]; what would is released at once, and no byte is lost. The table
    /// grows by doubling, so the cap may turn new messages away with up to half of it unused.
    #[test]
    fn what_all_threads_hold_is_capped() {
        let mut messages = Reassembly::new();
        let chunk = [b'c'; 200];
        let threads = HELD_IN_ALL / (chunk.len() + ALLOCATION_OVERHEAD);
        let mut released = 0;
        for thread in 0..threads as u64 {
            if let Some(release) = messages.append((thread, 0, OUT), &chunk) {
                assert!(release.held.is_empty(), "a new message has nothing held");
                released += release.chunk.len();
            } else {
                assert_eq!(released, 0, "once the cap turns a message away, it turns away every later one");
            }
            assert!(messages.held_bytes() <= HELD_IN_ALL);
        }
        assert!(released > 0 && messages.held_bytes() > HELD_IN_ALL / 2, "{}", messages.held_bytes());
        let held: usize = messages.unfinished().into_iter().map(|key| messages.take(key).len()).sum();
        assert_eq!(held + released, threads * chunk.len());
        assert_eq!(messages.held_bytes(), 0);
    }

    /// Std's table grows, when full, to at most what [`grown_table_capacity`] foresees, which the cap is checked
    /// against before it grows.
    #[test]
    fn a_full_table_grows_no_more_than_foreseen() {
        let mut table: HashMap<WriterKey, Vec<u8>> = HashMap::new();
        let mut capacity = 0;
        for thread in 0..100_000 {
            table.insert((thread, 0, OUT), Vec::new());
            if table.capacity() != capacity {
                assert!(table.capacity() <= grown_table_capacity(capacity), "{capacity} grew to {}", table.capacity());
                capacity = table.capacity();
            }
        }
    }

    /// A table that held many messages shrinks as they finish, and goes when the last one does.
    #[test]
    fn the_table_shrinks_as_messages_finish() {
        let mut messages = Reassembly::new();
        for thread in 0..10_000 {
            assert!(messages.append((thread, 0, OUT), b"x").is_none());
        }
        for thread in 1_000..10_000 {
            assert_eq!(messages.take((thread, 0, OUT)), b"x");
        }
        let entries = 1_000 * (LEAST_CAPACITY + ALLOCATION_OVERHEAD);
        assert!(messages.held_bytes() <= entries + table_bytes(4_000), "{}", messages.held_bytes());
        for thread in 0..1_000 {
            assert_eq!(messages.take((thread, 0, OUT)), b"x");
        }
        assert_eq!((messages.held_bytes(), messages.held.capacity()), (0, 0));
    }
}
