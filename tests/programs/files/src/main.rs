//! Files and stdin from the GPU, through `gpu_startup::fs` and `gpu_startup::io`.
//!
//! Without arguments: every thread writes a file of its own, reads it back and removes it, and appends a long line
//! (over a chunk of formatted output) to one log that a constructor opened; the destructor reads the log back and
//! checks that every thread's line is there once, whole. Thread 0 also goes through the operations and their
//! errors: a missing file, a directory, a closed handle, seek and tell, append, rename, `fs::write`.
//! `stdin`: each thread reads one line of the loader's stdin and prints it. `stdin-all`: thread 0 reads all of
//! stdin through `Read` and prints its size. `lines`: every thread takes lines of stdin through `lines()` until its
//! end and prints each.
#![no_std]
#![no_main]

extern crate alloc;

use core::fmt::Write as _;
use core::mem::ManuallyDrop;
use core::sync::atomic::{AtomicU64, Ordering};

use gpu_startup::fs::{self, File, OpenOptions};
use gpu_startup::io::{self, ErrorKind, Read, Seek, SeekFrom, Write};
use gpu_startup::{constructor, destructor, println, thread};

/// The log's handle, from the constructor; `u64::MAX` when the run has no log.
static LOG: AtomicU64 = AtomicU64::new(u64::MAX);
/// The threads in `main`'s grid, for the destructor (which runs on a grid of one).
static THREADS: AtomicU64 = AtomicU64::new(0);

/// The padding of each log line: longer than the 256 bytes of one chunk of formatted output.
const PADDING: &str = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\
0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\
0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz";

fn mode() -> &'static str {
    gpu_startup::env::args().nth(1).unwrap_or("files")
}

#[constructor]
fn open_log() {
    if mode() == "files" {
        let log = File::create("log.txt").expect("create log.txt");
        LOG.store(log.into_raw_handle(), Ordering::Relaxed);
    }
}

#[destructor]
fn check_log() {
    let handle = LOG.load(Ordering::Relaxed);
    if handle == u64::MAX {
        return;
    }
    if let Err(error) = File::from_raw_handle(handle).close() {
        println!("closing the log failed: {error}");
        return;
    }
    let threads = THREADS.load(Ordering::Relaxed);
    let mut seen = [0u64; 4];
    let mut lines = 0;
    let mut log = File::open("log.txt").expect("open log.txt");
    let mut line = [0; 512];
    loop {
        let n = log.read_line_bytes(&mut line).expect("read the log");
        if n == 0 {
            break;
        }
        lines += 1;
        let text = core::str::from_utf8(&line[..n]).unwrap_or("");
        let thread = text.strip_prefix("thread ").and_then(|rest| rest.split_once(": "));
        match thread.and_then(|(index, rest)| Some((index.parse::<u64>().ok()?, rest))) {
            Some((index, rest)) if index < threads && rest.strip_suffix('\n') == Some(PADDING) => {
                if seen[index as usize / 64] & 1 << (index % 64) != 0 {
                    println!("log: thread {index} twice");
                }
                seen[index as usize / 64] |= 1 << (index % 64);
            }
            _ => println!("log: a line cut or mixed with another: {text:?}"),
        }
    }
    let all = seen.iter().map(|word| word.count_ones() as u64).sum::<u64>() == threads;
    println!("log: {lines} lines of {threads} threads, each whole, each thread once: {all}");
}

/// A path made of `prefix` and a number, in a buffer on the stack.
struct Name {
    bytes: [u8; 40],
    len: usize,
}

impl Name {
    fn new(args: core::fmt::Arguments<'_>) -> Self {
        let mut name = Name { bytes: [0; 40], len: 0 };
        let _ = name.write_fmt(args);
        name
    }
}

impl core::fmt::Write for Name {
    fn write_str(&mut self, text: &str) -> core::fmt::Result {
        let end = self.len + text.len();
        self.bytes.get_mut(self.len..end).ok_or(core::fmt::Error)?.copy_from_slice(text.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl AsRef<[u8]> for Name {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Every thread: a file of its own, written, read back and removed; then its line in the log.
fn own_file_and_log(index: u64) -> io::Result<()> {
    let name = Name::new(format_args!("thread-{index}.txt"));
    let mut file = File::create(&name)?;
    writeln!(file, "thread {index} was here")?;
    file.close()?;
    let mut text = [0; 64];
    let n = File::open(&name)?.read(&mut text)?;
    let expected = Name::new(format_args!("thread {index} was here\n"));
    if text[..n] != *expected.as_ref() {
        println!("thread {index}: read back {:?}", core::str::from_utf8(&text[..n]));
        return Err(ErrorKind::InvalidData.into());
    }
    fs::remove_file(&name)?;
    let log = ManuallyDrop::new(File::from_raw_handle(LOG.load(Ordering::Relaxed)));
    writeln!(&*log, "thread {index}: {PADDING}")
}

/// How an error shows: its kind and message.
fn show(result: io::Result<impl core::fmt::Debug>) -> Name {
    match result {
        Ok(value) => Name::new(format_args!("ok {value:?}")),
        Err(error) => Name::new(format_args!("{:?} {}", error.kind(), error.raw_os_error().unwrap_or(0))),
    }
}

fn text(name: &Name) -> &str {
    core::str::from_utf8(name.as_ref()).unwrap_or("?")
}

/// Thread 0: the operations and their errors, each on a line.
fn operations() -> io::Result<()> {
    println!("missing file: {}", text(&show(File::open("missing.txt"))));
    println!("directory: {}", text(&show(File::open("."))));
    println!("directory for writing: {}", text(&show(File::create("."))));
    match File::open("missing.txt") {
        Err(error) => println!("missing file says: {error}"),
        Ok(_) => println!("missing file opened"),
    }

    fs::write("data.txt", "0123456789")?;
    println!("create_new of an existing file: {}", text(&show(File::create_new("data.txt"))));
    let mut file = OpenOptions::new().read(true).write(true).open("data.txt")?;
    let mut five = [0; 5];
    file.read_exact(&mut five)?;
    println!("read 5: {:?}, position {}", core::str::from_utf8(&five), file.stream_position()?);
    file.write_all(b"ABC")?;
    println!("seek to 2 from the end: {}", file.seek(SeekFrom::End(-2))?);
    let mut rest = [0; 8];
    let n = file.read(&mut rest)?;
    println!("read the rest: {:?}", core::str::from_utf8(&rest[..n]));
    file.rewind()?;
    let n = file.read(&mut rest)?;
    println!("after rewind: {:?}", core::str::from_utf8(&rest[..n]));
    println!("read_exact past the end: {}", text(&show(file.read_exact(&mut rest))));
    println!("seek before the start: {}", text(&show(file.seek(SeekFrom::Current(-100)))));
    file.close()?;

    let mut appended = OpenOptions::new().append(true).open("data.txt")?;
    write!(appended, "+{}", 42)?;
    appended.close()?;
    let mut all = [0; 32];
    let n = File::open("data.txt")?.read(&mut all)?;
    println!("after append: {:?}", core::str::from_utf8(&all[..n]));
    fs::write("lines.txt", "first\nsecond\nno end")?;
    let mut lines = File::open("lines.txt")?;
    let mut line = alloc::string::String::new();
    while lines.read_line(&mut line)? > 0 {}
    println!("read_line until the end: {line:?}");
    println!("read_to_string: {:?}", fs::read_to_string("lines.txt")?);
    println!("read: {} bytes", fs::read("lines.txt")?.len());
    fs::write("latin1.txt", b"caf\xe9")?;
    println!("read_to_string of Latin-1: {}", text(&show(fs::read_to_string("latin1.txt"))));

    let handle = File::create("closed.txt")?.into_raw_handle();
    File::from_raw_handle(handle).close()?;
    let mut stale = ManuallyDrop::new(File::from_raw_handle(handle));
    println!("closed handle: read {}", text(&show(stale.read(&mut all))));
    println!("closed handle: write {}", text(&show(stale.write(b"x"))));
    println!("closed handle: seek {}", text(&show(stale.seek(SeekFrom::Start(0)))));
    println!("closed handle: flush {}", text(&show(stale.flush())));
    println!("closed handle: close {}", text(&show(File::from_raw_handle(handle).close())));
    println!("never given: {}", text(&show(File::from_raw_handle(12345).read(&mut all))));
    let mut read_only = File::open("data.txt")?;
    println!("write to a file opened for reading: {}", text(&show(read_only.write(b"x"))));

    fs::rename("data.txt", "renamed.txt")?;
    println!("old name after rename: {}", text(&show(File::open("data.txt"))));
    println!("remove: {}", text(&show(fs::remove_file("renamed.txt"))));
    println!("remove again: {}", text(&show(fs::remove_file("renamed.txt"))));
    println!("remove a directory: {}", text(&show(fs::remove_file("."))));
    println!("stdin is empty: {}", text(&show(io::stdin().read_line_bytes(&mut all))));
    Ok(())
}

#[gpu_startup::main]
fn main() -> i32 {
    let index = thread::index();
    match mode() {
        "files" => {
            if index == 0 {
                THREADS.store(gpu_startup::grid::thread_count(), Ordering::Relaxed);
                if let Err(error) = operations() {
                    println!("operations failed: {error}");
                    return 1;
                }
            }
            match own_file_and_log(index) {
                Ok(()) => 0,
                Err(error) => {
                    println!("thread {index} failed: {error}");
                    1
                }
            }
        }
        "stdin" => {
            let mut line = [0; 256];
            match io::stdin().read_line_bytes(&mut line) {
                Ok(0) => 0,
                Ok(n) => {
                    gpu_startup::print!("got: {}", core::str::from_utf8(&line[..n]).unwrap_or("not UTF-8\n"));
                    0
                }
                Err(error) => {
                    println!("thread {index}: stdin failed: {error}");
                    1
                }
            }
        }
        "lines" => {
            let mut got = alloc::vec::Vec::new();
            for line in io::stdin().lines() {
                match line {
                    Ok(line) => got.push(line),
                    Err(error) => {
                        println!("thread {index}: lines failed: {error}");
                        return 1;
                    }
                }
            }
            for line in got {
                println!("took: {line}");
            }
            0
        }
        "stdin-all" if index == 0 => {
            let (mut bytes, mut lines, mut sum) = (0u64, 0u64, 0u64);
            let mut buffer = [0; 1000];
            loop {
                match io::stdin().read(&mut buffer) {
                    Ok(0) => break,
                    Ok(n) => {
                        bytes += n as u64;
                        lines += buffer[..n].iter().filter(|&&byte| byte == b'\n').count() as u64;
                        sum = buffer[..n].iter().fold(sum, |sum, &byte| sum.wrapping_mul(31).wrapping_add(u64::from(byte)));
                    }
                    Err(error) => {
                        println!("stdin failed: {error}");
                        return 1;
                    }
                }
            }
            println!("stdin: {bytes} bytes, {lines} lines, hash {sum}");
            0
        }
        _ => 0,
    }
}
