//! `main` does nothing: the startup's own cost, as the benchmarks measure it.
#![no_std]
#![no_main]

#[gpu_startup::main]
fn main() {}
