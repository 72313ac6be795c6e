//! The atomic types of the RPC region, the client's locks and the heap: loom's when modelling (`--cfg loom`), core's
//! otherwise, so the loom models check the same source that runs on the GPU.

#[cfg(all(loom, not(any(test, feature = "host"))))]
compile_error!("the loom models need `std`: build them with `--features host`");

#[cfg(not(loom))]
pub use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64};
#[cfg(loom)]
pub use loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64};

/// A pause in a loop that waits for the other side (`spins` is how often it has waited so far). It spins; on a
/// host with `std`, a wait that lasts (a client thread that needs this core to make progress, as in host tests)
/// yields the core after a while. Under loom it lets the model schedule another thread.
#[inline(always)]
pub(crate) fn spin_pause(spins: u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
    #[cfg(all(not(loom), any(test, feature = "host")))]
    if spins >= 1024 {
        std::thread::yield_now();
    } else {
        core::hint::spin_loop();
    }
    #[cfg(all(not(loom), not(any(test, feature = "host"))))]
    {
        let _ = spins;
        core::hint::spin_loop();
    }
}
