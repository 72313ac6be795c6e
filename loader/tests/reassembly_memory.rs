//! What `Reassembly` really allocates, counted by the global allocator, against what it says it holds: the writer key
//! is the client's to choose, so many tiny unfinished messages must not make the host allocate more than
//! `held_bytes`, which never passes `HELD_IN_ALL`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gpu_loader::server::reassembly::{HELD_IN_ALL, Reassembly};
use gpu_startup_protocol::messages::{Destination, Stream};

struct Counting;

thread_local! {
    /// Bytes this thread allocated and has not freed: per thread, so the test harness's own threads do not count.
    static LIVE: Cell<usize> = const { Cell::new(0) };
}

fn count(allocated: usize, freed: usize) {
    // `try_with`: the allocator may run while the thread's locals are torn down.
    let _ = LIVE.try_with(|live| live.set(live.get().wrapping_add(allocated).wrapping_sub(freed)));
}

// SAFETY: every call goes to `System` unchanged; the counting touches no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees for `layout` are `System`'s.
        let block = unsafe { System.alloc(layout) };
        if !block.is_null() {
            count(layout.size(), 0);
        }
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let block = unsafe { System.alloc_zeroed(layout) };
        if !block.is_null() {
            count(layout.size(), 0);
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: `block` came from this allocator, so from `System`, with `layout`.
        unsafe { System.dealloc(block, layout) };
        count(0, layout.size());
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `block` came from `System` with `layout`; the caller's guarantees for `new_size` are `System`'s.
        let moved = unsafe { System.realloc(block, layout, new_size) };
        if !moved.is_null() {
            count(new_size, layout.size());
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.with(Cell::get)
}

const OUT: Destination = Destination::Stream(Stream::Stdout);

/// The held bytes cover what the reassembly allocated since `baseline`, stay within the cap, and are not far above
/// what was allocated (the allocator's own overhead per block is in them, not in the count).
#[track_caller]
fn check(messages: &Reassembly, baseline: usize, what: std::fmt::Arguments<'_>) {
    let allocated = live().wrapping_sub(baseline);
    let held = messages.held_bytes();
    assert!(allocated <= held, "{what}: {allocated} bytes allocated, {held} counted");
    assert!(held <= HELD_IN_ALL, "{what}: {held} bytes counted, over the cap");
    assert!(held <= allocated + allocated / 2, "{what}: {held} bytes counted for {allocated} allocated");
}

/// Unfinished one-byte messages from ever new writers until the cap turns them away: each costs its key, its
/// vector and its share of the table far more than its byte, and all of it is counted.
#[test]
fn many_tiny_unfinished_messages_allocate_no_more_than_is_counted() {
    let baseline = live();
    let mut messages = Reassembly::new();
    let mut writers = 0;
    while messages.append((writers, 0, OUT), b"x").is_none() {
        writers += 1;
        check(&messages, baseline, format_args!("{writers} messages"));
    }
    assert!(writers > 100_000, "the cap turned messages away after {writers}");
    for writer in (0..writers).step_by(2) {
        assert_eq!(messages.complete((writer, 0, OUT), b"", true).to_vec(), b"x\n");
        check(&messages, baseline, format_args!("message {writer} completed"));
    }
    for writer in (1..writers).step_by(2) {
        assert_eq!(messages.take((writer, 0, OUT)), b"x");
        check(&messages, baseline, format_args!("message {writer} taken"));
    }
    assert_eq!((messages.held_bytes(), live().wrapping_sub(baseline)), (0, 0));
}

/// Messages that grow chunk by chunk, in chunks of uneven sizes: what their vectors reserve ahead is counted too.
#[test]
fn growing_messages_allocate_no_more_than_is_counted() {
    const ROUNDS: usize = 200;
    let chunk_size = |round: usize, writer: u64| (round * 7 + writer as usize * 13) % 97 + 1;
    let baseline = live();
    let mut messages = Reassembly::new();
    let chunk = [b'c'; 97];
    for round in 0..ROUNDS {
        for writer in 0..50 {
            assert!(messages.append((writer, 1, OUT), &chunk[..chunk_size(round, writer)]).is_none());
            check(&messages, baseline, format_args!("round {round}, writer {writer}"));
        }
    }
    for writer in 0..50 {
        let sent: usize = (0..ROUNDS).map(|round| chunk_size(round, writer)).sum();
        assert_eq!(messages.take((writer, 1, OUT)).len(), sent);
        check(&messages, baseline, format_args!("writer {writer} taken"));
    }
    assert_eq!((messages.held_bytes(), live().wrapping_sub(baseline)), (0, 0));
}
