//! The program's output as the server writes it from `WRITE` and `FILE_WRITE` messages, to stdout, stderr, or a file
//! the program opened ([`Files`]). Each thread's message is held until its last byte arrives and then written whole,
//! up to the caps of [`super::reassembly`], which reassembles the chunks.

use std::io::{self, BufWriter, Write};
use std::time::Instant;

use gpu_startup_protocol::messages::{Destination, Stream};

use super::files::Files;
use super::reassembly::{Reassembly, WriterKey};

/// Buffered stdout and stderr, the program's files, and the messages held until they are complete.
pub(super) struct Output {
    stdout: BufWriter<Box<dyn Write + Send>>,
    stderr: BufWriter<Box<dyn Write + Send>>,
    pub(super) files: Files,
    held: Reassembly,
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
            held: Reassembly::new(),
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

    /// Bytes held for unfinished messages ([`Reassembly::held_bytes`]).
    pub(super) fn held_bytes(&self) -> usize {
        self.held.held_bytes()
    }

    /// More bytes of the message that `key` is writing: held, or, past a cap, written out at once after the bytes
    /// held before them.
    pub(super) fn append(&mut self, key: WriterKey, bytes: &[u8]) -> io::Result<()> {
        match self.held.append(key, bytes) {
            Some(release) => self.write(key.2, &release.pieces()),
            None => Ok(()),
        }
    }

    /// The last bytes of the message that `key` is writing: writes the message whole (with a line break after it
    /// when `newline`), right after the bytes held for it.
    pub(super) fn complete(&mut self, key: WriterKey, last: &[u8], newline: bool) -> io::Result<()> {
        let release = self.held.complete(key, last, newline);
        self.write(key.2, &release.pieces())
    }

    /// The message that `key` is writing will not be finished (its thread stopped, or the server gave it up): writes
    /// what arrived. On stdout or stderr it ends its line, so that it does not run into the next output; to a file
    /// it goes as it is, and an error writing it waits for the file's next flush or close (or is lost with the bytes
    /// when the file was closed meanwhile).
    pub(super) fn cut_short(&mut self, key: WriterKey) -> io::Result<()> {
        let bytes = self.held.take(key);
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

    /// Writes out the messages still waiting for their last chunk (a thread stopped mid-message), in the order of
    /// their keys, each ending its line, then flushes.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        for key in self.held.unfinished() {
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
        assert!(output.held_bytes() > 9, "the bytes held, with their bookkeeping");
        assert!(written(&mut output, &sink).is_empty());
        output.complete(b, b"b2", true).unwrap();
        output.complete(a, b"a3", false).unwrap();
        output.complete((3, 0, OUT), b"alone", true).unwrap();
        assert_eq!(written(&mut output, &sink), b"b1 b2\na1 a2 a3alone\n");
        assert_eq!(output.held_bytes(), 0);
        output.append(a, b"cut").unwrap();
        let one_held = output.held_bytes();
        output.append(b, b"").unwrap();
        assert_eq!(output.held_bytes(), one_held, "an empty chunk holds nothing");
        output.finish().unwrap();
        assert_eq!(written(&mut output, &sink), b"b1 b2\na1 a2 a3alone\ncut\n");
    }
}
