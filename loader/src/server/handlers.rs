//! The handlers of the startup's own operations (`gpu_startup_protocol::opcode`). Everything a message carries is the
//! GPU's to choose: lengths are used only as far as they are served packet by packet, never to size an allocation.

use gpu_startup_protocol::messages::{Destination, Stream};
use gpu_startup_protocol::messages::{RealtimeReply, WriteAck, WriteHead};
use gpu_startup_protocol::region::{MAX_LANES, lanes};
use startup_common::rpc::ServerPort;

use gpu_startup_protocol::opcode;

use super::reassembly::writer_key;
use super::{BuiltIn, Context, ServerError};

/// The operations served here, with their handlers.
pub(super) const HANDLERS: &[(u32, BuiltIn)] =
    &[(opcode::WRITE, write), (opcode::CLOCK_REALTIME, realtime), (opcode::PANIC_MESSAGE, panic_message)];

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
    if port.is_abandoned() {
        // The rest will not come, and the run may go on: what arrived is written now, ending its line, rather than
        // run into the thread's next message.
        for key in lanes(unfinished).filter_map(|lane| keys[lane as usize]) {
            context.output.cut_short(key)?;
        }
    }
    // The acknowledgement: the chunk is in the server's hands, so the thread's next chunk comes after it.
    port.send(|_, packet| packet.set_words(WriteAck.encode()));
    Ok(())
}

/// `PANIC_MESSAGE`: the message of the run's first panic, in chunks as a `WRITE`'s, kept for the test runner (the
/// panicking thread prints it with a `WRITE` too, in the panic's line); then one packet acknowledges the chunk.
fn panic_message(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    port.recv_n_with::<{ WriteHead::WORDS }, ServerError>(|piece| {
        let head = WriteHead::decode(*piece.head);
        if piece.offset == 0 {
            context.sender.get_or_insert(head.writer());
        }
        let last = piece.is_last() && head.flags & WriteHead::MORE == 0;
        context.first_panic.receive((head.thread, head.group), piece.bytes, last);
        Ok(())
    })?;
    port.send(|_, packet| packet.set_words(WriteAck.encode()));
    Ok(())
}
