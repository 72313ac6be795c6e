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

use core::ffi::{CStr, c_char, c_int};

use startup_common::{Gpu, println};
#[cfg(target_arch = "amdgpu")]
use startup_amdgpu as rt;
#[cfg(target_arch = "nvptx64")]
use startup_nvptx as rt;

#[unsafe(no_mangle)]
pub extern "C" fn main(argc: c_int, argv: *mut *mut c_char, _envp: *mut *mut c_char) -> c_int {
    let ids = rt::Target::thread_ids();
    if ids.thread != [0; 3] || ids.block != [0; 3] {
        return 0;
    }
    let rounds: u64 = if argc > 1 {
        // SAFETY: the loader passes `argc` C strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(1)) };
        match arg.to_str().ok().and_then(|s| s.parse().ok()) {
            Some(n) => n,
            None => return 2,
        }
    } else {
        1000
    };
    // SAFETY: as above; a second argument is optional.
    let mode = if argc > 2 { unsafe { CStr::from_ptr(*argv.add(2)) }.to_bytes() } else { b"" };
    if mode == b"compare" {
        let Ok(rounds) = u32::try_from(rounds) else { return 2 };
        let client = rt::RUNTIME.client();
        let (mut messages, mut hand_offs) = (0u64, 0u64);
        for _ in 0..COMPARE_REPEATS {
            let started = rt::Target::nanoseconds();
            for _ in 0..rounds {
                client.test_noop();
            }
            messages += rt::Target::nanoseconds() - started;
            hand_offs += client.test_hand_offs(rounds);
        }
        let per_round = |ns: u64| ns * 1000 / (u64::from(rounds.max(1)) * u64::from(COMPARE_REPEATS));
        println!("round trip ps: message {} hand-off {}", per_round(messages), per_round(hand_offs));
        return 0;
    }
    if mode == b"after-idle" {
        // SAFETY: as above; `after-idle` takes the pause as a third argument.
        let pause = if argc > 3 { unsafe { CStr::from_ptr(*argv.add(3)) }.to_str().ok() } else { None };
        let Some(millis) = pause.and_then(|text| text.parse::<u64>().ok()) else { return 2 };
        let client = rt::RUNTIME.client();
        for _ in 0..rounds {
            let paused = rt::Target::nanoseconds();
            while rt::Target::nanoseconds() - paused < millis * 1_000_000 {
                rt::Target::sleep_briefly();
            }
            let started = rt::Target::nanoseconds();
            client.test_noop();
            let first = rt::Target::nanoseconds();
            client.test_noop();
            let next = rt::Target::nanoseconds();
            println!("after idle ns: first {} next {}", first - started, next - first);
        }
        return 0;
    }
    if mode == b"empty" {
        for _ in 0..rounds {
            rt::RUNTIME.client().test_noop();
        }
        return 0;
    }
    let mut value = 0;
    for _ in 0..rounds {
        value = rt::RUNTIME.client().test_increment(value);
    }
    if value == rounds { 0 } else { 1 }
}

/// How often `compare` alternates the two loops: machine states that come and go touch both alike.
const COMPARE_REPEATS: u32 = 5;
