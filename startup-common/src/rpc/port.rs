//! A port held by one lane group: the packets and streams of one message, each side's turn handed over through the
//! port's mailboxes.

use core::marker::PhantomData;
use core::sync::atomic::Ordering;

use gpu_startup_protocol::region::{PACKET_BYTES, PACKET_WORDS, first_packet_bytes, gather, scatter};

/// [`gather`], out of line. Inlined, its copy of a short tail was repeated for every word of both of
/// [`Port::send_n_with`]'s packet loops and made up most of every image's code (every `print!` sends through it);
/// a call per word costs little next to a packet's trip to the host.
#[inline(never)]
fn gather_word(bytes: &[u8], offset: usize) -> u64 {
    gather(bytes, offset)
}

use super::lock::{GroupLock, Locks, PortMemo};
use super::{Packet, Region};
use crate::gpu::Gpu;
use crate::sync::spin_pause;

/// Polls of the server outbox without a pause between them before the pauses start (then doubling): a reply to a lone
/// thread comes within a few polls (each a read of host memory, about a microsecond), so only long waits back off:
/// thousands of groups polling flat out slow down every poll (`docs/performance.md`).
const BACK_OFF_AFTER: u32 = 16;

/// A port held by one lane group. Every lane of the group makes the same calls in the same order; each lane reads
/// and writes its own packet buffer. Dropping the port closes it.
pub struct Port<'a, G: Gpu> {
    /// The client's port locks, to leave the memo in when the port closes.
    locks: &'a Locks,
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
    /// The group's lock when the port is the group's own (`Client::open_own`), `None` when it is a shared one.
    own: Option<&'a GroupLock>,
    _gpu: PhantomData<fn() -> G>,
}

impl<'a, G: Gpu> Port<'a, G> {
    /// The port `index` of `region`, just locked by the group `mask` (through `locks`, or `own` for the group's own
    /// port), in the state `memo` says: this side's outbox value, and whether it owns the buffers without looking.
    #[inline(always)]
    pub(super) fn new(
        locks: &'a Locks,
        region: Region,
        index: u32,
        mask: u64,
        epoch: u32,
        memo: PortMemo,
        own: Option<&'a GroupLock>,
    ) -> Self {
        let PortMemo { out, owned } = memo;
        Self { locks, region, index, mask, epoch, out, owns: owned, receive: false, own, _gpu: PhantomData }
    }
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

    /// Writes the message's header (opcode, lanes); the group owns the buffers, and its leader writes for all. Only
    /// the server reads the header: the leader's own release in [`Port::toggle`] publishes it, and no other lane needs
    /// to see it.
    pub(super) fn write_header(&self, opcode: u32, leader: bool) {
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
    pub(super) fn wait_for_ownership(&mut self) {
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
                spin_pause(polls);
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
        // The warp barrier orders each lane's packet writes before the leader's release: without it the server could
        // read a lagging lane's packet before the lane wrote it.
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
        self.send_stream(&head, data)
    }

    /// [`Port::send_n_with`] with the head as a slice: one copy of the packet loops, however many head lengths a
    /// program's messages use (a copy per length would be much of an image). At most 6 head words: the first packet
    /// holds the length, the head and at least one word of data, so words past the sixth are not sent.
    pub fn send_stream(&mut self, head: &[u64], data: &[u8]) {
        debug_assert!(head.len() <= PACKET_WORDS - 2, "at most 6 head words");
        let head = &head[..head.len().min(PACKET_WORDS - 2)];
        let len = data.len();
        self.send(|packet| {
            packet.set(0, len as u64);
            for (word, value) in head.iter().enumerate() {
                packet.set(1 + word, *value);
            }
            for word in 0..PACKET_WORDS - 1 - head.len() {
                if word * 8 < len {
                    packet.set(1 + head.len() + word, gather_word(data, word * 8));
                }
            }
        });
        let mut offset = first_packet_bytes(head.len());
        while G::ballot(self.mask, offset < len) != 0 {
            self.send(|packet| {
                for word in 0..PACKET_WORDS {
                    if offset + word * 8 < len {
                        packet.set(word, gather_word(data, offset + word * 8));
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
        // Every lane is done with the port (its last read of a reply included) before the leader lets the next group
        // have it: a lane that lags would read the next message's packet.
        G::sync_lanes(self.mask);
        if G::lane_id() == self.mask.trailing_zeros() {
            let memo = PortMemo { out: self.out, owned: self.owns };
            match self.own {
                Some(lock) => {
                    // The device-memory word tells the warp that has this port in a later kernel what this one knew:
                    // nobody else reads it during this kernel, and the kernel's end orders it before the next.
                    self.locks.word(self.index).store(memo.encode(self.epoch), Ordering::Relaxed);
                    lock.unlock::<G>(memo);
                }
                None => self.locks.unlock::<G>(self.index, self.epoch, memo),
            }
        }
    }
}
