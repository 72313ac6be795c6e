//! A `should_panic` test that returns a `Result` fails to compile.
#![no_std]
#![no_main]

#[gpu_startup::test(should_panic)]
fn divides() -> Result<(), &'static str> {
    Err("by zero")
}
