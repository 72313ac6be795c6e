//! std's time on the GPU: `Instant` from the GPU's clock, `SystemTime` from the host's real time, `thread::sleep`
//! and `yield_now`.
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn main() {
    let (start, wall_start) = (Instant::now(), SystemTime::now());
    std::thread::sleep(Duration::from_millis(2));
    std::thread::yield_now();
    let slept = start.elapsed();
    assert!(slept >= Duration::from_millis(2), "slept only {slept:?}");
    let wall = wall_start.elapsed().expect("the real time went backwards");
    assert!(wall >= Duration::from_millis(2), "the real time moved only {wall:?}");
    // 2025-01-01 and 2200-01-01: a clock without the host's epoch would be decades off.
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).expect("before 1970").as_secs();
    assert!((1_735_689_600..7_258_118_400).contains(&since_epoch), "{since_epoch} s since 1970");
    println!("slept at least 2 ms");
}
