//! Who a GPU thread is to std, on every thread of the grid (`threads-std N`, N the grid's thread count):
//! `thread::current()` names it by its coordinates and gives it an id of its own, its `thread_local!`s are its own,
//! and their destructors run once its `main` returned, as std runs a thread's. The last thread to count itself in
//! says how many names and ids the grid's threads had, all told.
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::{self, ThreadId};

/// A thread-local with a destructor: it says whose it was and how often it was used.
struct Farewell {
    owner: String,
    uses: Cell<u32>,
}

impl Drop for Farewell {
    fn drop(&mut self) {
        println!("{}: thread-local dropped after {} uses", self.owner, self.uses.get());
    }
}

thread_local! {
    static FAREWELL: Farewell = Farewell {
        owner: thread::current().name().unwrap_or("<unnamed>").to_owned(),
        uses: Cell::new(0),
    };
}

static SEEN: Mutex<Vec<(String, ThreadId)>> = Mutex::new(Vec::new());
static COUNTED: AtomicUsize = AtomicUsize::new(0);

fn main() {
    let threads: usize = std::env::args().nth(1).and_then(|count| count.parse().ok()).expect("say the thread count");
    let current = thread::current();
    let name = current.name().unwrap_or("<unnamed>").to_owned();
    for _ in 0..2 {
        FAREWELL.with(|farewell| farewell.uses.set(farewell.uses.get() + 1));
    }
    println!("{name}");
    SEEN.lock().unwrap().push((name, current.id()));
    if COUNTED.fetch_add(1, Ordering::AcqRel) + 1 == threads {
        let seen = SEEN.lock().unwrap();
        let names: HashSet<&str> = seen.iter().map(|(name, _)| name.as_str()).collect();
        let ids: HashSet<ThreadId> = seen.iter().map(|(_, id)| *id).collect();
        println!("{} threads: {} names, {} ids", seen.len(), names.len(), ids.len());
    }
}
