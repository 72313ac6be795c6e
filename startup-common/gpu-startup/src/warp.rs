//! The lanes of the calling thread's warp (NVIDIA, 32 lanes) or wavefront (AMD, 64) that run this code together, and
//! votes among them: what a warp reduction or a warp-wide test needs.
//!
//! ```no_run
//! #![no_std]
//! #![no_main]
//! use gpu_startup::{thread, warp};
//!
//! #[gpu_startup::main]
//! fn main() {
//!     // The sum of the lane numbers, bit by bit: bit `b` of the sum's terms is set in as many lanes as vote for it.
//!     let lane = thread::lane();
//!     let sum: u32 = (0..6).map(|bit| warp::ballot(lane >> bit & 1 == 1).count_ones() << bit).sum();
//!     if lane == 0 {
//!         gpu_startup::println!("{} lanes, lane numbers summing to {sum}", warp::active_lanes().count_ones());
//!     }
//! }
//! ```

use startup_common::Gpu;

use crate::arch::Target;

/// The lanes running this call together, the caller's among them: bit `n` is lane `n` ([`thread::lane`]).
///
/// [`thread::lane`]: crate::thread::lane
pub fn active_lanes() -> u64 {
    Target::lane_mask()
}

/// The lanes of [`active_lanes`] whose `predicate` is true; every one of them gets the same answer.
pub fn ballot(predicate: bool) -> u64 {
    Target::ballot(Target::lane_mask(), predicate)
}

/// Waits until every lane of [`active_lanes`] has arrived, and orders their memory accesses around that point.
pub fn sync() {
    Target::sync_lanes(Target::lane_mask())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_a_warp_of_one_lane() {
        assert_eq!(active_lanes(), 1);
        assert_eq!((ballot(true), ballot(false)), (1, 0));
        sync();
    }
}
