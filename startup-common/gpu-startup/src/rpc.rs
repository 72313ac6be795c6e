//! The channel to the host that printing, `exit` and `abort` use (`docs/rpc.md`), for the runtime's own tests and
//! for new host services; a program has no need of it otherwise.

use crate::arch::RUNTIME;

pub use startup_common::rpc::opcode;

/// The RPC client every thread of the program shares.
pub fn client() -> &'static startup_common::rpc::Client<impl startup_common::Gpu> {
    RUNTIME.client()
}
