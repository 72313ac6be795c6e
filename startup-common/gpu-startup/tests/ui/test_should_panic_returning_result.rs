#![no_std]
#![no_main]

#[gpu_startup::test(should_panic)]
fn divides() -> Result<(), &'static str> {
    Err("by zero")
}
