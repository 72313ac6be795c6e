//! Runs of pages, for large blocks and for slabs: a bitmap of the pages in use, searched first-fit from the lowest
//! page that may be free, under one lock.
//!
//! A run can end above the *top*, the first page that has no metadata of this run: the search then raises the top,
//! setting up the metadata of the pages it passes (their page bits, page map entries, slab counters and the
//! classes' slab map words). That is what lets `_begin` reset a heap of any size with a few stores.
//!
//! When no run fits, the allocator takes back every slab whose chunks are all free (its counter is swapped from
//! "all free" to "unused", so no reservation can be in flight) and searches again. A flag saves that scan when no
//! slab became empty since the last one found nothing, so that a grid that has run out of memory fails fast.

use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use super::counter::{UNUSED, class_of_counter, count};
use super::geometry::{self, CLASS_COUNT, PAGE_BYTES, PAGE_SHIFT, PAGES_PER_SLAB, header};
use super::{Heap, HeapError};
use crate::gpu::{DeviceRmw, Gpu};

/// What a page is, in the page map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PageUse {
    /// Free, or a page of a large block other than its first.
    Free,
    /// A page of a slab of class `class`.
    Slab { class: u32 },
    /// The first page of a large block of `pages` pages.
    Large { pages: u32 },
}

impl PageUse {
    pub(super) fn encode(self) -> u64 {
        match self {
            PageUse::Free => 0,
            PageUse::Slab { class } => 1 | u64::from(class) << 8,
            PageUse::Large { pages } => 2 | u64::from(pages) << 8,
        }
    }

    pub(super) fn decode(entry: u64) -> Self {
        match entry & 0xff {
            1 => PageUse::Slab { class: (entry >> 8) as u32 },
            2 => PageUse::Large { pages: (entry >> 8) as u32 },
            _ => PageUse::Free,
        }
    }
}

impl<G: Gpu> Heap<G> {
    /// A large block of `size` bytes aligned to `align` (a power of two), or null.
    pub(super) fn allocate_pages_for(&self, size: usize, align: usize) -> *mut u8 {
        let setup = self.setup();
        let pages = size.div_ceil(PAGE_BYTES).max(1);
        let align_pages = (align / PAGE_BYTES).max(1);
        if pages > setup.geometry.pages as usize || align_pages > setup.geometry.pages as usize {
            return core::ptr::null_mut();
        }
        let (pages, align_pages) = (pages as u32, align_pages as u32);
        match self.allocate_pages(pages, align_pages, PageUse::Large { pages }) {
            Some(first) => setup.data.wrapping_add(first as usize * PAGE_BYTES),
            None => core::ptr::null_mut(),
        }
    }

    /// Frees the large block at page `first`, if it is still one.
    pub(super) fn free_pages_of(&self, first: u32) -> Result<(), HeapError> {
        self.locked(|| match PageUse::decode(self.page_map(first)) {
            PageUse::Large { pages } => {
                self.release_run(first, pages, 1);
                Ok(())
            }
            _ => Err(HeapError::NotAllocated),
        })
    }

    /// `count` pages whose first page's address is a multiple of `align` pages, marked as `use_`; `None` when no such
    /// run is free, even after taking back the empty slabs.
    pub(super) fn allocate_pages(&self, count: u32, align: u32, use_: PageUse) -> Option<u32> {
        self.locked(|| {
            let first = match self.find_run(count, align) {
                Some(first) => first,
                None => {
                    // Set the flag first: a slab that becomes empty from here on clears it (`slabs.rs`), so either
                    // the scan below sees it empty or the next failure scans again.
                    let scanned_in_vain = G::device_rmw(self.word(header::NO_EMPTY_SLABS), DeviceRmw::Or, 1, AcqRel);
                    if scanned_in_vain & 1 != 0 || !self.reclaim_empty_slabs() {
                        return None;
                    }
                    self.find_run(count, align)?
                }
            };
            self.take_run(first, count, use_);
            Some(first)
        })
    }

    /// Runs `critical` holding the page allocator's lock.
    fn locked<R>(&self, critical: impl FnOnce() -> R) -> R {
        let lock = self.word(header::LOCK);
        loop {
            // The section runs inside the loop: the lanes of an AMD wavefront that lost the race spin in lockstep, so
            // a winner that ran its section after leaving the loop would wait for them for ever.
            if G::device_rmw(lock, DeviceRmw::Or, 1, Acquire) & 1 == 0 {
                let result = critical();
                lock.store(0, Release);
                return result;
            }
            G::sleep_briefly();
        }
    }

    fn page_map(&self, page: u32) -> u64 {
        self.word(self.setup().geometry.page_map_word(page)).load(Relaxed)
    }

    fn set_page_map(&self, page: u32, use_: PageUse) {
        self.word(self.setup().geometry.page_map_word(page)).store(use_.encode(), Relaxed);
    }

    /// Whether page `page` (below the top) is in use, by the page bits. Exact only under the lock.
    pub(super) fn page_in_use(&self, page: u32) -> bool {
        let word = self.word(self.setup().geometry.page_bits_word(page));
        word.load(Relaxed) & 1 << (page % 64) != 0
    }

    /// The lowest page at or after `page` whose address is a multiple of `align` pages.
    fn align_page(&self, page: u32, align: u32) -> u64 {
        let first_page = self.setup().data as u64 >> PAGE_SHIFT;
        (first_page + u64::from(page)).next_multiple_of(u64::from(align)) - first_page
    }

    /// The first run of `count` free pages aligned to `align`, raising the top if it ends above it. Under the lock.
    fn find_run(&self, count: u32, align: u32) -> Option<u32> {
        let total = u64::from(self.setup().geometry.pages);
        let top = self.word(header::TOP).load(Relaxed) as u32;
        let mut first = self.align_page(self.word(header::FREE_HINT).load(Relaxed) as u32, align);
        loop {
            let end = first + u64::from(count);
            if end > total {
                return None;
            }
            match self.last_used(first as u32, (end as u32).min(top)) {
                // No run starting at or before the window's last used page fits: go on from the next free page
                // after it, skipping whole words of used pages. (Stepping a page at a time from the first used one
                // crawls through a heap full of slabs: tens of thousands of steps per request, all under the lock.)
                Some(used) => first = self.align_page(self.next_free(used + 1, top), align),
                None => break,
            }
        }
        let end = (first + u64::from(count)) as u32;
        if end > top {
            self.raise_top(top, end);
        }
        Some(first as u32)
    }

    /// The last page in use in `from..to` (below the top).
    fn last_used(&self, from: u32, to: u32) -> Option<u32> {
        let geometry = self.setup().geometry;
        let mut end = to;
        while end > from {
            let word_start = (end - 1) / 64 * 64;
            let start = word_start.max(from);
            let mut mask = u64::MAX >> (64 - (end - word_start));
            mask &= u64::MAX << (start - word_start);
            let used = self.word(geometry.page_bits_word(word_start)).load(Relaxed) & mask;
            if used != 0 {
                return Some(word_start + 63 - used.leading_zeros());
            }
            end = start;
        }
        None
    }

    /// The first free page at or after `from`: below the top by the page bits, else `max(from, top)` (the pages
    /// from the top on are all free; their bits are stale).
    fn next_free(&self, from: u32, top: u32) -> u32 {
        let geometry = self.setup().geometry;
        let mut page = from;
        while page < top {
            let word_start = page / 64 * 64;
            let free = !self.word(geometry.page_bits_word(page)).load(Relaxed) & u64::MAX << (page - word_start);
            if free != 0 {
                return (word_start + free.trailing_zeros()).min(top);
            }
            page = word_start + 64;
        }
        from.max(top)
    }

    /// Sets up the metadata of pages `top..new_top`, free, and publishes the new top. Under the lock.
    ///
    /// Out of line: it runs once per stretch of fresh pages, and its loops, unrolled into every caller of
    /// `allocate_pages` (a store per size class for each slab map word), were a third of the heap's code.
    #[inline(never)]
    fn raise_top(&self, top: u32, new_top: u32) {
        let geometry = self.setup().geometry;
        let mut page = top / 64 * 64;
        while page < new_top {
            let word = self.word(geometry.page_bits_word(page));
            // Bits below the old top belong to this run; the others are left from an earlier one.
            let kept = if page < top { word.load(Relaxed) & ((1u64 << (top % 64)) - 1) } else { 0 };
            word.store(kept, Relaxed);
            page += 64;
        }
        for page in top..new_top {
            self.set_page_map(page, PageUse::Free);
        }
        for slab in top.div_ceil(PAGES_PER_SLAB)..new_top.div_ceil(PAGES_PER_SLAB) {
            self.word(geometry.counter_word(slab)).store(UNUSED, Relaxed);
        }
        // A slab map word covers 64 slabs.
        let pages_per_map_word = 64 * PAGES_PER_SLAB;
        for word in top.div_ceil(pages_per_map_word)..new_top.div_ceil(pages_per_map_word) {
            for class in 0..CLASS_COUNT {
                self.word(geometry.slab_map_word(class, word)).store(0, Relaxed);
            }
        }
        // Release: a thread that reads the new top (acquire) finds the metadata below it set up.
        self.word(header::TOP).store(u64::from(new_top), Release);
    }

    /// Marks `count` pages from `first` in use as `use_`. Under the lock.
    fn take_run(&self, first: u32, count: u32, use_: PageUse) {
        self.set_page_bits(first, count, true);
        match use_ {
            PageUse::Slab { .. } => (first..first + count).for_each(|page| self.set_page_map(page, use_)),
            _ => self.set_page_map(first, use_),
        }
        // The hint stays at or below the lowest free page: past this run, at the next free page, when the run
        // started at it.
        let hint = self.word(header::FREE_HINT);
        if hint.load(Relaxed) == u64::from(first) {
            let top = self.word(header::TOP).load(Relaxed) as u32;
            hint.store(u64::from(self.next_free(first + count, top)), Relaxed);
        }
    }

    /// Frees `count` pages from `first`, whose first `mapped` page map entries say what they were. Under the lock.
    fn release_run(&self, first: u32, count: u32, mapped: u32) {
        self.set_page_bits(first, count, false);
        for page in first..first + mapped {
            self.set_page_map(page, PageUse::Free);
        }
        let hint = self.word(header::FREE_HINT);
        if u64::from(first) < hint.load(Relaxed) {
            hint.store(u64::from(first), Relaxed);
        }
    }

    fn set_page_bits(&self, first: u32, count: u32, used: bool) {
        let geometry = self.setup().geometry;
        let (mut page, end) = (first, first + count);
        while page < end {
            let word_end = (page / 64 + 1) * 64;
            let mut mask = u64::MAX << (page % 64);
            if end < word_end {
                mask &= (1u64 << (end % 64)) - 1;
            }
            let word = self.word(geometry.page_bits_word(page));
            let bits = word.load(Relaxed);
            word.store(if used { bits | mask } else { bits & !mask }, Relaxed);
            page = word_end;
        }
    }

    /// Takes back every slab whose chunks are all free; whether there was one. Under the lock.
    fn reclaim_empty_slabs(&self) -> bool {
        let geometry = self.setup().geometry;
        let slabs = self.word(header::TOP).load(Relaxed) as u32 / PAGES_PER_SLAB;
        let mut reclaimed = false;
        for slab in 0..slabs {
            let counter = self.word(geometry.counter_word(slab));
            let value = counter.load(Relaxed);
            let Some(class) = class_of_counter(value) else { continue };
            if count(value) != i64::from(geometry::capacity(class)) {
                continue;
            }
            // Only from exactly "all free": then no reservation is in flight, and none can take a chunk after this.
            // Acquire: the frees' writes to its chunks happen before the pages' next use.
            if counter.compare_exchange(value, UNUSED, AcqRel, Relaxed).is_ok() {
                self.unmark(class, slab);
                self.release_run(slab * PAGES_PER_SLAB, PAGES_PER_SLAB, PAGES_PER_SLAB);
                reclaimed = true;
            }
        }
        reclaimed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_map_entries_round_trip() {
        for use_ in [PageUse::Free, PageUse::Slab { class: 31 }, PageUse::Large { pages: u32::MAX }] {
            assert_eq!(PageUse::decode(use_.encode()), use_);
        }
        assert_eq!(PageUse::decode(0xff), PageUse::Free);
    }
}
