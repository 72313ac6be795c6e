//! The handlers of the file operations (`gpu_startup_protocol::opcode::FILE_*`). Each lane's request is served on
//! its own, in lane order, and answered with its own result: an error in one lane's request (a bad handle, a path too
//! long) is that lane's error number, and the message goes on. Lengths come from the device: a path is received
//! packet by packet and held only up to `MAX_PATH` bytes, a read is cut to `MAX_READ`.

use std::ffi::c_int;

use gpu_startup_protocol::errno;
use gpu_startup_protocol::messages::Destination;
use gpu_startup_protocol::messages::{
    CloseRequest, CurrentDirectoryReplyHead, FileReply, FileWriteHead, FileWriteReply, FlushRequest, OpenHead,
    ReadReplyHead, ReadRequest, RemoveHead, SeekRequest, StatHead, StatReply, WriteHead,
};
use gpu_startup_protocol::opcode;
use gpu_startup_protocol::region::{MAX_LANES, lanes};
use startup_common::rpc::ServerPort;

use super::MAX_PATH;
use crate::server::reassembly::writer_key;
use crate::server::{BuiltIn, Context, ServerError};

/// The operations served here, with their handlers.
pub(in crate::server) const HANDLERS: &[(u32, BuiltIn)] = &[
    (opcode::FILE_OPEN, open),
    (opcode::FILE_CLOSE, close),
    (opcode::FILE_READ, read),
    (opcode::FILE_WRITE, write),
    (opcode::FILE_SEEK, seek),
    (opcode::FILE_FLUSH, flush),
    (opcode::FILE_REMOVE, remove),
    (opcode::FILE_RENAME, rename),
    (opcode::FILE_STAT, stat),
    (opcode::MAKE_DIRECTORY, make_directory),
    (opcode::CURRENT_DIRECTORY, current_directory),
];

const LANES: usize = MAX_LANES as usize;

/// No lane's reply yet.
const NO_REPLIES: [FileReply; LANES] = [FileReply(Ok(0)); LANES];

fn send_replies(port: &mut ServerPort<'_>, replies: &[FileReply; LANES]) {
    port.send(|lane, packet| packet.set_words(replies[lane as usize].encode()));
}

/// A path each lane streamed, with its `H` head words: the bytes, or `ENAMETOOLONG` for one of `MAX_PATH` bytes or
/// more, which is received to its end but not held.
struct Paths<const H: usize> {
    heads: [[u64; H]; LANES],
    paths: [Result<Vec<u8>, c_int>; LANES],
}

impl<const H: usize> Paths<H> {
    fn receive(port: &mut ServerPort<'_>) -> Self {
        let mut this = Self { heads: [[0; H]; LANES], paths: std::array::from_fn(|_| Ok(Vec::new())) };
        let received = port.recv_n_with::<H, ServerError>(|piece| {
            let lane = piece.lane as usize;
            if piece.offset == 0 {
                this.heads[lane] = *piece.head;
                if piece.total >= MAX_PATH as u64 {
                    this.paths[lane] = Err(errno::ENAMETOOLONG);
                }
            }
            if let Ok(path) = &mut this.paths[lane] {
                path.extend_from_slice(piece.bytes);
            }
            Ok(())
        });
        debug_assert!(received.is_ok(), "the sink never refuses");
        this
    }
}

/// `FILE_OPEN`: the handle of each lane's file.
fn open(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let request = Paths::<1>::receive(port);
    let mut replies = NO_REPLIES;
    for lane in port.lanes() {
        let lane = lane as usize;
        let opened = match &request.paths[lane] {
            Ok(path) => context.output.files.open(path, OpenHead::decode(request.heads[lane]).flags),
            Err(error) => Err(*error),
        };
        replies[lane] = FileReply(opened);
    }
    send_replies(port, &replies);
    Ok(())
}

/// Receives one packet of `N` words per lane: a request to decode.
fn receive_words<const N: usize>(port: &mut ServerPort<'_>) -> [[u64; N]; LANES] {
    let mut words = [[0; N]; LANES];
    port.recv(|lane, packet| words[lane as usize] = packet.get_words());
    words
}

/// Serves a request of one packet: `serve` answers each lane's words.
fn one_packet<const N: usize>(
    port: &mut ServerPort<'_>,
    context: &mut Context,
    mut serve: impl FnMut(&mut Context, [u64; N]) -> Result<u64, c_int>,
) -> Result<(), ServerError> {
    let words = receive_words::<N>(port);
    let mut replies = NO_REPLIES;
    for lane in port.lanes() {
        replies[lane as usize] = FileReply(serve(context, words[lane as usize]));
    }
    send_replies(port, &replies);
    Ok(())
}

/// `FILE_CLOSE`.
fn close(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    one_packet(port, context, |context, words| {
        context.output.files.close(CloseRequest::decode(words).handle).map(|()| 0)
    })
}

/// `FILE_FLUSH`.
fn flush(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    one_packet(port, context, |context, words| {
        context.output.files.flush(FlushRequest::decode(words).handle).map(|()| 0)
    })
}

/// `FILE_SEEK`: the new position.
fn seek(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    one_packet(port, context, |context, words| {
        let request = SeekRequest::decode(words).ok_or(errno::EINVAL)?;
        context.output.files.seek(request.handle, request.offset, request.whence)
    })
}

/// `FILE_READ`: each lane's bytes, after its error number (`EAGAIN` when there is nothing yet).
fn read(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let words = receive_words(port);
    let mut data: [Vec<u8>; LANES] = std::array::from_fn(|_| Vec::new());
    let mut statuses = [ReadReplyHead { error: 0 }; LANES];
    for lane in port.lanes() {
        let lane = lane as usize;
        let read = ReadRequest::decode(words[lane]).ok_or(errno::EINVAL).and_then(|request| {
            let max = usize::try_from(request.max).unwrap_or(usize::MAX);
            context.output.files.read(request.handle, max, request.mode, &mut data[lane])
        });
        if let Err(error) = read {
            data[lane].clear();
            statuses[lane].error = error as u64;
        }
    }
    port.send_n_with::<1, _>(|lane| (statuses[lane as usize].encode(), &data[lane as usize]));
    Ok(())
}

/// `FILE_WRITE`: each lane's bytes go to its thread's message for the file, written whole with its last chunk (as
/// for `WRITE`, `output`); then each lane gets its error number (`EBADF` for a handle not open for writing).
fn write(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let mut keys = [None; LANES];
    let mut errors = [0u64; LANES];
    // Lanes whose stream has not ended yet: what is left of them when the message is given up.
    let mut unfinished = 0u64;
    port.recv_n_with::<{ FileWriteHead::WORDS }, ServerError>(|piece| {
        let lane = piece.lane as usize;
        let FileWriteHead { handle, write: head } = FileWriteHead::decode(*piece.head);
        let key = writer_key(&head, Destination::File(handle));
        if piece.offset == 0 {
            context.sender.get_or_insert(head.writer());
            match context.output.files.check_writable(handle) {
                Ok(()) => {
                    keys[lane] = Some(key);
                    unfinished |= 1 << lane;
                }
                Err(error) => errors[lane] = error as u64,
            }
        }
        if errors[lane] != 0 {
            return Ok(());
        }
        let written = if !piece.is_last() || head.flags & WriteHead::MORE != 0 {
            context.output.append(key, piece.bytes)
        } else {
            context.output.complete(key, piece.bytes, false)
        };
        if piece.is_last() {
            unfinished &= !(1 << lane);
        }
        if let Err(error) = written {
            errors[lane] = super::error_number(&error) as u64;
        }
        Ok(())
    })?;
    if port.is_abandoned() {
        for key in lanes(unfinished).filter_map(|lane| keys[lane as usize]) {
            context.output.cut_short(key)?;
        }
    }
    port.send(|lane, packet| packet.set_words(FileWriteReply { error: errors[lane as usize] }.encode()));
    Ok(())
}

/// `FILE_REMOVE`.
fn remove(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let request = Paths::<1>::receive(port);
    let mut replies = NO_REPLIES;
    for lane in port.lanes() {
        let lane = lane as usize;
        let kind = RemoveHead::decode(request.heads[lane]).map(|head| head.kind).ok_or(errno::EINVAL);
        let removed = request.paths[lane].as_ref().map_err(|error| *error);
        replies[lane] = FileReply(removed.and_then(|path| context.output.files.remove(path, kind?)).map(|()| 0));
    }
    send_replies(port, &replies);
    Ok(())
}

/// `FILE_RENAME`: two streams per lane, the old path (with a `RenameHead`, which says nothing) and the new.
fn rename(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let from = Paths::<1>::receive(port);
    let to = Paths::<0>::receive(port);
    let mut replies = NO_REPLIES;
    for lane in port.lanes() {
        let lane = lane as usize;
        let renamed = match (&from.paths[lane], &to.paths[lane]) {
            (Ok(from), Ok(to)) => context.output.files.rename(from, to),
            (Err(error), _) | (_, Err(error)) => Err(*error),
        };
        replies[lane] = FileReply(renamed.map(|()| 0));
    }
    send_replies(port, &replies);
    Ok(())
}

/// `FILE_STAT`: each lane's file status, or its error number.
fn stat(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let request = Paths::<2>::receive(port);
    let mut replies = [StatReply(Err(0)); LANES];
    for lane in port.lanes() {
        let lane = lane as usize;
        let status = StatHead::decode(request.heads[lane]).ok_or(errno::EINVAL).and_then(|head| {
            let path = request.paths[lane].as_ref().map_err(|error| *error)?;
            context.output.files.stat(head.target, path)
        });
        replies[lane] = StatReply(status);
    }
    port.send(|lane, packet| packet.set_words(replies[lane as usize].encode()));
    Ok(())
}

/// `MAKE_DIRECTORY`: its head word says nothing yet.
fn make_directory(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    let request = Paths::<1>::receive(port);
    let mut replies = NO_REPLIES;
    for lane in port.lanes() {
        let lane = lane as usize;
        let made = request.paths[lane].as_ref().map_err(|error| *error);
        replies[lane] = FileReply(made.and_then(|path| context.output.files.make_directory(path)).map(|()| 0));
    }
    send_replies(port, &replies);
    Ok(())
}

/// `CURRENT_DIRECTORY`: the loader's working directory, the same for every lane.
fn current_directory(port: &mut ServerPort<'_>, context: &mut Context) -> Result<(), ServerError> {
    port.recv(|_, _| {});
    let (error, path) = match context.output.files.current_directory() {
        Ok(path) => (0, path),
        Err(error) => (error as u64, Vec::new()),
    };
    port.send_n_with::<1, _>(|_| (CurrentDirectoryReplyHead { error }.encode(), &path));
    Ok(())
}
