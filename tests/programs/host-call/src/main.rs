//! Host calls of one's own, as a program whose host program embeds the loader makes them: the suite's example calls
//! (`gpu_startup::rpc::testing`: `SQUARE`, `SQUARES_SEEN`, `REVERSE`), which `gpu-test-loader` registers through the
//! `gpu_loader` library. Every thread has the host square a number of its own (a typed call), then, from one call
//! site, even threads ask for its successor and odd ones for its square again (lanes running one call with different
//! opcodes), and has the host reverse bytes of its own (a byte stream of 0 to 150 bytes, up to three packets); the
//! destructor asks how many numbers the host squared, state the host kept between the calls.
//!
//! With `overflow` as `argv[1]`, thread 0 asks for the square of 2^32, which the host's handler refuses: the run
//! ends with the handler's error. A plain `gpu-loader` registers none of these calls: the first one ends the run
//! with an error naming its opcode (`expect.unregistered.toml`).
#![no_std]
#![no_main]

use gpu_startup::rpc::{self, testing};
use gpu_startup::{println, thread};

#[gpu_startup::destructor]
fn report() {
    println!("the host squared {} numbers", rpc::call(testing::SQUARES_SEEN, ()));
}

#[gpu_startup::main]
fn main() -> i32 {
    let index = thread::index();
    if gpu_startup::env::args().nth(1) == Some("overflow") {
        if index == 0 {
            rpc::call(testing::SQUARE, 1 << 32);
        }
        return 0;
    }
    let number = index * 1000 + 7;
    let squared = rpc::call(testing::SQUARE, number) == number * number;

    // One call site, two calls: even threads ask for a successor, odd ones for a square. The lanes of a warp run the
    // call together with different opcodes, as lanes that reach a shared function from different calls may: each lane
    // must be served by its own call.
    let (call, expected) =
        if index % 2 == 0 { (testing::INCREMENT, number + 1) } else { (testing::SQUARE, number * number) };
    let own_call = rpc::call(call, number) == expected;

    let len = (index * 37 % 151) as usize;
    let mut bytes = [0u8; 150];
    for (i, byte) in bytes[..len].iter_mut().enumerate() {
        *byte = (index as usize * 31 + i) as u8;
    }
    let mut reversed = [0u8; 150];
    let mut port = rpc::open(testing::REVERSE);
    port.send_n(&bytes[..len]);
    let sent_back = port.recv_n(&mut reversed);
    port.close();
    let reversed_right = sent_back == len && reversed[..len].iter().eq(bytes[..len].iter().rev());

    if squared && own_call && reversed_right { 0 } else { 1 }
}
