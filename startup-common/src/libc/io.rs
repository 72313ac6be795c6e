//! Output from GPU threads: formatted output over `core::fmt` (behind Rust's `print!` and friends,
//! [`crate::rust::print`], and the runtime's own messages), and the writes behind C's `puts`/`fputs`/`fwrite`, to
//! stdout, stderr or a file the host opened ([`crate::libc::files`]); and a panic's report ([`report_panic`]).
//!
//! Each thread formats into a bounded buffer on its own stack ([`PRINT_BUFFER`] bytes). A full buffer goes to the
//! host as a chunk marked "more follows"; the host holds chunks per writing thread and stream and writes the message
//! with one write call when its last chunk arrives. So a message is never cut, never interleaved with another
//! thread's, and long output streams through a small buffer. Every chunk is acknowledged before the thread goes on,
//! so one thread's messages (and chunks) reach the host in the order it wrote them.

use core::ffi::c_int;
use core::fmt;
use core::mem::MaybeUninit;

use crate::gpu::Gpu;
use crate::libc::errno;
use gpu_startup_protocol::messages::{FileWriteHead, FileWriteReply, PanicLocationHead, WriteHead};
use gpu_startup_protocol::opcode;

use crate::rpc::Client;

/// Bytes of formatted output a thread gathers before sending a chunk.
pub const PRINT_BUFFER: usize = 256;

/// The two output streams, numbered as the contract numbers them.
pub use gpu_startup_protocol::messages::Stream;

/// Where output goes: a stream or a file, as the contract names it.
pub use gpu_startup_protocol::messages::Destination;

/// The bytes of a C string, without its NUL. Counts them itself rather than through `CStr::from_ptr`, which calls
/// libc's `strlen`: nothing defines that on AMD, where a C program's `puts` would then fail to link.
///
/// # Safety
/// `text` must point to a NUL-terminated string that outlives `'a`.
pub unsafe fn c_string_bytes<'a>(text: *const core::ffi::c_char) -> &'a [u8] {
    let mut len = 0;
    // SAFETY: the caller guarantees a NUL within the string, so every byte up to it is readable.
    while unsafe { text.add(len).read() } != 0 {
        len += 1;
    }
    // SAFETY: the `len` bytes before the NUL are readable and live for `'a` (caller's guarantee).
    unsafe { core::slice::from_raw_parts(text.cast::<u8>(), len) }
}

/// Writes `bytes` to `stream` as one message.
pub fn write<G: Gpu>(client: &Client<G>, stream: Stream, bytes: &[u8]) {
    // Output to a stream cannot fail on the device's side.
    let _ = write_to(client, Destination::Stream(stream), bytes);
}

/// Writes `bytes` to `destination` as one message; the error number the host returned for a file.
pub fn write_to<G: Gpu>(client: &Client<G>, destination: Destination, bytes: &[u8]) -> Result<(), c_int> {
    let sink = Sink::Output(destination);
    send_chunk(client, sink, head::<G>(sink, 0), bytes)
}

/// Writes `pieces` to `destination` as one message (POSIX's `writev`): every piece but the last goes as a chunk
/// marked "more follows", so the host writes them together. The error number the host returned for a file.
pub fn write_pieces_to<'a, G: Gpu>(
    client: &Client<G>,
    destination: Destination,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(), c_int> {
    let sink = Sink::Output(destination);
    let mut pieces = pieces.into_iter().peekable();
    while let Some(piece) = pieces.next() {
        let flags = if pieces.peek().is_some() { WriteHead::MORE } else { 0 };
        send_chunk(client, sink, head::<G>(sink, flags), piece)?;
    }
    Ok(())
}

/// Writes `bytes` and a newline to `stream` as one line.
pub fn write_line<G: Gpu>(client: &Client<G>, stream: Stream, bytes: &[u8]) {
    let sink = Sink::Output(Destination::Stream(stream));
    let _ = send_chunk(client, sink, head::<G>(sink, WriteHead::NEWLINE), bytes);
}

/// Formats `args` and writes the result to `stream` as one message, streamed in chunks of [`PRINT_BUFFER`] bytes.
pub fn print<G: Gpu>(client: &Client<G>, stream: Stream, args: fmt::Arguments<'_>) {
    let _ = print_to(client, Destination::Stream(stream), args);
}

/// Formats `args` and writes the result to `destination` as one message, streamed in chunks of [`PRINT_BUFFER`]
/// bytes; the error number the host returned for a file. A formatting error (from a user's `Display`) still sends
/// what was formatted before it, and is not an error here. Out of line: a program prints from many places, and each
/// would otherwise get its own copy of the buffer's code.
#[inline(never)]
pub fn print_to<G: Gpu>(client: &Client<G>, destination: Destination, args: fmt::Arguments<'_>) -> Result<(), c_int> {
    if let Some(text) = args.as_str() {
        return write_to(client, destination, text.as_bytes());
    }
    let mut chunks = Chunks::new(client, destination);
    let _ = fmt::Write::write_fmt(&mut chunks, args);
    chunks.finish()
}

/// Reports a panic: its location ([`opcode::PANIC_LOCATION`]), then its message ([`opcode::PANIC_MESSAGE`]). The
/// host prints `panicked at FILE:LINE:COLUMN: MESSAGE (THREAD)` on stderr as one line, the thread's coordinates taken
/// from the messages' heads, and keeps the run's first message for the test runner to compare with a `should_panic`
/// test's expected text. The device formats only the message: the location's numbers and the coordinates would put
/// integer formatting and more formatting passes into every image that can panic.
pub fn report_panic<G: Gpu>(
    client: &Client<G>,
    location: Option<&core::panic::Location<'_>>,
    message: impl fmt::Display,
) {
    let (file, line, column) = match location {
        Some(location) => (location.file(), location.line(), location.column()),
        None => ("<unknown location>", 0, 0),
    };
    let sink = Sink::PanicLocation { line, column };
    // Neither can fail on the device's side.
    let _ = send_chunk(client, sink, head::<G>(sink, 0), file.as_bytes());
    let mut chunks = Chunks::with_sink(client, Sink::PanicMessage);
    let _ = fmt::Write::write_fmt(&mut chunks, format_args!("{message}"));
    let _ = chunks.finish();
}

/// Where a thread's chunks go: the program's output, or the host's report of a panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sink {
    Output(Destination),
    PanicLocation { line: u32, column: u32 },
    PanicMessage,
}

/// The write head for the calling thread: the stream (0 for a file, whose handle travels apart, and for a panic
/// message), `flags`, and the thread's key.
fn head<G: Gpu>(sink: Sink, flags: u8) -> WriteHead {
    let stream = match sink {
        Sink::Output(Destination::Stream(stream)) => stream as u32 as u8,
        Sink::Output(Destination::File(_)) | Sink::PanicLocation { .. } | Sink::PanicMessage => 0,
    };
    let head = WriteHead::for_thread(stream, flags, G::thread_ids());
    // On the host every thread of a test has the same coordinates: tell OS threads apart instead.
    #[cfg(all(not(any(target_arch = "nvptx64", target_arch = "amdgpu")), any(test, feature = "host")))]
    let head = WriteHead { group: head.group ^ host_thread_number(), ..head };
    head
}

#[cfg(all(not(any(target_arch = "nvptx64", target_arch = "amdgpu")), any(test, feature = "host")))]
fn host_thread_number() -> u64 {
    use core::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    std::thread_local! {
        static NUMBER: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|number| *number)
}

/// Sends one chunk and waits for the host to take it, so chunks and messages keep the thread's order. Output to a
/// stream (or a panic message) before the channel is set up is dropped; to a file it is [`errno::ENOSYS`].
// Out of line: every print, panic and file write sends through it, and a copy inlined in each costs far more
// code than the call.
#[inline(never)]
fn send_chunk<G: Gpu>(client: &Client<G>, sink: Sink, head: WriteHead, bytes: &[u8]) -> Result<(), c_int> {
    if !client.is_ready() {
        return match sink {
            Sink::Output(Destination::Stream(_)) | Sink::PanicLocation { .. } | Sink::PanicMessage => Ok(()),
            Sink::Output(Destination::File(_)) => Err(errno::ENOSYS),
        };
    }
    // One open, stream and close for both kinds of message: each spelled out is a copy of the RPC client's code.
    let (opcode, head, head_words) = match sink {
        Sink::Output(Destination::Stream(_)) => (opcode::WRITE, with_spare_word(head.encode()), 2),
        Sink::PanicMessage => (opcode::PANIC_MESSAGE, with_spare_word(head.encode()), 2),
        Sink::PanicLocation { line, column } => {
            (opcode::PANIC_LOCATION, PanicLocationHead { write: head, line, column }.encode(), 3)
        }
        Sink::Output(Destination::File(handle)) => {
            (opcode::FILE_WRITE, FileWriteHead { handle, write: head }.encode(), 3)
        }
    };
    let mut port = client.open(opcode);
    port.send_stream(&head[..head_words], bytes);
    let mut reply = [0; 1];
    port.recv(|packet| reply = packet.get_words());
    port.close();
    // A stream's reply is empty: only a file's carries an error number.
    let error = if opcode == opcode::FILE_WRITE { FileWriteReply::decode(reply).error } else { 0 };
    if error == 0 { Ok(()) } else { Err(error as c_int) }
}

/// A two-word head in the room of a three-word one.
fn with_spare_word([first, second]: [u64; 2]) -> [u64; 3] {
    [first, second, 0]
}

/// A thread's buffer for one message: full buffers go out as chunks marked [`WriteHead::MORE`], [`Chunks::finish`]
/// sends the last one. `print!` and C's `printf` write through it. After a chunk the host refused (a file's error)
/// nothing more is sent.
pub(crate) struct Chunks<'a, G: Gpu> {
    client: &'a Client<G>,
    sink: Sink,
    head: WriteHead,
    /// Uninitialised past `len`: zeroing it would cost 256 byte stores on every message.
    buffer: [MaybeUninit<u8>; PRINT_BUFFER],
    len: usize,
    /// Whether a chunk has gone out: an empty message is sent only to end one that has.
    sent: bool,
    /// The error number of the first chunk the host refused.
    error: Option<c_int>,
}

impl<'a, G: Gpu> Chunks<'a, G> {
    pub(crate) fn new(client: &'a Client<G>, destination: Destination) -> Self {
        Self::with_sink(client, Sink::Output(destination))
    }

    fn with_sink(client: &'a Client<G>, sink: Sink) -> Self {
        Self {
            client,
            sink,
            head: head::<G>(sink, 0),
            buffer: [MaybeUninit::uninit(); PRINT_BUFFER],
            len: 0,
            sent: false,
            error: None,
        }
    }

    /// Sends `bytes` as a chunk marked "more follows", unless the host refused an earlier one (`error`).
    fn send_more(client: &Client<G>, sink: Sink, head: WriteHead, error: &mut Option<c_int>, bytes: &[u8]) {
        if error.is_none() {
            let head = WriteHead { flags: head.flags | WriteHead::MORE, ..head };
            *error = send_chunk(client, sink, head, bytes).err();
        }
    }

    /// The bytes gathered so far.
    fn gathered(&self) -> &[u8] {
        // SAFETY: the first `len` bytes have been written (`push`, `fill`).
        unsafe { self.buffer[..self.len].assume_init_ref() }
    }

    /// Sends the buffer once it is full.
    fn send_if_full(&mut self) {
        if self.len == PRINT_BUFFER {
            // SAFETY: the buffer is full: all its bytes have been written (`push`, `fill`).
            let bytes = unsafe { self.buffer.assume_init_ref() };
            Self::send_more(self.client, self.sink, self.head, &mut self.error, bytes);
            self.sent = true;
            self.len = 0;
        }
    }

    /// Appends `bytes` to the message. Out of line: `print!` calls it once per piece of its format, from many
    /// formatting functions, and its copy loop inlined in each would be much of an image.
    #[inline(never)]
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.len == 0 && bytes.len() >= PRINT_BUFFER {
                // A long piece goes out directly, without a copy.
                Self::send_more(self.client, self.sink, self.head, &mut self.error, bytes);
                self.sent = true;
                return;
            }
            let n = bytes.len().min(PRINT_BUFFER - self.len);
            self.buffer[self.len..self.len + n].write_copy_of_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
            self.send_if_full();
        }
    }

    /// Appends `count` copies of `byte` to the message.
    pub(crate) fn fill(&mut self, byte: u8, mut count: usize) {
        while count > 0 {
            let n = count.min(PRINT_BUFFER - self.len);
            self.buffer[self.len..self.len + n].fill(MaybeUninit::new(byte));
            self.len += n;
            count -= n;
            self.send_if_full();
        }
    }

    /// Sends the last chunk, which completes the message on the host; the error number of the first chunk the host
    /// refused.
    pub(crate) fn finish(self) -> Result<(), c_int> {
        if let Some(error) = self.error {
            return Err(error);
        }
        // A panic message goes even when empty: that it arrives says the panic was reported.
        if self.len > 0 || self.sent || self.sink == Sink::PanicMessage {
            send_chunk(self.client, self.sink, self.head, self.gathered())?;
        }
        Ok(())
    }
}

impl<G: Gpu> fmt::Write for Chunks<'_, G> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.push(text.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn c_strings_lose_only_their_nul() {
        // SAFETY: both are NUL-terminated literals.
        let (empty, text) = unsafe { (super::c_string_bytes(c"".as_ptr()), super::c_string_bytes(c"abc".as_ptr())) };
        assert_eq!(empty, b"");
        assert_eq!(text, b"abc");
    }
}
