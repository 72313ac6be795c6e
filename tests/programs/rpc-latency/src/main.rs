//! One thread makes `argv[1]` RPC round trips (default 1000): the channel's latency, as the benchmarks measure it;
//! every other thread returns at once. Each carries a number each way (test increment, checked), or nothing (test
//! noop) when `argv[2]` is `empty`.
//!
//! With `compare` as `argv[2]`, the thread alternates, [`COMPARE_REPEATS`] times, `argv[1]` empty messages with as
//! many bare hand-offs of one port's buffers (test hand-offs), times both with the device's clock and prints
//! `round trip ps: message M hand-off H` (picoseconds per round trip, over all the repeats): the protocol's
//! cost against the hardware's, on the same SM, port and host thread.
//!
//! With `after-idle MS` as `argv[2]` and `argv[3]`, the thread takes `argv[1]` samples of the first round trip after
//! a pause: it waits MS milliseconds on the device (no message meanwhile, so the host's serve loop goes idle), times
//! one empty message, then at once a second, and prints `after idle ns: first F next N` per sample: how long the
//! host takes to notice a message when it was idle, against its busy round trip.
#![no_std]
#![no_main]

use gpu_startup::rpc::{self, testing::TestOperations};
use gpu_startup::time::Instant;
use gpu_startup::{println, thread};

#[gpu_startup::main]
fn main() -> i32 {
    if !thread::is_first() {
        return 0;
    }
    let mut args = gpu_startup::env::args().skip(1);
    let rounds: u64 = match args.next().map(str::parse) {
        None => 1000,
        Some(Ok(rounds)) => rounds,
        Some(Err(_)) => return 2,
    };
    let client = rpc::testing::client();
    match args.next() {
        Some("compare") => {
            let Ok(rounds) = u32::try_from(rounds) else { return 2 };
            let (mut messages, mut hand_offs) = (0u64, 0u64);
            for _ in 0..COMPARE_REPEATS {
                let started = Instant::now();
                for _ in 0..rounds {
                    client.test_noop();
                }
                messages += started.elapsed().as_nanos() as u64;
                hand_offs += client.test_hand_offs(rounds);
            }
            let per_round = |ns: u64| ns * 1000 / (u64::from(rounds.max(1)) * u64::from(COMPARE_REPEATS));
            println!("round trip ps: message {} hand-off {}", per_round(messages), per_round(hand_offs));
            0
        }
        Some("after-idle") => {
            let Some(Ok(millis)) = args.next().map(str::parse::<u64>) else { return 2 };
            for _ in 0..rounds {
                thread::sleep(core::time::Duration::from_millis(millis));
                let started = Instant::now();
                client.test_noop();
                let first = started.elapsed();
                let second = Instant::now();
                client.test_noop();
                let next = second.elapsed();
                println!("after idle ns: first {} next {}", first.as_nanos(), next.as_nanos());
            }
            0
        }
        Some("empty") => {
            for _ in 0..rounds {
                client.test_noop();
            }
            0
        }
        _ => {
            let mut value = 0;
            for _ in 0..rounds {
                value = client.test_increment(value);
            }
            if value == rounds { 0 } else { 1 }
        }
    }
}

/// How often `compare` alternates the two loops: machine states that come and go touch both alike.
const COMPARE_REPEATS: u32 = 5;
