//! The handlers of the startup's own operations (`gpu_startup_protocol::opcode`). Everything a message carries is the
//! GPU's to choose: lengths are used only as far as they are served packet by packet, never to size an allocation.

use gpu_startup_protocol::abi::ThreadIds;
use gpu_startup_protocol::messages::{Destination, Stream};
use gpu_startup_protocol::messages::{PanicLocationHead, RealtimeReply, WriteAck, WriteHead};
use gpu_startup_protocol::region::{MAX_LANES, lanes};
use startup_common::rpc::ServerPort;

use gpu_startup_protocol::opcode;

use super::reassembly::{WriterKey, writer_key};
use super::{BuiltIn, Context, ServerError};

/// The operations served here, with their handlers.
pub(super) const HANDLERS: &[(u32, BuiltIn)] = &[
    (opcode::WRITE, write),
    (opcode::CLOCK_REALTIME, realtime),
    (opcode::PANIC_MESSAGE, panic_message),
    (opcode::PANIC_LOCATION, panic_location),
];

/// `CLOCK_REALTIME`: the host's real time, the same for every lane of the message.
fn realtime(port: &mut ServerPort<'_>, _context: &mut Context) -> Result<(), ServerError> {
    port.recv(|_, _| {});
    let nanoseconds = match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_nanos()).map_or(i64::MIN, |before| -before),
    };
    port.send(|_, packet| packet.set_words(RealtimeReply { nanoseconds }.encode()));
    Ok(())
}

/// `WRITE`: each lane's bytes go to its thread's message as they arrive (see `output`), which is written once its
/// last chunk is complete; then one packet acknowledges the chunk.
fn write(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let index = port.index();
    let mut keys = [None; MAX_LANES as usize];
    // Lanes whose stream has not ended yet: what is left of them when the message is given up.
    let mut unfinished = 0u64;
    port.recv_n_with::<{ WriteHead::WORDS }, ServerError>(|piece| {
        let head = WriteHead::decode(*piece.head);
        let stream = Stream::from_number(u32::from(head.stream))
            .ok_or(ServerError::BadStream { stream: head.stream, port: index })?;
        let key = writer_key(&head, Destination::Stream(stream));
        if piece.offset == 0 {
            keys[piece.lane as usize] = Some(key);
            unfinished |= 1 << piece.lane;
            context.sender.get_or_insert(head.writer());
        }
        if !piece.is_last() {
            context.output.append(key, piece.bytes)?;
            return Ok(());
        }
        unfinished &= !(1 << piece.lane);
        if head.flags & WriteHead::MORE != 0 {
            context.output.append(key, piece.bytes)?;
        } else {
            context.output.complete(key, piece.bytes, head.flags & WriteHead::NEWLINE != 0)?;
        }
        Ok(())
    })?;
    acknowledge_chunk(port, context, lanes(unfinished).filter_map(|lane| keys[lane as usize]))
}

/// Ends the exchange of a chunk of a line (`WRITE`, `PANIC_LOCATION`, `PANIC_MESSAGE`). When the thread abandoned the
/// port, the rest will not come and the run may go on: the `unfinished` lines are written now, ended, rather than run
/// into the thread's next message. Then one packet acknowledges: the chunk is in the server's hands, so the thread's
/// next chunk comes after it.
fn acknowledge_chunk(
    port: &mut ServerPort<'_>,
    context: &mut Context,
    unfinished: impl IntoIterator<Item = WriterKey>,
) -> Result<(), ServerError> {
    if port.is_abandoned() {
        for key in unfinished {
            context.output.cut_short(key)?;
        }
    }
    port.send(|_, packet| packet.set_words(WriteAck.encode()));
    Ok(())
}

/// `PANIC_LOCATION`: starts the panicking thread's line on stderr, `panicked at FILE:LINE:COLUMN: `, held as a
/// `WRITE`'s chunks are until the `PANIC_MESSAGE` after it ends the line; then one packet acknowledges it.
fn panic_location(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let mut keys = [None; MAX_LANES as usize];
    port.recv_n_with::<{ PanicLocationHead::WORDS }, ServerError>(|piece| {
        let head = PanicLocationHead::decode(*piece.head);
        let key = panic_line_key(&head.write);
        if piece.offset == 0 {
            keys[piece.lane as usize] = Some(key);
            context.sender.get_or_insert(head.write.writer());
            context.output.append(key, b"panicked at ")?;
        }
        context.output.append(key, piece.bytes)?;
        if piece.is_last() {
            let numbers = match head.line {
                0 => String::new(),
                line => format!(":{line}:{}", head.column),
            };
            context.output.append(key, format!("{numbers}: ").as_bytes())?;
        }
        Ok(())
    })?;
    // Every line this started waits for its message.
    acknowledge_chunk(port, context, keys.into_iter().flatten())
}

/// `PANIC_MESSAGE`: a panic's message, in chunks as a `WRITE`'s. It goes on with the thread's line on stderr that
/// `PANIC_LOCATION` started, which its last chunk ends with the thread's coordinates; the run's first is kept for
/// the test runner too. Then one packet acknowledges the chunk.
fn panic_message(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let mut unfinished = [None; MAX_LANES as usize];
    port.recv_n_with::<{ WriteHead::WORDS }, ServerError>(|piece| {
        let head = WriteHead::decode(*piece.head);
        let key = panic_line_key(&head);
        if piece.offset == 0 {
            unfinished[piece.lane as usize] = Some(key);
            context.sender.get_or_insert(head.writer());
        }
        let last = piece.is_last() && head.flags & WriteHead::MORE == 0;
        context.first_panic.receive((head.thread, head.group), piece.bytes, last);
        context.output.append(key, piece.bytes)?;
        if piece.is_last() {
            unfinished[piece.lane as usize] = None;
        }
        if last {
            let ThreadIds { thread: [tx, ty, tz], block: [bx, by, bz] } = head.writer();
            let coordinates = format!(" (thread ({tx}, {ty}, {tz}) of block ({bx}, {by}, {bz}))");
            context.output.complete(key, coordinates.as_bytes(), true)?;
        }
        Ok(())
    })?;
    acknowledge_chunk(port, context, unfinished.into_iter().flatten())
}

/// The panicking thread's line on stderr: the key its own `WRITE`s to stderr use, so the line keeps its place among
/// them.
fn panic_line_key(head: &WriteHead) -> WriterKey {
    writer_key(head, Destination::Stream(Stream::Stderr))
}
