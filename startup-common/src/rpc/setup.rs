//! What [`Client::reset`](super::Client::reset) sets ([`Setup`]), the copy of it a block keeps during a kernel
//! ([`BlockSetup`]), and the region it names ([`view`]).

use core::ffi::c_void;
use core::sync::atomic::Ordering;

use gpu_startup_protocol::region::{Layout, MAX_PORTS};

use super::Region;
use crate::gpu::Gpu;
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64};

/// What [`Client::reset`](super::Client::reset) sets and every message reads. Only `reset` writes it, and no other thread may use the client
/// meanwhile (on the GPU it runs in `_begin`, a kernel of its own), so it is read with plain loads, which the device
/// caches: atomics would go to L2 on every message.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub(super) struct Setup {
    pub(super) region: *mut c_void,
    pub(super) port_count: u32,
    /// Bumped by every `reset`; see [`Locks`](super::lock::Locks). Starts at 0, which no reset client has.
    pub(super) epoch: u32,
}

/// The client's setup as a block keeps it during a kernel (`Client::prepare_block` writes it before the block
/// barrier, every later access reads it). Atomics so that the host models may share it between threads; on the GPU
/// they are plain loads of shared memory.
#[repr(C)]
pub(super) struct BlockSetup {
    region: AtomicPtr<c_void>,
    port_count: AtomicU32,
    epoch: AtomicU32,
}

impl BlockSetup {
    /// A setup no client has, as block memory may hold when a kernel starts.
    #[cfg(any(test, feature = "host-threads"))]
    pub(super) fn garbage() -> Self {
        Self { region: AtomicPtr::new(core::ptr::null_mut()), port_count: AtomicU32::new(0), epoch: AtomicU32::new(0) }
    }

    pub(super) fn store(&self, setup: Setup) {
        self.region.store(setup.region, Ordering::Relaxed);
        self.port_count.store(setup.port_count, Ordering::Relaxed);
        self.epoch.store(setup.epoch, Ordering::Relaxed);
    }

    pub(super) fn load(&self) -> Setup {
        Setup {
            region: self.region.load(Ordering::Relaxed),
            port_count: self.port_count.load(Ordering::Relaxed),
            epoch: self.epoch.load(Ordering::Relaxed),
        }
    }
}

/// The region and the epoch of a client's setup.
pub(super) fn view<G: Gpu>(setup: Setup) -> (Region, u32) {
    let Setup { region: base, port_count, epoch } = setup;
    // One test of all three fields, so that their loads (one 16-byte line) are issued together, not one after each
    // branch: a reset client has all three (a region, 1 to `MAX_PORTS` ports, an epoch from 1).
    let ready = !base.is_null() & (epoch != 0) & (port_count.wrapping_sub(1) < MAX_PORTS);
    if !ready {
        // A bug of the runtime's. A trap, not a panic: a panic's message would go out through this very client, so
        // it could say no more, and a panic here would link the panic machinery into every image.
        G::trap();
    }
    let layout = Layout::new(port_count, G::LANE_SIZE);
    // SAFETY: `reset`'s contract: the region is laid out for this many ports and lanes, holds atomics, and lives while
    // the client is used.
    (unsafe { Region::new(base.cast::<AtomicU64>().cast_const(), layout) }, epoch)
}
