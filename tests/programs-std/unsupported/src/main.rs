//! What std cannot do on the GPU, and what a program gets for it: each line is an operation and std's own answer
//! (an `io::Error`'s kind and message, or what the call returned). Thread 0 of the grid prints them; the others only
//! try.
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTED: AtomicUsize = AtomicUsize::new(0);

fn outcome<T: std::fmt::Debug>(result: io::Result<T>) -> String {
    match result {
        Ok(value) => format!("Ok({value:?})"),
        Err(error) => format!("{:?}: {error}", error.kind()),
    }
}

fn main() {
    let first = COUNTED.fetch_add(1, Ordering::Relaxed) == 0;
    let lines = [
        ("TcpStream::connect", outcome(std::net::TcpStream::connect("127.0.0.1:9").map(drop))),
        ("TcpListener::bind", outcome(std::net::TcpListener::bind("127.0.0.1:0").map(drop))),
        ("UdpSocket::bind", outcome(std::net::UdpSocket::bind("127.0.0.1:0").map(drop))),
        ("Command::output", outcome(std::process::Command::new("true").output().map(|output| output.status))),
        ("fs::rename", outcome(std::fs::rename("a", "b"))),
        ("fs::canonicalize", outcome(std::fs::canonicalize("."))),
        ("fs::remove_dir_all", outcome(std::fs::remove_dir_all("no-such-directory"))),
        ("env::current_dir", outcome(std::env::current_dir())),
        ("env::set_current_dir", outcome(std::env::set_current_dir("/"))),
        ("thread::Builder::spawn", outcome(std::thread::Builder::new().spawn(|| ()).map(drop))),
        ("available_parallelism", outcome(std::thread::available_parallelism())),
        ("Backtrace::force_capture", format!("{:?}", std::backtrace::Backtrace::force_capture().status())),
    ];
    if first {
        for (what, answer) in lines {
            println!("{what}: {answer}");
        }
    }
}
