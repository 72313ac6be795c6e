//! Files and stdin against the real server: host threads as clients (through `startup_common::libc::files` and C's
//! stream functions), and a region a test writes over as a buggy GPU program can.

use std::ffi::CString;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpu_startup_protocol::errno;
use gpu_startup_protocol::messages::Destination;
use gpu_startup_protocol::messages::WriteHead;
use gpu_startup_protocol::opcode;
use gpu_startup_protocol::region::Layout;
use startup_common::Gpu;
use startup_common::gpu::HostThread;
use startup_common::libc::files::{
    self, MAX_OPEN_FILES, MAX_READ, OpenFlags, ReadMode, RemoveKind, STDIN_HANDLE, Whence,
};
use startup_common::rpc::testing::{self, TestOperations};
use startup_common::rpc::{Client, HostRegion};

mod c_streams;
mod std_descriptors;

use crate::server::tests::{Capture, Scribbler};
use crate::server::{GiveUpReason, HostServer};

const PORTS: u32 = 8;

/// A folder of its own for a test, removed with everything in it when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("gpu-loader-files-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    /// The path of `name` in the folder, as the device sends it.
    fn path(&self, name: &str) -> Vec<u8> {
        self.0.join(name).into_os_string().into_encoded_bytes()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A region of one-lane ports, a runtime whose client is set up on it, and the server, reading `stdin`.
struct Setup {
    /// The region the client and the server share; kept as long as they are.
    _region: HostRegion,
    runtime: startup_common::Runtime<HostThread>,
    server: HostServer,
    err: Capture,
}

impl Setup {
    fn new(stdin: Box<dyn Read + Send>) -> Self {
        Self::configured(stdin, |server| server)
    }

    /// A setup whose server `configure` has set up further.
    fn configured(stdin: Box<dyn Read + Send>, configure: impl FnOnce(HostServer) -> HostServer) -> Self {
        let region = HostRegion::new(Layout::new(PORTS, 1));
        let runtime = startup_common::Runtime::<HostThread>::new();
        // SAFETY: a fresh zeroed region laid out for these ports of one lane, which the setup keeps as long as the
        // client.
        unsafe { runtime.client().reset(region.as_ptr(), PORTS) };
        let err = Capture::default();
        // SAFETY: same region; this is its only server.
        let server = unsafe { HostServer::new(region.as_ptr(), PORTS, 1) }
            .with_output(Box::new(io::sink()), Box::new(err.clone()))
            .with_stdin(stdin)
            .with_host_calls(testing::operations());
        let server = configure(server);
        Self { _region: region, runtime, server, err }
    }

    /// Runs `body` on `threads` host threads, serving them until all are done; their results in thread order.
    fn run<R: Send>(
        &mut self,
        threads: usize,
        body: impl Fn(&startup_common::Runtime<HostThread>, usize) -> R + Sync,
    ) -> Vec<R> {
        let (runtime, server) = (&self.runtime, &mut self.server);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|n| {
                    scope.spawn({
                        let body = &body;
                        move || body(runtime, n)
                    })
                })
                .collect();
            let started = Instant::now();
            while !workers.iter().all(|worker| worker.is_finished()) {
                server.poll().unwrap();
                assert!(started.elapsed() < Duration::from_secs(60), "the clients did not finish");
            }
            server.poll().unwrap();
            workers.into_iter().map(|worker| worker.join().unwrap()).collect()
        })
    }

    /// Runs `body` on one host thread.
    fn one<R: Send>(&mut self, body: impl Fn(&Client<HostThread>) -> R + Sync) -> R {
        self.run(1, |runtime, _| body(runtime.client())).pop().unwrap()
    }
}

fn no_stdin() -> Box<dyn Read + Send> {
    Box::new(io::empty())
}

const WRITE_NEW: OpenFlags = OpenFlags(OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::TRUNCATE);
const READ: OpenFlags = OpenFlags(OpenFlags::READ);

fn read_all(client: &Client<HostThread>, handle: u64) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buffer = [0; 100];
    loop {
        match files::read(client, handle, &mut buffer, ReadMode::Bytes).unwrap() {
            0 => return all,
            n => all.extend_from_slice(&buffer[..n]),
        }
    }
}

#[test]
fn a_file_is_written_read_back_by_bytes_and_lines_sought_and_removed() {
    let scratch = Scratch::new();
    let mut setup = Setup::new(no_stdin());
    let path = scratch.path("notes.txt");
    setup.one(|client| {
        let handle = files::open(client, &path, WRITE_NEW).unwrap();
        assert!(handle >= files::FIRST_FILE_HANDLE);
        files::write(client, handle, b"first line\n").unwrap();
        startup_common::libc::io::print_to(client, Destination::File(handle), format_args!("{} line\n", "second"))
            .unwrap();
        assert_eq!(files::seek(client, handle, 0, Whence::Current), Ok(23), "the position counts what is held");
        files::flush(client, handle).unwrap();
        files::close(client, handle).unwrap();
        assert_eq!(files::close(client, handle), Err(errno::EBADF), "closed once");

        let handle = files::open(client, &path, OpenFlags(OpenFlags::READ | OpenFlags::WRITE)).unwrap();
        let mut line = [0; 64];
        assert_eq!(files::read(client, handle, &mut line, ReadMode::Line), Ok(11));
        assert_eq!(&line[..11], b"first line\n");
        assert_eq!(files::seek(client, handle, 0, Whence::Current), Ok(11), "what was read ahead does not count");
        // A write goes where the reader is, not past what was read ahead.
        files::write(client, handle, b"SECOND").unwrap();
        assert_eq!(files::seek(client, handle, -3, Whence::End), Ok(20));
        assert_eq!(read_all(client, handle), b"ne\n");
        assert_eq!(files::seek(client, handle, 0, Whence::Start), Ok(0));
        assert_eq!(read_all(client, handle), b"first line\nSECOND line\n");
        assert_eq!(files::seek(client, handle, -1, Whence::Start), Err(errno::EINVAL));
        files::close(client, handle).unwrap();

        let append = OpenFlags(OpenFlags::APPEND | OpenFlags::WRITE);
        let handle = files::open(client, &path, append).unwrap();
        files::write(client, handle, b"third\n").unwrap();
        files::close(client, handle).unwrap();
    });
    assert_eq!(std::fs::read(scratch.0.join("notes.txt")).unwrap(), b"first line\nSECOND line\nthird\n");
    let renamed = scratch.path("renamed.txt");
    setup.one(|client| {
        files::rename(client, &path, &renamed).unwrap();
        assert_eq!(files::open(client, &path, READ), Err(errno::ENOENT));
        files::remove(client, &renamed, RemoveKind::File).unwrap();
        assert_eq!(files::remove(client, &renamed, RemoveKind::File), Err(errno::ENOENT));
    });
    assert_eq!(std::fs::read_dir(&scratch.0).unwrap().count(), 0);
    assert_eq!(setup.server.open_files(), 0);
}

#[test]
fn every_bad_request_is_an_error_number_for_its_thread() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.0.join("folder")).unwrap();
    std::fs::write(scratch.0.join("data"), b"data").unwrap();
    let fifo = CString::new(scratch.path("fifo")).unwrap();
    // SAFETY: a C string naming a path in the test's own folder.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let mut setup = Setup::new(no_stdin());
    setup.one(|client| {
        let open = |name: &str, flags: u64| files::open(client, &scratch.path(name), OpenFlags(flags));
        assert_eq!(open("missing", OpenFlags::READ), Err(errno::ENOENT));
        assert_eq!(open("folder", OpenFlags::READ), Err(errno::EISDIR), "a directory opens, and is refused");
        assert_eq!(open("folder", OpenFlags::WRITE), Err(errno::EISDIR));
        assert_eq!(open("fifo", OpenFlags::READ), Err(errno::ENXIO));
        assert_eq!(open("data/below", OpenFlags::READ), Err(errno::ENOTDIR));
        assert_eq!(open("data", OpenFlags::CREATE_NEW | OpenFlags::WRITE), Err(errno::EEXIST));
        assert_eq!(open("data", 0), Err(errno::EINVAL), "neither read nor write");
        assert_eq!(open("data", OpenFlags::READ | 256), Err(errno::EINVAL), "a flag that does not exist");
        assert_eq!(open("data", OpenFlags::READ | OpenFlags::DIRECTORY), Err(errno::ENOTDIR));
        let folder_for_writing = OpenFlags::WRITE | OpenFlags::DIRECTORY;
        assert_eq!(open("folder", folder_for_writing), Err(errno::EINVAL), "a directory is for reading");
        assert_eq!(files::open(client, b"da\0ta", READ), Err(errno::EINVAL));
        assert_eq!(files::open(client, &[b'a'; files::MAX_PATH], READ), Err(errno::ENAMETOOLONG));

        let reader = open("data", OpenFlags::READ).unwrap();
        assert_eq!(files::write(client, reader, b"x"), Err(errno::EBADF), "not open for writing");
        let writer = open("written", OpenFlags::WRITE | OpenFlags::CREATE).unwrap();
        assert_eq!(files::read(client, writer, &mut [0; 4], ReadMode::Bytes), Err(errno::EBADF));
        files::close(client, writer).unwrap();
        files::close(client, reader).unwrap();
        for closed in [reader, writer, 1, 2, 999, u64::MAX] {
            assert_eq!(files::read(client, closed, &mut [0; 4], ReadMode::Bytes), Err(errno::EBADF));
            assert_eq!(files::write(client, closed, b"x"), Err(errno::EBADF));
            assert_eq!(files::seek(client, closed, 0, Whence::Start), Err(errno::EBADF));
            assert_eq!(files::flush(client, closed), Err(errno::EBADF));
            assert_eq!(files::close(client, closed), Err(errno::EBADF));
        }
        assert_eq!(files::write(client, STDIN_HANDLE, b"x"), Err(errno::EBADF));
        assert_eq!(files::seek(client, STDIN_HANDLE, 0, Whence::Current), Err(errno::ESPIPE));
        let folder = scratch.path("folder");
        assert_eq!(files::remove(client, &folder, RemoveKind::File), Err(errno::EISDIR));
        assert_eq!(files::remove(client, &scratch.path("missing"), RemoveKind::File), Err(errno::ENOENT));
        assert_eq!(files::rename(client, &scratch.path("missing"), &scratch.path("x")), Err(errno::ENOENT));
        assert_eq!(files::rename(client, &scratch.path("data"), &[b'b'; files::MAX_PATH]), Err(errno::ENAMETOOLONG));
        files::remove(client, &folder, RemoveKind::FileOrEmptyDirectory).unwrap();
    });
    assert!(!scratch.0.join("folder").exists(), "C's remove takes an empty directory");
}

#[test]
fn open_files_are_capped_and_a_read_is_cut_to_its_limit() {
    let scratch = Scratch::new();
    std::fs::write(scratch.0.join("big"), vec![7u8; 2 * MAX_READ]).unwrap();
    let mut setup = Setup::new(no_stdin());
    let path = scratch.path("big");
    setup.one(|client| {
        let handles: Vec<u64> = (0..MAX_OPEN_FILES).map(|_| files::open(client, &path, READ).unwrap()).collect();
        assert_eq!(files::open(client, &path, READ), Err(errno::EMFILE));
        files::close(client, handles[0]).unwrap();
        let again = files::open(client, &path, READ).unwrap();
        assert!(!handles.contains(&again), "a handle is never given twice");
        let mut buffer = vec![0; 3 * MAX_READ];
        assert_eq!(files::read(client, again, &mut buffer, ReadMode::Bytes), Ok(MAX_READ));
        assert_eq!(files::read(client, again, &mut buffer, ReadMode::Line), Ok(MAX_READ), "a line as long as allowed");
        assert_eq!(files::read(client, again, &mut buffer, ReadMode::Bytes), Ok(0));
    });
    assert_eq!(setup.server.open_files(), MAX_OPEN_FILES);
    setup.server.close_files().unwrap();
    assert_eq!(setup.server.open_files(), 0, "the run's end closes them");
}

#[test]
fn many_threads_reading_stdin_lines_each_get_whole_lines_once() {
    const LINES: usize = 400;
    let input: String = (0..LINES).map(|n| format!("line {n} {}\n", "x".repeat(n % 90))).collect();
    let mut setup = Setup::new(Box::new(io::Cursor::new(input.clone().into_bytes())));
    let got = setup.run(8, |runtime, _| {
        let mut lines = Vec::new();
        let mut buffer = [0; 128];
        loop {
            match files::read(runtime.client(), STDIN_HANDLE, &mut buffer, ReadMode::Line).unwrap() {
                0 => return lines,
                n => lines.push(String::from_utf8(buffer[..n].to_vec()).unwrap()),
            }
        }
    });
    let mut got: Vec<String> = got.into_iter().flatten().collect();
    let mut expected: Vec<String> = input.lines().map(|line| format!("{line}\n")).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
}

/// Input that arrives when a test sends it, as from a terminal.
struct Typed(mpsc::Receiver<Vec<u8>>, Vec<u8>);

impl Read for Typed {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        if self.1.is_empty() {
            match self.0.recv() {
                Ok(bytes) => self.1 = bytes,
                Err(_) => return Ok(0),
            }
        }
        let n = self.1.len().min(buffer.len());
        buffer[..n].copy_from_slice(&self.1[..n]);
        self.1.drain(..n);
        Ok(n)
    }
}

/// A thread that reads stdin before there is input waits for it, while the server goes on serving others: the host
/// never blocks on stdin.
#[test]
fn a_reader_waits_for_input_while_others_are_served() {
    let (typist, typed) = mpsc::channel();
    let mut setup = Setup::new(Box::new(Typed(typed, Vec::new())));
    let typist = std::sync::Mutex::new(Some(typist));
    let results = setup.run(2, |runtime, n| {
        let client = runtime.client();
        if n == 0 {
            let mut line = [0; 32];
            let len = files::read(client, STDIN_HANDLE, &mut line, ReadMode::Line).unwrap();
            let eof = files::read(client, STDIN_HANDLE, &mut line[len..], ReadMode::Line).unwrap();
            (String::from_utf8(line[..len].to_vec()).unwrap(), eof)
        } else {
            // Served while thread 0 waits; only then does the input come, in two pieces, and then its end.
            for value in 0..100 {
                assert_eq!(client.test_increment(value), value + 1);
            }
            let typist = typist.lock().unwrap().take().unwrap();
            typist.send(b"typed ".to_vec()).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            typist.send(b"slowly\n".to_vec()).unwrap();
            drop(typist);
            (String::new(), 0)
        }
    });
    assert_eq!(results[0], ("typed slowly\n".to_owned(), 0));
}

/// Threads writing long formatted messages to one file at once: each message lands whole, as a line of stdout does.
#[test]
fn messages_to_one_file_from_many_threads_land_whole() {
    let scratch = Scratch::new();
    let path = scratch.path("shared.txt");
    let mut setup = Setup::new(no_stdin());
    let handle = setup.one(|client| files::open(client, &path, WRITE_NEW).unwrap());
    setup.run(6, |runtime, n| {
        for round in 0..20 {
            let line = format!("{n}:{round}:{}\n", char::from(b'a' + n as u8).to_string().repeat(700));
            startup_common::libc::io::print_to(runtime.client(), Destination::File(handle), format_args!("{line}"))
                .unwrap();
        }
    });
    setup.server.close_files().unwrap();
    let text = std::fs::read_to_string(scratch.0.join("shared.txt")).unwrap();
    assert_eq!(text.lines().count(), 120);
    for line in text.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        let letter = char::from(b'a' + fields[0].parse::<u8>().unwrap());
        assert_eq!(fields[2], letter.to_string().repeat(700), "a message was cut or interleaved");
    }
}

/// What the program left open and unflushed is written when the run ends, a message cut short included.
#[test]
fn the_runs_end_writes_out_and_closes_what_is_left() {
    let scratch = Scratch::new();
    let path = scratch.path("left.txt");
    let mut setup = Setup::new(no_stdin());
    setup.one(|client| {
        let handle = files::open(client, &path, WRITE_NEW).unwrap();
        files::write(client, handle, b"held on the host\n").unwrap();
        // The first chunk of a message whose last never comes: a thread that stopped mid-`fprintf`.
        let head = WriteHead::for_thread(0, WriteHead::MORE, HostThread::thread_ids());
        let [word0, word1] = head.encode();
        let mut port = client.open(opcode::FILE_WRITE);
        port.send_n_with([handle, word0, word1], b"unfinished");
        port.recv(|packet| assert_eq!(packet.get(0), 0));
        port.close();
    });
    assert_eq!(std::fs::read(scratch.0.join("left.txt")).unwrap(), b"", "nothing written out yet");
    setup.server.close_files().unwrap();
    assert_eq!(std::fs::read(scratch.0.join("left.txt")).unwrap(), b"held on the host\nunfinished");
    assert_eq!(setup.server.open_files(), 0);
}

/// A file that cannot be written out at the end of the run is reported with its path.
#[test]
fn a_write_that_fails_at_the_end_is_reported() {
    let full = b"/dev/full";
    if !Path::new("/dev/full").exists() {
        return;
    }
    let mut setup = Setup::new(no_stdin());
    setup.one(|client| {
        let handle = files::open(client, full, OpenFlags(OpenFlags::WRITE)).unwrap();
        files::write(client, handle, b"no room").unwrap();
        let second = files::open(client, full, OpenFlags(OpenFlags::WRITE)).unwrap();
        files::write(client, second, b"no room either").unwrap();
        assert_eq!(files::flush(client, second), Err(errno::ENOSPC), "a flush reports the error");
        assert_eq!(files::flush(client, second), Ok(()), "once");
    });
    let error = setup.server.close_files().unwrap_err();
    assert_eq!(
        error.to_string(),
        "writing `/dev/full` failed when the run ended: No space left on device (os error 28)"
    );
}

/// Reads a lane's packet word from the region the test writes over.
fn word(region: &HostRegion, index: usize) -> u64 {
    // SAFETY: the index is a word of the live region, read atomically as the client would.
    unsafe { AtomicU64::from_ptr((region.as_ptr() as *mut u64).add(index)) }.load(Ordering::Acquire)
}

/// Garbage from every lane of a message: handles never given, seek origins and read modes that do not exist, a path
/// that announces 2^62 bytes. Each lane gets its error number; nothing panics or holds what the device announces.
#[test]
fn garbage_requests_written_over_the_region_are_answered_with_errors() {
    const LANES: u32 = 4;
    let layout = Layout::new(2, LANES);
    let region = HostRegion::new(layout);
    let scribbler = Scribbler::new(region.as_ptr(), layout);
    // SAFETY: a fresh zeroed region of this layout, kept as long as the server; its only server.
    let mut server = unsafe { HostServer::new(region.as_ptr(), 2, LANES) }
        .with_stdin(no_stdin())
        .with_stall_limit(Duration::from_millis(50));
    let error_of_lane = |lane: u32| word(&region, layout.packet_word(0, 1, lane));
    let mut client_word = 0;
    let mut post = |opcode: u32, packet: &[u64]| {
        client_word ^= 1;
        scribbler.post(0, u64::from(opcode), 0b1111, packet, client_word);
        server.poll_watched(&mut || false).unwrap();
        assert!(server.take_given_up().is_empty());
    };
    for op in [opcode::FILE_CLOSE, opcode::FILE_FLUSH] {
        post(op, &[0xdead_beef, 1, 2]);
        assert!((0..LANES).all(|lane| error_of_lane(lane) == errno::EBADF as u64));
    }
    post(opcode::FILE_SEEK, &[u64::MAX, 5, 99]);
    assert!((0..LANES).all(|lane| error_of_lane(lane) == errno::EINVAL as u64));
    post(opcode::FILE_SEEK, &[STDIN_HANDLE, 5, 0]);
    assert!((0..LANES).all(|lane| error_of_lane(lane) == errno::ESPIPE as u64));
    // A read's reply is a stream: its head word (the error number) follows the length.
    post(opcode::FILE_READ, &[STDIN_HANDLE, u64::MAX, 7]);
    assert!((0..LANES).all(|lane| word(&region, layout.packet_word(0, 1, lane)) == errno::EINVAL as u64));
    post(opcode::FILE_READ, &[12345, u64::MAX, 0]);
    assert!((0..LANES).all(|lane| word(&region, layout.packet_word(0, 1, lane)) == errno::EBADF as u64));
    post(opcode::FILE_READ, &[STDIN_HANDLE, u64::MAX, 1]);
    assert!((0..LANES).all(|lane| word(&region, layout.packet_word(0, 0, lane)) == 0), "stdin is empty");
    // A write to a handle never given: refused at its first packet, nothing held.
    post(opcode::FILE_WRITE, &[8, 77, 0, 0, u64::from(b'x')]);
    assert!((0..LANES).all(|lane| word(&region, layout.packet_word(0, 0, lane)) == errno::EBADF as u64));
    assert_eq!(server.held_output_bytes(), 0);

    // An open whose path never ends: served packet by packet, nothing held past the limit, given up once its
    // client makes no progress.
    client_word ^= 1;
    scribbler.post(0, u64::from(opcode::FILE_OPEN), 0b1111, &[1 << 62, OpenFlags::READ], client_word);
    let started = Instant::now();
    server.poll_watched(&mut || false).unwrap();
    let given_up = server.take_given_up();
    assert_eq!(given_up.len(), 1);
    assert!(matches!(given_up[0].why, GiveUpReason::Stalled(_)));
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A server that denies the file system checks every request as usual and refuses each that names a path.
#[test]
fn a_denied_file_system_refuses_every_path() {
    let scratch = Scratch::new();
    std::fs::write(scratch.0.join("kept"), b"kept").unwrap();
    let mut setup = Setup::configured(Box::new(&b"still read\n"[..]), HostServer::deny_file_system);
    let kept = scratch.path("kept");
    setup.one(|client| {
        assert_eq!(files::open(client, &kept, READ), Err(errno::EACCES));
        assert_eq!(files::open(client, b"a\0b", READ), Err(errno::EINVAL), "checked first");
        assert_eq!(files::remove(client, &kept, RemoveKind::File), Err(errno::EACCES));
        assert_eq!(files::rename(client, &kept, &scratch.path("moved")), Err(errno::EACCES));
        let mut line = [0; 20];
        assert_eq!(files::read(client, STDIN_HANDLE, &mut line, ReadMode::Line), Ok(11));
    });
    assert_eq!(std::fs::read(scratch.0.join("kept")).unwrap(), b"kept");
}
