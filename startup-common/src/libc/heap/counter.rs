//! A slab's counter: one word that holds its state. The high half is 0 for a slab not in use, or one more than its
//! class; the low half is `COUNT_BIAS` plus the chunks that are free and not reserved. Taking chunks is two
//! steps: reserve `n` by subtracting `n` from the counter (the old value says how many of them the slab had: any
//! shortfall is added back), then set `n` clear bits of the bitmap, which the reservation guarantees to exist: the
//! counter never exceeds the clear bits, since a free clears its bit before it adds 1. The bias keeps a counter that
//! reservers pushed below zero from borrowing from the high half. A slab is put in use by *adding* the difference
//! between the in-use and the unused value, and taken out of use by a compare-and-swap from "every chunk free": so a
//! subtraction made on a slab just taken out of use, and added back after it was put in use again, still balances.

/// Added to a counter's count, so that reservations that push it below zero stay in the low half.
pub(super) const COUNT_BIAS: u64 = 1 << 31;

/// A counter's value for a slab not in use: no class, no chunks.
pub(super) const UNUSED: u64 = COUNT_BIAS;

/// A counter's value for a slab of class `class` with `count` chunks free and not reserved.
pub(super) const fn in_use(class: u32, count: u32) -> u64 {
    ((class as u64 + 1) << 32) | (COUNT_BIAS + count as u64)
}

/// The class a counter value says its slab has, if it is in use.
pub(super) fn class_of_counter(value: u64) -> Option<u32> {
    ((value >> 32) as u32).checked_sub(1)
}

/// The count in a counter value: free, unreserved chunks, less the reservations being given back.
pub(super) fn count(value: u64) -> i64 {
    (value & 0xffff_ffff) as i64 - COUNT_BIAS as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_keep_class_and_count_apart() {
        let value = in_use(5, 100);
        assert_eq!((class_of_counter(value), count(value)), (Some(5), 100));
        assert_eq!((class_of_counter(UNUSED), count(UNUSED)), (None, 0));
        // Reservations below zero stay in the low half.
        let below = value.wrapping_sub(1000);
        assert_eq!((class_of_counter(below), count(below)), (Some(5), -900));
        // Putting a slab in use by adding keeps a pending subtraction.
        let pending = UNUSED.wrapping_sub(3);
        let used = pending.wrapping_add(in_use(2, 50).wrapping_sub(UNUSED));
        assert_eq!((class_of_counter(used), count(used)), (Some(2), 47));
    }
}
