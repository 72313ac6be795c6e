//! The loader's stdin for the device: a thread of its own reads it, so that the server, which must keep serving every
//! other port, never waits for input. Reading starts with the program's first read of stdin (a program that never
//! reads it leaves it alone), and the thread holds at most [`STDIN_HELD`] bytes that nobody has read yet, so a large
//! input waits in its pipe rather than in memory.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

/// The most bytes of stdin the reading thread holds before the device reads them.
pub const STDIN_HELD: usize = 1 << 20;

/// Where the device's reads of stdin come from: a reader that a thread drains into a bounded queue. Reading it never
/// blocks: with nothing queued yet it returns `WouldBlock` (the device asks again), at the end 0.
#[derive(Clone)]
pub struct StdinSource {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when the device has taken bytes, for the thread waiting for room.
    room: Condvar,
}

struct State {
    /// The reader, until the thread that reads it starts.
    reader: Option<Box<dyn Read + Send>>,
    queued: VecDeque<u8>,
    /// The reader ended, or failed with this error (once it is read, the device sees the end).
    ended: bool,
    error: Option<io::Error>,
}

impl StdinSource {
    /// The source of `reader`, read by a thread of its own from the first read on.
    pub fn new(reader: Box<dyn Read + Send>) -> Self {
        let state = State { reader: Some(reader), queued: VecDeque::new(), ended: false, error: None };
        Self { shared: Arc::new(Shared { state: Mutex::new(state), room: Condvar::new() }) }
    }

    /// The process's stdin: one source for every server of the process, so that two programs run one after the
    /// other (as the benchmarks do) read it in turn and no byte is read twice or lost between them.
    pub fn process() -> Self {
        static PROCESS: OnceLock<StdinSource> = OnceLock::new();
        PROCESS.get_or_init(|| Self::new(Box::new(io::stdin()))).clone()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic in the reading thread cannot leave the queue inconsistent: every change is one call.
        self.shared.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts the reading thread if it has not started.
    fn start(&self, state: &mut State) {
        if let Some(reader) = state.reader.take() {
            let shared = Arc::clone(&self.shared);
            let started =
                std::thread::Builder::new().name("gpu-loader stdin".into()).spawn(move || pump(&shared, reader));
            if let Err(error) = started {
                state.error = Some(error);
            }
        }
    }
}

impl Read for StdinSource {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let mut state = self.state();
        self.start(&mut state);
        if state.queued.is_empty() {
            if let Some(error) = state.error.take() {
                state.ended = true;
                return Err(error);
            }
            return if state.ended { Ok(0) } else { Err(ErrorKind::WouldBlock.into()) };
        }
        let n = state.queued.len().min(buffer.len());
        for (slot, byte) in buffer.iter_mut().zip(state.queued.drain(..n)) {
            *slot = byte;
        }
        self.shared.room.notify_one();
        Ok(n)
    }
}

/// The reading thread: moves what `reader` gives into the queue, waiting while it is full, until the reader ends.
fn pump(shared: &Shared, mut reader: Box<dyn Read + Send>) {
    let mut buffer = vec![0; 64 << 10];
    loop {
        let room = {
            let state = shared.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let state = shared
                .room
                .wait_while(state, |state| state.queued.len() >= STDIN_HELD)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            STDIN_HELD - state.queued.len()
        };
        let len = room.min(buffer.len());
        let read = reader.read(&mut buffer[..len]);
        let mut state = shared.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match read {
            Ok(0) => {
                state.ended = true;
                return;
            }
            Ok(n) => state.queued.extend(&buffer[..n]),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => {
                state.error = Some(error);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Reads until the source gives bytes or ends, as the device does by asking again.
    fn read_some(source: &mut StdinSource, buffer: &mut [u8]) -> io::Result<usize> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match source.read(buffer) {
                Err(error) if error.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                result => return result,
            }
        }
    }

    #[test]
    fn a_reader_is_drained_in_turn_and_then_ends() {
        let mut source = StdinSource::new(Box::new(&b"hello\nworld\n"[..]));
        let mut all = Vec::new();
        let mut buffer = [0; 5];
        loop {
            let n = read_some(&mut source, &mut buffer).unwrap();
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buffer[..n]);
        }
        assert_eq!(all, b"hello\nworld\n");
        assert_eq!(read_some(&mut source, &mut buffer).unwrap(), 0, "the end stays the end");
    }

    #[test]
    fn a_large_input_is_held_only_up_to_the_cap() {
        let input = vec![b'y'; 3 * STDIN_HELD];
        let mut source = StdinSource::new(Box::new(io::Cursor::new(input)));
        let mut buffer = [0; 1];
        assert_eq!(read_some(&mut source, &mut buffer).unwrap(), 1);
        std::thread::sleep(Duration::from_millis(100));
        assert!(source.state().queued.len() <= STDIN_HELD, "the thread waits for room");
        let mut total = 1;
        let mut buffer = vec![0; 100_000];
        while let n @ 1.. = read_some(&mut source, &mut buffer).unwrap() {
            total += n;
        }
        assert_eq!(total, 3 * STDIN_HELD);
    }

    #[test]
    fn an_error_of_the_reader_is_returned_once_and_then_the_end() {
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::from_raw_os_error(libc::EIO))
            }
        }
        let mut source = StdinSource::new(Box::new(Failing));
        let mut buffer = [0; 4];
        assert_eq!(read_some(&mut source, &mut buffer).unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(read_some(&mut source, &mut buffer).unwrap(), 0);
    }
}
