//! Every message round-trips through its encoding; unknown numbers are refused.

use super::*;
use crate::files::{FileKind, FileStatus, OpenFlags, ReadMode, RemoveKind, StatTarget, Whence};

#[test]
fn the_opcode_list_numbers_and_names_each_operation_once() {
    for (index, &opcode) in opcode::ALL.iter().enumerate() {
        assert!(opcode::is_reserved(opcode));
        assert!(opcode::ALL[..index].iter().all(|&before| before < opcode), "in number order, once");
    }
    assert_eq!(opcode::name(opcode::WRITE), Some("WRITE"));
    assert_eq!(opcode::name(opcode::FILE_RENAME), Some("FILE_RENAME"));
    assert_eq!(opcode::name(2), None);
    assert_eq!(opcode::name(opcode::FIRST_USER), None);
    assert!(!opcode::is_reserved(opcode::FIRST_USER));
}

#[test]
fn write_head_round_trips() {
    let head =
        WriteHead { stream: 2, flags: WriteHead::MORE | WriteHead::NEWLINE, thread: 0x1234_5678_9abc, group: u64::MAX };
    assert_eq!(WriteHead::decode(head.encode()), head);
    // The thread's coordinates come back from a head for reports: x, y, z of the thread in 16 bits each, the
    // block's x whole and its y and z in 16 bits.
    let ids = ThreadIds { thread: [1023, 2, 63], block: [0x8_0001, 65535, 7] };
    let head = WriteHead::decode(WriteHead::for_thread(1, 0, ids).encode());
    assert_eq!((head.stream, head.flags, head.writer()), (1, 0, ids));
    let wide = ThreadIds { thread: [0x1_0001, 0, 0], block: [0, 0x1_0002, 0] };
    assert_eq!(WriteHead::for_thread(1, 0, wide).writer(), ThreadIds { thread: [1, 0, 0], block: [0, 2, 0] });
    let file = FileWriteHead { handle: 9, write: head };
    assert_eq!(FileWriteHead::decode(file.encode()), file);
    assert_eq!(file.encode()[1..], head.encode());
    let location = PanicLocationHead { write: head, line: 0xffff_fffe, column: 7 };
    assert_eq!(PanicLocationHead::decode(location.encode()), location);
    assert_eq!(location.encode()[..2], head.encode());
}

#[test]
fn a_file_reply_is_a_value_or_an_error_number() {
    assert_eq!(FileReply(Ok(7)).encode(), [7, 0]);
    assert_eq!(FileReply(Err(2)).encode(), [0, 2]);
    assert_eq!(FileReply::decode([7, 0]), FileReply(Ok(7)));
    assert_eq!(FileReply::decode([5, 2]), FileReply(Err(2)));
}

#[test]
fn a_realtime_reply_round_trips_before_and_after_the_epoch() {
    for nanoseconds in [0, -1, 1_765_000_000_123_456_789, i64::MIN, i64::MAX] {
        assert_eq!(RealtimeReply::decode(RealtimeReply { nanoseconds }.encode()), RealtimeReply { nanoseconds });
        let head = CurrentDirectoryReplyHead { error: nanoseconds as u64 };
        assert_eq!(CurrentDirectoryReplyHead::decode(head.encode()), head);
    }
}

#[test]
fn a_stat_reply_carries_every_field_and_a_stat_head_its_target() {
    let status = FileStatus {
        kind: FileKind::Directory,
        permissions: 0o755,
        size: u64::MAX - 1,
        modified: (-5, 999_999_999),
        accessed: (1_700_000_000, 1),
        changed: (i64::MAX, 0),
    };
    assert_eq!(StatReply::decode(StatReply(Ok(status)).encode()), StatReply(Ok(status)));
    assert_eq!(StatReply::decode(StatReply(Err(2)).encode()), StatReply(Err(2)));
    for target in [StatTarget::Path, StatTarget::Link, StatTarget::Open(u64::MAX)] {
        assert_eq!(StatHead::decode(StatHead { target }.encode()), Some(StatHead { target }));
    }
    assert_eq!(StatHead::decode([3, 0]), None);
}

#[test]
fn requests_round_trip_and_unknown_numbers_are_refused() {
    let read = ReadRequest { handle: 3, max: 100, mode: ReadMode::Line };
    assert_eq!(read.encode(), [3, 100, 1]);
    assert_eq!(ReadRequest::decode(read.encode()), Some(read));
    assert_eq!(ReadRequest::decode([3, 100, 7]), None);
    let seek = SeekRequest { handle: 4, offset: -5, whence: Whence::End };
    assert_eq!(seek.encode(), [4, -5i64 as u64, 2]);
    assert_eq!(SeekRequest::decode(seek.encode()), Some(seek));
    assert_eq!(SeekRequest::decode([4, 0, 3]), None);
    let remove = RemoveHead { kind: RemoveKind::FileOrEmptyDirectory };
    assert_eq!(RemoveHead::decode(remove.encode()), Some(remove));
    assert_eq!(RemoveHead::decode([3]), None);
    let open = OpenHead { flags: OpenFlags(OpenFlags::READ | OpenFlags::CREATE) };
    assert_eq!(OpenHead::decode(open.encode()), open);
    assert_eq!(CloseRequest::decode(CloseRequest { handle: 8 }.encode()), CloseRequest { handle: 8 });
    assert_eq!(FlushRequest::decode(FlushRequest { handle: 8 }.encode()), FlushRequest { handle: 8 });
    assert_eq!(ReadReplyHead::decode(ReadReplyHead { error: 11 }.encode()), ReadReplyHead { error: 11 });
    assert_eq!(FileWriteReply::decode(FileWriteReply { error: 9 }.encode()), FileWriteReply { error: 9 });
    assert_eq!((WriteAck.encode(), RenameHead.encode()), ([0], [0]));
}
