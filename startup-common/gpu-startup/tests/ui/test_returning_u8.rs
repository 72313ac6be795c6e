#![no_std]
#![no_main]

#[gpu_startup::test]
fn counts() -> u8 {
    0
}
