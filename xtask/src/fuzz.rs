//! The fuzz smoke run of `cargo xtask test`: every cargo-fuzz target of `loader/fuzz` for a few seconds, starting
//! from the committed corpus. A crash fails the run and leaves its input in `loader/fuzz/artifacts/<target>/`.
//!
//! The long runs (`docs/failures.md` records them) use the same command with `-runs=N` in place of
//! `-max_total_time`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

/// The targets of `loader/fuzz/Cargo.toml`.
pub const TARGETS: [&str; 4] = ["image", "constructors", "args", "rpc_server"];

/// Flags for every build and run, so that `cargo fuzz run` finds the build of `cargo fuzz build` current:
/// optimized with debug assertions (overflow checks), no sanitizer (the fuzzed code is safe Rust; a build without
/// AddressSanitizer is quicker to make and runs about twice as fast).
const BUILD_FLAGS: [&str; 4] = ["-O", "-a", "--sanitizer", "none"];

fn fuzz_dir() -> PathBuf {
    crate::project_root().join("loader/fuzz")
}

/// Installs cargo-fuzz where it is missing.
pub fn ensure_cargo_fuzz(sh: &Shell) -> Result<()> {
    if cmd!(sh, "cargo fuzz --version").quiet().ignore_stdout().ignore_stderr().run().is_ok() {
        return Ok(());
    }
    eprintln!("xtask: cargo-fuzz is missing; installing it with `cargo install cargo-fuzz --locked`");
    cmd!(sh, "cargo install cargo-fuzz --locked").run().context(
        "cannot install cargo-fuzz (`cargo install cargo-fuzz --locked` failed: is crates.io reachable?); \
         install it by hand to run the fuzz smoke test",
    )?;
    Ok(())
}

/// Builds every target, then runs each for `seconds` over a scratch copy of its committed corpus (libFuzzer adds
/// the inputs it finds to the corpus folder it is given; the committed one stays as it is). Fails if any target
/// crashes, times out on an input or runs out of memory.
pub fn smoke(sh: &Shell, seconds: u32) -> Result<()> {
    ensure_cargo_fuzz(sh)?;
    let root = crate::project_root();
    let fuzz_dir = fuzz_dir();
    let target_dir = fuzz_dir.join("target");
    // A CARGO_TARGET_DIR from the caller would mix these sanitizer-flagged builds with the workspace's.
    let _target = sh.push_env("CARGO_TARGET_DIR", &target_dir);

    let started = Instant::now();
    cmd!(sh, "cargo fuzz build {BUILD_FLAGS...} --fuzz-dir {fuzz_dir}")
        .run()
        .context("cannot build the fuzz targets (cargo fuzz build)")?;
    eprintln!("xtask: fuzz targets built in {:.0?}", started.elapsed());

    let scratch = root.join("target/fuzz-smoke");
    let mut crashed = Vec::new();
    for target in TARGETS {
        let corpus = scratch.join(target);
        copy_corpus(sh, &fuzz_dir.join("corpus").join(target), &corpus)?;
        let time = format!("-max_total_time={seconds}");
        let ran = cmd!(
            sh,
            "cargo fuzz run {BUILD_FLAGS...} --fuzz-dir {fuzz_dir} {target} {corpus}
                -- {time} -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1"
        )
        .run();
        if ran.is_err() {
            crashed.push(target);
        }
    }
    eprintln!("xtask: fuzz smoke run took {:.0?} in all", started.elapsed());
    if !crashed.is_empty() {
        bail!(
            "fuzz target(s) {} crashed: the inputs are in loader/fuzz/artifacts/<target>/; reproduce with \
             `cargo fuzz run --fuzz-dir loader/fuzz <target> <input>`",
            crashed.join(", ")
        );
    }
    Ok(())
}

/// `from`'s files into a fresh `to`.
fn copy_corpus(sh: &Shell, from: &Path, to: &Path) -> Result<()> {
    if sh.path_exists(to) {
        sh.remove_path(to)?;
    }
    sh.create_dir(to)?;
    for file in sh.read_dir(from).with_context(|| format!("no fuzz corpus at {}", from.display()))? {
        if let Some(name) = file.file_name() {
            sh.copy_file(&file, to.join(name))?;
        }
    }
    Ok(())
}
