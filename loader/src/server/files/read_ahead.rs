//! Reading for the device: bytes read ahead from a source (a file, the loader's stdin) and handed out one request
//! at a time, whole lines for a line read. The source never blocks the server: one that has nothing yet answers
//! `WouldBlock`, and so does a request it cannot finish yet (a line without its end), leaving what was read for the
//! next request.

use std::io::{self, ErrorKind, Read};

use gpu_startup_protocol::files::ReadMode;

/// Bytes read from a source at a time; also the most a read-ahead holds beyond one request's length.
pub const READ_AHEAD: usize = 64 << 10;

/// Bytes read from a source and not yet handed out.
#[derive(Default)]
pub(super) struct ReadAhead {
    buffer: Vec<u8>,
    /// Where the bytes not yet handed out start.
    start: usize,
}

impl ReadAhead {
    /// Bytes read from the source but not yet handed out: how far the source is ahead of the reader.
    pub(super) fn unread(&self) -> usize {
        self.buffer.len() - self.start
    }

    /// Forgets what was read ahead (the reader moved elsewhere in the source).
    pub(super) fn discard(&mut self) {
        self.buffer.clear();
        self.start = 0;
    }

    /// Hands out, into `out`, what one request of at most `max` bytes gets: in [`ReadMode::Bytes`] what is there
    /// (reading the source once when nothing is), in [`ReadMode::Line`] one line through its `\n`, `max` bytes of a
    /// longer one, or what is left at the end of the source. Nothing (`out` empty) means the source ended. An error of
    /// the source is returned once nothing more can be handed out; `WouldBlock` says to ask again later.
    pub(super) fn take(
        &mut self,
        source: &mut dyn Read,
        max: usize,
        mode: ReadMode,
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        out.clear();
        if max == 0 {
            return Ok(());
        }
        match mode {
            ReadMode::Bytes => {
                if self.unread() == 0 {
                    if max >= READ_AHEAD {
                        // A large read goes straight into the reply.
                        out.resize(max, 0);
                        let n = read_retrying(source, out)?;
                        out.truncate(n);
                        return Ok(());
                    }
                    self.fill(source)?;
                }
                self.hand_out(max.min(self.unread()), out);
                Ok(())
            }
            ReadMode::Line => loop {
                let unread = &self.buffer[self.start..];
                if let Some(newline) = unread[..unread.len().min(max)].iter().position(|&byte| byte == b'\n') {
                    self.hand_out(newline + 1, out);
                    return Ok(());
                }
                if unread.len() >= max {
                    self.hand_out(max, out);
                    return Ok(());
                }
                if self.fill(source)? == 0 {
                    // The last line, without its end.
                    self.hand_out(self.unread(), out);
                    return Ok(());
                }
            },
        }
    }

    /// Moves the first `n` unread bytes to `out`.
    fn hand_out(&mut self, n: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.buffer[self.start..self.start + n]);
        self.start += n;
        if self.start == self.buffer.len() {
            self.discard();
        }
    }

    /// Reads once more from the source, after what is unread; the number of bytes, 0 at its end.
    fn fill(&mut self, source: &mut dyn Read) -> io::Result<usize> {
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        let len = self.buffer.len();
        self.buffer.resize(len + READ_AHEAD, 0);
        let read = read_retrying(source, &mut self.buffer[len..]);
        self.buffer.truncate(len + *read.as_ref().unwrap_or(&0));
        read
    }
}

/// One read of `source`, again when a signal interrupted it.
fn read_retrying(source: &mut dyn Read, buffer: &mut [u8]) -> io::Result<usize> {
    loop {
        match source.read(buffer) {
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that gives its pieces one read at a time, then `WouldBlock` once per `None`, then its end.
    struct Pieces(Vec<Option<&'static [u8]>>);

    impl Read for Pieces {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            match self.0.remove(0) {
                None => Err(ErrorKind::WouldBlock.into()),
                Some(piece) => {
                    let n = piece.len().min(buffer.len());
                    buffer[..n].copy_from_slice(&piece[..n]);
                    if n < piece.len() {
                        self.0.insert(0, Some(&piece[n..]));
                    }
                    Ok(n)
                }
            }
        }
    }

    fn take(ahead: &mut ReadAhead, source: &mut Pieces, max: usize, mode: ReadMode) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        ahead.take(source, max, mode, &mut out).map(|()| out)
    }

    #[test]
    fn lines_come_whole_across_reads_and_wait_for_their_end() {
        let mut source = Pieces(vec![Some(b"one\ntw"), None, Some(b"o\nthree"), None, Some(b"\nlast")]);
        let mut ahead = ReadAhead::default();
        let mut line = |source: &mut Pieces| take(&mut ahead, source, 100, ReadMode::Line);
        assert_eq!(line(&mut source).unwrap(), b"one\n");
        assert_eq!(line(&mut source).unwrap_err().kind(), ErrorKind::WouldBlock, "half a line waits");
        assert_eq!(line(&mut source).unwrap(), b"two\n");
        assert_eq!(line(&mut source).unwrap_err().kind(), ErrorKind::WouldBlock);
        assert_eq!(line(&mut source).unwrap(), b"three\n");
        assert_eq!(line(&mut source).unwrap(), b"last", "the last line needs no end");
        assert_eq!(line(&mut source).unwrap(), b"");
    }

    #[test]
    fn a_long_line_comes_in_pieces_of_the_length_asked_for() {
        let mut source = Pieces(vec![Some(b"abcdefgh\nij")]);
        let mut ahead = ReadAhead::default();
        assert_eq!(take(&mut ahead, &mut source, 3, ReadMode::Line).unwrap(), b"abc");
        assert_eq!(take(&mut ahead, &mut source, 6, ReadMode::Line).unwrap(), b"defgh\n");
        assert_eq!(take(&mut ahead, &mut source, 1, ReadMode::Bytes).unwrap(), b"i");
        assert_eq!(ahead.unread(), 1);
        assert_eq!(take(&mut ahead, &mut source, 0, ReadMode::Line).unwrap(), b"");
        assert_eq!(take(&mut ahead, &mut source, 9, ReadMode::Bytes).unwrap(), b"j");
        assert_eq!(take(&mut ahead, &mut source, 9, ReadMode::Bytes).unwrap(), b"");
    }

    #[test]
    fn byte_reads_take_what_is_there() {
        let mut source = Pieces(vec![None, Some(b"12345"), Some(b"67")]);
        let mut ahead = ReadAhead::default();
        assert_eq!(take(&mut ahead, &mut source, 4, ReadMode::Bytes).unwrap_err().kind(), ErrorKind::WouldBlock);
        assert_eq!(take(&mut ahead, &mut source, 4, ReadMode::Bytes).unwrap(), b"1234");
        assert_eq!(take(&mut ahead, &mut source, 4, ReadMode::Bytes).unwrap(), b"5", "no second read of the source");
        assert_eq!(take(&mut ahead, &mut source, READ_AHEAD, ReadMode::Bytes).unwrap(), b"67");
        assert_eq!(take(&mut ahead, &mut source, READ_AHEAD, ReadMode::Bytes).unwrap(), b"");
    }

    #[test]
    fn what_is_held_stays_bounded() {
        let long: &'static [u8] = Box::leak(vec![b'x'; 3 * READ_AHEAD].into_boxed_slice());
        let mut source = Pieces(vec![Some(long), None]);
        let mut ahead = ReadAhead::default();
        let max = READ_AHEAD / 2;
        assert_eq!(take(&mut ahead, &mut source, max, ReadMode::Line).unwrap().len(), max);
        assert!(ahead.buffer.len() <= max + READ_AHEAD);
        let mut total = max;
        while let Ok(piece) = take(&mut ahead, &mut source, max, ReadMode::Line) {
            assert!(ahead.buffer.len() <= max + READ_AHEAD);
            total += piece.len();
        }
        assert_eq!(total, 3 * READ_AHEAD);
    }
}
