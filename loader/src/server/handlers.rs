//! The handlers of the built-in opcodes (`startup_common::rpc::opcode`). Everything a message carries is the GPU's
//! to choose: lengths and round counts are used only as far as they are served packet by packet, never to size an
//! allocation, and arithmetic on them wraps.

use startup_common::io::{Destination, Stream};
use startup_common::rpc::{MAX_LANES, ServerPort, WriteHead};

use super::output::key;
use super::{Context, Outcome, ServerError};

/// The most bytes per lane a `TEST_ECHO` may send: the server holds the whole stream before it echoes it back.
pub const ECHO_LIMIT: u64 = 64 << 10;

/// `WRITE`: each lane's bytes go to its thread's message as they arrive (see `output`), which is written once its
/// last chunk is complete; then one packet acknowledges the chunk.
pub(super) fn write(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let index = port.index();
    let mut keys = [None; MAX_LANES as usize];
    // Lanes whose stream has not ended yet: what is left of them when the message is given up.
    let mut unfinished = 0u64;
    port.recv_n_with::<{ WriteHead::WORDS }, ServerError>(|piece| {
        let head = WriteHead::decode(*piece.head);
        let stream = Stream::from_number(u32::from(head.stream))
            .ok_or(ServerError::BadStream { stream: head.stream, port: index })?;
        let key = key(&head, Destination::Stream(stream));
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
        for key in startup_common::rpc::lanes(unfinished).filter_map(|lane| keys[lane as usize]) {
            context.output.cut_short(key)?;
        }
    }
    // The acknowledgement: the chunk is in the server's hands, so the thread's next chunk comes after it.
    port.send(|_, packet| packet.set(0, 0));
    Ok(())
}

/// `EXIT`: the first lane's status, the whole 64-bit word (a status outside `c_int` is corrupt, but must not become
/// 0 by being cut to 32 bits).
pub(super) fn exit(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let mut status = None;
    port.recv(|_, packet| {
        status.get_or_insert(packet.get(0) as i64);
    });
    if let Some(status) = status {
        context.set_outcome(Outcome::Exit(status));
    }
    Ok(())
}

pub(super) fn abort(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    port.recv(|_, _| {});
    context.set_outcome(Outcome::Abort);
    Ok(())
}

pub(super) fn increment(port: &mut ServerPort<'_>, _: &mut Context) -> Result<(), ServerError> {
    let mut values = [0u64; MAX_LANES as usize];
    port.recv(|lane, packet| values[lane as usize] = packet.get(0));
    port.send(|lane, packet| packet.set(0, values[lane as usize].wrapping_add(1)));
    Ok(())
}

pub(super) fn echo(port: &mut ServerPort<'_>, _: &mut Context) -> Result<(), ServerError> {
    let index = port.index();
    let received = port.recv_n_vec::<0>(ECHO_LIMIT).map_err(|refused| ServerError::EchoTooLong {
        port: index,
        lane: refused.lane,
        len: refused.len,
    })?;
    let mut by_lane: [&[u8]; MAX_LANES as usize] = [&[]; MAX_LANES as usize];
    for entry in &received {
        by_lane[entry.lane as usize] = &entry.data;
    }
    port.send_n(|lane| by_lane[lane as usize]);
    Ok(())
}

pub(super) fn noop(port: &mut ServerPort<'_>, _: &mut Context) -> Result<(), ServerError> {
    port.recv(|_, _| {});
    port.send(|_, _| {});
    Ok(())
}

/// The host's half of `Client::test_hand_offs`: hands the buffers back, empty, as soon as it has them, `rounds + 1`
/// times.
pub(super) fn hand_offs(port: &mut ServerPort<'_>, _: &mut Context) -> Result<(), ServerError> {
    let mut rounds = 0;
    port.recv(|_, packet| rounds = packet.get(0));
    for _ in 0..=rounds {
        if port.is_abandoned() {
            break;
        }
        port.send(|_, _| {});
    }
    Ok(())
}

/// The host's half of `Client::test_interface`: answers each lane's value with its successor, checking that every
/// packet carries the id of the lane whose slot it arrived in; the last packet says whether all did.
pub(super) fn interface(port: &mut ServerPort<'_>, _: &mut Context) -> Result<(), ServerError> {
    let mut values = [0u64; MAX_LANES as usize];
    let mut rounds = 0;
    let mut lanes_right = true;
    port.recv(|lane, packet| {
        rounds = packet.get(0);
        lanes_right &= packet.get(1) == u64::from(lane);
    });
    for _ in 0..rounds {
        if port.is_abandoned() {
            break;
        }
        port.send(|lane, packet| {
            packet.set(0, values[lane as usize].wrapping_add(1));
            packet.set(1, u64::from(lane));
        });
        port.recv(|lane, packet| {
            values[lane as usize] = packet.get(0);
            lanes_right &= packet.get(1) == u64::from(lane);
        });
    }
    port.send(|_, packet| packet.set(0, if lanes_right { u64::MAX } else { 0 }));
    Ok(())
}
