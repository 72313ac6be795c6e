//! std's files and stdin on the GPU, through `std::fs` and `std::io` as on the CPU. With no argument, every thread
//! writes, reads back, measures and removes a file of its own, and thread 0 of the grid goes through the operations
//! and their errors, printing each result; with `lines`, the threads share stdin's lines.
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, ErrorKind, Read, Seek, SeekFrom, Write};

/// The calling thread's index in the grid: each thread counts itself in, in no particular order.
fn thread_number() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|number| *number)
}

fn kind_and_code(error: &io::Error) -> String {
    format!("{:?} {}", error.kind(), error.raw_os_error().unwrap_or(0))
}

/// Thread 0's tour of the operations; each line is what a CPU program would print too.
fn operations() -> io::Result<()> {
    match File::open("missing.txt") {
        Ok(_) => println!("missing file: opened"),
        Err(error) => println!("missing file: {} ({error})", kind_and_code(&error)),
    }
    fs::write("notes.txt", "0123456789")?;
    let mut file = OpenOptions::new().read(true).write(true).open("notes.txt")?;
    let mut five = [0; 5];
    file.read_exact(&mut five)?;
    println!("read 5: {:?}, position {}", std::str::from_utf8(&five).unwrap(), file.stream_position()?);
    println!("seek to 2 from the end: {}", file.seek(SeekFrom::End(-2))?);
    file.seek(SeekFrom::Start(5))?;
    file.write_all(b"ABC")?;
    file.rewind()?;
    let mut all = String::new();
    file.read_to_string(&mut all)?;
    println!("after rewind: {all:?}");
    match file.seek(SeekFrom::Current(-100)) {
        Ok(position) => println!("seek before the start: {position}"),
        Err(error) => println!("seek before the start: {}", kind_and_code(&error)),
    }
    drop(file);
    let mut log = OpenOptions::new().append(true).open("notes.txt")?;
    writeln!(log, "+{}", 42)?;
    drop(log);
    let metadata = fs::metadata("notes.txt")?;
    println!("metadata: {} bytes, file {}, directory {}", metadata.len(), metadata.is_file(), metadata.is_dir());
    println!("directory metadata: directory {}", fs::metadata(".")?.is_dir());
    println!("read_to_string: {:?}", fs::read_to_string("notes.txt")?);
    match OpenOptions::new().write(true).create_new(true).open("notes.txt") {
        Ok(_) => println!("create_new of an existing file: created"),
        Err(error) => println!("create_new of an existing file: {}", kind_and_code(&error)),
    }
    fs::remove_file("notes.txt")?;
    match fs::remove_file("notes.txt") {
        Ok(()) => println!("remove again: removed"),
        Err(error) => println!("remove again: {}", kind_and_code(&error)),
    }
    match fs::metadata("notes.txt") {
        Ok(_) => println!("metadata of a removed file: found"),
        Err(error) => println!("metadata of a removed file: {}", kind_and_code(&error)),
    }
    directories()
}

/// Directories: made, listed, refused where a file is, removed.
fn directories() -> io::Result<()> {
    fs::create_dir_all("tree/a/b")?;
    fs::create_dir_all("tree/a/b")?;
    fs::write("tree/a/file.txt", "x")?;
    let mut names: Vec<String> = fs::read_dir("tree/a")?
        .map(|entry| {
            let entry = entry?;
            let kind = if entry.file_type()?.is_dir() { "directory" } else { "file" };
            Ok(format!("{} ({kind})", entry.file_name().to_string_lossy()))
        })
        .collect::<io::Result<_>>()?;
    names.sort();
    println!("tree/a holds: {}", names.join(", "));
    println!("tree/a/b holds {} entries", fs::read_dir("tree/a/b")?.count());
    let report = |what: &str, result: io::Result<()>| match result {
        Ok(()) => println!("{what}: ok"),
        Err(error) => println!("{what}: {}", kind_and_code(&error)),
    };
    report("remove_dir of a full directory", fs::remove_dir("tree/a"));
    report("remove_dir of a file", fs::remove_dir("tree/a/file.txt"));
    report("create_dir of an existing one", fs::create_dir("tree/a"));
    report("open a directory", File::open("tree").map(drop));
    report("a path through a file", File::open("tree/a/file.txt/below").map(drop));
    report("read_dir of a file", fs::read_dir("tree/a/file.txt").map(drop));
    fs::remove_file("tree/a/file.txt")?;
    fs::remove_dir("tree/a/b")?;
    fs::remove_dir("tree/a")?;
    fs::remove_dir("tree")?;
    println!("tree removed: {}", !fs::exists("tree")?);
    report("write to a full disk", fs::write("/dev/full", "x"));
    let mut line = String::new();
    println!("read_line at stdin's end: {:?}", io::stdin().read_line(&mut line).map_err(|error| kind_and_code(&error)));
    Ok(())
}

/// Every thread's own file: written in two pieces, measured, read back whole, removed.
fn own_file(number: usize) -> io::Result<()> {
    let path = format!("thread-{number}.txt");
    let text = format!("thread {number} was here\n").repeat(1 + number % 7);
    let mut file = File::create(&path)?;
    let (head, tail) = text.as_bytes().split_at(text.len() / 2);
    file.write_all(head)?;
    file.write_all(tail)?;
    let size = file.metadata()?.len();
    drop(file);
    let back = fs::read(&path)?;
    fs::remove_file(&path)?;
    if back != text.as_bytes() || size != text.len() as u64 {
        return Err(io::Error::other(format!("{path}: {size} bytes, read back {} of {}", back.len(), text.len())));
    }
    Ok(())
}

fn main() -> io::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("lines") {
        let mut count = 0;
        for line in io::stdin().lock().lines() {
            let line = line?;
            if !line.starts_with("line ") {
                return Err(io::Error::new(ErrorKind::InvalidData, format!("a cut line: {line:?}")));
            }
            count += 1;
        }
        if count > 0 {
            println!("read {count} lines");
        }
        return Ok(());
    }
    let number = thread_number();
    if number == 0 {
        operations()?;
    }
    own_file(number)
}
