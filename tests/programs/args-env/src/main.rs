//! Arguments and environment, as LLVM libc's args_test checks: run with `1 2 3` and `FRANCE=Paris`,
//! `GERMANY=Berlin` in the environment; every thread checks them and the results are ORed.
#![no_std]
#![no_main]

use gpu_startup::env;

#[gpu_startup::main]
fn main() -> i32 {
    let mut failures = 0;
    let args = env::args();
    if args.len() != 4 {
        failures |= 1;
    }
    if !args.skip(1).eq(["1", "2", "3"]) {
        failures |= 2;
    }
    // The `_os` view of the same array: C strings, `argv[0]` first.
    if env::args_os().map(|arg| arg.to_bytes()).ne(env::args().map(str::as_bytes)) {
        failures |= 4;
    }
    if env::var("FRANCE") != Ok("Paris") || env::var_os("GERMANY") != Some(&b"Berlin"[..]) {
        failures |= 8;
    }
    if !env::vars().any(|pair| pair == ("FRANCE", "Paris")) || env::var("NOT_SET").is_ok() {
        failures |= 16;
    }
    failures
}
