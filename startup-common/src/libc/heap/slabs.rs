//! Chunks: slabs of one size class, found through per-class slab maps, reserved through counters, taken through
//! bitmaps. Nothing here takes a lock; making a slab takes one page run from `pages.rs`. A slab's state is its counter
//! (`counter.rs`).
//!
//! **The slab map** of a class has a bit per slab: set while the slab is of that class and may have a free chunk.
//! Every counter update that takes the count from zero or less to above zero sets the bit; one that takes it from
//! above zero to zero or less clears it and then reads the counter again with a read-modify-write, setting the bit
//! again if the count went back up meanwhile. Counter updates are acquire-release, so either the re-read sees the
//! other thread's increment, or that increment's bit setting comes after the clearing: a slab with free chunks never
//! stays unmarked (the loom models check this).

use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use super::counter::{UNUSED, class_of_counter, count, in_use};
use super::geometry::{self, PAGES_PER_SLAB, SLAB_BYTES, header};
use super::pages::PageUse;
use super::{Heap, HeapError};
use crate::gpu::{DeviceRmw, Gpu};
use crate::sync::AtomicU64;

/// What a reservation got: `count` chunks of slab `slab`; `fresh` when the slab was just made and its first `count`
/// chunks are already taken for the reservers. `count` 0: the heap is out of memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reservation {
    slab: u32,
    count: u32,
    fresh: bool,
}

impl Reservation {
    const OUT_OF_MEMORY: Self = Self { slab: 0, count: 0, fresh: false };

    fn encode(self) -> [u32; 2] {
        [self.slab, self.count | u32::from(self.fresh) << 31]
    }

    fn decode([slab, count]: [u32; 2]) -> Self {
        Self { slab, count: count & !(1 << 31), fresh: count >> 31 != 0 }
    }
}

/// Why no slab was made.
enum MakeError {
    /// Another thread is making a slab of this class: look again for one with room soon.
    Busy,
    OutOfMemory,
}

/// A 32-bit mix of `x`, for spreading warps over slabs and bitmap words.
fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// Where the calling warp starts looking for slabs of class `class` and for clear bits: the same for a warp every
/// time, different between warps, so that warps spread over slabs and each tends to come back to its own.
fn spread<G: Gpu>(class: u32) -> u32 {
    let ids = G::thread_ids();
    let [tx, ty, tz] = ids.thread;
    let [bx, by, bz] = ids.block;
    let warp = (tx / G::LANE_SIZE) ^ ty.wrapping_mul(0x9e37_79b9) ^ tz.wrapping_mul(0x85eb_ca6b);
    mix(warp ^ mix(bx ^ mix(by ^ mix(bz ^ class.wrapping_mul(0xc2b2_ae35)))))
}

/// The lowest `n` set bits of `bits` (all of them when it has fewer).
fn lowest_bits(bits: u64, n: u32) -> u64 {
    let mut rest = bits;
    for _ in 0..n.min(64) {
        rest &= rest.wrapping_sub(1);
    }
    bits & !rest
}

/// The position of the `n`-th (from 0) set bit of `bits`, which has more than `n`.
fn nth_set_bit(bits: u64, n: u32) -> u32 {
    let mut rest = bits;
    for _ in 0..n {
        rest &= rest - 1;
    }
    rest.trailing_zeros()
}

/// A 64-bit value from the lowest lane of `mask`.
fn broadcast_u64<G: Gpu>(mask: u64, value: u64) -> u64 {
    u64::from(G::broadcast_first(mask, value as u32)) | u64::from(G::broadcast_first(mask, (value >> 32) as u32)) << 32
}

impl<G: Gpu> Heap<G> {
    /// A chunk of class `class` for each calling lane. The lanes that call this together are grouped by class; each
    /// group is served by its lowest lane.
    pub(super) fn allocate_chunk(&self, class: u32) -> *mut u8 {
        let mut pending = G::lane_mask();
        let mut chunk = core::ptr::null_mut();
        loop {
            let serving = G::broadcast_first(pending, class);
            let group = G::ballot(pending, class == serving);
            let served = class == serving;
            if served {
                chunk = self.allocate_in_class(group, class);
            }
            pending = G::ballot(pending, !served);
            if served {
                return chunk;
            }
        }
    }

    /// A chunk of class `class` for every lane of `group`, which calls this together; null in the lanes left without
    /// one when the heap is out of memory.
    fn allocate_in_class(&self, group: u64, class: u32) -> *mut u8 {
        let lane = G::lane_id();
        let mut waiting = group;
        loop {
            let leader = lane == waiting.trailing_zeros();
            let wanted = waiting.count_ones();
            let reservation = if leader { self.reserve(class, wanted) } else { Reservation::OUT_OF_MEMORY };
            let [slab, count] = reservation.encode();
            // The leader's reservation reaches the group by shuffles, not through memory.
            let reservation =
                Reservation::decode([G::broadcast_first(waiting, slab), G::broadcast_first(waiting, count)]);
            if reservation.count == 0 {
                return core::ptr::null_mut();
            }
            let rank = (waiting & ((1u64 << lane) - 1)).count_ones();
            let index = if reservation.fresh {
                (rank < reservation.count).then_some(rank)
            } else {
                self.take_bits(waiting, reservation.slab, class, reservation.count, rank)
            };
            // The leader's acquire of the bits orders the chunks' earlier use before this one, for all the lanes.
            G::sync_lanes(waiting);
            let served = index.is_some();
            waiting = G::ballot(waiting, !served);
            if let Some(index) = index {
                let offset = reservation.slab as usize * SLAB_BYTES + (index * geometry::chunk_size(class)) as usize;
                return self.setup().data.wrapping_add(offset);
            }
        }
    }

    /// Reserves up to `wanted` chunks of class `class` in one slab, making a slab when no slab of the class has room.
    /// Run by one lane for its group.
    fn reserve(&self, class: u32, wanted: u32) -> Reservation {
        loop {
            let Some(slab) = self.find_slab(class) else {
                match self.make_slab(class, wanted) {
                    Ok(reservation) => return reservation,
                    Err(MakeError::OutOfMemory) => return Reservation::OUT_OF_MEMORY,
                    Err(MakeError::Busy) => {
                        // Making a slab takes a while; look again after it may have appeared.
                        for _ in 0..8 {
                            G::sleep_briefly();
                        }
                        continue;
                    }
                }
            };
            let old = self.add_to_counter(slab, u64::from(wanted).wrapping_neg());
            let got =
                if class_of_counter(old) == Some(class) { count(old).clamp(0, i64::from(wanted)) as u32 } else { 0 };
            if got < wanted {
                self.add_to_counter(slab, u64::from(wanted - got));
            }
            if got > 0 {
                return Reservation { slab, count: got, fresh: false };
            }
            // The map said the slab had room, but it has none or is of another class now: unmark it (the counter's
            // own updates do that only when they take its count from above zero).
            self.unmark(class, slab);
        }
    }

    /// A slab of class `class` whose map bit is set, looking from where the calling warp usually looks.
    fn find_slab(&self, class: u32) -> Option<u32> {
        let geometry = self.setup().geometry;
        // Acquire: the map words below the top were cleared before the top passed them.
        let slabs = G::device_load(self.word(header::TOP), Acquire) as u32 / PAGES_PER_SLAB;
        let words = slabs.div_ceil(64);
        if words == 0 {
            return None;
        }
        let spread = spread::<G>(class);
        let mut word = spread % words;
        for _ in 0..words {
            let bits = G::device_load(self.word(geometry.slab_map_word(class, word)), Relaxed);
            if bits != 0 {
                // The first marked slab at or after a bit of the warp's own, so that warps of one word spread too.
                let start = spread >> 26;
                let bit = (bits.rotate_right(start).trailing_zeros() + start) % 64;
                return Some(word * 64 + bit);
            }
            word = if word + 1 == words { 0 } else { word + 1 };
        }
        None
    }

    /// Makes a slab of class `class` with the first `wanted` (at most all) of its chunks taken, unless another thread
    /// is making one of the class: one at a time per class, or every warp of a starting grid would make its own.
    fn make_slab(&self, class: u32, wanted: u32) -> Result<Reservation, MakeError> {
        let making = self.word(header::MAKING + class as usize);
        // A load first: while a slab is being made, every group of the class that finds no room comes here.
        if G::device_load(making, Relaxed) & 1 != 0 || G::device_rmw(making, DeviceRmw::Or, 1, Acquire) & 1 != 0 {
            return Err(MakeError::Busy);
        }
        let made = self.allocate_pages(PAGES_PER_SLAB, PAGES_PER_SLAB, PageUse::Slab { class }).map(|page| {
            let slab = page / PAGES_PER_SLAB;
            let geometry = self.setup().geometry;
            let capacity = geometry::capacity(class);
            let taken = wanted.min(capacity);
            for word in 0..geometry::bitmap_words(class) {
                // Bits of the chunks taken now, and of those past the capacity, which are never free.
                let first = word * 64;
                let taken_bits = lowest_bits(u64::MAX, taken.saturating_sub(first));
                let past_end = if capacity >= first + 64 { 0 } else { u64::MAX << (capacity - first) };
                self.word(geometry.bitmap_word(slab, word)).store(taken_bits | past_end, Relaxed);
            }
            // Release: a thread that reserves in this slab sees the bitmap above and the page map.
            let counter = self.word(geometry.counter_word(slab));
            let old =
                G::device_rmw(counter, DeviceRmw::Add, in_use(class, capacity - taken).wrapping_sub(UNUSED), Release);
            if count(old) + i64::from(capacity - taken) > 0 {
                self.mark(class, slab);
            }
            Reservation { slab, count: taken, fresh: true }
        });
        making.store(0, Release);
        made.ok_or(MakeError::OutOfMemory)
    }

    /// Sets up to `count` clear bits of slab `slab`'s bitmap, which the group's reservation guarantees, for the first
    /// `count` lanes of `group` by rank; returns the chunk of the lane of rank `rank`, if it is one of them. The
    /// lowest lane takes the bits, a word at a time, and tells the others.
    fn take_bits(&self, group: u64, slab: u32, class: u32, count: u32, rank: u32) -> Option<u32> {
        let geometry = self.setup().geometry;
        let words = geometry::bitmap_words(class);
        let leader = G::lane_id() == group.trailing_zeros();
        let mut word = if leader { spread::<G>(class) % words } else { 0 };
        let mut assigned = 0;
        let mut mine = None;
        while assigned < count {
            let mut taken = 0u64;
            if leader {
                loop {
                    let bits = self.word(geometry.bitmap_word(slab, word));
                    let clear = !G::device_load(bits, Relaxed);
                    if clear == 0 {
                        word = if word + 1 == words { 0 } else { word + 1 };
                        if word == 0 {
                            // A whole pass found none: bits were freed behind it and taken ahead of it. The
                            // reservation guarantees one; let the others move.
                            G::sleep_briefly();
                        }
                        continue;
                    }
                    let wanted = lowest_bits(clear, count - assigned);
                    // Acquire: the last user of these chunks freed them with a release.
                    taken = wanted & !G::device_rmw(bits, DeviceRmw::Or, wanted, Acquire);
                    if taken != 0 {
                        break;
                    }
                }
            }
            // The leader's bits reach the group by shuffles, not memory; `allocate_in_class`'s warp barrier then
            // orders its acquire before the lanes' use of the chunks.
            let word_taken = G::broadcast_first(group, word);
            let taken = broadcast_u64::<G>(group, taken);
            let got = taken.count_ones();
            if rank >= assigned && rank < assigned + got {
                mine = Some(word_taken * 64 + nth_set_bit(taken, rank - assigned));
            }
            assigned += got;
        }
        mine
    }

    /// Frees chunk `index` of slab `slab`: clears its bit, then counts it free.
    pub(super) fn free_chunk(&self, slab: u32, index: u32) -> Result<(), HeapError> {
        let geometry = self.setup().geometry;
        let bit = 1u64 << (index % 64);
        let bits = self.word(geometry.bitmap_word(slab, index / 64));
        // Release: the next user of the chunk takes its bit with an acquire.
        if G::device_rmw(bits, DeviceRmw::And, !bit, Release) & bit == 0 {
            return Err(HeapError::NotAllocated);
        }
        self.add_to_counter(slab, 1);
        Ok(())
    }

    /// Adds `delta` (two's complement for a subtraction) to slab `slab`'s counter and keeps its class's slab map
    /// in step (see the module's comment); returns the old value.
    fn add_to_counter(&self, slab: u32, delta: u64) -> u64 {
        let counter = self.word(self.setup().geometry.counter_word(slab));
        let old = G::device_rmw(counter, DeviceRmw::Add, delta, AcqRel);
        if let Some(class) = class_of_counter(old) {
            let (before, after) = (count(old), count(old.wrapping_add(delta)));
            if before <= 0 && after > 0 {
                self.mark(class, slab);
            } else if before > 0 && after <= 0 {
                self.unmark(class, slab);
            }
            let capacity = i64::from(geometry::capacity(class));
            if after == capacity && before != capacity {
                // The slab is empty now: the page allocator may take it back when it runs out of pages (`pages.rs`).
                G::device_rmw(self.word(header::NO_EMPTY_SLABS), DeviceRmw::And, 0, AcqRel);
            }
        }
        old
    }

    fn slab_map_bit(&self, class: u32, slab: u32) -> (&AtomicU64, u64) {
        (self.word(self.setup().geometry.slab_map_word(class, slab / 64)), 1 << (slab % 64))
    }

    /// Marks slab `slab` in class `class`'s map: it may have room.
    pub(super) fn mark(&self, class: u32, slab: u32) {
        let (word, bit) = self.slab_map_bit(class, slab);
        G::device_rmw(word, DeviceRmw::Or, bit, Relaxed);
    }

    /// Unmarks slab `slab` in class `class`'s map, then marks it again if its counter says it is of that class with
    /// room after all: the read-modify-write orders this against a concurrent increment (module comment).
    pub(super) fn unmark(&self, class: u32, slab: u32) {
        let (word, bit) = self.slab_map_bit(class, slab);
        G::device_rmw(word, DeviceRmw::And, !bit, Relaxed);
        let counter = self.word(self.setup().geometry.counter_word(slab));
        let now = G::device_rmw(counter, DeviceRmw::Add, 0, AcqRel);
        if class_of_counter(now) == Some(class) && count(now) > 0 {
            G::device_rmw(word, DeviceRmw::Or, bit, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_helpers() {
        assert_eq!(lowest_bits(0b1011_0110, 3), 0b0001_0110);
        assert_eq!(lowest_bits(0b101, 5), 0b101);
        assert_eq!(lowest_bits(u64::MAX, 64), u64::MAX);
        assert_eq!(lowest_bits(u64::MAX, 0), 0);
        assert_eq!(nth_set_bit(0b1011_0110, 0), 1);
        assert_eq!(nth_set_bit(0b1011_0110, 3), 5);
        assert_eq!(nth_set_bit(1 << 63, 0), 63);
    }

    #[test]
    fn reservations_cross_lanes_in_two_words() {
        let reservation = Reservation { slab: 12345, count: 64, fresh: true };
        assert_eq!(Reservation::decode(reservation.encode()), reservation);
        assert_eq!(Reservation::decode(Reservation::OUT_OF_MEMORY.encode()).count, 0);
    }
}
