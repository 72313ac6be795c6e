//! A static check that C's variadic calls and the startup's `printf` agree on where each argument lies.
//!
//! The startup reads a C `va_list` with Rust's `VaList::next_arg` (through `startup_common::libc::printf::VaArgs`); C
//! programs fill it with clang. Both go through LLVM: clang's call is lowered by the `ExpandVariadics` pass (on
//! NVIDIA each argument at its natural alignment, on AMD in 4-byte slots), rustc lowers `next_arg` itself. The
//! check links a clang caller that passes `int, long, double, char *, int, double` with a Rust callee that reads them
//! through `VaArgs`, lowers the variadics and optimizes: if both sides agree, LLVM folds every value through the
//! buffer, and the caller stores its own constants. It needs no GPU, so it covers AMD, where the suite cannot run
//! here.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use gpu_startup_targets::Target;
use xshell::{Shell, cmd};

use crate::toolchain;

const CALLER: &str = r#"void probe_read(unsigned long long *out, ...);
void probe(unsigned long long *out, const char *text) { probe_read(out, 1, -2L, 3.0, text, 5, 6.5); }
"#;

const CALLEE: &str = r#"#![no_std]
#![feature(c_variadic)]
use startup_common::libc::printf::{Arguments, VaArgs};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn probe_read(out: *mut u64, args: ...) {
    // SAFETY: the caller passes exactly these kinds, in this order, and room for six words.
    unsafe {
        let mut args = VaArgs::new(args);
        let values = [
            u64::from(args.next_u32()),
            args.next_u64(),
            args.next_f64().to_bits(),
            args.next_pointer() as u64,
            u64::from(args.next_u32()),
            args.next_f64().to_bits(),
        ];
        for (index, value) in values.into_iter().enumerate() {
            out.add(index).write(value);
        }
    }
}
"#;

/// What the optimized caller must store: each argument as the callee reads it (3.0 and 6.5 as their bits).
const EXPECTED_STORES: [&str; 5] = [
    "store i64 1,",
    "store i64 -2,",
    "store i64 4613937818241073152,",
    "store i64 5,",
    "store i64 4619004367821864960,",
];

/// Checks the startup built as `startup` (its archive; the crates' rlibs are in `deps/` beside it) against `clang`
/// for `target` and `arch`, in `work_dir`.
pub fn check(
    sh: &Shell,
    clang: &Path,
    target: &'static Target,
    arch: &str,
    sysroot: &Path,
    startup: &Path,
    work_dir: &Path,
) -> Result<()> {
    std::fs::create_dir_all(work_dir)?;
    let deps = startup.parent().context("the startup archive has no folder")?.join("deps");
    let startup_common = newest(&deps, "libstartup_common-")?;
    let triple = target.triple;
    let (caller_c, callee_rs) = (work_dir.join("caller.c"), work_dir.join("callee.rs"));
    std::fs::write(&caller_c, CALLER)?;
    std::fs::write(&callee_rs, CALLEE)?;
    let (caller, callee) = (work_dir.join("caller.bc"), work_dir.join("callee.bc"));
    let flags = crate::clang::clang_flags(target, arch)?;
    cmd!(sh, "{clang} --target={triple} {flags...} -O2 -c {caller_c} -o {caller}").quiet().run()?;
    let cpu = format!("-Ctarget-cpu={arch}");
    let extern_arg = format!("startup_common={}", startup_common.display());
    // In the project root, `rustc` is the project's toolchain (`rust-toolchain.toml`), which built the startup's rlibs.
    cmd!(
        sh,
        "rustc --edition 2024 --target {triple} {cpu} -Copt-level=3 -Cpanic=abort --crate-type lib --emit llvm-bc
         -L {deps} --extern {extern_arg} {callee_rs} -o {callee}"
    )
    .quiet()
    .run()?;
    let tools = toolchain::llvm_tools_dir(sysroot);
    let (linked, optimized) = (work_dir.join("linked.bc"), work_dir.join("optimized.ll"));
    let (llvm_link, opt) = (tools.join("llvm-link"), tools.join("opt"));
    cmd!(sh, "{llvm_link} {caller} {callee} -o {linked}").quiet().run()?;
    cmd!(
        sh,
        "{opt} -passes=expand-variadics,default<O3> -expand-variadics-override=lowering {linked} -S -o {optimized}"
    )
    .quiet()
    .run()?;
    let ir = std::fs::read_to_string(&optimized)?;
    check_folded(&ir).with_context(|| {
        format!("{target} ({arch}): the startup's printf does not read a C caller's variadic arguments where clang puts them (see {})", optimized.display())
    })
}

/// Whether the body of `probe` in `ir` stores the caller's constants, with nothing left to read.
fn check_folded(ir: &str) -> Result<()> {
    let start = ir.find("@probe(").context("no function `probe` in the optimized module")?;
    let body = &ir[start..];
    let body = &body[..body.find("\n}\n").context("`probe` has no end")?];
    ensure!(!body.contains(" load ") && !body.contains(" call "), "`probe` still loads or calls:\n{body}");
    for store in EXPECTED_STORES {
        if !body.contains(store) {
            bail!("`probe` does not `{store} ...`:\n{body}");
        }
    }
    ensure!(body.contains("ptrtoint ptr %1 to i64"), "`probe` does not store the string's address:\n{body}");
    Ok(())
}

/// The newest file in `dir` whose name starts with `prefix` and ends with `.rlib`.
fn newest(dir: &Path, prefix: &str) -> Result<PathBuf> {
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) && name.ends_with(".rlib") {
            let modified = entry.metadata()?.modified()?;
            if best.as_ref().is_none_or(|(time, _)| modified > *time) {
                best = Some((modified, entry.path()));
            }
        }
    }
    best.map(|(_, path)| path).with_context(|| format!("no {prefix}*.rlib in {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_fully_folded_probe_passes() {
        let good = "define void @probe(ptr %0, ptr %1) {\n  store i64 1, ptr %0\n  store i64 -2, ptr %2\n  \
                    store i64 4613937818241073152, ptr %3\n  %5 = ptrtoint ptr %1 to i64\n  store i64 5, ptr %4\n  \
                    store i64 4619004367821864960, ptr %6\n  ret void\n}\n";
        check_folded(good).unwrap();
        assert!(check_folded(&good.replace("store i64 5,", "store i64 0,")).is_err());
        assert!(check_folded(&good.replace("  ret void", "  %7 = load i64, ptr %1\n  ret void")).is_err());
        assert!(check_folded("define void @other() {\n}\n").is_err());
    }
}
