//! The bitcode linker rustc calls for linker flavor `llbc` (every nvptx image, every AMD std program), standing in
//! for rustup's `llvm-bitcode-linker` component (not installable for this toolchain, see `docs/architecture.md`).
//!
//! It takes exactly what rustc passes:
//! `--export-symbol NAME ... INPUTS... -L DIR --target TRIPLE --target-cpu CPU --target-feature=FEATURES -o OUT -O3 [--debug]`
//! where inputs are bitcode objects or archives (rlibs, staticlibs) holding bitcode. It pulls the bitcode out, links it
//! with `llvm-link`, internalizes everything but the exported symbols and the globals the loader reads, optimizes with
//! `opt`, and writes PTX with `llc` (for `amdgcn-amd-amdhsa`, an object that `rust-lld` links into a code object). The
//! LLVM tools come from the toolchain's `llvm-tools` component (found next to the `-L <sysroot>/lib/rustlib/...`
//! directory rustc passes), or from `$GPU_LLVM_TOOLS_DIR`. `-v`/`--verbose`, which rustc never passes, prints each
//! tool's command line and all it says.
//!
//! A failure is one line, `gpu-bitcode-linker: <problem>`, and exit code 1.

use std::ffi::OsString;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Paths need not be UTF-8; `LinkRequest::parse` refuses any other value that is not.
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match gpu_bitcode_linker::LinkRequest::parse(&args).and_then(|request| request.link()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("gpu-bitcode-linker: {}", one_line(&error.to_string()));
            ExitCode::FAILURE
        }
    }
}

/// The message with its line breaks escaped: a path may hold one, and the error is one line.
fn one_line(message: &str) -> String {
    message.replace('\r', "\\r").replace('\n', "\\n")
}
