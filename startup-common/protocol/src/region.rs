//! The RPC region's layout: where the mailboxes, headers and packets of every port lie (`docs/rpc.md`), and how a
//! byte stream fills the packets of a message. The runtime's atomic view of a region (`startup_common::rpc`) and the
//! loader's allocation of one both compute every offset here.

/// The most ports a region may hold (the client's lock bits are sized for this many).
pub const MAX_PORTS: u32 = 4096;

/// The port count the loader uses unless told otherwise: enough for every warp of a large GPU to find a free port
/// quickly, small enough that the server's scan over all mailboxes stays well under a microsecond.
pub const DEFAULT_PORT_COUNT: u32 = 1024;

/// The most lanes in a group (AMD's wavefront); lane masks are `u64`.
pub const MAX_LANES: u32 = 64;

/// 64-bit words in one lane's packet buffer: a packet moves 64 bytes per lane.
pub const PACKET_WORDS: usize = 8;

/// Bytes in one lane's packet.
pub const PACKET_BYTES: usize = PACKET_WORDS * 8;

/// Where everything lives in the region, for `port_count` ports of `lane_size` lanes. All offsets are in 64-bit
/// words from the region's start; the region must be zeroed and 64-byte aligned (pinned allocations are page
/// aligned).
///
/// ```text
/// word 0                       client outbox of port 0, 1, ..., P-1   (device writes, host reads)
/// word S = round_up(P, 8)      server outbox of port 0, 1, ..., P-1   (host writes, device reads)
/// word 2S + p * (8 + 8L)       port p: header line [opcode, lane mask, 6 reserved words]
///      ... + 8 + w * L + l     port p: packet word w (0..8) of lane l (lanes interleaved, so a warp's
///                              stores of one word are one contiguous 8L-byte block)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    port_count: u32,
    lane_size: u32,
}

impl Layout {
    /// Required alignment of the region, in bytes.
    pub const ALIGN: usize = 64;

    /// The layout for `port_count` ports (1 to [`MAX_PORTS`]) of `lane_size` lanes (1 to [`MAX_LANES`]).
    ///
    /// # Panics
    /// When either count is out of range; [`Layout::checked`] returns `None` instead.
    pub const fn new(port_count: u32, lane_size: u32) -> Self {
        assert!(port_count >= 1 && port_count <= MAX_PORTS, "port count out of range");
        assert!(lane_size >= 1 && lane_size <= MAX_LANES, "lane size out of range");
        Self { port_count, lane_size }
    }

    /// The layout for `port_count` ports of `lane_size` lanes, or `None` when either count is out of range.
    pub const fn checked(port_count: u32, lane_size: u32) -> Option<Self> {
        if port_count >= 1 && port_count <= MAX_PORTS && lane_size >= 1 && lane_size <= MAX_LANES {
            Some(Self { port_count, lane_size })
        } else {
            None
        }
    }

    pub const fn port_count(&self) -> u32 {
        self.port_count
    }

    pub const fn lane_size(&self) -> u32 {
        self.lane_size
    }

    const fn mailbox_words(&self) -> usize {
        (self.port_count as usize).next_multiple_of(8)
    }

    const fn port_words(&self) -> usize {
        8 + PACKET_WORDS * self.lane_size as usize
    }

    /// Size of the region in 64-bit words.
    pub const fn words(&self) -> usize {
        2 * self.mailbox_words() + self.port_count as usize * self.port_words()
    }

    /// Size of the region in bytes: what the loader allocates (host-pinned, device-mapped, zeroed).
    pub const fn size(&self) -> usize {
        self.words() * 8
    }

    /// Word index of port `port`'s client outbox.
    pub const fn client_outbox(&self, port: u32) -> usize {
        port as usize
    }

    /// Word index of port `port`'s server outbox.
    pub const fn server_outbox(&self, port: u32) -> usize {
        self.mailbox_words() + port as usize
    }

    /// Word index of port `port`'s header line: word 0 opcode, word 1 lane mask.
    pub const fn header(&self, port: u32) -> usize {
        2 * self.mailbox_words() + port as usize * self.port_words()
    }

    /// Word index of packet word `word` of lane `lane` in port `port`.
    pub const fn packet_word(&self, port: u32, word: usize, lane: u32) -> usize {
        self.header(port) + 8 + word * self.lane_size as usize + lane as usize
    }
}

/// The region size in bytes for `port_count` ports of `lane_size` lanes; see [`Layout`].
pub const fn region_size(port_count: u32, lane_size: u32) -> usize {
    Layout::new(port_count, lane_size).size()
}

/// The one reading of a mailbox word: its lowest bit. A side only ever stores 0 or 1, but the region is device-writable
/// memory that a buggy program can scribble over; reading every other value the same way everywhere (the server's
/// scan, its open, its waits, and the client's) keeps a corrupt word from looking handed over to one reader and not to
/// another.
#[inline(always)]
pub const fn mailbox_bit(word: u64) -> u64 {
    word & 1
}

/// The lanes set in `mask` (a header's word 1), lowest first.
pub fn lanes(mut mask: u64) -> impl Iterator<Item = u32> {
    core::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let lane = mask.trailing_zeros();
        mask &= mask - 1;
        Some(lane)
    })
}

/// Up to 8 bytes of `bytes` from `offset`, little-endian, zero-padded; 0 past the end: how a stream's bytes (and a
/// host call's value) become packet words.
#[inline(always)]
pub fn gather(bytes: &[u8], offset: usize) -> u64 {
    match bytes.get(offset..) {
        Some(rest) if rest.len() >= 8 => {
            u64::from_le_bytes([rest[0], rest[1], rest[2], rest[3], rest[4], rest[5], rest[6], rest[7]])
        }
        Some(rest) => {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(word)
        }
        None => 0,
    }
}

/// Stores the bytes of `word` at `offset` of `out`, as many as fit below `limit` and `out.len()`: the reverse of
/// [`gather`].
#[inline(always)]
pub fn scatter(out: &mut [u8], offset: usize, limit: usize, word: u64) {
    let end = limit.min(out.len());
    if offset < end {
        let n = (end - offset).min(8);
        out[offset..offset + n].copy_from_slice(&word.to_le_bytes()[..n]);
    }
}

/// Bytes the first packet of a stream carries for each lane, after the length word and `head_words` head words.
pub const fn first_packet_bytes(head_words: usize) -> usize {
    (PACKET_WORDS - 1 - head_words) * 8
}

/// Packets a stream of `len` bytes per lane takes with `head_words` head words: at least 1.
pub const fn stream_packets(len: u64, head_words: usize) -> u64 {
    let first = first_packet_bytes(head_words) as u64;
    if len <= first { 1 } else { 1 + (len - first).div_ceil(PACKET_BYTES as u64) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_sizes_and_offsets() {
        let layout = Layout::new(4, 32);
        // 2 mailbox blocks of 8 words (rounded up), then 4 ports of a header line and 8 words × 32 lanes.
        assert_eq!(layout.words(), 2 * 8 + 4 * (8 + 8 * 32));
        assert_eq!(layout.size(), layout.words() * 8);
        assert_eq!(layout.client_outbox(3), 3);
        assert_eq!(layout.server_outbox(0), 8);
        assert_eq!(layout.header(1), 16 + 264);
        assert_eq!(layout.packet_word(1, 2, 5), 16 + 264 + 8 + 2 * 32 + 5);
        assert_eq!(region_size(DEFAULT_PORT_COUNT, 32), 2 * 1024 * 8 + 1024 * (64 + 2048));
        assert_eq!(region_size(MAX_PORTS, 64), 2 * 4096 * 8 + 4096 * (64 + 4096));
        assert_eq!(region_size(1, 1), 2 * 64 + 128);
        // Every port's packet block starts on a cache line, so a warp's store of one word is whole lines.
        for lanes in [1, 32, 64] {
            let layout = Layout::new(13, lanes);
            for port in 0..13 {
                assert_eq!(layout.header(port) * 8 % Layout::ALIGN, 0);
            }
            assert_eq!(layout.size() % Layout::ALIGN, 0);
        }
        assert_eq!(Layout::checked(0, 32), None);
        assert_eq!(Layout::checked(1, MAX_LANES + 1), None);
    }

    #[test]
    #[should_panic(expected = "port count out of range")]
    fn too_many_ports_are_refused() {
        let _ = Layout::new(MAX_PORTS + 1, 32);
    }

    #[test]
    fn stream_packet_counts() {
        assert_eq!(first_packet_bytes(0), 56);
        assert_eq!(first_packet_bytes(2), 40);
        assert_eq!(stream_packets(0, 0), 1);
        assert_eq!(stream_packets(56, 0), 1);
        assert_eq!(stream_packets(57, 0), 2);
        assert_eq!(stream_packets(56 + 64, 0), 2);
        assert_eq!(stream_packets(56 + 65, 0), 3);
        assert_eq!(stream_packets(41, 2), 2);
    }

    #[test]
    fn bytes_gather_into_words_and_scatter_back() {
        let bytes = *b"0123456789";
        assert_eq!(gather(&bytes, 0), u64::from_le_bytes(*b"01234567"));
        assert_eq!(gather(&bytes, 8), u64::from(b'8') | u64::from(b'9') << 8);
        assert_eq!(gather(&bytes, 16), 0);
        let mut out = [0u8; 10];
        scatter(&mut out, 0, 10, gather(&bytes, 0));
        scatter(&mut out, 8, 10, gather(&bytes, 8));
        assert_eq!(out, bytes);
        let mut short = [0u8; 3];
        scatter(&mut short, 0, 2, u64::MAX);
        assert_eq!(short, [0xff, 0xff, 0]);
    }

    #[test]
    fn lanes_come_lowest_first() {
        let mut seen = [0u32; 4];
        let mut count = 0;
        for lane in lanes(0x8000_0000_0000_0005 | 1 << 9) {
            seen[count] = lane;
            count += 1;
        }
        assert_eq!((count, seen), (4, [0, 2, 9, 63]));
        assert_eq!(lanes(0).next(), None);
    }
}
