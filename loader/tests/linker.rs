//! `gpu-bitcode-linker` on bad inputs: every one must end fast with exit 1 and one line on stderr that names the
//! problem, never a panic, a hang or unbounded memory. Each case runs the real binary under the watchdog of
//! `common::run`.
//!
//! The command line, the output's directory and the inputs are checked before any LLVM tool runs, so those cases point
//! `GPU_LLVM_TOOLS_DIR` at a directory that does not exist. The cases that need `llvm-link`, `opt` and `llc` find them
//! as rustc makes the linker find them (`-L <sysroot>/lib/rustlib/...`), and skip themselves where the toolchain lacks
//! its `llvm-tools` component.

mod common;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::process::Command;

use common::{Ran, run, scratch};

const LINKER: &str = env!("CARGO_BIN_EXE_gpu-bitcode-linker");

/// The linker with `args`, without LLVM tools: a case that reaches them fails naming them.
fn linker<I: AsRef<OsStr>>(args: impl IntoIterator<Item = I>) -> Command {
    let mut command = Command::new(LINKER);
    command.args(args).env("GPU_LLVM_TOOLS_DIR", "/nonexistent/llvm-tools");
    command
}

#[track_caller]
fn refused(ran: &Ran, words: &[&str]) {
    ran.fails_as("gpu-bitcode-linker", words);
}

fn os(bytes: &[u8]) -> OsString {
    OsString::from_vec(bytes.to_vec())
}

// --- the command line ---

#[test]
fn a_non_utf8_value_where_a_string_is_needed() {
    for (flag, value, shown) in [
        ("--target-cpu", &b"sm_\xff"[..], "the value of `--target-cpu` is not UTF-8: `sm_\u{fffd}`"),
        ("--export-symbol", b"ma\xffn", "the value of `--export-symbol` is not UTF-8: `ma\u{fffd}n`"),
        ("--target", b"nvptx\xfe", "the value of `--target` is not UTF-8: `nvptx\u{fffd}`"),
    ] {
        refused(&run(linker([os(b"a.o"), flag.into(), os(value), "-o".into(), "out.ptx".into()])), &[shown]);
    }
    let feature = os(b"--target-feature=+ptx\xff");
    refused(
        &run(linker([os(b"a.o"), feature, "-o".into(), "out.ptx".into()])),
        &["the value of `--target-feature` is not UTF-8: `+ptx\u{fffd}`"],
    );
    refused(&run(linker([os(b"a.o"), os(b"-\xff"), "-o".into(), "out.ptx".into()])), &["unknown option `-\u{fffd}`"]);
}

#[test]
fn non_utf8_paths_are_taken_as_paths() {
    let dir = scratch("linker-non-utf8-paths");
    let input = dir.join(OsStr::from_bytes(b"in-\xff.o"));
    let ran = run(linker([
        input.as_os_str(),
        OsStr::new("-L"),
        OsStr::from_bytes(b"/lib-\xff"),
        OsStr::new("-o"),
        dir.join(OsStr::from_bytes(b"out-\xfe.ptx")).as_os_str(),
    ]));
    refused(&ran, &["cannot read ", "in-\u{fffd}.o", "No such file or directory"]);
}

#[test]
fn a_missing_input_whose_name_has_a_newline_is_named_on_one_line() {
    let dir = scratch("linker-newline");
    let ran = run(linker([dir.join("two\nlines.o").as_os_str(), OsStr::new("-o"), dir.join("out.ptx").as_os_str()]));
    refused(&ran, &["cannot read ", "two\\nlines.o", "No such file or directory"]);
}
