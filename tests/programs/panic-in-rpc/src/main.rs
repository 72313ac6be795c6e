//! One thread panics inside a port operation, while its group holds its warp's own port (4 warps, 1024 ports: every
//! warp has a port of its own): the report, itself a message, must take another port rather than wait for the one
//! its own group holds, and the run ends with 101.
#![no_std]
#![no_main]

use gpu_startup::rpc::{self, UserOpcode};
use gpu_startup::{block, thread};

/// The message the panic interrupts, which never reaches the host (no handler serves it).
const NEVER_SENT: UserOpcode = UserOpcode::new(0x1_0000, "never sent");

#[gpu_startup::main]
fn main() -> i32 {
    if thread::id()[0] != 37 || block::id()[0] != 1 {
        return 0;
    }
    let mut port = rpc::open(NEVER_SENT);
    port.send(|_| panic!("lane 5 of warp 1 fails while its group holds a port"));
    1
}
