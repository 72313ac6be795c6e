//! The locks that give a lane group a port: one word per port in device memory ([`Locks`]) for ports that groups
//! share, one per lane group in block memory ([`GroupLock`]) for a warp's own port, and the [`PortMemo`] each lock
//! passes to its next holder.

use core::sync::atomic::Ordering;

#[cfg(not(loom))]
use gpu_startup_protocol::region::MAX_PORTS;

use crate::gpu::Gpu;
use crate::sync::{AtomicU32, AtomicU64};

/// Per port, one word in device memory (the program's static, never the pinned region): the client-side lock and
/// what the last holder knew of the port ([`PortMemo`]), tagged with the client's epoch.
///
/// ```text
/// bit 0       LOCKED: a lane group holds the port
/// bits 1-2    the memo: the buffers were the client's (bit 1), the client outbox value (bit 2)
/// bits 3-31   the epoch of the run that wrote the word
/// ```
///
/// A word of an older epoch is free whatever its lock bit says (a run that ended with `exit` may leave ports
/// locked), and its memo is unknown: so [`Client::reset`](super::Client::reset) clears nothing, it starts a new epoch.
#[cfg(not(loom))]
pub(super) struct Locks([AtomicU32; MAX_PORTS as usize]);

#[cfg(not(loom))]
impl Locks {
    pub(super) const fn new() -> Self {
        Self([const { AtomicU32::new(0) }; MAX_PORTS as usize])
    }

    pub(super) fn word(&self, port: u32) -> &AtomicU32 {
        // Ports are below the setup's count, at most `MAX_PORTS` (a power of two): the mask keeps that true without a
        // bounds check, whose panic would link the panic machinery into every image that prints.
        const { assert!(MAX_PORTS.is_power_of_two()) };
        &self.0[port as usize & (MAX_PORTS as usize - 1)]
    }

    pub(super) fn prepare(&self, _port_count: u32) {}
}

/// Under loom the words are loom atomics, which cannot be built in a `const fn`: `reset` makes them, inside the model.
#[cfg(loom)]
pub(super) struct Locks(std::sync::OnceLock<std::boxed::Box<[AtomicU32]>>);

#[cfg(loom)]
impl Locks {
    pub(super) const fn new() -> Self {
        Self(std::sync::OnceLock::new())
    }

    pub(super) fn word(&self, port: u32) -> &AtomicU32 {
        &self.0.get().expect("reset made the locks")[port as usize]
    }

    pub(super) fn prepare(&self, port_count: u32) {
        let _ = self.0.set((0..port_count).map(|_| AtomicU32::new(0)).collect());
    }
}

impl Locks {
    pub(super) const LOCKED: u32 = 1;
    const EPOCH_SHIFT: u32 = 3;
    /// Epochs wrap at this mask; 0 is never a client's (zeroed words are of no run).
    pub(super) const EPOCH_MASK: u32 = u32::MAX >> Self::EPOCH_SHIFT;

    /// Takes port `port`'s lock if it is free in `epoch`. Returns the word the last holder left (its memo), or `None`
    /// when another group holds the port. Only device threads take these locks, so device-scope ordering is enough
    /// ([`Gpu::lock_fetch_or`]).
    pub(super) fn try_lock<G: Gpu>(&self, port: u32, epoch: u32) -> Option<u32> {
        let word = self.word(port);
        let old = G::lock_fetch_or(word, Self::LOCKED);
        let taken = if old >> Self::EPOCH_SHIFT == epoch {
            old & Self::LOCKED == 0
        } else {
            // A word of an earlier run: free, whatever its lock bit. Every group that finds it so (lock bit set now
            // by its own `fetch_or` or an earlier one) tries to swap in this epoch's word; the first one takes it.
            let stale = old | Self::LOCKED;
            let current = (epoch << Self::EPOCH_SHIFT) | Self::LOCKED;
            word.compare_exchange(stale, current, Ordering::Acquire, Ordering::Relaxed).is_ok()
        };
        taken.then_some(old & !Self::LOCKED)
    }

    /// Lets go of port `port`'s lock, leaving `memo` for the next holder: everything this holder wrote happens before
    /// the next holder's [`Locks::try_lock`].
    pub(super) fn unlock<G: Gpu>(&self, port: u32, epoch: u32, memo: PortMemo) {
        G::unlock_swap(self.word(port), memo.encode(epoch));
    }
}

/// What the last holder of a port's lock knew when it let go, so that the next holder can skip reading pinned host
/// memory (a PCIe round trip from the GPU) when opening it: the client's own outbox bit (the client is its only
/// writer), and whether the client owned the buffers (its last operation was a receive, so the server cannot have
/// touched the port since). It travels in the port's lock word, whose release and acquire order it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PortMemo {
    pub(super) out: u64,
    pub(super) owned: bool,
}

impl PortMemo {
    /// The lock word that leaves this memo, unlocked, in `epoch`.
    pub(super) fn encode(self, epoch: u32) -> u32 {
        (epoch << Locks::EPOCH_SHIFT) | (self.out as u32 & 1) << 2 | u32::from(self.owned) << 1
    }

    /// The memo in a lock word, if the word was written in `epoch`.
    pub(super) fn decode(word: u32, epoch: u32) -> Option<Self> {
        (word >> Locks::EPOCH_SHIFT == epoch).then_some(Self { out: u64::from(word >> 2 & 1), owned: word & 2 != 0 })
    }
}

/// The lock of a warp's own port, in block memory (`Client::open_own`), shared by the warp's lane groups.
#[repr(C)]
pub(super) struct GroupLock {
    /// As a device-memory lock word: bit 0 LOCKED, bits 1-2 the memo; then bit 3 KNOWN: the memo is valid (0 once
    /// `prepare_block` cleared the word: no group used the port yet in this kernel).
    word: AtomicU32,
    /// The group's own port + 1 in this kernel, or 0 when the group takes shared ports (`client::own_port_index`).
    port: AtomicU32,
    /// The holder's lane mask (0 while the lock is free), so that a group that opens a port while it holds the lock
    /// can tell itself from a divergent group that waits its turn.
    holder: AtomicU64,
}

impl GroupLock {
    /// The "epoch" of a memo in a group lock: valid memos have bit 3 set and nothing above.
    const KNOWN: u32 = 1;

    /// What [`GroupLock::lock`] returns when the group holds the lock already (a word it returns otherwise never has
    /// the lock bit).
    pub(super) const HELD_BY_THIS_GROUP: u32 = Locks::LOCKED;

    /// A lock full of bits that only [`GroupLock::clear`] makes usable, as block memory is when a kernel starts.
    #[cfg(any(test, feature = "host-threads"))]
    pub(super) fn garbage() -> Self {
        Self { word: AtomicU32::new(u32::MAX), port: AtomicU32::new(u32::MAX), holder: AtomicU64::new(u64::MAX) }
    }

    /// Frees the lock, forgets the memo and records the group's port, for a new kernel.
    pub(super) fn clear(&self, port: Option<u32>) {
        // Plain stores: `Client::prepare_block`'s block barrier orders them before any lane uses the lock.
        self.word.store(0, Ordering::Relaxed);
        self.port.store(port.map_or(0, |port| port + 1), Ordering::Relaxed);
        self.holder.store(0, Ordering::Relaxed);
    }

    /// The group's own port in this kernel, if it has one.
    pub(super) fn own_port(&self) -> Option<u32> {
        // Written only by `clear`, before the block barrier: every lane may read it plainly.
        self.port.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Takes the lock for the group `mask`, waiting while another group of the warp holds it; run by the group's
    /// leader. Returns the word the last holder left, or [`GroupLock::HELD_BY_THIS_GROUP`].
    ///
    /// The groups that share this lock are diverged lanes of one warp: one waits here for another to finish its
    /// message, so they cannot meet at a warp barrier, and every access to `word` and `holder` is an atomic
    /// read-modify-write at block scope ([`Gpu::block_swap`] says why not a plain load or store). On AMD a
    /// wavefront runs one path at a time, and a group holds the lock only between opening and closing a port, within
    /// its own path: there the lock is never contended, only the re-entry check matters.
    pub(super) fn lock<G: Gpu>(&self, mask: u64) -> u32 {
        let mut tries = 0u32;
        loop {
            let old = G::block_lock_fetch_or(&self.word, Locks::LOCKED);
            if old & Locks::LOCKED == 0 {
                G::block_swap(&self.holder, mask);
                return old;
            }
            // The acquire above synchronizes with the last release of the lock, before which its holder cleared
            // `holder`: what this reads is 0 or the current holder's mask. If that holds one of this group's lanes,
            // the holder is this group (the lanes of groups that run at once are disjoint): it opened a port while
            // holding one.
            if G::block_read(&self.holder) & mask != 0 {
                return Self::HELD_BY_THIS_GROUP;
            }
            // The holder waits for the host, a microsecond or more: back off, up to 16 pauses, so that the waiting
            // group's polling leaves the warp's issue slots to the holder (under a sanitizer's instrumentation, each
            // poll costs far more than the pause).
            for _ in 0..1u32 << tries.min(4) {
                G::sleep_briefly();
            }
            tries += 1;
        }
    }

    /// The memo in a word that [`GroupLock::lock`] returned, if any group used the port this kernel.
    pub(super) fn memo(word: u32) -> Option<PortMemo> {
        PortMemo::decode(word, Self::KNOWN)
    }

    /// Lets go of the lock, leaving `memo` for the warp's next group.
    pub(super) fn unlock<G: Gpu>(&self, memo: PortMemo) {
        // Atomic, as every access of diverged groups to the lock (`GroupLock::lock`).
        G::block_swap(&self.holder, 0);
        G::block_unlock_swap(&self.word, memo.encode(Self::KNOWN));
    }
}
