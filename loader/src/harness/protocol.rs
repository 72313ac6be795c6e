//! What the runner and a worker process say to each other over the worker's stdin and stdout: length-prefixed
//! frames, a kind byte and a little-endian `u32` length, then the payload. The worker is this very binary, so both
//! sides are built from this one definition; a frame that does not decode is still an error, never a panic.

use std::io::{self, Read, Write};
use std::time::Duration;

/// What the runner asks a worker for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    /// The test's entry global.
    pub entry_symbol: String,
    pub threads: [u32; 3],
    pub blocks: [u32; 3],
    pub timeout: Duration,
}

/// How a test's run ended, as the worker saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The status `_end` (or an `exit` on the device) reported.
    Exited(i64),
    Aborted,
    TimedOut,
    /// The device faulted; the loader's message.
    Fault(String),
    /// Anything else that stopped the run (an RPC error, a launch the device refuses); the loader's message.
    Error(String),
}

/// One test's run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    pub ending: Ending,
    /// Threads that panicked (a lower bound when the kernels did not finish).
    pub panicked_threads: u32,
    /// Whether the kernels finished.
    pub finished: bool,
    /// Whether `_begin` ran every constructor; if not, the test never ran.
    pub constructors_ran: bool,
    /// Whether the worker exits after this report: its context may be unusable or kernels may still run on it.
    pub worker_ends: bool,
    /// RPC messages the loader gave up in the middle: the test's output is incomplete.
    pub messages_given_up: u32,
    /// The first panic's message, as the panicking thread reported it ([`RunReport::panic_message`]).
    ///
    /// [`RunReport::panic_message`]: crate::run::RunReport::panic_message
    pub panic_message: Option<String>,
}

/// A worker's message to the runner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// The image is loaded; the platform has this many GPUs.
    Ready { gpus: u32 },
    /// The worker could not start; the loader's message. It exits after sending it.
    SetupFailed(String),
    /// Output of the running test: `stderr` tells the stream.
    Output { stderr: bool, bytes: Vec<u8> },
    /// The running test ended.
    Finished(RunResult),
}

const REQUEST: u8 = 1;
const READY: u8 = 2;
const SETUP_FAILED: u8 = 3;
const STDOUT: u8 = 4;
const STDERR: u8 = 5;
const FINISHED: u8 = 6;

/// Frames larger than this are corrupt: a test's name, a message or a chunk of output is far smaller.
const MAX_FRAME: usize = 64 << 20;

fn write_frame(out: &mut impl Write, kind: u8, payload: &[u8]) -> io::Result<()> {
    let mut frame = Vec::with_capacity(5 + payload.len());
    frame.push(kind);
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(payload);
    // One write per frame: a frame is never interleaved with another writer's.
    out.write_all(&frame)?;
    out.flush()
}

/// Reads one frame; `None` at the end of the stream (between frames).
fn read_frame(input: &mut impl Read) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut header = [0u8; 5];
    match input.read_exact(&mut header[..1]) {
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        other => other?,
    }
    input.read_exact(&mut header[1..])?;
    let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > MAX_FRAME {
        return Err(corrupt(format!("a frame of {len} bytes")));
    }
    let mut payload = vec![0; len];
    input.read_exact(&mut payload)?;
    Ok(Some((header[0], payload)))
}

fn corrupt(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("corrupt message between the test runner and a worker: {what}"))
}

/// A cursor over a payload that fails instead of panicking.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or_else(|| corrupt("a payload too short".into()))?;
        self.0 = rest;
        Ok(*head)
    }
    fn u32(&mut self) -> io::Result<u32> {
        self.take().map(u32::from_le_bytes)
    }
    /// Text of a length that a `u32` before it gives, or `None` after a 0 byte (a 1 byte: text follows).
    fn optional_text(&mut self) -> io::Result<Option<String>> {
        let [present] = self.take()?;
        match present {
            0 => Ok(None),
            1 => {
                let len = self.u32()? as usize;
                if len > self.0.len() {
                    return Err(corrupt("a payload too short".into()));
                }
                let (text, rest) = self.0.split_at(len);
                self.0 = rest;
                String::from_utf8(text.to_vec()).map(Some).map_err(|_| corrupt("text that is not UTF-8".into()))
            }
            _ => Err(corrupt(format!("presence byte {present}"))),
        }
    }
    /// The rest of the payload, as text.
    fn string(&mut self) -> io::Result<String> {
        String::from_utf8(std::mem::take(&mut self.0).to_vec()).map_err(|_| corrupt("text that is not UTF-8".into()))
    }
    /// Checks that the last field was read: bytes after it mean the two sides disagree on the frame's layout.
    fn end(self) -> io::Result<()> {
        match self.0.len() {
            0 => Ok(()),
            1 => Err(corrupt("a byte after a payload's last field".into())),
            left => Err(corrupt(format!("{left} bytes after a payload's last field"))),
        }
    }
}

impl RunRequest {
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let mut payload = Vec::new();
        for count in self.threads.iter().chain(&self.blocks) {
            payload.extend_from_slice(&count.to_le_bytes());
        }
        payload.extend_from_slice(&u64::try_from(self.timeout.as_micros()).unwrap_or(u64::MAX).to_le_bytes());
        payload.extend_from_slice(self.entry_symbol.as_bytes());
        write_frame(out, REQUEST, &payload)
    }

    /// The next request; `None` when the runner closed the stream (the worker then exits).
    pub fn read(input: &mut impl Read) -> io::Result<Option<Self>> {
        let Some((kind, payload)) = read_frame(input)? else { return Ok(None) };
        if kind != REQUEST {
            return Err(corrupt(format!("kind {kind} where a request was expected")));
        }
        let mut fields = Fields(&payload);
        let mut counts = [0u32; 6];
        for count in &mut counts {
            *count = fields.u32()?;
        }
        let timeout = Duration::from_micros(u64::from_le_bytes(fields.take()?));
        let entry_symbol = fields.string()?;
        fields.end()?;
        Ok(Some(Self {
            threads: [counts[0], counts[1], counts[2]],
            blocks: [counts[3], counts[4], counts[5]],
            timeout,
            entry_symbol,
        }))
    }
}

impl Report {
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        match self {
            Report::Ready { gpus } => write_frame(out, READY, &gpus.to_le_bytes()),
            Report::SetupFailed(message) => write_frame(out, SETUP_FAILED, message.as_bytes()),
            Report::Output { stderr, bytes } => write_frame(out, if *stderr { STDERR } else { STDOUT }, bytes),
            Report::Finished(result) => {
                let (tag, code, message): (u8, i64, &str) = match &result.ending {
                    Ending::Exited(code) => (0, *code, ""),
                    Ending::Aborted => (1, 0, ""),
                    Ending::TimedOut => (2, 0, ""),
                    Ending::Fault(message) => (3, 0, message),
                    Ending::Error(message) => (4, 0, message),
                };
                let flags = [result.finished, result.worker_ends, result.constructors_ran].map(u8::from);
                let mut payload = vec![tag, flags[0], flags[1], flags[2]];
                payload.extend_from_slice(&code.to_le_bytes());
                payload.extend_from_slice(&result.panicked_threads.to_le_bytes());
                payload.extend_from_slice(&result.messages_given_up.to_le_bytes());
                match &result.panic_message {
                    None => payload.push(0),
                    Some(text) => {
                        // The server keeps far fewer than 4 GiB of a panic message.
                        payload.push(1);
                        payload.extend_from_slice(&u32::try_from(text.len()).unwrap_or(u32::MAX).to_le_bytes());
                        payload.extend_from_slice(text.as_bytes());
                    }
                }
                payload.extend_from_slice(message.as_bytes());
                write_frame(out, FINISHED, &payload)
            }
        }
    }

    /// The next report; `None` when the worker closed its stdout (it exited).
    pub fn read(input: &mut impl Read) -> io::Result<Option<Self>> {
        let Some((kind, payload)) = read_frame(input)? else { return Ok(None) };
        let mut fields = Fields(&payload);
        let report = match kind {
            READY => Report::Ready { gpus: fields.u32()? },
            SETUP_FAILED => Report::SetupFailed(fields.string()?),
            // The whole payload is the output: nothing can follow it.
            STDOUT | STDERR => return Ok(Some(Report::Output { stderr: kind == STDERR, bytes: payload })),
            FINISHED => {
                let [tag, finished, worker_ends, constructors_ran] = fields.take()?;
                let code = i64::from_le_bytes(fields.take()?);
                let panicked_threads = fields.u32()?;
                let messages_given_up = fields.u32()?;
                let panic_message = fields.optional_text()?;
                let message = fields.string()?;
                let ending = match tag {
                    0 => Ending::Exited(code),
                    1 => Ending::Aborted,
                    2 => Ending::TimedOut,
                    3 => Ending::Fault(message),
                    4 => Ending::Error(message),
                    _ => return Err(corrupt(format!("ending {tag}"))),
                };
                let flag = |byte: u8| match byte {
                    0 | 1 => Ok(byte == 1),
                    _ => Err(corrupt(format!("flag {byte}"))),
                };
                Report::Finished(RunResult {
                    ending,
                    panicked_threads,
                    finished: flag(finished)?,
                    worker_ends: flag(worker_ends)?,
                    constructors_ran: flag(constructors_ran)?,
                    messages_given_up,
                    panic_message,
                })
            }
            _ => return Err(corrupt(format!("kind {kind}"))),
        };
        fields.end()?;
        Ok(Some(report))
    }
}

/// Sends a worker's output to the runner as [`Report::Output`] frames: the program's stdout or stderr in a worker.
pub struct OutputFrames {
    pub stderr: bool,
}

impl Write for OutputFrames {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        Report::Output { stderr: self.stderr, bytes: bytes.to_vec() }.write(&mut io::stdout().lock())?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stdout().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(report: Report) {
        let mut bytes = Vec::new();
        report.write(&mut bytes).unwrap();
        let mut input = bytes.as_slice();
        assert_eq!(Report::read(&mut input).unwrap(), Some(report));
        assert_eq!(Report::read(&mut input).unwrap(), None);
    }

    #[test]
    fn every_message_round_trips() {
        let request = RunRequest {
            entry_symbol: "__gpu_test_entry_adds_3_1".into(),
            threads: [32, 2, 1],
            blocks: [4, 1, 1],
            timeout: Duration::from_millis(1500),
        };
        let mut bytes = Vec::new();
        request.write(&mut bytes).unwrap();
        let mut input = bytes.as_slice();
        assert_eq!(RunRequest::read(&mut input).unwrap(), Some(request));
        assert_eq!(RunRequest::read(&mut input).unwrap(), None);

        round_trip(Report::Ready { gpus: 8 });
        round_trip(Report::SetupFailed("no GPU: none".into()));
        round_trip(Report::Output { stderr: true, bytes: b"panicked at x\n".to_vec() });
        round_trip(Report::Output { stderr: false, bytes: vec![0xff, 0] });
        for ending in [
            Ending::Exited(-7),
            Ending::Exited(1 << 40),
            Ending::Aborted,
            Ending::TimedOut,
            Ending::Fault("CUDA_ERROR_ILLEGAL_INSTRUCTION".into()),
            Ending::Error("RPC: no handler".into()),
        ] {
            for panic_message in [None, Some(String::new()), Some("sum was 17\n  left: 4".into())] {
                round_trip(Report::Finished(RunResult {
                    ending: ending.clone(),
                    panicked_threads: 32,
                    finished: false,
                    worker_ends: true,
                    constructors_ran: false,
                    messages_given_up: 2,
                    panic_message,
                }));
            }
        }
    }

    #[test]
    fn corrupt_frames_are_errors() {
        let cases: [&[u8]; 6] = [
            &[9, 0, 0, 0, 0],
            &[FINISHED, 3, 0, 0, 0, 0, 0, 0],
            &[FINISHED, 20, 0, 0, 0, 7, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            &[READY, 0xff, 0xff, 0xff, 0xff],
            &[READY, 4, 0, 0, 0, 1],
            &[SETUP_FAILED, 1, 0, 0, 0, 0xff],
        ];
        for bytes in cases {
            assert!(Report::read(&mut &bytes[..]).is_err(), "{bytes:?}");
        }
        assert!(RunRequest::read(&mut &[READY, 0, 0, 0, 0][..]).is_err());
        assert!(RunRequest::read(&mut &[REQUEST, 2, 0, 0, 0, 1, 2][..]).is_err());
    }

    #[test]
    fn a_corrupt_panic_message_is_an_error() {
        let finished = |panic_message: &[u8]| {
            let mut payload = vec![0, 1, 0, 1];
            payload.extend_from_slice(&[0; 16]);
            payload.extend_from_slice(panic_message);
            let mut bytes = Vec::new();
            write_frame(&mut bytes, FINISHED, &payload).unwrap();
            Report::read(&mut bytes.as_slice())
        };
        assert!(
            matches!(finished(&[1, 2, 0, 0, 0, b'h', b'i']), Ok(Some(Report::Finished(RunResult { panic_message: Some(m), .. }))) if m == "hi")
        );
        for (bytes, problem) in [
            (&[2][..], "presence byte 2"),
            (&[1, 3, 0, 0, 0, b'h', b'i'], "a payload too short"),
            (&[1, 0xff, 0xff, 0xff, 0xff], "a payload too short"),
            (&[1, 1, 0, 0, 0, 0xff], "text that is not UTF-8"),
            (&[1, 2, 0], "a payload too short"),
        ] {
            let error = finished(bytes).unwrap_err().to_string();
            assert!(error.ends_with(problem), "{bytes:?}: {error}");
        }
    }

    #[test]
    fn a_payload_with_bytes_after_its_last_field_is_refused() {
        let mut bytes = Vec::new();
        Report::Ready { gpus: 2 }.write(&mut bytes).unwrap();
        bytes[1] += 1;
        bytes.push(7);
        let error = Report::read(&mut bytes.as_slice()).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            error.to_string(),
            "corrupt message between the test runner and a worker: a byte after a payload's last field"
        );
    }
}
