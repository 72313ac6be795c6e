//! A thread's coordinates as the runtime's messages (and std's thread names) give them.

use gpu_startup_protocol::abi::ThreadIds;

/// A thread's coordinates as the runtime's messages name it: `thread (x, y, z) of block (x, y, z)`.
pub(crate) struct Coordinates(pub(crate) ThreadIds);

impl core::fmt::Display for Coordinates {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let ([tx, ty, tz], [bx, by, bz]) = (self.0.thread, self.0.block);
        write!(f, "thread ({tx}, {ty}, {tz}) of block ({bx}, {by}, {bz})")
    }
}
