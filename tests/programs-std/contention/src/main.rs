//! `contention-std mutex|atomic ROUNDS THREADS`: every GPU thread adds 1 to one shared count ROUNDS times, through a
//! `Mutex<u64>` (lock, increment, unlock) or an atomic add. The last of THREADS threads to finish checks the count
//! and prints how long the grid took, from the first thread's start to its own end, on the GPU's clock.
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static COUNT: Mutex<u64> = Mutex::new(0);
static ATOMIC_COUNT: AtomicU64 = AtomicU64::new(0);
static FINISHED: AtomicUsize = AtomicUsize::new(0);
/// The first thread's start, as nanoseconds since `EPOCH`.
static FIRST_START: AtomicU64 = AtomicU64::new(u64::MAX);
static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(how), Some(rounds), Some(threads)) = (
        args.get(1),
        args.get(2).and_then(|n| n.parse::<u64>().ok()),
        args.get(3).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: contention-std mutex|atomic ROUNDS THREADS");
        std::process::exit(2);
    };
    let epoch = *EPOCH.get_or_init(Instant::now);
    FIRST_START.fetch_min(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
    match how.as_str() {
        "mutex" => {
            for _ in 0..rounds {
                *COUNT.lock().unwrap() += 1;
            }
        }
        "atomic" => {
            for _ in 0..rounds {
                ATOMIC_COUNT.fetch_add(1, Ordering::Relaxed);
            }
        }
        _ => {
            eprintln!("say mutex or atomic");
            std::process::exit(2);
        }
    }
    if FINISHED.fetch_add(1, Ordering::AcqRel) + 1 == threads {
        let took = Duration::from_nanos(epoch.elapsed().as_nanos() as u64 - FIRST_START.load(Ordering::Relaxed));
        let count = if how == "mutex" { *COUNT.lock().unwrap() } else { ATOMIC_COUNT.load(Ordering::Relaxed) };
        let expected = rounds * threads as u64;
        if count != expected {
            eprintln!("{how}: the count is {count}, not {expected}");
            std::process::exit(1);
        }
        println!("{how}: {count} additions in {} ns", took.as_nanos());
    }
}
