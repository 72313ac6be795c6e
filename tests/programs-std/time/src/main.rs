//! std's time on the GPU: `Instant` from the GPU's clock, `thread::sleep` and `yield_now`.
use std::time::{Duration, Instant};

fn main() {
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    std::thread::yield_now();
    let slept = start.elapsed();
    assert!(slept >= Duration::from_millis(2), "slept only {slept:?}");
    println!("slept at least 2 ms");
}
