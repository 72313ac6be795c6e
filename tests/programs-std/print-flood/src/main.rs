//! Every GPU thread prints one line with `println!`, numbered by its coordinates, which std gives as the thread's
//! name: `line ID from thread X of block B` (ID = B × 1024 + X), as the startup's `print-flood` prints them. The
//! benchmark `print-throughput-std` floods a million lines through std's stdout and checks that each arrives whole,
//! once.

/// X and B of a thread named `thread (X, 0, 0) of block (B, 0, 0)`.
fn coordinates(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix("thread (")?;
    let (thread, rest) = rest.split_once(", ")?;
    let block = rest.split_once("of block (")?.1.split_once(", ")?.0;
    Some((thread.parse().ok()?, block.parse().ok()?))
}

fn main() {
    let current = std::thread::current();
    let name = current.name().unwrap_or_default();
    let (x, block_x) = coordinates(name).unwrap_or_else(|| panic!("a thread named {name:?}"));
    println!("line {} from thread {x} of block {block_x}", block_x * 1024 + x);
}
