//! How a std program ends, on every GPU thread: `panic`: the sixth thread to count itself in panics, the others
//! print and return; `mutex`, `thread-local`, `drop`: the sixth thread panics holding a `Mutex` the others lock
//! after it, in a thread-local's initializer, or in a destructor; `error`: `main` returns an `Err`, which std
//! prints; `exit`: `process::exit(3)` after printing; `spawn`: `thread::Builder::spawn`, which cannot make a thread
//! on the GPU, returns std's error.
use std::cell::Cell;
use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

static ARRIVED: AtomicUsize = AtomicUsize::new(0);
static SHARED: Mutex<u32> = Mutex::new(0);

thread_local! {
    /// The number the thread counted itself in with.
    static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
    /// Initialized from [`MINE`]: thread number 5's initializer panics.
    static CHECKED: usize = {
        let number = MINE.get();
        if number == 5 {
            panic!("the thread-local of thread number {number} gave up");
        }
        number
    };
}

/// Panics when dropped by thread number 5.
struct Fragile(usize);

impl Drop for Fragile {
    fn drop(&mut self) {
        if self.0 == 5 {
            panic!("dropping thread number 5's value gave up");
        }
    }
}

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
        Some("mutex") => {
            let mut shared = SHARED.lock().unwrap();
            *shared += 1;
            if number == 5 {
                panic!("thread number {number} gave up holding the lock");
            }
            drop(shared);
            println!("fine");
            Ok(())
        }
        Some("thread-local") => {
            MINE.set(number);
            CHECKED.with(|_| ());
            println!("fine");
            Ok(())
        }
        Some("drop") => {
            drop(Fragile(number));
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
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "say panic, mutex, thread-local, drop, error, exit or spawn",
        )),
    }
}
