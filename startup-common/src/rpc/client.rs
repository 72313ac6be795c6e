//! The device side: [`Client`] opens ports for lane groups, [`Port`] moves packets.

use core::ffi::{c_int, c_void};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicPtr, AtomicU32 as CoreAtomicU32, Ordering};

use super::sync::{AtomicU32, AtomicU64};
use super::{
    Layout, MAX_PORTS, PACKET_BYTES, PACKET_WORDS, Packet, Region, first_packet_bytes, gather, opcode, scatter,
};
use crate::gpu::Gpu;

#[cfg(not(loom))]
const LOCK_WORDS: usize = MAX_PORTS as usize / 32;

/// The client-side lock bits, one per port, in device memory (the program's static), never in the pinned region; and
/// per port what the last lock holder knew of it (see [`PortMemo`]).
#[cfg(not(loom))]
struct Locks([AtomicU32; LOCK_WORDS], [AtomicU32; MAX_PORTS as usize]);

#[cfg(not(loom))]
impl Locks {
    const fn new() -> Self {
        Self([const { AtomicU32::new(0) }; LOCK_WORDS], [const { AtomicU32::new(0) }; MAX_PORTS as usize])
    }

    fn word(&self, port: u32) -> &AtomicU32 {
        &self.0[port as usize / 32]
    }

    fn memo(&self, port: u32) -> &AtomicU32 {
        &self.1[port as usize]
    }

    /// Unlocks every port. The memos need no clearing: a new epoch makes every one of them stale.
    fn clear(&self, _port_count: u32) {
        for word in &self.0 {
            word.store(0, Ordering::Relaxed);
        }
    }
}

/// Under loom the lock words are loom atomics, which cannot be built in a `const fn`: they are made by `reset`, inside
/// the model.
#[cfg(loom)]
struct Locks(std::sync::OnceLock<(std::boxed::Box<[AtomicU32]>, std::boxed::Box<[AtomicU32]>)>);

#[cfg(loom)]
impl Locks {
    const fn new() -> Self {
        Self(std::sync::OnceLock::new())
    }

    fn word(&self, port: u32) -> &AtomicU32 {
        &self.0.get().expect("reset made the locks").0[port as usize / 32]
    }

    fn memo(&self, port: u32) -> &AtomicU32 {
        &self.0.get().expect("reset made the locks").1[port as usize]
    }

    fn clear(&self, port_count: u32) {
        let words = (port_count as usize).div_ceil(32);
        let _ = self.0.set((
            (0..words).map(|_| AtomicU32::new(0)).collect(),
            (0..port_count).map(|_| AtomicU32::new(0)).collect(),
        ));
    }
}

impl Locks {
    /// Takes port `port`'s lock if it is free. The acquire is a separate fence because the LLVM our toolchain uses
    /// (22) lowers NVPTX `atomicrmw` without its ordering: `fetch_or(bit, Acquire)` became a relaxed `atom.or`, so
    /// the next holder could read the memo, or the client outbox, from before the last holder let go. Only device
    /// threads take these locks, so a device-scope fence is enough.
    fn try_lock<G: Gpu>(&self, port: u32) -> bool {
        let bit = 1u32 << (port % 32);
        let taken = self.word(port).fetch_or(bit, Ordering::Relaxed) & bit == 0;
        if taken {
            G::device_fence(Ordering::Acquire);
        }
        taken
    }

    /// Lets go of port `port`'s lock: everything this holder wrote (the memo, the region) happens before the next
    /// holder's [`Locks::try_lock`]. A fence first, for the reason given there.
    fn unlock<G: Gpu>(&self, port: u32) {
        G::device_fence(Ordering::Release);
        self.word(port).fetch_and(!(1u32 << (port % 32)), Ordering::Relaxed);
    }
}

/// What the last holder of a port's lock knew when it let go, so that the next holder can skip reading pinned host
/// memory (a PCIe round trip from the GPU) when opening it: the client's own outbox bit (the client is its only
/// writer), and whether the client owned the buffers (its last operation was a receive, so the server cannot have
/// touched the port since). Written and read only under the port's lock, whose fences order it. Tagged
/// with the client's epoch: [`Client::reset`] starts a new epoch, which makes every memo stale without clearing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PortMemo {
    out: u64,
    owned: bool,
}

impl PortMemo {
    fn encode(self, epoch: u32) -> u32 {
        (epoch << 2) | (u32::from(self.owned) << 1) | (self.out as u32 & 1)
    }

    /// The memo, if it was written in `epoch`.
    fn decode(word: u32, epoch: u32) -> Option<Self> {
        (word >> 2 == epoch & (u32::MAX >> 2)).then_some(Self { out: u64::from(word & 1), owned: word & 2 != 0 })
    }
}

/// The device's end of the channel: one per program, shared by every thread.
pub struct Client<G: Gpu> {
    region: AtomicPtr<c_void>,
    port_count: CoreAtomicU32,
    /// Bumped by every `reset`; see [`PortMemo`]. Starts at 0, which no memo of a reset client carries.
    epoch: CoreAtomicU32,
    locks: Locks,
    _gpu: PhantomData<fn() -> G>,
}

impl<G: Gpu> Default for Client<G> {
    fn default() -> Self {
        Self::new()
    }
}

impl<G: Gpu> Client<G> {
    pub const fn new() -> Self {
        Self {
            region: AtomicPtr::new(core::ptr::null_mut()),
            port_count: CoreAtomicU32::new(0),
            epoch: CoreAtomicU32::new(0),
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
    /// runs.
    pub unsafe fn reset(&self, region: *mut c_void, port_count: u32) {
        let port_count = port_count.min(MAX_PORTS);
        self.locks.clear(port_count);
        // Memos of an earlier run of the program may not match this region: a new epoch makes them all stale. Epoch
        // 0 is skipped, so zeroed memos are never current.
        let epoch = (self.epoch.load(Ordering::Relaxed) + 1) & (u32::MAX >> 2);
        self.epoch.store(epoch.max(1), Ordering::Relaxed);
        self.port_count.store(port_count, Ordering::Relaxed);
        self.region.store(if port_count == 0 { core::ptr::null_mut() } else { region }, Ordering::Release);
    }

    /// Whether [`Client::reset`] gave the client a region.
    pub fn is_ready(&self) -> bool {
        !self.region.load(Ordering::Relaxed).is_null()
    }

    fn view(&self) -> Region {
        let base = self.region.load(Ordering::Acquire);
        assert!(!base.is_null(), "the RPC client is used before reset");
        let layout = Layout::new(self.port_count.load(Ordering::Relaxed), G::LANE_SIZE);
        // SAFETY: `reset`'s contract: the region is laid out for this many ports and lanes, holds atomics, and lives
        // while the client is used.
        unsafe { Region::new(base.cast::<AtomicU64>().cast_const(), layout) }
    }

    /// Opens a port for the calling lane group to send a message with `opcode`. Every lane of the group calls this
    /// together; the lowest lane takes a free port's lock for all of them. Returns once the group owns a port.
    pub fn open(&self, opcode: u32) -> Port<'_, G> {
        let region = self.view();
        let port_count = region.layout().port_count();
        let mask = G::lane_mask();
        let leader = G::lane_id() == mask.trailing_zeros();
        let mut index = G::broadcast_first(mask, start_port(G::thread_ids(), G::LANE_SIZE) % port_count);
        let mut tried = 0;
        loop {
            let locked = leader && self.locks.try_lock::<G>(index);
            if G::broadcast_first(mask, locked as u32) != 0 {
                // Order the lock before every lane's accesses to the port.
                G::sync_lanes(mask);
                let epoch = self.epoch.load(Ordering::Relaxed);
                let memo = PortMemo::decode(
                    G::broadcast_first(mask, if leader { self.locks.memo(index).load(Ordering::Relaxed) } else { 0 }),
                    epoch,
                );
                if let Some(PortMemo { out, owned: true }) = memo {
                    // The last holder received last: the buffers are the client's, with no host memory read. The
                    // lock's fences (then `sync_lanes`) order the last holder's acquire of the server's hand-off
                    // before this group's accesses.
                    if leader {
                        region.opcode(index).store(opcode as u64, Ordering::Relaxed);
                        region.mask(index).store(mask, Ordering::Relaxed);
                    }
                    return Port { client: self, region, index, mask, out, owns: true, receive: false };
                }
                // Only lock holders write the client outbox, so the leader (who acquired the lock) knows its latest
                // value, from the memo or from the region; the other lanes take the leader's.
                let out = match memo {
                    Some(memo) => memo.out,
                    None => G::broadcast_first(mask, region.client_outbox(index).load(Ordering::Relaxed) as u32) as u64,
                };
                // Each lane acquires the server's hand-off itself, so its own buffer accesses are ordered after it.
                let inbox = region.server_outbox(index).load(Ordering::Acquire);
                if G::ballot(mask, inbox == out) == mask {
                    if leader {
                        region.opcode(index).store(opcode as u64, Ordering::Relaxed);
                        region.mask(index).store(mask, Ordering::Relaxed);
                    }
                    return Port { client: self, region, index, mask, out, owns: true, receive: false };
                }
                // The server still owns this port (it has not finished the previous message): try another.
                G::sync_lanes(mask);
                if leader {
                    self.locks.memo(index).store(PortMemo { out, owned: false }.encode(epoch), Ordering::Relaxed);
                    self.locks.unlock::<G>(index);
                }
            }
            index = if index + 1 == port_count { 0 } else { index + 1 };
            tried += 1;
            if tried % port_count == 0 {
                G::sleep_briefly();
            }
        }
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

    /// Test operation: the host returns `value + 1`, for each lane.
    pub fn test_increment(&self, value: u64) -> u64 {
        let mut port = self.open(opcode::TEST_INCREMENT);
        port.send(|packet| packet.set(0, value));
        let mut result = 0;
        port.recv(|packet| result = packet.get(0));
        port.close();
        result
    }

    /// Test operation: one empty packet to the host and one back; the round trip alone.
    pub fn test_noop(&self) {
        let mut port = self.open(opcode::TEST_NOOP);
        port.send(|_| {});
        port.recv(|_| {});
        port.close();
    }

    /// Test operation: `rounds` alternating receives and sends on one port, as LLVM's rpc_interface_test does.
    /// Every packet carries the sending lane's id; the host checks it against the lane slot the packet arrived in,
    /// and answers each value with its successor. Returns whether every answer (and the host's final verdict) was
    /// right for this lane. All lanes of the group pass the same `rounds`.
    pub fn test_interface(&self, rounds: u32) -> bool {
        const HOST_SAW_A_WRONG_LANE: u64 = 0;
        const ALL_GOOD: u64 = u64::MAX;
        let lane = u64::from(G::lane_id());
        let mut port = self.open(opcode::TEST_INTERFACE);
        port.send(|packet| {
            packet.set(0, u64::from(rounds));
            packet.set(1, lane);
        });
        let mut ok = true;
        let mut value = 0;
        for _ in 0..rounds {
            port.recv(|packet| {
                ok &= packet.get(0) == value + 1 && packet.get(1) == lane;
                value = packet.get(0);
            });
            port.send(|packet| {
                packet.set(0, value);
                packet.set(1, lane);
            });
        }
        port.recv(|packet| ok &= packet.get(0) == ALL_GOOD && packet.get(0) != HOST_SAW_A_WRONG_LANE);
        port.close();
        ok
    }

    /// Test operation: streams `input` to the host, which streams it back into `output` (as much as fits). Returns
    /// the length the host sent, `input.len()`. Each lane has its own input and output.
    pub fn test_echo(&self, input: &[u8], output: &mut [u8]) -> usize {
        let mut port = self.open(opcode::TEST_ECHO);
        port.send_n(input);
        let len = port.recv_n(output);
        port.close();
        len
    }
}

/// Where a group starts looking for a free port: spread by block and warp, so groups rarely contend.
fn start_port(ids: crate::ThreadIds, lane_size: u32) -> u32 {
    let [tx, ty, tz] = ids.thread;
    let [bx, by, bz] = ids.block;
    let warp = tx / lane_size.max(1);
    // A multiplicative mix; every group of a warp computes the same value, and the leader's is used anyway.
    let mut h = bx.wrapping_mul(0x9e37_79b1) ^ by.wrapping_mul(0x85eb_ca77) ^ bz.wrapping_mul(0xc2b2_ae3d);
    h = h.wrapping_mul(0x27d4_eb2f)
        ^ warp.wrapping_add(ty.wrapping_mul(0x1656_67b1)).wrapping_add(tz.wrapping_mul(0xd3a2_646c));
    h ^ (h >> 15)
}

/// A port held by one lane group. Every lane of the group makes the same calls in the same order; each lane reads
/// and writes its own packet buffer. Dropping the port closes it.
pub struct Port<'a, G: Gpu> {
    client: &'a Client<G>,
    region: Region,
    index: u32,
    mask: u64,
    /// This side's outbox value, the same in every lane.
    out: u64,
    /// Whether this side owns the buffers now without looking.
    owns: bool,
    /// Whether the last operation was a receive: the next receive first hands the buffers back.
    receive: bool,
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

    fn packet(&self) -> Packet<'_> {
        self.region.packet(self.index, G::lane_id())
    }

    /// Waits until the server hands the buffers back. Each lane acquires the hand-off itself; the group leaves the
    /// loop together once every lane has seen it (it cannot be undone until this side toggles again).
    fn wait_for_ownership(&mut self) {
        if self.owns {
            return;
        }
        loop {
            let inbox = self.region.server_outbox(self.index).load(Ordering::Acquire);
            if G::ballot(self.mask, inbox == self.out) == self.mask {
                break;
            }
            G::sleep_briefly();
        }
        self.owns = true;
    }

    /// Hands the buffers to the server: every lane's writes are done (`sync_lanes`), then the leader toggles the
    /// client outbox with a release store.
    fn toggle(&mut self) {
        G::sync_lanes(self.mask);
        self.out ^= 1;
        if G::lane_id() == self.mask.trailing_zeros() {
            self.region.client_outbox(self.index).store(self.out, Ordering::Release);
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
            let epoch = self.client.epoch.load(Ordering::Relaxed);
            self.client.locks.memo(self.index).store(memo.encode(epoch), Ordering::Relaxed);
            self.client.locks.unlock::<G>(self.index);
        }
    }
}
