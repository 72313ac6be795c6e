//! A test binary with every outcome a test can have, run by `gpu-loader` as libtest runs a host test binary.
//!
//! A constructor reads the environment: with `PANIC_IN_CONSTRUCTOR` set it panics, before any test runs.
#![no_std]
#![cfg_attr(test, no_main, feature(custom_test_frameworks), test_runner(gpu_startup::test_runner))]

#[gpu_startup::constructor]
fn check_environment() {
    if gpu_startup::env::var("PANIC_IN_CONSTRUCTOR").is_ok() {
        panic!("the constructor was told to panic");
    }
}

#[gpu_startup::test]
fn adds() {
    gpu_startup::println!("this line is shown only with --nocapture or --show-output");
    assert_eq!(1 + 1, 2);
}

#[gpu_startup::test]
fn compares_wrongly() {
    gpu_startup::println!("output of a failing test is shown");
    let sum = core::hint::black_box(2) + 2;
    assert_eq!(sum, 5, "two and two");
}

#[gpu_startup::test]
fn returns_ok() -> Result<(), &'static str> {
    Ok(())
}

#[gpu_startup::test]
fn returns_err() -> Result<(), &'static str> {
    Err("no luck")
}

#[gpu_startup::test(ignore)]
fn not_ready() {
    panic!("an ignored test never runs");
}

#[gpu_startup::test(should_panic(expected = "divide by zero"))]
fn divides_by_zero() {
    let divisor = core::hint::black_box(0u32);
    if divisor == 0 {
        panic!("attempt to divide by zero");
    }
}

#[gpu_startup::test]
#[should_panic]
fn forgets_to_panic() {}

/// Prints the expected text, then panics with another message: libtest looks for the text in the panic's message
/// alone, so this fails.
#[gpu_startup::test(should_panic(expected = "divide by zero"))]
fn prints_the_text_but_panics_with_another() {
    gpu_startup::println!("attempt to divide by zero, this line says");
    panic!("an unrelated panic");
}

#[gpu_startup::test]
fn traps_after_printing() {
    gpu_startup::println!("the line before the trap");
    gpu_startup::process::trap();
}

#[gpu_startup::test(timeout = 0.5)]
fn never_returns() {
    loop {
        gpu_startup::thread::sleep(core::time::Duration::from_millis(1));
    }
}

/// Tests of one warp: 32 threads.
#[cfg(test)]
mod warp {
    use gpu_startup::{thread, warp};

    /// The sum of the lanes' numbers, from five ballots: bit `b` of the sum's terms is set in as many lanes as the
    /// ballot of bit `b` has bits.
    fn warp_sum_of_lane_numbers() -> u32 {
        let lane = thread::lane();
        (0..5).map(|bit| warp::ballot(lane >> bit & 1 == 1).count_ones() << bit).sum()
    }

    #[gpu_startup::test(threads = 32)]
    fn sums_lane_ids() {
        assert_eq!(warp_sum_of_lane_numbers(), (0..32).sum::<u32>());
    }

    #[gpu_startup::test(threads = 32, timeout = 10)]
    fn upper_half_fails() {
        let lane = thread::lane();
        assert!(lane < 16, "lane {lane} is in the upper half");
    }

    /// Half a warp panics, each lane with a message of its own: the first panic's message is the one compared.
    #[gpu_startup::test(threads = 32, timeout = 10, should_panic(expected = "is in the upper half"))]
    fn upper_half_panics_with_its_message() {
        let lane = thread::lane();
        assert!(lane < 16, "lane {lane} is in the upper half");
    }
}
