//! `cargo xtask test`, `cargo xtask run` and `cargo xtask bench`: the GPU suite end to end (`cargo xtask bundle` packs
//! it for a machine without Rust: `bundle.rs`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use gpu_startup_targets::{AMDGPU, NVPTX, Target};
use xshell::{Shell, cmd};

use crate::build::{self, BuildOptions};
use crate::gpus::Gpus;
use crate::image::{BuiltImage, check_images, check_size_budgets};

/// Builds the release host binaries the suite runs: `gpu-loader` and `gpu-suite` (and `gpu-test-loader`, which the
/// suite finds next to `gpu-loader`, and `gpu-bench`).
pub fn build_host_binaries(sh: &Shell) -> Result<(PathBuf, PathBuf)> {
    let root = crate::project_root();
    cmd!(sh, "cargo build --quiet --release --package loader --package tests").run()?;
    Ok((root.join("target/release/gpu-loader"), root.join("target/release/gpu-suite")))
}

/// `cargo xtask bench`: the benchmarks on this machine's NVIDIA GPU; the table on stdout, JSON in
/// `target/bench.json`, Markdown in `target/bench.md`. With `write_docs`, the Markdown (the results of this one run,
/// headed by the GPU, the commit and the date) becomes the "Latest results" of `docs/performance.md`.
pub fn bench(sh: &Shell, gpu_arch: Option<String>, write_docs: bool, bench_args: &[String]) -> Result<()> {
    if write_docs && bench_args.iter().any(|arg| arg.starts_with("--only")) {
        bail!("--write-docs puts one whole run in docs/performance.md: leave out --only");
    }
    if !Gpus::detect().nvidia {
        bail!("the benchmarks need an NVIDIA GPU, and none was found on this machine");
    }
    let images =
        build::build(sh, &BuildOptions { targets: vec![&NVPTX], gpu_arch, release: true, programs: Vec::new() })?;
    // The std programs and the real crates' tests (built, not run here: the benchmarks run them).
    crate::std_programs::check(sh, &[&NVPTX])?;
    crate::real_crates::check(sh, Gpus::default())?;
    let dir = gather_images(&images, &NVPTX)?.context("no images were built")?;
    let host_tests = crate::real_crates::host_dir();
    let (loader, _) = build_host_binaries(sh)?;
    let root = crate::project_root();
    let bench = root.join("target/release/gpu-bench");
    let json = root.join("target/bench.json");
    let markdown = root.join("target/bench.md");
    let commit = cmd!(sh, "git describe --always --dirty --abbrev=7").read()?;
    cmd!(
        sh,
        "{bench} --images {dir} --loader {loader} --host-tests {host_tests} --json {json} --markdown {markdown} --commit {commit} {bench_args...}"
    )
    .run()?;
    if write_docs {
        let docs = root.join("docs/performance.md");
        let page = std::fs::read_to_string(&docs)?;
        let results = std::fs::read_to_string(&markdown)?;
        std::fs::write(&docs, with_latest_results(&page, &results)?)?;
        println!("wrote the results into {}", docs.display());
    }
    Ok(())
}

/// The heading of the section of `docs/performance.md` that holds one run's results as `gpu-bench` writes them.
const LATEST_RESULTS: &str = "## Latest results\n";

/// `page` with the body of its "Latest results" section (up to the next heading of its level) replaced by `results`.
fn with_latest_results(page: &str, results: &str) -> Result<String> {
    let start = page.find(LATEST_RESULTS).context("docs/performance.md has no \"## Latest results\" section")?
        + LATEST_RESULTS.len();
    let end = page[start..].find("\n## ").map_or(page.len(), |at| start + at + 1);
    let gap = if end < page.len() { "\n\n" } else { "\n" };
    Ok(format!("{}\n{}{gap}{}", &page[..start], results.trim_end(), &page[end..]))
}

/// Options of `cargo xtask test`.
#[derive(Clone, Debug)]
pub struct TestOptions {
    pub require_gpu: bool,
    pub targets: Vec<&'static Target>,
    pub gpu_arch: Option<String>,
    /// Passed to the GPU suite (libtest arguments: a name filter, `--exact`, ...).
    pub suite_args: Vec<String>,
    /// Skip the host tests and checks: only build and run the GPU suite.
    pub gpu_only: bool,
    /// Run the GPU suite under these compute-sanitizer tools (comma-separated; empty: all four) instead.
    pub sanitize: Option<String>,
}

/// The program `cargo xtask test` also builds in the dev profile: constructors, destructors and printing, and the
/// one the dev-profile amdgpu build first failed on.
const DEV_PROFILE_PROGRAM: &str = "init-fini";

/// Builds everything, runs the host tests and the static checks, then the GPU suite on every GPU the machine has.
pub fn test(sh: &Shell, options: &TestOptions) -> Result<()> {
    if let Some(tools) = &options.sanitize {
        return sanitize(sh, options, tools);
    }
    let gpus = Gpus::detect();
    if options.require_gpu && options.targets.iter().all(|&t| !gpus.has(t)) {
        bail!("--require-gpu: no GPU for {} found on this machine", target_names(&options.targets));
    }
    if !options.gpu_only {
        // A plain `cargo xtask build` makes dev-profile images, which take other paths through rustc (incremental
        // compilation once stopped the amdgpu build): one program per target is built and checked that way too.
        // The release build below replaces its images.
        let dev_images = build::build(
            sh,
            &BuildOptions {
                targets: options.targets.clone(),
                gpu_arch: options.gpu_arch.clone(),
                release: false,
                programs: vec![DEV_PROFILE_PROGRAM.to_owned()],
            },
        )?;
        check_images(&dev_images)?;
    }
    let images = build::build(
        sh,
        &BuildOptions {
            targets: options.targets.clone(),
            gpu_arch: options.gpu_arch.clone(),
            release: true,
            programs: Vec::new(),
        },
    )?;
    check_images(&images)?;
    check_size_budgets(&images)?;
    if !options.gpu_only {
        host_tests(sh)?;
        crate::out_of_tree::check(sh, gpus)?;
        crate::std_programs::check(sh, &options.targets)?;
        crate::out_of_tree_std::check(sh, gpus)?;
        crate::real_crates::check(sh, gpus)?;
    }
    let (loader, suite) = build_host_binaries(sh)?;
    let mut failed = Vec::new();
    for &target in &options.targets {
        let Some(dir) = gather_images(&images, target)? else { continue };
        let target_name = target.name;
        let args = &options.suite_args;
        // Without a GPU of its kind, a target's images still get the cases that need none (a test binary's list).
        let without_gpu = (!gpus.has(target)).then_some("--without-gpu");
        let suite_run =
            cmd!(sh, "{suite} --loader {loader} --images {dir} --target {target_name} {without_gpu...} {args...}");
        if suite_run.run().is_err() {
            failed.push(target_name);
        }
    }
    if gpus.none() {
        println!(
            "xtask: GPU suite SKIPPED: no GPU on this machine (no NVIDIA driver with a device, no /dev/kfd); only \
             its cases that need no GPU ran. Everything else was built and tested; run `cargo xtask test` on a GPU \
             machine, or carry `cargo xtask bundle` there."
        );
    }
    if !failed.is_empty() {
        bail!("the GPU suite failed on {}", failed.join(", "));
    }
    Ok(())
}

/// `cargo xtask test --sanitize[=TOOLS]`: builds the NVIDIA images and runs the GPU suite under compute-sanitizer's
/// tools on this machine's NVIDIA GPU; the host tests are not run (they do not run on the GPU).
fn sanitize(sh: &Shell, options: &TestOptions, tools: &str) -> Result<()> {
    if !Gpus::detect().nvidia {
        bail!("--sanitize: compute-sanitizer needs an NVIDIA GPU, and none was found on this machine");
    }
    let images = build::build(
        sh,
        &BuildOptions {
            targets: vec![&NVPTX],
            gpu_arch: options.gpu_arch.clone(),
            release: true,
            programs: Vec::new(),
        },
    )?;
    check_images(&images)?;
    let (loader, suite) = build_host_binaries(sh)?;
    let dir = images.first().and_then(|i| i.path.parent()).context("no images were built")?;
    let args = &options.suite_args;
    let sanitize = format!("--sanitize={tools}");
    cmd!(sh, "{suite} --loader {loader} --images {dir} --target nvptx {sanitize} {args...}")
        .run()
        .context("the GPU suite failed under compute-sanitizer")?;
    Ok(())
}

/// The host side: every workspace test (unit, integration, loom-free), then the HSA bindings' freshness where the
/// ROCm headers are installed.
fn host_tests(sh: &Shell) -> Result<()> {
    cmd!(sh, "cargo test --workspace").run().context("host tests failed")?;
    // The workspace's test build turns on features that one package's own `cargo test` may lack.
    cmd!(sh, "cargo test --quiet -p startup-common --no-run")
        .run()
        .context("`cargo test -p startup-common` does not build")?;
    // The RPC hand-off (2 clients and 1 server), the heap's lock-free parts (2 or 3 threads on a slab) and the guard
    // of C++'s function-local statics under loom, bounded model checking, in its own target folder because
    // `--cfg loom` changes every crate's build.
    let loom_target = crate::project_root().join("target/loom");
    cmd!(sh, "cargo test --quiet --release -p startup-common --features host --lib loom")
        .env("RUSTFLAGS", "--cfg loom")
        .env("CARGO_TARGET_DIR", &loom_target)
        .run()
        .context("the loom models of the RPC protocol, the heap and the C++ guards failed")?;
    // The protocol's tests under Miri (undefined behaviour, data races, aliasing): the unit tests, and the simulated
    // warps (lane groups of several threads; ports of their own in block memory, and shared ones).
    crate::toolchain::ensure_component(sh, "miri")?;
    cmd!(sh, "cargo miri test --quiet -p startup-common --features host --lib rpc")
        .env("CARGO_TARGET_DIR", crate::project_root().join("target/miri"))
        .run()
        .context("the RPC protocol's tests failed under Miri")?;
    cmd!(sh, "cargo miri test --quiet -p startup-common --features host --test rpc_simt")
        .env("CARGO_TARGET_DIR", crate::project_root().join("target/miri"))
        .run()
        .context("the RPC protocol's simulated-warp tests failed under Miri")?;
    // The heap's tests under Miri, scaled down (about a minute and a half): one thread, then many threads and
    // simulated warps at once.
    cmd!(sh, "cargo miri test --quiet -p startup-common --features host --lib heap")
        .env("CARGO_TARGET_DIR", crate::project_root().join("target/miri"))
        .run()
        .context("the heap's tests failed under Miri")?;
    cmd!(sh, "cargo miri test --quiet -p startup-common --features host --test heap_threads")
        .env("CARGO_TARGET_DIR", crate::project_root().join("target/miri"))
        .run()
        .context("the heap's tests with many threads failed under Miri")?;
    // The exit registry and the guards of C++'s function-local statics, with real threads, under Miri.
    cmd!(sh, "cargo miri test --quiet -p startup-common --features host --lib -- atexit cxxabi")
        .env("CARGO_TARGET_DIR", crate::project_root().join("target/miri"))
        .run()
        .context("the exit registry's and the C++ guards' tests failed under Miri")?;
    // A short run of each fuzz target over the committed corpus (the long runs are in docs/failures.md).
    crate::fuzz::smoke(sh, 10)?;
    if Path::new("/usr/include/hsa/hsa.h").is_file() {
        crate::bindgen::run(sh, true)?;
    } else {
        println!("xtask: HSA bindings check skipped: /usr/include/hsa/hsa.h is not installed (libhsa-runtime-dev)");
    }
    Ok(())
}

fn target_names(targets: &[&'static Target]) -> String {
    targets.iter().map(|t| t.name).collect::<Vec<_>>().join(" or ")
}

/// `cargo xtask run PROGRAM [LOADER OPTIONS] [-- ARGS]`: builds one program (a folder of tests/programs, or the
/// path of any crate) for the GPU this machine has and runs it with gpu-loader (gpu-test-loader for a program of
/// tests/programs that uses the test operations); returns the loader's exit code.
pub fn run(sh: &Shell, program: &str, gpu_arch: Option<String>, loader_args: &[String]) -> Result<i32> {
    let known = build::rust_programs()?;
    let crate_dir = Path::new(program);
    if !known.iter().any(|p| p == program) && !crate_dir.join("Cargo.toml").is_file() {
        bail!(
            "`{program}` is neither a GPU program of tests/programs (there are: {}) nor a crate's folder",
            known.join(", ")
        );
    }
    let gpus = Gpus::detect();
    let target = if gpus.amd && !gpus.nvidia { &AMDGPU } else { &NVPTX };
    let image = if known.iter().any(|p| p == program) {
        let images = build::build(
            sh,
            &BuildOptions { targets: vec![target], gpu_arch, release: true, programs: vec![program.to_owned()] },
        )?;
        images.into_iter().find(|i| i.program == program).context("the build produced no image")?.path
    } else {
        crate::toolchain::ensure_device_toolchain(sh)?;
        let linker = build::build_linker(sh)?;
        let arch = build::arch_for(target, gpu_arch.as_deref(), true)?;
        crate::gpu_cargo::build_crate(sh, crate_dir, target, &arch, linker.parent().context("the linker's folder")?)?
    };
    if gpus.none() {
        eprintln!(
            "xtask: built {}; no GPU was found on this machine (no NVIDIA driver with a device, no /dev/kfd), so it \
             was not run",
            image.display()
        );
        return Ok(1);
    }
    let (mut loader, _) = build_host_binaries(sh)?;
    if known.iter().any(|p| p == program) && uses_test_operations(program)? {
        loader.set_file_name("gpu-test-loader");
    }
    let (options, program_args) = match loader_args.iter().position(|a| a == "--") {
        Some(split) => (&loader_args[..split], &loader_args[split + 1..]),
        None => (loader_args, &[][..]),
    };
    let status = std::process::Command::new(&loader)
        .args(options)
        .arg(&image)
        .args(program_args)
        .status()
        .with_context(|| format!("cannot run {}", loader.display()))?;
    Ok(status.code().unwrap_or(1))
}

/// Whether the program of tests/programs named `program` runs with the test operations (`test-operations = true` in
/// its `expect.toml`).
fn uses_test_operations(program: &str) -> Result<bool> {
    let path = crate::project_root().join("tests/programs").join(program).join("expect.toml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let expectation: toml::Table = text.parse().with_context(|| format!("bad expectations in {}", path.display()))?;
    match expectation.get("test-operations") {
        None => Ok(false),
        Some(toml::Value::Boolean(uses)) => Ok(*uses),
        Some(other) => bail!("{}: `test-operations` is {other}, not true or false", path.display()),
    }
}

/// Every image of `target` in one folder, `target/gpu/suite/<target>`, as the GPU suite and the benchmarks take them:
/// the programs of `images` (this build's), the crate built from outside the repository (`out_of_tree`), the std
/// programs (`std_programs`) and, for NVIDIA, the real crates' tests (`real_crates`), each with its expectations.
/// `None` when `images` has none of `target`.
pub fn gather_images(images: &[BuiltImage], target: &'static Target) -> Result<Option<PathBuf>> {
    let Some(built) = images.iter().find(|i| i.target == target).and_then(|i| i.path.parent()) else {
        return Ok(None);
    };
    let mut sources = vec![built.to_owned(), crate::out_of_tree::out_dir(target), crate::std_programs::out_dir(target)];
    if target == &NVPTX {
        sources.push(crate::real_crates::out_dir());
    }
    let gathered = crate::project_root().join("target/gpu/suite").join(target.name);
    // Anew each time: an image an earlier build left would otherwise stay among them.
    let _ = std::fs::remove_dir_all(&gathered);
    std::fs::create_dir_all(&gathered)?;
    for dir in sources.iter().filter(|dir| dir.is_dir()) {
        for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
            let path = entry?.path();
            std::fs::copy(&path, gathered.join(path.file_name().expect("a file")))?;
        }
    }
    Ok(Some(gathered))
}

#[cfg(test)]
mod tests;
