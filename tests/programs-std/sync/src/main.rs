//! std's synchronisation from every GPU thread at once: a `Mutex` each thread takes 100 times, an `RwLock`, a
//! `OnceLock` and a `LazyLock` made once, a `Barrier` all threads meet at, and a `Condvar` the last one to arrive
//! signals. The argument is the number of threads in the grid (the `Barrier` needs it); every thread of the grid
//! must be resident on the GPU at once, as the barrier waits for all of them.
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Barrier, Condvar, LazyLock, Mutex, OnceLock, RwLock};

const ROUNDS: u64 = 100;

static COUNTER: Mutex<u64> = Mutex::new(0);
static TABLE: RwLock<Vec<u32>> = RwLock::new(Vec::new());
static INITS: AtomicU32 = AtomicU32::new(0);
static ONCE: OnceLock<u64> = OnceLock::new();
static LAZY: LazyLock<String> = LazyLock::new(|| {
    INITS.fetch_add(1, Ordering::Relaxed);
    "made once".to_owned()
});
static BARRIER: OnceLock<Barrier> = OnceLock::new();
static ARRIVED: AtomicU32 = AtomicU32::new(0);
static READY: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

fn main() {
    let threads: u32 = std::env::args().nth(1).and_then(|arg| arg.parse().ok()).expect("the grid's thread count");
    for _ in 0..ROUNDS {
        *COUNTER.lock().unwrap() += 1;
    }
    TABLE.write().unwrap().push(7);
    ONCE.get_or_init(|| {
        INITS.fetch_add(1, Ordering::Relaxed);
        42
    });
    assert_eq!(LAZY.as_str(), "made once");

    BARRIER.get_or_init(|| Barrier::new(threads as usize)).wait();
    // Past the barrier every thread has done all of the above.
    let total = *COUNTER.lock().unwrap();
    assert_eq!(total, u64::from(threads) * ROUNDS);
    let entries = TABLE.read().unwrap().len();
    assert_eq!(entries, threads as usize);
    assert_eq!(INITS.load(Ordering::Relaxed), 2, "the OnceLock and the LazyLock were each made once");

    let (ready, signal) = &READY;
    if ARRIVED.fetch_add(1, Ordering::Relaxed) + 1 == threads {
        *ready.lock().unwrap() = true;
        signal.notify_all();
    }
    let mut guard = ready.lock().unwrap();
    while !*guard {
        guard = signal.wait(guard).unwrap();
    }
    println!("{total} increments, {entries} entries, each lazy value made once");
}
