//! What only the Rust API (`gpu-startup`) uses: the printing macros ([`print`]) and a test binary's test table
//! ([`test_table`], behind `#[gpu_startup::test]`).

pub mod print;
pub mod test_table;
