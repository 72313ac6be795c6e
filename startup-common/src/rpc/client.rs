//! The device's end of the channel: [`Client`] opens ports for lane groups, a warp's own port where the grid has one
//! for each warp, a shared one otherwise; [`Port`] moves the packets.

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::sync::atomic::Ordering;

use gpu_startup_protocol::region::MAX_PORTS;

use super::Region;
use super::block::Block;
use super::lock::{GroupLock, Locks, PortMemo};
use super::port::Port;
use super::setup::{Setup, view};
use crate::gpu::Gpu;

/// The device's end of the channel: one per program, shared by every thread.
pub struct Client<G: Gpu> {
    setup: UnsafeCell<Setup>,
    locks: Locks,
    _gpu: PhantomData<fn() -> G>,
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

    /// Points the client at `region`, which holds `port_count` ports laid out by [`Layout`](super::Layout) for `G::LANE_SIZE` lanes
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
    pub fn region_for_testing(&self) -> Option<(*mut c_void, super::Layout)> {
        let Setup { region, port_count, .. } = self.setup();
        (!region.is_null()).then(|| (region, super::Layout::new(port_count, G::LANE_SIZE)))
    }

    /// Opens a port for the calling lane group to send a message with `opcode`. The lanes that run this call together
    /// with the same opcode are the group (lanes with another opcode form groups of their own: `lanes_sending`); the
    /// lowest lane takes a free port's lock for all of them. Returns once the group owns a port.
    ///
    /// Always inlined, with the own port's path: a `Port` returned through memory would be read back from the stack
    /// after the next acquire of the host's hand-off, which empties L1, at the cost of a load from L2 on every message
    /// (`docs/performance.md` has the costs).
    #[inline(always)]
    pub fn open(&self, opcode: u32) -> Port<'_, G> {
        let mask = lanes_sending::<G>(opcode);
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
                    let port = Port::new(&self.locks, region, index, mask, epoch, PortMemo { out, owned: true }, None);
                    port.write_header(opcode, leader);
                    return port;
                }
                // The server still owns this port (it has not finished the previous message): try another. Every
                // lane has read the port before the leader lets another group have it.
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
        let mut port = Port::new(&self.locks, region, index, mask, epoch, memo, Some(lock));
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
}

/// The lanes that send a message with `opcode` together: those of the lanes running this call that send the same
/// opcode. Lanes that run one function together may have come to it from different calls: under independent thread
/// scheduling, lanes of a warp that reach a shared function (a file request, a host call) from different call sites
/// may run it together, each with its own opcode. One message has one opcode in its header, and the host serves
/// every lane of the message by it: a lane whose request is another's would be served as that one (an open served as
/// a remove). So each opcode's lanes form a group of their own, and the groups take turns like divergent branches.
///
/// Where lanes do not run independently (an AMD wavefront), the lanes that run together are one path of the program,
/// and only a compiler that merged two calls into one could give them different opcodes: their groups could not take
/// turns (each would wait at the other's lane operations), so that traps rather than serve a lane the wrong message.
#[inline(always)]
fn lanes_sending<G: Gpu>(opcode: u32) -> u64 {
    let mut pending = G::lane_mask();
    loop {
        let first = G::broadcast_first(pending, opcode);
        let same = G::ballot(pending, opcode == first);
        if same == pending {
            return pending;
        }
        if !G::INDEPENDENT_LANES {
            G::trap();
        }
        if opcode == first {
            return same;
        }
        // The lanes of the lowest lane's opcode have left; the others pick the next opcode among themselves.
        pending &= !same;
    }
}

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

/// The thread's index in its block, x fastest: warps and wavefronts are consecutive runs of it.
fn linear_thread(ids: crate::ThreadIds, shape: &crate::abi::LaunchParams) -> u32 {
    shape.linear_thread_in_block(ids.thread)
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
