//! The device clock, like `std::time::Instant`: nanoseconds, the same for every thread of the device (NVIDIA's
//! global timer; on AMD the 100 MHz real-time counter).
//!
//! ```no_run
//! #![no_std]
//! #![no_main]
//! use gpu_startup::time::Instant;
//!
//! #[gpu_startup::main]
//! fn main() {
//!     let start = Instant::now();
//!     let mut sum = 0u64;
//!     for i in 0..1_000_000u64 {
//!         sum = sum.wrapping_add(core::hint::black_box(i));
//!     }
//!     if gpu_startup::thread::is_first() {
//!         gpu_startup::println!("sum {sum} in {:?}", start.elapsed());
//!     }
//! }
//! ```

use core::ops::{Add, Sub};
use core::time::Duration;

use startup_common::Gpu;

use crate::arch::Target;

/// A reading of the device clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    nanoseconds: u64,
}

impl Instant {
    /// The clock now.
    pub fn now() -> Self {
        Self { nanoseconds: Target::nanoseconds() }
    }

    /// The time from `earlier` to `self`; zero when `earlier` is later.
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.nanoseconds.saturating_sub(earlier.nanoseconds))
    }

    /// The time since `self`.
    pub fn elapsed(&self) -> Duration {
        Instant::now().duration_since(*self)
    }

    /// `self + duration`, or `None` past the clock's range.
    pub fn checked_add(&self, duration: Duration) -> Option<Instant> {
        let nanoseconds = u64::try_from(duration.as_nanos()).ok()?;
        Some(Self { nanoseconds: self.nanoseconds.checked_add(nanoseconds)? })
    }
}

impl Sub for Instant {
    type Output = Duration;

    /// The time from `earlier` to `self`; zero when `earlier` is later.
    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// # Panics
    /// Past the clock's range (about 584 years of nanoseconds).
    fn add(self, duration: Duration) -> Instant {
        self.checked_add(duration).expect("overflow when adding a duration to an instant")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_between_instants_saturate_at_zero() {
        let (early, late) = (Instant { nanoseconds: 1_000 }, Instant { nanoseconds: 3_500 });
        assert_eq!(late - early, Duration::from_nanos(2_500));
        assert_eq!(early - late, Duration::ZERO);
        assert_eq!(early + Duration::from_nanos(2_500), late);
        assert_eq!(late.checked_add(Duration::MAX), None);
        assert!(Instant::now().elapsed() < Duration::from_secs(60));
    }
}
