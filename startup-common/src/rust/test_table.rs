//! The test table's Rust side: [`gpu_test!`](crate::gpu_test), which `#[gpu_startup::test]` expands to, and what a
//! test's result means for its thread ([`TestResult`]). The table's names and its metadata's encoding are the
//! contract's (`gpu_startup_protocol::test_table`, re-exported here), which the loader reads back.

use core::ffi::c_int;

pub use gpu_startup_protocol::test_table::*;

/// What a test function may return: `()`, or `Result<(), E>` with `E: Debug` (an `Err` fails the test, as under
/// libtest). [`gpu_test!`](crate::gpu_test)'s trampoline turns it into the thread's `main` result.
#[diagnostic::on_unimplemented(
    message = "a GPU test returns `()` or `Result<(), E>` with `E: Debug`, not `{Self}`",
    label = "this test's result"
)]
pub trait TestResult {
    /// 0 for a pass; otherwise prints why on stderr and returns non-zero.
    fn status(self) -> c_int;
}

impl TestResult for () {
    fn status(self) -> c_int {
        0
    }
}

/// The `main` result of a thread whose test returned `Err`.
pub const ERR_STATUS: c_int = 1;

impl<E: core::fmt::Debug> TestResult for Result<(), E> {
    fn status(self) -> c_int {
        match self {
            Ok(()) => 0,
            Err(error) => {
                crate::eprintln!("Error: {error:?}");
                ERR_STATUS
            }
        }
    }
}

/// Registers a test: `gpu_test!("ID", function)` or `gpu_test!("ID", function, option, ...)`, where `function` is a
/// `fn()` or a `fn() -> Result<(), E: Debug>` in scope, `ID` makes the test's symbols unique in the binary, and each
/// option is one of [`TestSpec`]'s builders: `ignore`, `should_panic`, `should_panic_with("text")`, `threads(n)`,
/// `threads_xyz(x, y, z)`, `blocks(n)`, `blocks_xyz(x, y, z)`, `timeout(seconds)`, `timeout_ms(ms)`,
/// `source(path, start_line, start_column, end_line, end_column)` (without it, the test is where the macro is).
///
/// Programs write `#[gpu_startup::test]`, which checks the function and its options, picks the `ID` (the function's
/// name and a hash of where it is) and expands to this:
///
/// ```ignore
/// startup_common::gpu_test!(
///     "warp_sum_is_496_c0ffee0123456789", warp_sum_is_496, threads(32), timeout(5), source("src/lib.rs", 8, 4, 8, 19)
/// );
/// ```
///
/// The test's name is its module path without the crate, then the function (`tests::warp_sum_is_496`), as libtest
/// names tests. It expands to a trampoline with `main`'s prototype that calls the function, and the two globals of
/// the [test table](crate::rust::test_table), `__gpu_test_entry_ID` and `__gpu_test_meta_ID` (two tests with one `ID`
/// collide at link time: an error, never a wrong table). Off the GPU it only checks the function's type and the
/// options.
#[macro_export]
macro_rules! gpu_test {
    ($id:literal, $function:ident $(, $option:ident $( ( $($argument:expr),* $(,)? ) )? )* $(,)?) => {
        const _: () = {
            const SPEC: $crate::rust::test_table::TestSpec<'static> =
                $crate::rust::test_table::TestSpec::new(concat!(module_path!(), "::", stringify!($function)))
                    .source(file!(), line!(), column!(), line!(), column!())
                    $( .$option( $( $($argument),* )? ) )*;
            const LEN: usize = SPEC.encoded_len();

            unsafe extern "C" fn trampoline(
                _argc: ::core::ffi::c_int,
                _argv: *mut *mut ::core::ffi::c_char,
                _envp: *mut *mut ::core::ffi::c_char,
            ) -> ::core::ffi::c_int {
                $crate::rust::test_table::TestResult::status($function())
            }

            #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
            #[used]
            #[unsafe(export_name = concat!($crate::__gpu_test_entry_prefix!(), $id))]
            static ENTRY: $crate::MainFn = trampoline;

            #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
            #[used]
            #[unsafe(export_name = concat!($crate::__gpu_test_meta_prefix!(), $id))]
            static META: [u8; LEN] = SPEC.encode::<LEN>();

            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            const _: ($crate::MainFn, [u8; LEN]) = (trampoline, SPEC.encode::<LEN>());
        };
    };
}

#[cfg(test)]
mod tests;
