//! The message of a run's first panic, as the panicking thread reports it (`PANIC_MESSAGE`): what the test runner
//! compares with a `should_panic` test's expected text. The thread prints the panic's line on stderr as well; this
//! is the message alone, so that nothing a test prints can pass for it. What arrives is the GPU's to choose: the
//! first reporter's message is kept, up to [`MAX_PANIC_MESSAGE`] bytes, and nothing a second reporter sends changes it.

/// The most bytes of a panic message kept: far more than a message holds (a test's expected text is at most 64 KiB),
/// and a bound on what a thread can make the loader hold.
pub const MAX_PANIC_MESSAGE: usize = 1 << 20;

/// The first panic's message, as its chunks arrive.
#[derive(Debug, Default)]
pub(super) struct FirstPanic {
    /// The reporting thread, by its writer key (a `WriteHead`'s thread and group), once its first chunk arrived.
    reporter: Option<(u64, u64)>,
    bytes: Vec<u8>,
    /// Whether the reporter's last chunk arrived: later chunks are another message's.
    complete: bool,
}

impl FirstPanic {
    /// Bytes of the message that the thread `writer` reports; `last` when they end it.
    pub(super) fn receive(&mut self, writer: (u64, u64), bytes: &[u8], last: bool) {
        if *self.reporter.get_or_insert(writer) != writer || self.complete {
            return;
        }
        let room = MAX_PANIC_MESSAGE - self.bytes.len();
        self.bytes.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.complete = last;
    }

    /// The message, if a thread reported one (what arrived of it, if its thread stopped midway: the run then failed
    /// otherwise too), as text; the record is empty again for the next run.
    pub(super) fn take(&mut self) -> Option<String> {
        let taken = std::mem::take(self);
        taken.reporter.map(|_| String::from_utf8_lossy(&taken.bytes).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reporters_message_is_kept_whole() {
        let mut first = FirstPanic::default();
        assert_eq!(first.take(), None);
        first.receive((1, 0), b"sum was ", false);
        first.receive((2, 0), b"another thread's", true);
        first.receive((1, 0), b"17", true);
        first.receive((1, 0), b", and more", true);
        assert_eq!(first.take().as_deref(), Some("sum was 17"));
        assert_eq!(first.take(), None, "taken for one run only");
        first.receive((3, 1), b"", true);
        assert_eq!(first.take().as_deref(), Some(""), "an empty message is a message");
    }

    #[test]
    fn a_message_is_bounded_and_need_not_be_utf8() {
        let mut first = FirstPanic::default();
        let chunk = vec![b'x'; 300 << 10];
        for _ in 0..10 {
            first.receive((1, 0), &chunk, false);
        }
        assert_eq!(first.take().map(|message| message.len()), Some(MAX_PANIC_MESSAGE));
        first.receive((1, 0), &[b'a', 0xff, b'b'], true);
        assert_eq!(first.take().as_deref(), Some("a\u{fffd}b"));
    }
}
