//! The program's output as the server assembles it from `WRITE` and `FILE_WRITE` messages: each thread's message is
//! held until its last byte arrives and then written whole, so that lines from different threads never interleave;
//! but only up to a cap per thread and a cap in all, past which the bytes are written out as they come. The GPU
//! decides what it sends, so nothing it sends can make the host hold more than [`HELD_IN_ALL`] bytes. The output
//! goes to stdout, stderr, or a file the program opened ([`Files`]).

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::time::Instant;

use startup_common::io::{Destination, Stream};
use startup_common::rpc::WriteHead;

use super::files::Files;

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
pub(super) fn key(head: &WriteHead, destination: Destination) -> WriterKey {
    (head.thread, head.group, destination)
}

/// Buffered stdout and stderr, the program's files, and the messages held until they are complete.
pub(super) struct Output {
    stdout: BufWriter<Box<dyn Write + Send>>,
    stderr: BufWriter<Box<dyn Write + Send>>,
    pub(super) files: Files,
    held: HashMap<WriterKey, Vec<u8>>,
    /// The bytes of `held` with [`ENTRY_COST`] for each entry.
    held_bytes: usize,
    pub(super) last_flush: Instant,
    /// Whether anything was written since the last flush: an idle pass then has nothing to flush and skips it.
    written: bool,
}

impl Output {
    pub(super) fn new(stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>, files: Files) -> Self {
        Self {
            stdout: BufWriter::with_capacity(1 << 16, stdout),
            stderr: BufWriter::with_capacity(1 << 16, stderr),
            files,
            held: HashMap::new(),
            held_bytes: 0,
            last_flush: Instant::now(),
            written: false,
        }
    }

    /// Writes from now on to `stdout` and `stderr`; output still buffered for the old ones is dropped.
    pub(super) fn set_streams(&mut self, stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>) {
        self.stdout = BufWriter::with_capacity(1 << 16, stdout);
        self.stderr = BufWriter::with_capacity(1 << 16, stderr);
    }

    /// The (buffered) writer of `stream`.
    pub(super) fn writer(&mut self, stream: Stream) -> &mut BufWriter<Box<dyn Write + Send>> {
        self.written = true;
        match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        }
    }

    /// Writes `pieces` to `destination`, one after the other. A file's errors are the file's (`EBADF` for a file not
    /// open for writing), as [`io::Error::from_raw_os_error`].
    fn write(&mut self, destination: Destination, pieces: &[&[u8]]) -> io::Result<()> {
        match destination {
            Destination::Stream(stream) => {
                let writer = self.writer(stream);
                pieces.iter().try_for_each(|piece| writer.write_all(piece))
            }
            Destination::File(handle) => pieces
                .iter()
                .try_for_each(|piece| self.files.write(handle, piece))
                .map_err(io::Error::from_raw_os_error),
        }
    }

    /// Bytes held for unfinished messages, with [`ENTRY_COST`] each.
    pub(super) fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// More bytes of the message that `key` is writing: held, or, past a cap, written out at once after the bytes
    /// held before them.
    pub(super) fn append(&mut self, key: WriterKey, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let held = self.held.get(&key).map(Vec::len);
        let cost = bytes.len() + if held.is_none() { ENTRY_COST } else { 0 };
        if held.unwrap_or(0) + bytes.len() > HELD_PER_THREAD || self.held_bytes + cost > HELD_IN_ALL {
            let earlier = self.take(key);
            return self.write(key.2, &[&earlier, bytes]);
        }
        self.held_bytes += cost;
        self.held.entry(key).or_default().extend_from_slice(bytes);
        Ok(())
    }

    /// The last bytes of the message that `key` is writing: writes the message whole (with a line break after it
    /// when `newline`), right after the bytes held for it.
    pub(super) fn complete(&mut self, key: WriterKey, last: &[u8], newline: bool) -> io::Result<()> {
        let earlier = self.take(key);
        let newline: &[u8] = if newline { b"\n" } else { b"" };
        self.write(key.2, &[&earlier, last, newline])
    }

    /// The message that `key` is writing will not be finished (its thread stopped, or the server gave it up): writes
    /// what arrived. On stdout or stderr it ends its line, so that it does not run into the next output; to a file
    /// it goes as it is, and an error writing it waits for the file's next flush or close (or is lost with the bytes
    /// when the file was closed meanwhile).
    pub(super) fn cut_short(&mut self, key: WriterKey) -> io::Result<()> {
        let bytes = self.take(key);
        if bytes.is_empty() {
            return Ok(());
        }
        match key.2 {
            Destination::Stream(stream) => {
                let writer = self.writer(stream);
                writer.write_all(&bytes)?;
                if bytes.last() != Some(&b'\n') {
                    writer.write_all(b"\n")?;
                }
            }
            Destination::File(handle) => self.files.write_or_defer(handle, &bytes),
        }
        Ok(())
    }

    /// The bytes held for `key`, no longer held.
    fn take(&mut self, key: WriterKey) -> Vec<u8> {
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

    /// Writes out the messages still waiting for their last chunk (a thread stopped mid-message), in the order of
    /// their keys, each ending its line, then flushes.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        let mut keys: Vec<WriterKey> = self.held.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            self.cut_short(key)?;
        }
        self.flush()
    }

    pub(super) fn flush(&mut self) -> io::Result<()> {
        if !std::mem::take(&mut self.written) {
            return Ok(());
        }
        self.last_flush = Instant::now();
        self.stdout.flush()?;
        self.stderr.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::tests::Capture;

    fn output() -> (Output, Capture) {
        let sink = Capture::default();
        let files = Files::new(crate::server::files::StdinSource::new(Box::new(io::empty())));
        (Output::new(Box::new(sink.clone()), Box::new(io::sink()), files), sink)
    }

    const OUT: Destination = Destination::Stream(Stream::Stdout);

    fn written(output: &mut Output, sink: &Capture) -> Vec<u8> {
        output.flush().unwrap();
        sink.0.lock().unwrap().clone()
    }

    /// Chunks are held until the message completes and then written whole, right after any message completed
    /// before; a message cut short ends its line.
    #[test]
    fn messages_are_written_whole_when_complete() {
        let (mut output, sink) = output();
        let (a, b) = ((1, 0, OUT), (2, 0, OUT));
        output.append(a, b"a1 ").unwrap();
        output.append(b, b"b1 ").unwrap();
        output.append(a, b"a2 ").unwrap();
        assert_eq!(output.held_bytes(), 9 + 2 * ENTRY_COST);
        assert!(written(&mut output, &sink).is_empty());
        output.complete(b, b"b2", true).unwrap();
        output.complete(a, b"a3", false).unwrap();
        output.complete((3, 0, OUT), b"alone", true).unwrap();
        assert_eq!(written(&mut output, &sink), b"b1 b2\na1 a2 a3alone\n");
        assert_eq!(output.held_bytes(), 0);
        output.append(a, b"cut").unwrap();
        output.append(b, b"").unwrap();
        assert_eq!(output.held_bytes(), 3 + ENTRY_COST, "an empty chunk holds nothing");
        output.finish().unwrap();
        assert_eq!(written(&mut output, &sink), b"b1 b2\na1 a2 a3alone\ncut\n");
    }

    /// A thread's message past [`HELD_PER_THREAD`] goes out in pieces: what was held, then the new bytes.
    #[test]
    fn a_message_past_the_thread_cap_is_written_in_pieces() {
        let (mut output, sink) = output();
        let key = (7, 7, OUT);
        let piece = vec![b'x'; 64];
        let mut sent = 0;
        while sent + 64 <= HELD_PER_THREAD {
            output.append(key, &piece).unwrap();
            sent += 64;
        }
        assert!(written(&mut output, &sink).is_empty());
        assert_eq!(output.held_bytes(), sent + ENTRY_COST);
        output.append(key, &[b'y'; 65]).unwrap();
        assert_eq!(output.held_bytes(), 0);
        assert_eq!(written(&mut output, &sink).len(), sent + 65);
        output.complete(key, b"z", true).unwrap();
        let all = written(&mut output, &sink);
        assert_eq!(&all[sent..], [&[b'y'; 65][..], b"z\n"].concat());
    }

    /// However many threads hold unfinished messages (each key is the client's to choose), the held bytes with
    /// their entries never pass [`HELD_IN_ALL`]; what would is written out, and no byte is lost.
    #[test]
    fn what_all_threads_hold_is_capped() {
        let (mut output, sink) = output();
        let chunk = [b'c'; 200];
        let threads = HELD_IN_ALL / (chunk.len() + ENTRY_COST) + 1000;
        for thread in 0..threads as u64 {
            output.append((thread, 0, OUT), &chunk).unwrap();
            assert!(output.held_bytes() <= HELD_IN_ALL);
        }
        assert!(output.held_bytes() > HELD_IN_ALL - chunk.len() - ENTRY_COST);
        let early = written(&mut output, &sink).len();
        assert_eq!(early, 1000 * chunk.len(), "the messages past the cap went out at once");
        output.finish().unwrap();
        assert_eq!(written(&mut output, &sink).len(), threads * (chunk.len() + 1) - 1000);
        assert_eq!(output.held_bytes(), 0);
    }
}
