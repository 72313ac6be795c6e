//! The C library on the device: what `<stdio.h>`, `<errno.h>` and `<stdlib.h>` give a C or C++ program (and what the
//! Rust API's files and output are built on). The formatting engine and the `printf` family ([`printf`]), `FILE *`
//! streams ([`stdio`]), files and stdin over RPC ([`files`]), error numbers and each thread's `errno` ([`errno`]),
//! the device heap ([`heap`]) and the output path to stdout, stderr and files ([`io`]). `target_runtime!` exports
//! the C functions.

pub mod errno;
pub mod files;
pub mod heap;
pub mod io;
pub mod printf;
pub mod stdio;
