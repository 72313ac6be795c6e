#![no_std]
#![no_main]

#[gpu_startup::main]
unsafe fn main() -> i32 {
    0
}
