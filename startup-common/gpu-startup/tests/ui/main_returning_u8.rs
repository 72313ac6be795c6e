#![no_std]
#![no_main]

#[gpu_startup::main]
fn main() -> u8 {
    0
}
