//! The device side: [`Client`] opens ports for lane groups, [`Port`] moves packets.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use super::sync::{AtomicPtr, AtomicU32, AtomicU64};
use super::{
    Layout, MAX_PORTS, PACKET_BYTES, PACKET_WORDS, Packet, Region, first_packet_bytes, gather, opcode, scatter,
};
use crate::gpu::Gpu;

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
/// locked), and its memo is unknown: so [`Client::reset`] clears nothing, it starts a new epoch.
#[cfg(not(loom))]
struct Locks([AtomicU32; MAX_PORTS as usize]);

#[cfg(not(loom))]
impl Locks {
    const fn new() -> Self {
        Self([const { AtomicU32::new(0) }; MAX_PORTS as usize])
    }

    fn word(&self, port: u32) -> &AtomicU32 {
        &self.0[port as usize]
    }

    fn prepare(&self, _port_count: u32) {}
}

/// Under loom the words are loom atomics, which cannot be built in a `const fn`: `reset` makes them, inside the model.
#[cfg(loom)]
struct Locks(std::sync::OnceLock<std::boxed::Box<[AtomicU32]>>);

#[cfg(loom)]
impl Locks {
    const fn new() -> Self {
        Self(std::sync::OnceLock::new())
    }

    fn word(&self, port: u32) -> &AtomicU32 {
        &self.0.get().expect("reset made the locks")[port as usize]
    }

    fn prepare(&self, port_count: u32) {
        let _ = self.0.set((0..port_count).map(|_| AtomicU32::new(0)).collect());
    }
}

impl Locks {
    const LOCKED: u32 = 1;
    const EPOCH_SHIFT: u32 = 3;
    /// Epochs wrap at this mask; 0 is never a client's (zeroed words are of no run).
    const EPOCH_MASK: u32 = u32::MAX >> Self::EPOCH_SHIFT;

    /// Takes port `port`'s lock if it is free in `epoch`. Returns the word the last holder left (its memo), or `None`
    /// when another group holds the port. Only device threads take these locks, so device-scope ordering is enough
    /// ([`Gpu::lock_fetch_or`]).
    fn try_lock<G: Gpu>(&self, port: u32, epoch: u32) -> Option<u32> {
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
    fn unlock<G: Gpu>(&self, port: u32, epoch: u32, memo: PortMemo) {
        G::unlock_swap(self.word(port), memo.encode(epoch));
    }
}

/// What the last holder of a port's lock knew when it let go, so that the next holder can skip reading pinned host
/// memory (a PCIe round trip from the GPU) when opening it: the client's own outbox bit (the client is its only
/// writer), and whether the client owned the buffers (its last operation was a receive, so the server cannot have
/// touched the port since). It travels in the port's lock word, whose release and acquire order it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PortMemo {
    out: u64,
    owned: bool,
}

impl PortMemo {
    /// The lock word that leaves this memo, unlocked, in `epoch`.
    fn encode(self, epoch: u32) -> u32 {
        (epoch << Locks::EPOCH_SHIFT) | (self.out as u32 & 1) << 2 | u32::from(self.owned) << 1
    }

    /// The memo in a lock word, if the word was written in `epoch`.
    fn decode(word: u32, epoch: u32) -> Option<Self> {
        (word >> Locks::EPOCH_SHIFT == epoch).then_some(Self { out: u64::from(word >> 2 & 1), owned: word & 2 != 0 })
    }
}

/// The device's end of the channel: one per program, shared by every thread.
pub struct Client<G: Gpu> {
    setup: UnsafeCell<Setup>,
    locks: Locks,
    _gpu: PhantomData<fn() -> G>,
}

/// What [`Client::reset`] sets and every message reads. Only `reset` writes it, and no other thread may use the client
/// meanwhile (on the GPU it runs in `_begin`, a kernel of its own), so it is read with plain loads, which the device
/// caches: atomics would go to L2 on every message.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Setup {
    region: *mut c_void,
    port_count: u32,
    /// Bumped by every `reset`; see [`Locks`]. Starts at 0, which no reset client has.
    epoch: u32,
}

// SAFETY: the client's state is the lock words (atomics) and `setup`, which only `reset` writes, under a contract
// that no other thread uses the client while it runs; every other access reads it. The region it points to is shared
// memory accessed only atomically.
unsafe impl<G: Gpu> Sync for Client<G> {}
// SAFETY: as for `Sync`: nothing in the client belongs to one thread.
unsafe impl<G: Gpu> Send for Client<G> {}

impl<G: Gpu> Default for Client<G> {
    fn default() -> Self {
        Self::new()
    }
}

impl<G: Gpu> Client<G> {
    pub const fn new() -> Self {
        Self {
            setup: UnsafeCell::new(Setup { region: core::ptr::null_mut(), port_count: 0, epoch: 0 }),
            locks: Locks::new(),
            _gpu: PhantomData,
        }
    }

    /// Points the client at `region`, which holds `port_count` ports laid out by [`Layout`] for `G::LANE_SIZE` lanes
    /// (a count above [`MAX_PORTS`] uses [`MAX_PORTS`]).
    ///
    /// # Safety
    /// `region` must be zeroed (or left by a finished program with every port idle), laid out by
    /// `Layout::new(port_count, G::LANE_SIZE)`, 64-byte aligned, and stay valid while the client is used; a host
    /// server may access it concurrently only through this protocol. No other thread may use the client while this
    /// runs, and what it writes must reach every thread that uses the client later (a kernel boundary, or spawning
    /// the threads, does that).
    pub unsafe fn reset(&self, region: *mut c_void, port_count: u32) {
        let port_count = port_count.min(MAX_PORTS);
        self.locks.prepare(port_count);
        let setup = self.setup.get();
        // SAFETY: the caller guarantees no other thread uses the client now, so nothing reads `setup` meanwhile.
        unsafe {
            // Locks and memos of an earlier run of the program may not match this region: a new epoch frees them
            // all. Epoch 0 is skipped, so zeroed words are never current.
            let epoch = ((*setup).epoch + 1) & Locks::EPOCH_MASK;
            let region = if port_count == 0 { core::ptr::null_mut() } else { region };
            setup.write(Setup { region, port_count, epoch: epoch.max(1) });
        }
    }

    fn setup(&self) -> Setup {
        // SAFETY: only `reset` writes `setup`, and its contract keeps every other use of the client away meanwhile.
        unsafe { *self.setup.get() }
    }

    /// Whether [`Client::reset`] gave the client a region.
    pub fn is_ready(&self) -> bool {
        !self.setup().region.is_null()
    }

    /// The client's region and its layout, or `None` before [`Client::reset`]. Only for test programs that write over
    /// their own channel to check how the host copes (`tests/programs/rpc-scribble`): any other write to the region
    /// breaks the protocol.
    #[cfg(feature = "testing")]
    pub fn region_for_testing(&self) -> Option<(*mut c_void, Layout)> {
        let Setup { region, port_count, .. } = self.setup();
        (!region.is_null()).then(|| (region, Layout::new(port_count, G::LANE_SIZE)))
    }

    /// Opens a port for the calling lane group to send a message with `opcode`. Every lane of the group calls this
    /// together; the lowest lane takes a free port's lock for all of them. Returns once the group owns a port.
    ///
    /// Always inlined, with the own port's path: a `Port` returned through memory would be read back from the stack
    /// after the next acquire of the host's hand-off, which empties L1, at the cost of a load from L2 on every message
    /// (`docs/performance.md` has the costs).
    #[inline(always)]
    pub fn open(&self, opcode: u32) -> Port<'_, G> {
        let mask = G::lane_mask();
        let leader = G::lane_id() == mask.trailing_zeros();
        let Some(block) = Block::<G>::get() else {
            let (region, epoch) = view::<G>(self.setup());
            return self.open_shared(opcode, region, epoch, 0..region.layout().port_count(), mask, leader);
        };
        // The block's copy of the setup and the group's port, as `prepare_block` left them: shared memory, which no
        // acquire of the host's hand-off evicts, where the client's own setup would be read from L2 after every one.
        let lock = block.lock(linear_thread(G::thread_ids(), &G::launch_shape()) / G::LANE_SIZE);
        let (region, epoch) = view::<G>(block.setup().load());
        match lock.own_port() {
            Some(index) => self.open_own(opcode, region, epoch, OwnPort { index, lock }, mask, leader),
            None => self.open_shared(opcode, region, epoch, 0..region.layout().port_count(), mask, leader),
        }
    }

    /// Opens one of the ports `ports`, which groups share: takes the lock of a free one, starting from a port picked
    /// by the group's place in the grid.
    fn open_shared(
        &self,
        opcode: u32,
        region: Region,
        epoch: u32,
        ports: core::ops::Range<u32>,
        mask: u64,
        leader: bool,
    ) -> Port<'_, G> {
        let port_count = ports.end - ports.start;
        let mut index = ports.start + G::broadcast_first(mask, start_port(G::thread_ids(), G::LANE_SIZE, port_count));
        let mut tried = 0;
        loop {
            // The leader's outcome, for all lanes in one broadcast: the word the last holder left, or `LOCKED` when
            // the port is taken (a word the leader got never has that bit).
            let left = G::broadcast_first(
                mask,
                if leader { self.locks.try_lock::<G>(index, epoch).unwrap_or(Locks::LOCKED) } else { 0 },
            );
            if left & Locks::LOCKED == 0 {
                // Order the lock before every lane's accesses to the port.
                G::sync_lanes(mask);
                let memo = PortMemo::decode(left, epoch);
                let (out, ready) = match memo {
                    // The last holder received last: the buffers are the client's, with no host memory read. The
                    // lock's release and acquire (then `sync_lanes`) order the last holder's acquire of the server's
                    // hand-off before this group's accesses.
                    Some(PortMemo { out, owned: true }) => (out, true),
                    _ => {
                        // Only lock holders write the client outbox, so the leader (who acquired the lock) knows its
                        // latest value, from the memo or from the region; the other lanes take the leader's.
                        let out = match memo {
                            Some(memo) => memo.out,
                            None => {
                                let out = region.client_bit(index, Ordering::Relaxed) as u32;
                                G::broadcast_first(mask, out) as u64
                            }
                        };
                        // Each lane acquires the server's hand-off itself, so its own buffer accesses are ordered
                        // after it.
                        let inbox = region.server_bit(index, Ordering::Acquire);
                        (out, G::ballot(mask, inbox == out) == mask)
                    }
                };
                if ready {
                    let port =
                        Port { client: self, region, index, mask, epoch, out, owns: true, receive: false, own: None };
                    port.write_header(opcode, leader);
                    return port;
                }
                // The server still owns this port (it has not finished the previous message): try another.
                G::sync_lanes(mask);
                if leader {
                    self.locks.unlock::<G>(index, epoch, PortMemo { out, owned: false });
                }
            }
            index = if index + 1 == ports.end { ports.start } else { index + 1 };
            tried += 1;
            if tried % port_count == 0 {
                G::sleep_briefly();
            }
        }
    }

    /// Opens the calling group's own port, taking turns with the other groups of its warp through the port's lock in
    /// block memory, and waits until the server has finished with the port's previous message.
    ///
    /// When the grid has no more warps (wavefronts) than the region has ports and the target gives blocks memory of
    /// their own ([`Gpu::block_memory`]), warp `w`, numbered across the grid, always uses port `w`. Groups of one warp
    /// (divergent branches) take turns on it through a lock in block memory, whose block-scope atomics cost a
    /// fraction of the device-scope ones that shared ports need (`docs/performance.md`). The choice depends only on
    /// the launch and the region, so every group of a kernel makes the same one, and no port is ever both a group's
    /// own and shared in one kernel.
    ///
    /// A group that opens a port while it holds its own (a panic inside a port operation, whose report is a message
    /// too) would wait for itself forever: it takes a shared port among those no warp owns instead, and traps where
    /// there are none (the grid has as many warps as the region has ports).
    #[inline(always)]
    fn open_own(&self, opcode: u32, region: Region, epoch: u32, own: OwnPort, mask: u64, leader: bool) -> Port<'_, G> {
        let OwnPort { index, lock } = own;
        let held = G::broadcast_first(mask, if leader { lock.lock::<G>(mask) } else { 0 });
        if held == GroupLock::HELD_BY_THIS_GROUP {
            // Ports from the grid's lane group count on belong to nobody in this kernel (`own_port_index`).
            let shape = G::launch_shape();
            let owned = shape.lane_groups_per_block(G::LANE_SIZE) * shape.blocks_in_grid() as u32;
            let unowned = owned..region.layout().port_count();
            if unowned.is_empty() {
                G::trap();
            }
            return self.open_shared(opcode, region, epoch, unowned, mask, leader);
        }
        // Order the lock before every lane's accesses to the port.
        G::sync_lanes(mask);
        let memo = match GroupLock::memo(held) {
            Some(memo) => memo,
            // The first time in this kernel: the port's word in device memory has what an earlier kernel left there
            // (whose end orders it before this one). Only this warp uses the port now, so it reads it plainly.
            None => {
                let left = G::broadcast_first(
                    mask,
                    if leader { self.locks.word(index).load(Ordering::Relaxed) } else { Locks::LOCKED },
                );
                match PortMemo::decode(left, epoch).filter(|_| left & Locks::LOCKED == 0) {
                    Some(memo) => memo,
                    None => {
                        let out = if leader { region.client_bit(index, Ordering::Relaxed) as u32 } else { 0 };
                        PortMemo { out: u64::from(G::broadcast_first(mask, out)), owned: false }
                    }
                }
            }
        };
        let mut port = Port {
            client: self,
            region,
            index,
            mask,
            epoch,
            out: memo.out,
            owns: memo.owned,
            receive: false,
            own: Some(lock),
        };
        // Unlike a shared port, this one is never traded for another: the group waits for it.
        port.wait_for_ownership();
        port.write_header(opcode, leader);
        port
    }

    /// Prepares the calling block's memory ([`Gpu::block_memory`]) for a new kernel: copies the client's setup there,
    /// gives every lane group of the block its lock (see [`Client::open_own`]) and its port when the grid has one for
    /// each, then waits for the whole block.
    ///
    /// # Safety
    /// Every thread of the block must call this at the start of each kernel, after [`Client::reset`] and before any
    /// of them uses the client.
    pub unsafe fn prepare_block(&self) {
        let Some(block) = Block::<G>::get() else { return };
        let shape = G::launch_shape();
        let ids = G::thread_ids();
        let thread = linear_thread(ids, &shape);
        let setup = self.setup();
        if thread == 0 {
            block.setup().store(setup);
        }
        // One thread per lock, so the block prepares them all at once.
        if thread < shape.lane_groups_per_block(G::LANE_SIZE) {
            block.lock(thread).clear(own_port_index::<G>(&shape, ids.block, thread, setup.port_count));
        }
        G::sync_block();
    }

    /// Sends `EXIT` with `status` and returns without waiting: the host stops serving once it has the code.
    pub fn exit(&self, status: c_int) {
        let mut port = self.open(opcode::EXIT);
        port.send(|packet| packet.set(0, status as i64 as u64));
        port.close();
    }

    /// Sends `ABORT` and returns without waiting.
    pub fn abort(&self) {
        let mut port = self.open(opcode::ABORT);
        port.send(|_| {});
        port.close();
    }
}

/// Polls of the server outbox without a pause between them before the pauses start (then doubling): a reply to a lone
/// thread comes within a few polls (each a read of host memory, about a microsecond), so only long waits back off:
/// thousands of groups polling flat out slow down every poll (`docs/performance.md`).
const BACK_OFF_AFTER: u32 = 16;

/// A lane group's own port (see [`Client::open_own`]).
struct OwnPort {
    index: u32,
    /// The lock the groups of the warp share.
    lock: &'static GroupLock,
}

/// The port of lane group `group` of block `block` in a kernel launched as `shape`, or `None` when groups take shared
/// ports: the grid has more lane groups than the region (`port_count`) has ports. Lane group `w` of the grid, counted
/// block by block, gets port `w`.
fn own_port_index<G: Gpu>(
    shape: &crate::abi::LaunchParams,
    block: [u32; 3],
    group: u32,
    port_count: u32,
) -> Option<u32> {
    let groups = shape.lane_groups_per_block(G::LANE_SIZE);
    if u64::from(groups) * shape.blocks_in_grid() > u64::from(port_count) {
        return None;
    }
    let [bx, by, bz] = block;
    let [gx, gy, _] = shape.blocks;
    // Below `port_count / groups`, as the grid fits: no overflow.
    let block_index = bx + gx * (by + gy * bz);
    Some(block_index * groups + group)
}

/// The calling block's memory, as the client lays it out: a copy of the client's setup ([`BlockSetup`]), then one
/// [`GroupLock`] per lane group of the block.
struct Block<G: Gpu> {
    base: NonNull<super::BlockMemory>,
    _gpu: PhantomData<fn() -> G>,
}

impl<G: Gpu> Block<G> {
    fn get() -> Option<Self> {
        Some(Self { base: G::block_memory()?, _gpu: PhantomData })
    }

    /// The block's copy of the setup.
    fn setup<'k>(&self) -> &'k BlockSetup {
        // SAFETY: the launch gave the block `abi::block_memory_bytes`, which start with `BLOCK_MEMORY_HEADER` bytes
        // for this, 8-byte aligned. They live while the kernel runs.
        unsafe { self.base.cast::<BlockSetup>().as_ref() }
    }

    /// The lock of lane group `group` of the block, for as long as the caller uses it within this kernel.
    fn lock<'k>(&self, group: u32) -> &'k GroupLock {
        // SAFETY: the launch gave the block `abi::block_memory_bytes`: after the header, a lock per lane group, and
        // `group` is a lane group of the block (callers compute it from the thread's place in it). The words live
        // while the kernel runs, longer than any port opened in it.
        unsafe {
            let locks = self.base.cast::<u8>().add(core::mem::offset_of!(BlockLayout, locks)).cast::<GroupLock>();
            locks.add(group as usize).as_ref()
        }
    }
}

/// How the client lays out block memory: the setup, then the locks of as many lane groups as the block has.
#[repr(C)]
struct BlockLayout {
    setup: BlockSetup,
    locks: [GroupLock; 0],
}

// The loader sizes block memory by these (loom's atomics are larger, and live in host memory only).
#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::offset_of!(BlockLayout, locks) as u32 == crate::abi::BLOCK_MEMORY_HEADER);
    assert!(size_of::<GroupLock>() as u32 == crate::abi::BLOCK_MEMORY_PER_GROUP);
};

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
    #[cfg(any(test, feature = "host"))]
    pub(super) fn garbage() -> Self {
        Self { region: AtomicPtr::new(core::ptr::null_mut()), port_count: AtomicU32::new(0), epoch: AtomicU32::new(0) }
    }

    fn store(&self, setup: Setup) {
        self.region.store(setup.region, Ordering::Relaxed);
        self.port_count.store(setup.port_count, Ordering::Relaxed);
        self.epoch.store(setup.epoch, Ordering::Relaxed);
    }

    fn load(&self) -> Setup {
        Setup {
            region: self.region.load(Ordering::Relaxed),
            port_count: self.port_count.load(Ordering::Relaxed),
            epoch: self.epoch.load(Ordering::Relaxed),
        }
    }
}

/// The region and the epoch of a client's setup.
fn view<G: Gpu>(setup: Setup) -> (Region, u32) {
    let Setup { region: base, port_count, epoch } = setup;
    // One test of all three fields, so that their loads (one 16-byte line) are issued together, not one after each
    // branch: a reset client has all three (a region, 1 to `MAX_PORTS` ports, an epoch from 1).
    let ready = !base.is_null() & (epoch != 0) & (port_count.wrapping_sub(1) < MAX_PORTS);
    assert!(ready, "the RPC client is used before reset");
    let layout = Layout::new(port_count, G::LANE_SIZE);
    // SAFETY: `reset`'s contract: the region is laid out for this many ports and lanes, holds atomics, and lives while
    // the client is used.
    (unsafe { Region::new(base.cast::<AtomicU64>().cast_const(), layout) }, epoch)
}

/// The thread's index in its block, x fastest: warps and wavefronts are consecutive runs of it.
fn linear_thread(ids: crate::ThreadIds, shape: &crate::abi::LaunchParams) -> u32 {
    shape.linear_thread_in_block(ids.thread)
}

/// The lock of a warp's own port, in block memory ([`Client::open_own`]), shared by the warp's lane groups.
#[repr(C)]
pub(super) struct GroupLock {
    /// As a device-memory lock word: bit 0 LOCKED, bits 1-2 the memo; then bit 3 KNOWN: the memo is valid (0 once
    /// `prepare_block` cleared the word: no group used the port yet in this kernel).
    word: AtomicU32,
    /// The group's own port + 1 in this kernel, or 0 when the group takes shared ports ([`own_port_index`]).
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
    const HELD_BY_THIS_GROUP: u32 = Locks::LOCKED;

    /// A lock full of bits that only [`GroupLock::clear`] makes usable, as block memory is when a kernel starts.
    #[cfg(any(test, feature = "host"))]
    pub(super) fn garbage() -> Self {
        Self { word: AtomicU32::new(u32::MAX), port: AtomicU32::new(u32::MAX), holder: AtomicU64::new(u64::MAX) }
    }

    /// Frees the lock, forgets the memo and records the group's port, for a new kernel.
    fn clear(&self, port: Option<u32>) {
        self.word.store(0, Ordering::Relaxed);
        self.port.store(port.map_or(0, |port| port + 1), Ordering::Relaxed);
        self.holder.store(0, Ordering::Relaxed);
    }

    /// The group's own port in this kernel, if it has one.
    fn own_port(&self) -> Option<u32> {
        self.port.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Takes the lock for the group `mask`, waiting while another group of the warp holds it; run by the group's
    /// leader. Returns the word the last holder left, or [`GroupLock::HELD_BY_THIS_GROUP`].
    fn lock<G: Gpu>(&self, mask: u64) -> u32 {
        loop {
            let old = G::block_lock_fetch_or(&self.word, Locks::LOCKED);
            if old & Locks::LOCKED == 0 {
                self.holder.store(mask, Ordering::Relaxed);
                return old;
            }
            // The acquire above synchronizes with the last release of the lock, before which its holder cleared
            // `holder`: what this reads is 0 or the current holder's mask. If that holds one of this group's lanes,
            // the holder is this group (the lanes of groups that run at once are disjoint): it opened a port while
            // holding one.
            if self.holder.load(Ordering::Relaxed) & mask != 0 {
                return Self::HELD_BY_THIS_GROUP;
            }
            G::sleep_briefly();
        }
    }

    /// The memo in a word that [`GroupLock::lock`] returned, if any group used the port this kernel.
    fn memo(word: u32) -> Option<PortMemo> {
        PortMemo::decode(word, Self::KNOWN)
    }

    /// Lets go of the lock, leaving `memo` for the warp's next group.
    fn unlock<G: Gpu>(&self, memo: PortMemo) {
        self.holder.store(0, Ordering::Relaxed);
        G::block_unlock_swap(&self.word, memo.encode(Self::KNOWN));
    }
}

/// Where a group starts looking for a free port, below `port_count`: spread by block and warp, so groups rarely
/// contend.
fn start_port(ids: crate::ThreadIds, lane_size: u32, port_count: u32) -> u32 {
    let [tx, ty, tz] = ids.thread;
    let [bx, by, bz] = ids.block;
    let warp = tx / lane_size.max(1);
    // A multiplicative mix; every group of a warp computes the same value, and the leader's is used anyway.
    let mut h = bx.wrapping_mul(0x9e37_79b1) ^ by.wrapping_mul(0x85eb_ca77) ^ bz.wrapping_mul(0xc2b2_ae3d);
    h = h.wrapping_mul(0x27d4_eb2f)
        ^ warp.wrapping_add(ty.wrapping_mul(0x1656_67b1)).wrapping_add(tz.wrapping_mul(0xd3a2_646c));
    // Fibonacci hashing: multiplying by 2^32/φ spreads consecutive warps evenly over the high bits, and those pick
    // the port (`h * port_count / 2^32` rather than `h % port_count`: the GPU has no division instruction).
    h = h.wrapping_mul(0x9e37_79b9);
    ((u64::from(h) * u64::from(port_count)) >> 32) as u32
}

/// A port held by one lane group. Every lane of the group makes the same calls in the same order; each lane reads
/// and writes its own packet buffer. Dropping the port closes it.
pub struct Port<'a, G: Gpu> {
    client: &'a Client<G>,
    region: Region,
    index: u32,
    mask: u64,
    /// The client's epoch, for the memo the port leaves when it closes.
    epoch: u32,
    /// This side's outbox value, the same in every lane.
    out: u64,
    /// Whether this side owns the buffers now without looking.
    owns: bool,
    /// Whether the last operation was a receive: the next receive first hands the buffers back.
    receive: bool,
    /// The group's lock when the port is the group's own ([`Client::open_own`]), `None` when it is a shared one.
    own: Option<&'a GroupLock>,
}

impl<G: Gpu> Port<'_, G> {
    /// The port's index in the region.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The lanes using the port.
    pub fn lane_mask(&self) -> u64 {
        self.mask
    }

    /// Writes the message's header (opcode, lanes); the group owns the buffers, and its leader writes for all.
    fn write_header(&self, opcode: u32, leader: bool) {
        if leader {
            self.region.opcode(self.index).store(u64::from(opcode), Ordering::Relaxed);
            self.region.mask(self.index).store(self.mask, Ordering::Relaxed);
        }
    }

    fn packet(&self) -> Packet<'_> {
        self.region.packet(self.index, G::lane_id())
    }

    /// Waits until the server hands the buffers back. Each lane acquires the hand-off itself; the group leaves the
    /// loop together once every lane has seen it (it cannot be undone until this side toggles again).
    fn wait_for_ownership(&mut self) {
        if self.owns {
            return;
        }
        let mut polls = 0u32;
        loop {
            let inbox = self.region.server_bit(self.index, Ordering::Acquire);
            if G::ballot(self.mask, inbox == self.out) == self.mask {
                break;
            }
            // The first polls follow each other at once: each is a read of host memory (about a microsecond), long
            // enough a pause by itself, and a reply that comes soon is seen soonest. Then back off exponentially, to
            // at most 64 pauses: thousands of waiting groups polling flat out slow down every such read, the ones
            // that would see the server's hand-off included.
            if polls < BACK_OFF_AFTER {
                super::sync::spin_pause(polls);
            } else {
                for _ in 0..1u32 << (polls - BACK_OFF_AFTER).min(6) {
                    G::sleep_briefly();
                }
            }
            polls = polls.saturating_add(1);
        }
        self.owns = true;
    }

    /// Hands the buffers to the server: every lane's writes are done (`sync_lanes`), then the leader toggles the
    /// client outbox with a release store.
    fn toggle(&mut self) {
        G::sync_lanes(self.mask);
        self.out ^= 1;
        if G::lane_id() == self.mask.trailing_zeros() {
            self.region.set_client_outbox(self.index, self.out, Ordering::Release);
        }
        self.owns = false;
    }

    /// Fills this lane's packet and sends it; waits first until the server has taken the previous one.
    pub fn send(&mut self, fill: impl FnOnce(Packet<'_>)) {
        self.wait_for_ownership();
        fill(self.packet());
        self.toggle();
        self.receive = false;
    }

    /// Waits for the server's packet and reads this lane's part of it.
    pub fn recv(&mut self, read: impl FnOnce(Packet<'_>)) {
        if self.receive {
            // The previous packet was the server's too: hand the buffers back for the next one.
            self.toggle();
        }
        self.wait_for_ownership();
        read(self.packet());
        self.receive = true;
    }

    /// Streams `data` (this lane's; lanes may differ in length, 0 included) in as many packets as the longest needs.
    pub fn send_n(&mut self, data: &[u8]) {
        self.send_n_with::<0>([], data)
    }

    /// Like [`Port::send_n`], with `H` head words (at most 6) carried in the first packet after the length.
    pub fn send_n_with<const H: usize>(&mut self, head: [u64; H], data: &[u8]) {
        const { assert!(H < PACKET_WORDS - 1, "at most 6 head words") };
        let len = data.len();
        self.send(|packet| {
            packet.set(0, len as u64);
            for (word, value) in head.iter().enumerate() {
                packet.set(1 + word, *value);
            }
            for word in 0..PACKET_WORDS - 1 - H {
                if word * 8 < len {
                    packet.set(1 + H + word, gather(data, word * 8));
                }
            }
        });
        let mut offset = first_packet_bytes(H);
        while G::ballot(self.mask, offset < len) != 0 {
            self.send(|packet| {
                for word in 0..PACKET_WORDS {
                    if offset + word * 8 < len {
                        packet.set(word, gather(data, offset + word * 8));
                    }
                }
            });
            offset += PACKET_BYTES;
        }
    }

    /// Receives a stream sent by the server's `send_n`: copies what fits into `out` and returns the length sent.
    pub fn recv_n(&mut self, out: &mut [u8]) -> usize {
        self.recv_n_with::<0>(out).1
    }

    /// Like [`Port::recv_n`], returning the `H` head words too.
    pub fn recv_n_with<const H: usize>(&mut self, out: &mut [u8]) -> ([u64; H], usize) {
        const { assert!(H < PACKET_WORDS - 1, "at most 6 head words") };
        let mut head = [0; H];
        let mut len = 0;
        self.recv(|packet| {
            len = packet.get(0) as usize;
            for (word, value) in head.iter_mut().enumerate() {
                *value = packet.get(1 + word);
            }
            for word in 0..PACKET_WORDS - 1 - H {
                if word * 8 < len.min(out.len()) {
                    scatter(out, word * 8, len, packet.get(1 + H + word));
                }
            }
        });
        let mut offset = first_packet_bytes(H);
        while G::ballot(self.mask, offset < len) != 0 {
            self.recv(|packet| {
                for word in 0..PACKET_WORDS {
                    if offset + word * 8 < len.min(out.len()) {
                        scatter(out, offset + word * 8, len, packet.get(word));
                    }
                }
            });
            offset += PACKET_BYTES;
        }
        (head, len)
    }

    /// Closes the port (as dropping it does): the group's lanes finish with it, then the leader unlocks it. The
    /// client never toggles on close: if it owns the buffers, the next group to lock the port owns them too.
    pub fn close(self) {}
}

impl<G: Gpu> Drop for Port<'_, G> {
    fn drop(&mut self) {
        G::sync_lanes(self.mask);
        if G::lane_id() == self.mask.trailing_zeros() {
            let memo = PortMemo { out: self.out, owned: self.owns };
            match self.own {
                Some(lock) => {
                    // The device-memory word tells the warp that has this port in a later kernel what this one knew:
                    // nobody else reads it during this kernel, and the kernel's end orders it before the next.
                    self.client.locks.word(self.index).store(memo.encode(self.epoch), Ordering::Relaxed);
                    lock.unlock::<G>(memo);
                }
                None => self.client.locks.unlock::<G>(self.index, self.epoch, memo),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ThreadIds;

    fn port_of(block: u32, warp: u32, port_count: u32) -> u32 {
        start_port(ThreadIds { thread: [warp * 32, 0, 0], block: [block, 0, 0] }, 32, port_count)
    }

    /// The warps of a block start at different ports, and a full grid spreads over nearly all of them.
    #[test]
    fn start_ports_are_spread() {
        let mut block = [false; 1024];
        for warp in 0..32 {
            block[port_of(0, warp, 1024) as usize] = true;
        }
        assert_eq!(block.iter().filter(|&&used| used).count(), 32, "one block's warps never share a start port");

        let mut grid = [0u32; 1024];
        for b in 0..977 {
            for warp in 0..32 {
                grid[port_of(b, warp, 1024) as usize] += 1;
            }
        }
        // 31 264 warps over 1024 ports: about 30.5 each.
        let busiest = *grid.iter().max().unwrap();
        assert!(grid.iter().all(|&n| n > 0) && busiest < 60, "uneven spread: up to {busiest} warps on one port");

        for count in [1, 3, 1000, MAX_PORTS] {
            assert!((0..977).all(|b| (0..32).all(|w| port_of(b, w, count) < count)));
        }
    }
}
