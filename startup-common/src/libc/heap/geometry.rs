//! The heap's sizes: pages, slabs, size classes, and where each piece of metadata sits in the pool's metadata words.
//! Pure arithmetic, shared by the device and the host tests.

/// Pages are the unit of the page allocator: a large block is a run of them.
pub const PAGE_SHIFT: u32 = 12;
/// 4 KiB.
pub const PAGE_BYTES: usize = 1 << PAGE_SHIFT;
/// A slab holds the chunks of one size class.
pub const SLAB_SHIFT: u32 = 16;
/// 64 KiB: every slab starts at a multiple of this address, so a chunk whose size is a multiple of an alignment up
/// to the largest chunk is aligned to it.
pub const SLAB_BYTES: usize = 1 << SLAB_SHIFT;
/// Pages per slab.
pub const PAGES_PER_SLAB: u32 = 1 << (SLAB_SHIFT - PAGE_SHIFT);
/// The smallest chunk, and the alignment of every block `malloc` returns.
pub const MIN_CHUNK: usize = 16;
/// The largest chunk: a bigger request (or one aligned to more) is a run of pages.
pub const MAX_CHUNK: usize = 8192;
/// The number of size classes: 16 to 128 bytes in steps of 16, then four per doubling up to [`MAX_CHUNK`].
pub const CLASS_COUNT: u32 = 32;
/// 64-bit words in a slab's chunk bitmap, enough for the smallest class.
pub const BITMAP_WORDS: u32 = (SLAB_BYTES / MIN_CHUNK / 64) as u32;

/// The chunk size of size class `class` (below [`CLASS_COUNT`]).
pub const fn chunk_size(class: u32) -> u32 {
    if class < 8 {
        return 16 * (class + 1);
    }
    let k = class - 8;
    let power = 7 + k / 4;
    (1 << power) + (1 << (power - 2)) * (k % 4 + 1)
}

/// Chunks in a slab of class `class`.
pub const fn capacity(class: u32) -> u32 {
    SLAB_BYTES as u32 / chunk_size(class)
}

/// The words of a slab's bitmap that class `class` uses.
pub const fn bitmap_words(class: u32) -> u32 {
    capacity(class).div_ceil(64)
}

/// The smallest class whose chunk holds `size` bytes (1 to [`MAX_CHUNK`]).
fn class_holding(size: usize) -> u32 {
    if size <= 128 {
        return (size as u32).div_ceil(16).max(1) - 1;
    }
    // size lies in (2^power, 2^(power+1)], which four classes split evenly.
    let power = usize::BITS - 1 - (size - 1).leading_zeros();
    let step = 1usize << (power - 2);
    8 + (power - 7) * 4 + ((size - (1 << power)).div_ceil(step) as u32) - 1
}

/// The size class for a request of `size` bytes aligned to `align` (a power of two): the smallest whose chunk holds
/// `size` and is a multiple of `align`. `None` when the request is for a run of pages.
pub fn class_of(size: usize, align: usize) -> Option<u32> {
    if size > MAX_CHUNK || align > MAX_CHUNK {
        return None;
    }
    // Every power of two up to MAX_CHUNK is a chunk size, so this ends within four steps.
    (class_holding(size.max(1))..CLASS_COUNT).find(|&class| (chunk_size(class) as usize).is_multiple_of(align.max(1)))
}

/// The word indices of the metadata header.
pub mod header {
    /// The page allocator's lock: bit 0.
    pub const LOCK: usize = 0;
    /// Pages below this index have metadata of the current run; the rest is whatever an earlier run left.
    pub const TOP: usize = 1;
    /// No page below this index is free (a lower bound: the page allocator searches from here).
    pub const FREE_HINT: usize = 2;
    /// 1: the last search for empty slabs found none, and no slab has become empty since.
    pub const NO_EMPTY_SLABS: usize = 3;
    /// One word per size class: bit 0 while a thread makes a slab of that class.
    pub const MAKING: usize = 4;
    /// Words in the header.
    pub const WORDS: usize = MAKING + super::CLASS_COUNT as usize;
}

/// How many pages and slabs a pool has, and where each array of metadata starts, in 64-bit words from the start of
/// the metadata. Pages are numbered from the start of the data area, slab `s` being pages `16 s` to `16 s + 15`.
/// The arrays, in order:
///
/// - the header, [`header::WORDS`] words;
/// - page bits, a bit per page: in use (a slab's or a large block's);
/// - the page map, a word per page: free, a page of a slab (and its class), or the first page of a large block (and
///   its length);
/// - counters, a word per slab: its class and how many chunks are free and not reserved (`slabs.rs`);
/// - the classes' slab maps, per class a bit per slab: it is of that class and may have a free chunk;
/// - chunk bitmaps, 64 words per slab: a bit per chunk, in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub slabs: u32,
    pub pages: u32,
    pub page_bits: u32,
    pub page_map: u32,
    pub counters: u32,
    pub slab_maps: u32,
    /// Words in one class's slab map.
    pub slab_map_words: u32,
    pub bitmaps: u32,
    pub words: u32,
}

impl Geometry {
    /// The largest pool this layout describes: far above any GPU's memory, and what keeps every index in `u32`.
    const MAX_SLABS: u32 = 1 << 24;

    /// No pool: nothing is ever read through it. All zeros, so that a heap not yet set up (in the runtime's static)
    /// needs no initializer in the image.
    pub const NONE: Self = Self {
        slabs: 0,
        pages: 0,
        page_bits: 0,
        page_map: 0,
        counters: 0,
        slab_maps: 0,
        slab_map_words: 0,
        bitmaps: 0,
        words: 0,
    };

    /// The layout for `slabs` slabs (at most 2^24, a terabyte).
    pub const fn with_slabs(slabs: u32) -> Self {
        let slabs = if slabs > Self::MAX_SLABS { Self::MAX_SLABS } else { slabs };
        let pages = slabs * PAGES_PER_SLAB;
        let page_bits = header::WORDS as u32;
        let page_map = page_bits + pages.div_ceil(64);
        let counters = page_map + pages;
        let slab_map_words = slabs.div_ceil(64);
        let slab_maps = counters + slabs;
        let bitmaps = slab_maps + CLASS_COUNT * slab_map_words;
        let words = bitmaps + slabs * BITMAP_WORDS;
        Self { slabs, pages, page_bits, page_map, counters, slab_maps, slab_map_words, bitmaps, words }
    }

    /// How a pool of `size` bytes at address `base` divides: the metadata words first (8-byte aligned), then the
    /// data area at the next multiple of [`SLAB_BYTES`]. Returns the layout and the offsets of the metadata and of the
    /// data from `base`, or `None` when the pool cannot hold one slab with its metadata.
    pub fn for_pool(base: usize, size: usize) -> Option<(Self, usize, usize)> {
        let meta_offset = base.next_multiple_of(8) - base;
        let end = base as u64 + size as u64;
        let fits = |geometry: &Self| -> Option<usize> {
            let meta_end = base as u64 + meta_offset as u64 + u64::from(geometry.words) * 8;
            let data = meta_end.next_multiple_of(SLAB_BYTES as u64);
            (data + u64::from(geometry.slabs) * SLAB_BYTES as u64 <= end).then(|| (data - base as u64) as usize)
        };
        // A slab costs its bytes and about 660 bytes of metadata; start from that estimate and step down.
        let mut slabs = (size as u64 / (SLAB_BYTES as u64 + 700)).min(u64::from(Self::MAX_SLABS)) as u32;
        while slabs > 0 {
            let geometry = Self::with_slabs(slabs);
            if let Some(data_offset) = fits(&geometry) {
                return Some((geometry, meta_offset, data_offset));
            }
            slabs -= 1;
        }
        None
    }

    /// Bytes of the data area.
    pub fn data_bytes(&self) -> usize {
        self.slabs as usize * SLAB_BYTES
    }

    /// The word of the page bits that holds page `page`'s bit.
    pub fn page_bits_word(&self, page: u32) -> usize {
        self.page_bits as usize + (page / 64) as usize
    }

    pub fn page_map_word(&self, page: u32) -> usize {
        self.page_map as usize + page as usize
    }

    pub fn counter_word(&self, slab: u32) -> usize {
        self.counters as usize + slab as usize
    }

    /// The word of class `class`'s slab map that holds slab `64 word + i`'s bit.
    pub fn slab_map_word(&self, class: u32, word: u32) -> usize {
        self.slab_maps as usize + (class * self.slab_map_words + word) as usize
    }

    pub fn bitmap_word(&self, slab: u32, word: u32) -> usize {
        self.bitmaps as usize + slab as usize * BITMAP_WORDS as usize + word as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_step_by_16_then_by_quarters_of_a_power_of_two() {
        let sizes: std::vec::Vec<u32> = (0..CLASS_COUNT).map(chunk_size).collect();
        assert_eq!(&sizes[..13], [16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]);
        assert_eq!(sizes[CLASS_COUNT as usize - 1], MAX_CHUNK as u32);
        assert!(sizes.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(sizes.iter().all(|&size| size % 16 == 0));
        // At most 25% waste above 128 bytes.
        assert!(sizes.windows(2).skip(7).all(|pair| pair[1] * 4 <= pair[0] * 5));
    }

    #[test]
    fn every_size_gets_the_smallest_class_that_holds_it() {
        for size in 0..=MAX_CHUNK {
            let class = class_of(size, 1).unwrap();
            assert!(chunk_size(class) as usize >= size.max(1), "{size}");
            assert!(class == 0 || (chunk_size(class - 1) as usize) < size, "{size} -> {class}");
        }
        assert_eq!(class_of(MAX_CHUNK + 1, 1), None);
    }

    #[test]
    fn aligned_requests_get_a_chunk_that_is_a_multiple_of_the_alignment() {
        for shift in 0..=13 {
            let align = 1usize << shift;
            for size in [0, 1, 17, 100, 129, 1000, 5000, 8192] {
                let class = class_of(size, align).unwrap();
                assert_eq!(chunk_size(class) as usize % align, 0, "size {size} align {align}");
                assert!(chunk_size(class) as usize >= size);
            }
        }
        assert_eq!(class_of(16, 16384), None);
    }

    #[test]
    fn bitmaps_cover_every_chunk_of_the_smallest_class() {
        assert_eq!(capacity(0), 4096);
        assert_eq!(bitmap_words(0), BITMAP_WORDS);
        assert_eq!(capacity(2), 1365);
        assert_eq!(bitmap_words(2), 22);
        assert_eq!(capacity(CLASS_COUNT - 1), 8);
    }

    #[test]
    fn pools_divide_into_metadata_and_aligned_slabs() {
        for (base, size) in [(0x7000_0000_0100usize, 1usize << 30), (0x1_0000_0000, 8 << 20), (4096, 200_000)] {
            let (geometry, meta, data) = Geometry::for_pool(base, size).unwrap();
            assert_eq!((base + meta) % 8, 0);
            assert_eq!((base + data) % SLAB_BYTES, 0);
            assert!(meta + geometry.words as usize * 8 <= data);
            assert!(data + geometry.data_bytes() <= size, "{geometry:?}");
            // Nearly all of the pool is data: at most a slab lost to alignment, one to rounding down and 1.1% to
            // metadata.
            assert!(size - geometry.data_bytes() <= 2 * SLAB_BYTES + size / 90, "{size}: {geometry:?}");
        }
        assert_eq!(Geometry::for_pool(4096, 64 * 1024), None);
        assert_eq!(Geometry::for_pool(0, 0), None);
    }

    #[test]
    fn metadata_arrays_follow_each_other() {
        let geometry = Geometry::with_slabs(100);
        assert_eq!(geometry.pages, 1600);
        assert_eq!(geometry.page_map, geometry.page_bits + 25);
        assert_eq!(geometry.counters, geometry.page_map + 1600);
        assert_eq!(geometry.slab_maps, geometry.counters + 100);
        assert_eq!(geometry.bitmaps, geometry.slab_maps + 32 * 2);
        assert_eq!(geometry.words, geometry.bitmaps + 6400);
        assert_eq!(geometry.slab_map_word(3, 1), (geometry.slab_maps + 3 * 2 + 1) as usize);
    }
}
