//! A plain std program: printing, the environment, a `HashMap` with std's random keys, a thread-local, a `Mutex`.
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Mutex;

thread_local! {
    static CALLS: Cell<u32> = const { Cell::new(0) };
}

static TOTAL: Mutex<u64> = Mutex::new(0);

fn main() {
    let mut words = HashMap::new();
    for word in std::env::args().skip(1) {
        *words.entry(word).or_insert(0u32) += 1;
    }
    CALLS.with(|calls| calls.set(calls.get() + 1));
    *TOTAL.lock().unwrap() += 1;
    let greeting = std::env::var("HELLO_STD_GREETING").unwrap_or_else(|_| "hello".into());
    println!("{greeting} from std: {} distinct arguments, {} call", words.len(), CALLS.with(Cell::get));
}
