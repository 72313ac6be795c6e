//! The host side: [`Server`] finds ports with pending messages, [`ServerPort`] moves packets for every lane of the
//! group that sent the message. One host thread drives a server; it needs no locks.

use core::ffi::c_void;
use core::sync::atomic::Ordering;

use super::sync::{AtomicU64, spin_pause};
use super::{
    Layout, MAX_PORTS, PACKET_BYTES, PACKET_WORDS, Packet, Region, first_packet_bytes, gather, lanes, stream_packets,
};

/// The host's end of the channel.
pub struct Server {
    region: Region,
    /// The server outbox of every port, one bit each (port `p` is bit `p % 64` of word `p / 64`). The server is the
    /// only writer of its outboxes, so it keeps their values here and a scan reads only the client outboxes: half the
    /// loads, and none of them of a line the device may be reading.
    outboxes: [u64; MAX_PORTS as usize / 64],
}

// SAFETY: the server only holds the region's address; the region is shared memory accessed atomically, and the
// server's side of the protocol is driven by one thread at a time through `&mut self`.
unsafe impl Send for Server {}

impl Server {
    /// A server for the region at `region` (the host's address of it) with `port_count` ports of `lane_size` lanes.
    ///
    /// # Safety
    /// `region` must point to `Layout::new(port_count, lane_size).size()` bytes, 64-byte aligned, zeroed before any
    /// client used it, holding `AtomicU64`s (under loom: a [`HostRegion`](super::HostRegion)), valid while the server
    /// lives; and no other server may serve it at the same time.
    pub unsafe fn new(region: *mut c_void, port_count: u32, lane_size: u32) -> Self {
        let layout = Layout::new(port_count, lane_size);
        // SAFETY: the caller's contract is `Region::new`'s.
        let region = unsafe { Region::new(region.cast::<AtomicU64>().cast_const(), layout) };
        // A region a finished program left behind may hold outboxes at 1: start from what is there.
        let mut outboxes = [0; MAX_PORTS as usize / 64];
        for port in 0..port_count {
            outboxes[port as usize / 64] |= (region.server_outbox(port).load(Ordering::Relaxed) & 1) << (port % 64);
        }
        Self { region, outboxes }
    }

    pub fn layout(&self) -> Layout {
        self.region.layout()
    }

    pub fn port_count(&self) -> u32 {
        self.region.layout().port_count()
    }

    /// The server outbox of port `port`, from the server's own copy.
    #[inline(always)]
    fn outbox(&self, port: u32) -> u64 {
        (self.outboxes[port as usize / 64] >> (port % 64)) & 1
    }

    /// Whether a client has handed port `port` to the server: a message is waiting there.
    #[inline]
    pub fn is_pending(&self, port: u32) -> bool {
        self.region.client_outbox(port).load(Ordering::Acquire) != self.outbox(port)
    }

    /// How many groups of 64 ports [`Server::pending_in_group`] covers: `port_count / 64`, rounded up.
    pub fn port_groups(&self) -> u32 {
        self.port_count().div_ceil(64)
    }

    /// The ports of group `group` (ports `64 * group ..`, at most 64) with a waiting message, as a mask: bit `i` is
    /// port `64 * group + i`. One relaxed load per port and no branch, so a pass over a thousand idle ports takes a
    /// fraction of a microsecond; [`Server::open`] looks again with an acquire load before it touches a port.
    #[inline]
    pub fn pending_in_group(&self, group: u32) -> u64 {
        let first = group * 64;
        let ports = self.port_count().saturating_sub(first).min(64);
        // Outboxes hold 0 or 1 (a client writes nothing else), so the client's outboxes make a mask like ours.
        let mut clients = 0;
        for i in 0..ports {
            clients |= u64::from(self.region.client_outbox(first + i).load(Ordering::Relaxed) != 0) << i;
        }
        clients ^ self.outboxes[group as usize]
    }

    /// Opens port `port` if a message is waiting there. The handler then mirrors the client's calls; dropping the
    /// port (or [`ServerPort::close`]) ends the message and hands the buffers back if the server holds them.
    pub fn open(&mut self, port: u32) -> Option<ServerPort<'_>> {
        if port >= self.port_count() || !self.is_pending(port) {
            return None;
        }
        let out = self.outbox(port);
        let lane_bits = u64::MAX >> (64 - self.layout().lane_size());
        let opcode = self.region.opcode(port).load(Ordering::Relaxed) as u32;
        let mask = self.region.mask(port).load(Ordering::Relaxed) & lane_bits;
        Some(ServerPort {
            region: &self.region,
            outboxes: &mut self.outboxes[port as usize / 64],
            index: port,
            out,
            owns: true,
            receive: false,
            opcode,
            mask,
            give_up: None,
            abandoned: false,
        })
    }

    /// The first port with a waiting message at or after `from` (wrapping around), if any.
    pub fn next_pending(&self, from: u32) -> Option<u32> {
        let count = self.port_count();
        (from..count).chain(0..from.min(count)).find(|&port| self.is_pending(port))
    }
}

/// A message being served: its opcode, the lanes that sent it, and the packet operations mirroring
/// [`Port`](super::Port)'s. Each operation covers every lane of [`ServerPort::lane_mask`].
pub struct ServerPort<'a> {
    region: &'a Region,
    /// The server's copy of the outboxes of this port's group of 64, kept in step by `toggle`.
    outboxes: &'a mut u64,
    index: u32,
    out: u64,
    owns: bool,
    receive: bool,
    opcode: u32,
    mask: u64,
    /// Asked now and then while a wait for the client lasts ([`ServerPort::watched`]); `None` waits for ever.
    give_up: Option<&'a mut dyn FnMut() -> bool>,
    /// Whether a wait gave up: the client will never answer, and every later operation does nothing.
    abandoned: bool,
}

/// Spins of a wait for the client between two questions to [`ServerPort::watched`]'s `give_up`: about 50 µs before
/// the first (a client answers within a few microseconds unless it is gone), then, as `spin_pause` yields the core
/// from then on, every millisecond or so.
const SPINS_BETWEEN_CHECKS: u32 = 1024;

/// One piece of a stream received by [`ServerPort::recv_n_with`]: `bytes` are the lane's bytes at `offset` of its
/// `total`. Each lane gets a piece at offset 0 (empty when `total` is 0), then one per further packet it fills.
#[derive(Debug)]
pub struct StreamPiece<'a, const H: usize> {
    pub lane: u32,
    pub head: &'a [u64; H],
    pub total: u64,
    pub offset: u64,
    pub bytes: &'a [u8],
}

impl<'a> ServerPort<'a> {
    /// Lets a wait for the client end when `give_up` says so. A client can stop answering in the middle of a message
    /// (its kernel faulted, or the run ran out of time) and the server must not wait for it for ever; once `give_up`
    /// returns true the port is [abandoned](ServerPort::is_abandoned).
    pub fn watched(mut self, give_up: &'a mut dyn FnMut() -> bool) -> Self {
        self.give_up = Some(give_up);
        self
    }

    /// Whether a wait gave up (see [`ServerPort::watched`]). From then on receives read nothing (their closures are
    /// not called), sends write nothing, streams stop, and closing leaves the port as it is: it is never served again
    /// in this run, which ends.
    pub fn is_abandoned(&self) -> bool {
        self.abandoned
    }

    pub fn opcode(&self) -> u32 {
        self.opcode
    }

    /// The lanes of the group that sent the message.
    pub fn lane_mask(&self) -> u64 {
        self.mask
    }

    /// The lanes of [`ServerPort::lane_mask`], lowest first.
    pub fn lanes(&self) -> impl Iterator<Item = u32> + use<> {
        lanes(self.mask)
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    fn wait_for_ownership(&mut self) {
        if self.owns || self.abandoned {
            return;
        }
        // The server owns the buffers while the client's outbox differs from its own.
        let mut spins = 0u32;
        while self.region.client_outbox(self.index).load(Ordering::Acquire) == self.out {
            spin_pause(spins);
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(SPINS_BETWEEN_CHECKS) && self.give_up.as_mut().is_some_and(|give_up| give_up()) {
                self.abandoned = true;
                return;
            }
        }
        self.owns = true;
    }

    fn toggle(&mut self) {
        self.out ^= 1;
        *self.outboxes ^= 1 << (self.index % 64);
        self.region.server_outbox(self.index).store(self.out, Ordering::Release);
        self.owns = false;
    }

    /// Waits for the client's next packet and reads it, lane by lane.
    pub fn recv(&mut self, mut read: impl FnMut(u32, Packet<'_>)) {
        if self.abandoned {
            return;
        }
        if self.receive {
            self.toggle();
        }
        self.wait_for_ownership();
        if self.abandoned {
            return;
        }
        for lane in lanes(self.mask) {
            read(lane, self.region.packet(self.index, lane));
        }
        self.receive = true;
    }

    /// Fills a packet, lane by lane, and hands it to the client.
    pub fn send(&mut self, mut fill: impl FnMut(u32, Packet<'_>)) {
        self.wait_for_ownership();
        if self.abandoned {
            return;
        }
        for lane in lanes(self.mask) {
            fill(lane, self.region.packet(self.index, lane));
        }
        self.toggle();
        self.receive = false;
    }

    /// Receives a stream sent by the client's `send_n`, handing each lane's bytes to `sink` piece by piece.
    pub fn recv_n(&mut self, mut sink: impl FnMut(StreamPiece<'_, 0>)) {
        self.recv_n_with::<0>(&mut sink)
    }

    /// Receives a stream sent by the client's `send_n_with::<H>`.
    pub fn recv_n_with<const H: usize>(&mut self, mut sink: impl FnMut(StreamPiece<'_, H>)) {
        const { assert!(H < PACKET_WORDS - 1, "at most 6 head words") };
        let mut heads = [[0u64; H]; 64];
        let mut totals = [0u64; 64];
        let mut bytes = [0u8; PACKET_BYTES];
        let mut packets = 1;
        self.recv(|lane, packet| {
            let lane = lane as usize;
            totals[lane] = packet.get(0);
            for (word, value) in heads[lane].iter_mut().enumerate() {
                *value = packet.get(1 + word);
            }
            let n = totals[lane].min(first_packet_bytes(H) as u64) as usize;
            for word in 0..n.div_ceil(8) {
                bytes[word * 8..word * 8 + 8].copy_from_slice(&packet.get(1 + H + word).to_le_bytes());
            }
            packets = packets.max(stream_packets(totals[lane], H));
            sink(StreamPiece {
                lane: lane as u32,
                head: &heads[lane],
                total: totals[lane],
                offset: 0,
                bytes: &bytes[..n],
            });
        });
        let mut offset = first_packet_bytes(H) as u64;
        // A client's lengths are its own to choose: a stream it abandons stops here, whatever length it announced.
        for _ in 1..packets {
            if self.abandoned {
                break;
            }
            self.recv(|lane, packet| {
                let lane = lane as usize;
                if offset < totals[lane] {
                    let n = (totals[lane] - offset).min(PACKET_BYTES as u64) as usize;
                    for word in 0..n.div_ceil(8) {
                        bytes[word * 8..word * 8 + 8].copy_from_slice(&packet.get(word).to_le_bytes());
                    }
                    sink(StreamPiece {
                        lane: lane as u32,
                        head: &heads[lane],
                        total: totals[lane],
                        offset,
                        bytes: &bytes[..n],
                    });
                }
            });
            offset += PACKET_BYTES as u64;
        }
    }

    /// Streams to each lane the bytes `source(lane)` gives, in as many packets as the longest needs.
    pub fn send_n<'d>(&mut self, source: impl Fn(u32) -> &'d [u8]) {
        self.send_n_with::<0, _>(|lane| ([], source(lane)))
    }

    /// Like [`ServerPort::send_n`] with `H` head words per lane in the first packet.
    pub fn send_n_with<'d, const H: usize, F: Fn(u32) -> ([u64; H], &'d [u8])>(&mut self, source: F) {
        const { assert!(H < PACKET_WORDS - 1, "at most 6 head words") };
        let packets = lanes(self.mask).map(|lane| stream_packets(source(lane).1.len() as u64, H)).max().unwrap_or(1);
        self.send(|lane, packet| {
            let (head, data) = source(lane);
            packet.set(0, data.len() as u64);
            for (word, value) in head.iter().enumerate() {
                packet.set(1 + word, *value);
            }
            for word in 0..PACKET_WORDS - 1 - H {
                if word * 8 < data.len() {
                    packet.set(1 + H + word, gather(data, word * 8));
                }
            }
        });
        let mut offset = first_packet_bytes(H);
        for _ in 1..packets {
            if self.abandoned {
                break;
            }
            self.send(|lane, packet| {
                let data = source(lane).1;
                for word in 0..PACKET_WORDS {
                    if offset + word * 8 < data.len() {
                        packet.set(word, gather(data, offset + word * 8));
                    }
                }
            });
            offset += PACKET_BYTES;
        }
    }

    /// Ends the message (as dropping the port does).
    pub fn close(self) {}
}

impl Drop for ServerPort<'_> {
    /// The server is the passive side: if it holds the buffers when the message ends, it hands them back, which
    /// frees the port for the next client.
    fn drop(&mut self) {
        if self.owns {
            self.toggle();
        }
    }
}
