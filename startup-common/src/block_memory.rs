//! The memory a block's threads share during a kernel, as a target hands it to the runtime
//! ([`Gpu::block_memory`](crate::Gpu::block_memory)).

/// A block's memory for the RPC client: [`abi::block_memory_bytes`](crate::abi::block_memory_bytes) of it, 8-byte
/// aligned. Opaque: the client lays it out.
#[repr(C, align(8))]
pub struct BlockMemory {
    _opaque: [u8; 0],
}
