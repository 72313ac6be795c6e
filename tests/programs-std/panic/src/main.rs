//! How a std program ends, on every GPU thread: `panic`: the sixth thread to count itself in panics, the others
//! print and return; `error`: `main` returns an `Err`, which std prints; `exit`: `process::exit(3)` after printing;
//! `spawn`: `thread::Builder::spawn`, which cannot make a thread on the GPU, returns std's error.
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

static ARRIVED: AtomicUsize = AtomicUsize::new(0);

fn main() -> io::Result<()> {
    let number = ARRIVED.fetch_add(1, Ordering::Relaxed);
    match std::env::args().nth(1).as_deref() {
        Some("panic") => {
            if number == 5 {
                panic!("thread number {number} gave up");
            }
            println!("fine");
            Ok(())
        }
        Some("error") => Err(io::Error::new(io::ErrorKind::NotFound, "no such thing")),
        Some("exit") => {
            println!("leaving");
            std::process::exit(3)
        }
        Some("spawn") => {
            match std::thread::Builder::new().spawn(|| ()) {
                Ok(thread) => println!("spawned: {:?}", thread.join()),
                Err(error) => println!("spawn: {:?}: {error}", error.kind()),
            }
            Ok(())
        }
        _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "say panic, error, exit or spawn")),
    }
}
