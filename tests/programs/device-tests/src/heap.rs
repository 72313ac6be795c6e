//! Rust's `alloc` on the startup's global allocator, with no set-up: `Vec`, `String`, `format!`, `Box`, `BTreeMap`
//! and an over-aligned type, from every thread of a grid at once. Each test's launch starts with a fresh heap.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use gpu_startup::thread;

/// Aligned to more than any block's natural alignment below 512 bytes.
#[repr(C, align(512))]
struct Aligned([u8; 600]);

/// Builds each kind of value for thread `t` and checks it; names the first that is wrong.
fn build_and_check(t: u32) -> Result<(), String> {
    // Pushes move the vector through many size classes, and to a run of pages for the longer ones.
    let n = 1 + t * 37 % 6000;
    let mut numbers = Vec::new();
    for i in 0..n {
        numbers.push(i ^ t);
    }
    if numbers.len() != n as usize || numbers.iter().zip(0..).any(|(&x, i)| x != i ^ t) {
        return Err(format!("a Vec of {n} numbers"));
    }

    let mut text = format!("thread {t}:");
    for i in 0..t % 20 {
        text.push_str(&format!(" {i}"));
    }
    let words: Vec<&str> = text.split(' ').collect();
    if words.len() as u32 != 2 + t % 20 || words[1] != format!("{t}:") {
        return Err(format!("the String {text:?}"));
    }

    let boxed: Box<[u8]> = alloc::vec![t as u8; 3000].into_boxed_slice();
    let aligned = Box::new(Aligned([t as u8 ^ 0x5a; 600]));
    if (&raw const *aligned) as usize % 512 != 0 {
        return Err(format!("the alignment of a Box of 512-aligned data at {:p}", &raw const *aligned));
    }
    if boxed.iter().any(|&b| b != t as u8) || aligned.0.iter().any(|&b| b != t as u8 ^ 0x5a) {
        return Err(String::from("a Box's bytes"));
    }

    // 7919 is prime, so the keys are 40 different numbers below 101.
    let map: BTreeMap<u32, String> = (0..40).map(|i| (i * 7919 % 101, format!("{i}+{t}"))).collect();
    let map_right = map.len() == 40 && (0..40).all(|i| map.get(&(i * 7919 % 101)) == Some(&format!("{i}+{t}")));
    if !map_right {
        return Err(String::from("a BTreeMap"));
    }

    // Blocks freed in another order than they were allocated.
    let mut strings: Vec<String> =
        (0..16).map(|i| format!("{i:>width$}", width = (i * 13 + t as usize) % 300)).collect();
    strings.retain(|s| s.len() % 2 == 0);
    if strings.iter().any(|s| s.trim_start().parse::<usize>().is_err()) {
        return Err(String::from("a Vec of Strings"));
    }
    Ok(())
}

/// 2,048 threads build and check their values at once; a thread that finds one wrong names it.
#[gpu_startup::test(threads = 256, blocks = 8)]
fn alloc_types_from_2048_threads_at_once() {
    let t = thread::index() as u32;
    if let Err(what) = build_and_check(t) {
        panic!("thread {t}: {what} came out wrong");
    }
}
