//! Rust std's system calls on the GPU (`startup_common::runtime::std_os`, Hermit's `sys_open`, `sys_read`, ...)
//! against the real server, from host threads: descriptors are the host's handles, results Hermit's.

use std::io::Cursor;

use startup_common::libc::errno;
use startup_common::libc::files::OpenFlags;
use startup_common::runtime::std_os::{self, IoVec, Stat};

use super::{Scratch, Setup, no_stdin};

const CREATE_TRUNCATE: i32 = OpenFlags::O_WRONLY | OpenFlags::O_CREAT | OpenFlags::O_TRUNC;

#[test]
fn a_file_is_written_in_pieces_sought_read_back_and_unlinked() {
    let scratch = Scratch::new();
    let path = scratch.path("std.txt");
    let mut setup = Setup::new(no_stdin());
    setup.one(|client| {
        let fd = std_os::open(client, &path, CREATE_TRUNCATE);
        assert!(fd >= 3, "{fd}");
        assert_eq!(std_os::write(client, fd, b"one "), 4);
        let (mut two, mut three) = (*b"two ", *b"three\n");
        let pieces = [IoVec { base: two.as_mut_ptr(), len: 4 }, IoVec { base: three.as_mut_ptr(), len: 6 }];
        // SAFETY: each piece is its array's bytes.
        assert_eq!(unsafe { std_os::write_vectored(client, fd, &pieces) }, 10);
        assert_eq!(std_os::read(client, fd, &mut [0; 4]), -(errno::EBADF as isize), "opened for writing only");
        assert_eq!(std_os::close(client, fd), 0);
        assert_eq!(std_os::close(client, fd), -errno::EBADF, "closed once");

        let fd = std_os::open(client, &path, OpenFlags::O_RDWR);
        assert_eq!(std_os::seek(client, fd, 4, 0), 4);
        let (mut first, mut second) = ([0u8; 3], [0u8; 64]);
        let pieces = [IoVec { base: first.as_mut_ptr(), len: 3 }, IoVec { base: second.as_mut_ptr(), len: 64 }];
        // SAFETY: each piece is its array's bytes.
        assert_eq!(unsafe { std_os::read_vectored(client, fd, &pieces) }, 10, "a short read ends it");
        assert_eq!((&first, &second[..7]), (b"two", &b" three\n"[..]));
        assert_eq!(std_os::read(client, fd, &mut second), 0, "the end");
        assert_eq!(std_os::seek(client, fd, -6, 2), 8);
        assert_eq!(std_os::seek(client, fd, 0, 3), -(errno::EINVAL as isize), "no such whence");
        assert_eq!(std_os::close(client, fd), 0);

        assert_eq!(std_os::unlink(client, &path), 0);
        assert_eq!(std_os::unlink(client, &path), -errno::ENOENT);
        assert_eq!(std_os::open(client, &path, 0), -errno::ENOENT);
    });
    assert_eq!(setup.server.open_files(), 0);
}

#[test]
fn a_write_reaches_the_file_at_once_and_fails_itself_when_the_disk_is_full() {
    let scratch = Scratch::new();
    let path = scratch.path("now.txt");
    let mut setup = Setup::new(no_stdin());
    setup.one(|client| {
        let fd = std_os::open(client, &path, CREATE_TRUNCATE);
        assert_eq!(std_os::write(client, fd, b"at once"), 7);
        let on_disk = std::fs::read(std::str::from_utf8(&path).unwrap()).unwrap();
        assert_eq!(on_disk, b"at once", "written before the file is closed");
        assert_eq!(std_os::close(client, fd), 0);

        let full = std_os::open(client, b"/dev/full", OpenFlags::O_WRONLY);
        assert!(full >= 3, "{full}");
        assert_eq!(std_os::write(client, full, b"x"), -(errno::ENOSPC as isize), "the write's own error");
        assert_eq!(std_os::close(client, full), 0, "nothing left to fail at the close");
    });
}

#[test]
fn the_current_directory_is_the_loaders_and_a_short_buffer_is_erange() {
    let mut setup = Setup::new(no_stdin());
    setup.one(|client| {
        let mut path = [0u8; 4096];
        let length = std_os::current_directory(client, &mut path);
        let expected = std::env::current_dir().unwrap().into_os_string().into_encoded_bytes();
        assert_eq!(&path[..usize::try_from(length).unwrap()], &expected[..]);
        assert_eq!(std_os::current_directory(client, &mut [0u8; 1]), -(errno::ERANGE as isize));
    });
}

#[test]
fn the_standard_descriptors_do_what_they_can_and_refuse_the_rest() {
    let scratch = Scratch::new();
    let mut setup = Setup::new(Box::new(Cursor::new(b"typed\n".to_vec())));
    setup.one(|client| {
        let mut buffer = [0u8; 16];
        assert_eq!(std_os::read(client, 0, &mut buffer), 6);
        assert_eq!(&buffer[..6], b"typed\n");
        assert_eq!(std_os::read(client, 0, &mut buffer), 0, "stdin's end");
        assert_eq!(std_os::read(client, 1, &mut buffer), -(errno::EBADF as isize));
        assert_eq!(std_os::write(client, 0, b"x"), -(errno::EBADF as isize));
        assert_eq!(std_os::write(client, -1, b"x"), -(errno::EBADF as isize));
        assert_eq!(std_os::write(client, 99, b"x"), -(errno::EBADF as isize), "never a handle");
        assert_eq!(std_os::seek(client, 2, 0, 0), -(errno::ESPIPE as isize));
        let (mut head, mut tail) = (*b"half a ", *b"line\n");
        let pieces = [IoVec { base: head.as_mut_ptr(), len: 7 }, IoVec { base: tail.as_mut_ptr(), len: 5 }];
        // SAFETY: each piece is its array's bytes.
        assert_eq!(unsafe { std_os::write_vectored(client, 2, &pieces) }, 12);
        assert_eq!(std_os::close(client, 2), 0, "the streams stay open");
        assert_eq!(std_os::write(client, 2, b"still here\n"), 11);
        assert_eq!(std_os::open(client, &scratch.path(""), OpenFlags::O_DIRECTORY | OpenFlags::O_RDWR), -errno::EINVAL);
        assert_eq!(std_os::open(client, &scratch.path("x"), 3), -errno::EINVAL, "no such access mode");
    });
    assert_eq!(setup.err.text(), "half a line\nstill here\n");
}

#[test]
fn threads_writing_vectored_lines_to_one_file_never_cut_each_other() {
    let scratch = Scratch::new();
    let path = scratch.path("lines.txt");
    let mut setup = Setup::new(no_stdin());
    let fd = setup.one(|client| std_os::open(client, &path, OpenFlags::O_WRONLY | OpenFlags::O_CREAT));
    assert!(fd >= 3, "{fd}");
    setup.run(8, |runtime, n| {
        for round in 0..50 {
            let (mut head, mut tail) = (format!("thread {n} "), format!("round {round}\n"));
            let pieces = [
                IoVec { base: head.as_mut_ptr(), len: head.len() },
                IoVec { base: tail.as_mut_ptr(), len: tail.len() },
            ];
            // SAFETY: each piece is its string's bytes.
            let written = unsafe { std_os::write_vectored(runtime.client(), fd, &pieces) };
            assert_eq!(written as usize, head.len() + tail.len());
        }
    });
    assert_eq!(setup.one(|client| std_os::close(client, fd)), 0);
    let text = std::fs::read_to_string(scratch.0.join("lines.txt")).unwrap();
    assert_eq!(text.lines().count(), 400);
    for line in text.lines() {
        let words: Vec<_> = line.split(' ').collect();
        assert!(matches!(words[..], ["thread", _, "round", _]), "a cut line: {line:?}");
    }
}

fn blank_stat() -> Stat {
    // SAFETY: `Stat` is integers only, for which all zeroes is a value.
    unsafe { std::mem::zeroed() }
}

#[test]
fn stat_tells_kind_size_permissions_and_times_of_paths_and_open_files() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new();
    std::fs::write(scratch.0.join("data"), b"twelve bytes").unwrap();
    std::fs::set_permissions(scratch.0.join("data"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("data", scratch.0.join("link")).unwrap();
    let modified = std::fs::metadata(scratch.0.join("data")).unwrap().modified().unwrap();
    let since_epoch = modified.duration_since(std::time::UNIX_EPOCH).unwrap();
    let mut setup = Setup::new(no_stdin());
    setup.one(|client| {
        let mut stat = blank_stat();
        assert_eq!(std_os::stat_path(client, &scratch.path("data"), true, &mut stat), 0);
        assert_eq!((stat.mode, stat.size, stat.nlink), (0o100640, 12, 1));
        assert_eq!(
            (stat.modified.seconds, stat.modified.nanoseconds as u32),
            (since_epoch.as_secs() as i64, since_epoch.subsec_nanos())
        );
        assert_eq!(std_os::stat_path(client, &scratch.path("link"), true, &mut stat), 0);
        assert_eq!(stat.mode & 0o170000, 0o100000, "stat follows the link");
        assert_eq!(std_os::stat_path(client, &scratch.path("link"), false, &mut stat), 0);
        assert_eq!(stat.mode & 0o170000, 0o120000, "lstat does not");
        assert_eq!(std_os::stat_path(client, &scratch.path(""), true, &mut stat), 0);
        assert_eq!(stat.mode & 0o170000, 0o040000);
        assert_eq!(std_os::stat_path(client, &scratch.path("missing"), true, &mut stat), -errno::ENOENT);
        assert_eq!(std_os::stat_path(client, &scratch.path("data/below"), true, &mut stat), -errno::ENOTDIR);

        // An open file's size counts what the host still holds for it.
        let fd = std_os::open(client, &scratch.path("new"), CREATE_TRUNCATE);
        assert_eq!(std_os::write(client, fd, b"held"), 4);
        assert_eq!(std_os::stat_open(client, fd, &mut stat), 0);
        assert_eq!((stat.mode & 0o170000, stat.size), (0o100000, 4));
        assert_eq!(std_os::close(client, fd), 0);
        assert_eq!(std_os::stat_open(client, fd, &mut stat), -errno::EBADF, "closed");
        assert_eq!(std_os::stat_open(client, 1, &mut stat), 0);
        assert_eq!((stat.mode & 0o170000, stat.size), (0o020000, 0), "a stream is a character device");
    });
}

/// The `dirent64` records `read_directory` wrote: (name, type) in order, checking each record's length and offset.
fn records(bytes: &[u8]) -> Vec<(String, u8)> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let length = usize::from(u16::from_ne_bytes([bytes[at + 16], bytes[at + 17]]));
        assert_eq!(length % 8, 0);
        let next = i64::from_ne_bytes(bytes[at + 8..at + 16].try_into().unwrap());
        assert_eq!(next as usize, at + length);
        let name = std::ffi::CStr::from_bytes_until_nul(&bytes[at + 19..at + length]).unwrap();
        entries.push((name.to_str().unwrap().to_owned(), bytes[at + 18]));
        at += length;
    }
    entries
}

#[test]
fn directories_are_made_listed_whole_or_refused_for_a_small_buffer_and_removed() {
    let scratch = Scratch::new();
    let mut setup = Setup::new(no_stdin());
    let many: Vec<String> = (0..300).map(|n| format!("entry-{n:03}-{}", "n".repeat(n % 200))).collect();
    setup.one(|client| {
        let folder = scratch.path("folder");
        assert_eq!(std_os::make_directory(client, &folder), 0);
        assert_eq!(std_os::make_directory(client, &folder), -errno::EEXIST);
        assert_eq!(std_os::make_directory(client, &scratch.path("missing/below")), -errno::ENOENT);
        let fd = std_os::open(client, &folder, OpenFlags::O_DIRECTORY);
        assert!(fd >= 3, "{fd}");
        let mut buffer = vec![0u8; 4096];
        assert_eq!(std_os::read_directory(client, fd, &mut buffer), 0, "empty");
        assert_eq!(std_os::make_directory(client, &scratch.path("folder/inner")), 0);
        let file = std_os::open(client, &scratch.path("folder/file"), CREATE_TRUNCATE);
        assert_eq!(std_os::read_directory(client, file, &mut buffer), -i64::from(errno::ENOTDIR));
        assert_eq!(std_os::close(client, file), 0);
        let written = std_os::read_directory(client, fd, &mut buffer);
        let mut entries = records(&buffer[..written as usize]);
        entries.sort();
        assert_eq!(entries, [("file".to_owned(), 8), ("inner".to_owned(), 4)], "listed again from the start");
        assert_eq!(std_os::read_directory(client, fd, &mut buffer[..24]), -i64::from(errno::EINVAL), "too small");
        assert_eq!(std_os::close(client, fd), 0);

        assert_eq!(std_os::remove_directory(client, &folder), -errno::ENOTEMPTY);
        assert_eq!(std_os::remove_directory(client, &scratch.path("folder/file")), -errno::ENOTDIR);
        assert_eq!(std_os::open(client, &scratch.path("folder/file"), OpenFlags::O_DIRECTORY), -errno::ENOTDIR);
        // A FIFO with no writer: refused at once, where opening it to read would wait for a writer.
        let fifo = std::ffi::CString::new(scratch.path("fifo")).unwrap();
        // SAFETY: a C string naming a path in the test's own folder.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(std_os::open(client, &scratch.path("fifo"), OpenFlags::O_DIRECTORY), -errno::ENOTDIR);
        assert_eq!(std_os::unlink(client, &scratch.path("folder/file")), 0);
        assert_eq!(std_os::remove_directory(client, &scratch.path("folder/inner")), 0);
        assert_eq!(std_os::remove_directory(client, &folder), 0);
        assert_eq!(std_os::open(client, &scratch.path("folder"), OpenFlags::O_DIRECTORY), -errno::ENOENT);
        assert_eq!(std_os::make_directory(client, &scratch.path("many")), 0);
    });
    for name in &many {
        std::fs::write(scratch.0.join("many").join(name), b"").unwrap();
    }
    let listed = setup.one(|client| {
        let fd = std_os::open(client, &scratch.path("many"), OpenFlags::O_DIRECTORY);
        let mut buffer = vec![0u8; 1 << 16];
        let written = std_os::read_directory(client, fd, &mut buffer);
        assert_eq!(std_os::close(client, fd), 0);
        records(&buffer[..written as usize])
    });
    let mut names: Vec<String> = listed
        .into_iter()
        .map(|(name, kind)| {
            assert_eq!(kind, 8);
            name
        })
        .collect();
    names.sort();
    assert_eq!(names, many, "every entry once, across many reads");
}

#[test]
fn the_real_time_clock_is_the_hosts_measured_once_through_the_channel() {
    let mut setup = Setup::new(no_stdin());
    let times = setup.run(4, |runtime, _| {
        let mut time = std_os::Timespec { seconds: 0, nanoseconds: -1 };
        assert_eq!(std_os::clock_gettime(runtime.client(), std_os::CLOCK_REALTIME, &mut time), 0);
        assert!((0..1_000_000_000).contains(&time.nanoseconds));
        std::time::Duration::new(time.seconds as u64, time.nanoseconds as u32)
    });
    let host = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    for time in times {
        assert!(host.abs_diff(time) < std::time::Duration::from_secs(1), "{time:?} against the host's {host:?}");
    }
}
