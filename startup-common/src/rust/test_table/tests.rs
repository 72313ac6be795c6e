//! The test table's Rust side: what a test's result means for its thread, and the macro on the host.

use super::*;

#[test]
fn results_map_to_main_statuses() {
    assert_eq!(().status(), 0);
    assert_eq!(Ok::<(), &str>(()).status(), 0);
}

fn plain() {}
fn fallible() -> Result<(), &'static str> {
    Ok(())
}

// On the host the macro only checks the function's type and the options; these must compile.
crate::gpu_test!("plain_1", plain);
crate::gpu_test!("plain_2", plain, threads(32), blocks_xyz(2, 2, 1), timeout(5), ignore);
crate::gpu_test!("fallible_1", fallible, should_panic_with("boom"), timeout_ms(250),);
crate::gpu_test!("located_1", plain, source("src/lib.rs", 3, 4, 3, 9));
