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
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{LINKER, refused, run, scratch, write};

/// The linker with `args`, without LLVM tools: a case that reaches them fails naming them.
fn linker<I: AsRef<OsStr>>(args: impl IntoIterator<Item = I>) -> Command {
    let mut command = Command::new(LINKER);
    command.args(args).env("GPU_LLVM_TOOLS_DIR", "/nonexistent/llvm-tools");
    command
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

// --- inputs ---

#[test]
fn a_fifo_or_a_directory_input_is_refused_without_opening_it() {
    // A FIFO without a writer never opens: the linker would hang.
    let dir = scratch("linker-fifo");
    let fifo = dir.join("input.o");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
    let output = dir.join("out.ptx");
    refused(&run(linker([&fifo, Path::new("-o"), &output])), &["input.o: is not a regular file"]);
    refused(&run(linker([&dir, Path::new("-o"), &output])), &["linker-fifo: is a directory, not a linker input"]);
}

#[test]
fn dev_zero_is_refused_without_reading_it() {
    // `/dev/zero` never ends: read whole, it would fill memory; under this address-space limit, soon.
    let output = scratch("linker-dev-zero").join("out.ptx");
    let mut limited = Command::new("prlimit");
    limited.arg(format!("--as={}", 256 << 20)).arg(LINKER).args(["/dev/zero", "-o"]).arg(output);
    limited.env("GPU_LLVM_TOOLS_DIR", "/nonexistent/llvm-tools");
    refused(&run(limited), &["/dev/zero: is not a regular file"]);
}

#[test]
fn an_input_over_the_size_limit_is_refused_from_its_size() {
    let dir = scratch("linker-huge");
    let input = write(&dir, "huge.bc", b"BC\xC0\xDE");
    let len = gpu_bitcode_linker::MAX_INPUT_BYTES + 1;
    std::fs::OpenOptions::new().write(true).open(&input).and_then(|file| file.set_len(len)).expect("extend the file");
    // Read whole, the file would not fit this address space.
    let mut limited = Command::new("prlimit");
    limited.arg(format!("--as={}", 256 << 20)).arg(LINKER).arg(&input).arg("-o").arg(dir.join("out.ptx"));
    limited.env("GPU_LLVM_TOOLS_DIR", "/nonexistent/llvm-tools");
    let ran = run(limited);
    refused(&ran, &["huge.bc: is larger than the 1 GiB a linker input may have"]);
    assert!(ran.elapsed < Duration::from_secs(2), "took {:?}", ran.elapsed);
}

// --- the output ---

#[test]
fn an_output_in_a_missing_directory_is_refused_not_created() {
    let dir = scratch("linker-output-dir");
    let input = write(&dir, "in.bc", b"BC\xC0\xDE");
    let missing = dir.join("missing");
    let output = missing.join("out.ptx");
    let ran = run(linker([&input, Path::new("-o"), &output]));
    refused(&ran, &[&format!("cannot write {}: directory {} does not exist", output.display(), missing.display())]);
    assert!(!missing.exists(), "the linker created {}", missing.display());
    let file = write(&dir, "file", b"");
    let output = file.join("out.ptx");
    let ran = run(linker([&input, Path::new("-o"), &output]));
    refused(&ran, &[&format!("cannot write {}: {} is not a directory", output.display(), file.display())]);
}

// --- what the LLVM tools report ---

/// The toolchain's sysroot when it has the `llvm-tools` component, or `None` (said on stderr) when it has not and the
/// test skips.
fn sysroot_with_llvm_tools() -> Option<PathBuf> {
    let output = Command::new("rustc").args(["--print", "sysroot"]).output().ok()?;
    let sysroot = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    if tools(&sysroot).join("llvm-link").exists() {
        return Some(sysroot);
    }
    eprintln!("skipped: the toolchain at {} has no llvm-tools component", sysroot.display());
    None
}

fn tools(sysroot: &Path) -> PathBuf {
    sysroot.join("lib/rustlib").join(gpu_bitcode_linker::host_triple()).join("bin")
}

/// The linker as rustc runs it: it finds the LLVM tools from the `-L` directory of the target's libraries.
fn linker_as_rustc_runs_it<I: AsRef<OsStr>>(sysroot: &Path, args: impl IntoIterator<Item = I>) -> Command {
    let mut command = Command::new(LINKER);
    command.env_remove("GPU_LLVM_TOOLS_DIR").args(args);
    command.arg("-L").arg(sysroot.join("lib/rustlib/nvptx64-nvidia-cuda/lib/self-contained"));
    command.args(["--target", "nvptx64-nvidia-cuda"]);
    command
}

/// A bitcode module holding `_start` alone, assembled by the toolchain's `llvm-as`.
fn start_module(sysroot: &Path, dir: &Path) -> PathBuf {
    let source =
        write(dir, "start.ll", "target triple = \"nvptx64-nvidia-cuda\"\ndefine void @_start() {\n  ret void\n}\n");
    let module = dir.join("start.bc");
    let assembled = Command::new(tools(sysroot).join("llvm-as")).arg(&source).arg("-o").arg(&module).status();
    assert!(assembled.expect("run llvm-as").success(), "llvm-as failed");
    module
}

/// A file that starts as bitcode does and is none: `llvm-link` refuses it in two lines.
const CORRUPT_BITCODE: &[u8] = b"BC\xC0\xDE and then no bitcode at all";

#[test]
fn a_tool_error_is_one_line_naming_the_input() {
    let Some(sysroot) = sysroot_with_llvm_tools() else { return };
    let dir = scratch("linker-tool-error");
    let module = start_module(&sysroot, &dir);
    let corrupt = write(&dir, "corrupt.bc", CORRUPT_BITCODE);
    let output = dir.join("out.ptx");
    let ran = run(linker_as_rustc_runs_it(&sysroot, [&module, &corrupt, Path::new("-o"), &output]));
    refused(&ran, &[&format!("llvm-link failed on {}: ", corrupt.display()), "(--verbose prints all 2 lines)"]);
    // A member of an archive is named as `ARCHIVE(MEMBER)`.
    let member = write(&dir, "member.o", CORRUPT_BITCODE);
    let archive = dir.join("libbad.a");
    let archived = Command::new(tools(&sysroot).join("llvm-ar")).arg("rcS").arg(&archive).arg(&member).status();
    assert!(archived.expect("run llvm-ar").success(), "llvm-ar failed");
    let ran = run(linker_as_rustc_runs_it(&sysroot, [&module, &archive, Path::new("-o"), &output]));
    refused(&ran, &[&format!("llvm-link failed on {}(member.o): ", archive.display())]);
    assert!(!output.exists(), "a failed link left {}", output.display());
}

#[test]
fn verbose_prints_each_tool_and_its_whole_output() {
    let Some(sysroot) = sysroot_with_llvm_tools() else { return };
    let dir = scratch("linker-verbose");
    let module = start_module(&sysroot, &dir);
    let corrupt = write(&dir, "corrupt.bc", CORRUPT_BITCODE);
    let output = dir.join("out.ptx");
    for flag in ["-v", "--verbose"] {
        let ran =
            run(linker_as_rustc_runs_it(&sysroot, [&module, &corrupt, Path::new(flag), Path::new("-o"), &output]));
        assert_eq!(ran.code, Some(1), "{ran:#?}");
        let last = ran.stderr.lines().last().unwrap_or_default();
        assert!(last.starts_with("gpu-bitcode-linker: llvm-link failed on "), "{ran:#?}");
        assert!(ran.stderr.contains("gpu-bitcode-linker: running ") && ran.stderr.contains("llvm-link"), "{ran:#?}");
        assert!(ran.stderr.contains("loading file"), "not the whole output of llvm-link: {ran:#?}");
    }
}

#[test]
fn a_module_links_to_ptx_quietly() {
    let Some(sysroot) = sysroot_with_llvm_tools() else { return };
    let dir = scratch("linker-links");
    let module = start_module(&sysroot, &dir);
    let output = dir.join("out.ptx");
    let ran = run(linker_as_rustc_runs_it(&sysroot, [&module, Path::new("--target-cpu"), Path::new("sm_80")]));
    assert_eq!((ran.code, ran.stderr.as_str()), (Some(1), "gpu-bitcode-linker: no output file given (`-o`)\n"));
    let args = [&module, Path::new("--target-cpu"), Path::new("sm_80"), Path::new("-o"), &output];
    let ran = run(linker_as_rustc_runs_it(&sysroot, args));
    assert_eq!((ran.code, ran.stderr.as_str()), (Some(0), ""), "{ran:#?}");
    let ptx = std::fs::read_to_string(&output).expect("the PTX");
    assert!(ptx.contains(".target sm_80") && ptx.contains("_start"), "{ptx}");
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert!(!leftovers.iter().any(|name| name.to_string_lossy().contains(".link-")), "{leftovers:?}");
}

/// An AMD module as rustc emits a std program's: a kernel `_start` that reads a thread-local in the global address
/// space, and the runtime's `__emutls_get_address` (here a stand-in that hands out the initial value).
const AMD_MODULE: &str = r#"target datalayout = "e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9"
target triple = "amdgcn-amd-amdhsa"

@COUNT = internal thread_local addrspace(1) global i64 7, align 8
@OUT = addrspace(1) global i64 0, align 8

define amdgpu_kernel void @_start() {
  %p = call align 8 ptr addrspace(1) @llvm.threadlocal.address.p1(ptr addrspace(1) @COUNT)
  %v = load i64, ptr addrspace(1) %p, align 8
  store i64 %v, ptr addrspace(1) @OUT, align 8
  ret void
}

define ptr @__emutls_get_address(ptr %control) {
  %field = getelementptr inbounds i8, ptr %control, i64 24
  %initial = load ptr, ptr %field, align 8
  ret ptr %initial
}

declare nonnull ptr addrspace(1) @llvm.threadlocal.address.p1(ptr addrspace(1) nonnull)
"#;

#[test]
fn an_amd_module_with_thread_locals_links_to_a_code_object() {
    let Some(sysroot) = sysroot_with_llvm_tools() else { return };
    let dir = scratch("linker-amd");
    let source = write(&dir, "start.ll", AMD_MODULE);
    let module = dir.join("start.bc");
    let assembled = Command::new(tools(&sysroot).join("llvm-as")).arg(&source).arg("-o").arg(&module).status();
    assert!(assembled.expect("run llvm-as").success(), "llvm-as failed");
    let output = dir.join("out.elf");
    let mut command = Command::new(LINKER);
    command.env_remove("GPU_LLVM_TOOLS_DIR").arg(&module).arg("-o").arg(&output);
    command.args(["--target", "amdgcn-amd-amdhsa", "--target-cpu", "gfx90a", "--export-symbol", "_start"]);
    command.arg("-L").arg(sysroot.join("lib/rustlib/amdgcn-amd-amdhsa/lib"));
    let ran = run(command);
    assert_eq!((ran.code, ran.stderr.as_str()), (Some(0), ""), "{ran:#?}");
    let image = std::fs::read(&output).expect("the code object");
    // An ELF shared object for AMDGPU (machine 0xe0) with the kernel's descriptor, as the HSA runtime loads it.
    assert_eq!(&image[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([image[16], image[17]]), 3, "not a shared object");
    assert_eq!(u16::from_le_bytes([image[18], image[19]]), 0xe0, "not for AMDGPU");
    assert!(image.windows(9).any(|w| w == b"_start.kd"), "no kernel descriptor for _start");
}

#[test]
fn a_target_cpu_or_feature_llvm_does_not_know_is_refused() {
    let Some(sysroot) = sysroot_with_llvm_tools() else { return };
    let dir = scratch("linker-unknown-target");
    let module = start_module(&sysroot, &dir);
    let output = dir.join("out.ptx");
    for (flags, problem) in [
        (&["--target-cpu", "sm_999"][..], "unknown target CPU `sm_999`"),
        (&["--target-cpu", "sm_80", "--target-feature=+ptx70,+bogus"], "unknown target feature `+bogus`"),
    ] {
        let mut command = linker_as_rustc_runs_it(&sysroot, [&module]);
        command.args(flags).arg("-o").arg(&output);
        refused(&run(command), &[problem]);
        assert!(!output.exists(), "a refused link left {}", output.display());
    }
}

/// A std test binary built without `panic = "abort"`: its `main` calls libtest's `test_main_static`.
const SPAWNING_HARNESS: &str = "target triple = \"nvptx64-nvidia-cuda\"\n\
    @counter = thread_local global i32 0\n\
    define void @_RNvCs1_4test16test_main_static(ptr %0) {\n  ret void\n}\n\
    define i32 @main(i32 %0, ptr %1) {\n  %t = call ptr @llvm.threadlocal.address.p0(ptr @counter)\n  \
    call void @_RNvCs1_4test16test_main_static(ptr %t)\n  ret i32 0\n}\n\
    declare ptr @llvm.threadlocal.address.p0(ptr)\n";

#[test]
fn a_test_binary_whose_harness_spawns_a_thread_per_test_is_refused() {
    let Some(sysroot) = sysroot_with_llvm_tools() else { return };
    let dir = scratch("linker-spawning-harness");
    let module = dir.join("harness.bc");
    let source = write(&dir, "harness.ll", SPAWNING_HARNESS);
    let assembled = Command::new(tools(&sysroot).join("llvm-as")).arg(&source).arg("-o").arg(&module).status();
    assert!(assembled.expect("run llvm-as").success(), "llvm-as failed");
    let output = dir.join("out.ptx");
    let ran = run(linker_as_rustc_runs_it(&sysroot, [&module, Path::new("-o"), &output]));
    refused(&ran, &["`test::test_main_static`", "-Zpanic-abort-tests"]);
    assert!(!output.exists(), "a refused link left {}", output.display());
}
