//! The host side: [`Server`] finds ports with pending messages, [`ServerPort`] moves packets for every lane of the
//! group that sent the message. One host thread drives a server; it needs no locks.

use core::ffi::c_void;
use core::sync::atomic::Ordering;

use gpu_startup_protocol::region::{
    Layout, MAX_PORTS, PACKET_BYTES, PACKET_WORDS, first_packet_bytes, gather, lanes, stream_packets,
};

use super::{Packet, Region};
use crate::sync::{AtomicU64, spin_pause};

/// The host's end of the channel.
pub struct Server {
    region: Region,
    /// The ports in groups of 64 (port `p` is bit `p % 64` of group `p / 64`).
    groups: [PortGroup; MAX_PORTS as usize / 64],
}

/// What the server keeps of 64 ports.
#[derive(Clone, Copy, Default)]
struct PortGroup {
    /// The server outbox of each port. The server is the only writer of its outboxes, so it keeps their values here
    /// and a scan reads only the client outboxes: half the loads, and none of them of a line the device may be
    /// reading.
    outboxes: u64,
    /// The ports whose message was given up ([`ServerPort::is_abandoned`]): never served again, as the state of
    /// their buffers is unknown (a stalled client that comes back would send the rest of a message the server no
    /// longer expects).
    retired: u64,
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
        let mut groups = [PortGroup::default(); MAX_PORTS as usize / 64];
        for port in 0..port_count {
            groups[port as usize / 64].outboxes |= region.server_bit(port, Ordering::Relaxed) << (port % 64);
        }
        Self { region, groups }
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
        (self.groups[port as usize / 64].outboxes >> (port % 64)) & 1
    }

    /// Whether a client has handed port `port` to the server: a message is waiting there (and the port was not
    /// retired).
    #[inline]
    pub fn is_pending(&self, port: u32) -> bool {
        self.region.client_bit(port, Ordering::Acquire) != self.outbox(port) && !self.is_retired(port)
    }

    /// Whether port `port`'s message was given up, so that the server no longer serves it.
    pub fn is_retired(&self, port: u32) -> bool {
        (self.groups[port as usize / 64].retired >> (port % 64)) & 1 != 0
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
        let mut clients = 0;
        for i in 0..ports {
            clients |= self.region.client_bit(first + i, Ordering::Relaxed) << i;
        }
        let group = &self.groups[group as usize];
        (clients ^ group.outboxes) & !group.retired
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
            group: &mut self.groups[port as usize / 64],
            index: port,
            out,
            owns: true,
            receive: false,
            opcode,
            mask,
            watch: None,
            hand_offs: 0,
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
    /// The server's copy of this port's group of 64, kept in step by `toggle`, and where closing retires the port.
    group: &'a mut PortGroup,
    index: u32,
    out: u64,
    owns: bool,
    receive: bool,
    opcode: u32,
    mask: u64,
    /// Asked now and then during the message ([`ServerPort::watched`]); `None` waits for ever.
    watch: Option<&'a mut dyn FnMut(u64) -> bool>,
    /// Hand-offs from the client in this message so far, after the one that opened it: its progress.
    hand_offs: u64,
    /// Whether the message was given up: the client will never answer, and every later operation does nothing.
    abandoned: bool,
}

/// Spins of a wait for the client between two questions to [`ServerPort::watched`]'s `watch`: about 50 µs before
/// the first (a client answers within a few microseconds unless it is gone), then, as `spin_pause` yields the core
/// from then on, every millisecond or so. A fuzz build asks at once: its "client" acts only when asked.
const SPINS_BETWEEN_CHECKS: u32 = if cfg!(fuzzing) { 1 } else { 1024 };

/// Hand-offs from the client between two questions to `watch` when the client never keeps the server waiting: a
/// message may go on for ever (a client that announced 2^62 bytes and keeps sending), and the loader must still
/// notice a fault, a timeout or a signal. A hand-off takes a microsecond or more, so this asks every millisecond or
/// so at most.
const HAND_OFFS_BETWEEN_CHECKS: u64 = 1024;

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

impl<const H: usize> StreamPiece<'_, H> {
    /// Whether this piece ends its lane's stream.
    pub fn is_last(&self) -> bool {
        self.offset + self.bytes.len() as u64 >= self.total
    }
}

impl<'a> ServerPort<'a> {
    /// Lets the message be given up when `watch` says so. A client can stop answering in the middle of a message (its
    /// kernel faulted, the run ran out of time, or it stalls) and the server must not wait for it for ever. `watch` is
    /// asked about every [`SPINS_BETWEEN_CHECKS`] spins of a wait for the client and every
    /// [`HAND_OFFS_BETWEEN_CHECKS`] hand-offs, with the number of hand-offs from the client so far in this message (a
    /// number that stops growing means no progress); once it returns true the port is
    /// [abandoned](ServerPort::is_abandoned).
    pub fn watched(mut self, watch: &'a mut dyn FnMut(u64) -> bool) -> Self {
        self.watch = Some(watch);
        self
    }

    /// Whether the message was given up (see [`ServerPort::watched`]). From then on receives read nothing (their
    /// closures are not called), sends write nothing, streams stop, and closing leaves the port as it is and retires
    /// it: the server never serves it again.
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
        while self.region.client_bit(self.index, Ordering::Acquire) == self.out {
            spin_pause(spins);
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(SPINS_BETWEEN_CHECKS) && self.watcher_gives_up() {
                return;
            }
        }
        self.owns = true;
        self.hand_offs += 1;
        if self.hand_offs.is_multiple_of(HAND_OFFS_BETWEEN_CHECKS) {
            self.watcher_gives_up();
        }
    }

    /// Asks `watch` whether to go on; abandons the message when it says no.
    fn watcher_gives_up(&mut self) -> bool {
        let hand_offs = self.hand_offs;
        self.abandoned |= self.watch.as_mut().is_some_and(|watch| watch(hand_offs));
        self.abandoned
    }

    /// Gives the message up: as when `watch` says so, and for a handler that finds the message malformed.
    pub fn abandon(&mut self) {
        self.abandoned = true;
    }

    fn toggle(&mut self) {
        self.out ^= 1;
        self.group.outboxes ^= 1 << (self.index % 64);
        self.region.set_server_outbox(self.index, self.out, Ordering::Release);
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
    pub fn recv_n<E>(&mut self, sink: impl FnMut(StreamPiece<'_, 0>) -> Result<(), E>) -> Result<(), E> {
        self.recv_n_with::<0, E>(sink)
    }

    /// Receives a stream sent by the client's `send_n_with::<H>`. An error from `sink` stops the stream and
    /// [abandons](ServerPort::abandon) the message (the client, which goes on sending, is never answered), and is
    /// returned. The lengths are the client's to choose: nothing here holds more than one packet.
    pub fn recv_n_with<const H: usize, E>(
        &mut self,
        mut sink: impl FnMut(StreamPiece<'_, H>) -> Result<(), E>,
    ) -> Result<(), E> {
        const { assert!(H < PACKET_WORDS - 1, "at most 6 head words") };
        let mut heads = [[0u64; H]; 64];
        let mut totals = [0u64; 64];
        let mut bytes = [0u8; PACKET_BYTES];
        let mut packets = 1;
        let mut outcome = Ok(());
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
            if outcome.is_ok() {
                outcome = sink(StreamPiece {
                    lane: lane as u32,
                    head: &heads[lane],
                    total: totals[lane],
                    offset: 0,
                    bytes: &bytes[..n],
                });
            }
        });
        let mut offset = first_packet_bytes(H) as u64;
        // A client's lengths are its own to choose: a stream it abandons stops here, whatever length it announced.
        for _ in 1..packets {
            if self.abandoned || outcome.is_err() {
                break;
            }
            self.recv(|lane, packet| {
                let lane = lane as usize;
                if offset < totals[lane] && outcome.is_ok() {
                    let n = (totals[lane] - offset).min(PACKET_BYTES as u64) as usize;
                    for word in 0..n.div_ceil(8) {
                        bytes[word * 8..word * 8 + 8].copy_from_slice(&packet.get(word).to_le_bytes());
                    }
                    outcome = sink(StreamPiece {
                        lane: lane as u32,
                        head: &heads[lane],
                        total: totals[lane],
                        offset,
                        bytes: &bytes[..n],
                    });
                }
            });
            offset = offset.saturating_add(PACKET_BYTES as u64);
        }
        if outcome.is_err() {
            self.abandon();
        }
        outcome
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
    /// frees the port for the next client. A message given up leaves its port as it is, retired.
    fn drop(&mut self) {
        if self.abandoned {
            self.group.retired |= 1 << (self.index % 64);
        } else if self.owns {
            self.toggle();
        }
    }
}
