//! `cargo xtask test`, `cargo xtask run` and `cargo xtask bundle`: the GPU suite end to end.

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

/// `cargo xtask bundle`: a folder that runs the GPU suite on an x86-64 Linux GPU machine without Rust. With
/// `max_size` (bytes), fails when the folder comes out larger, for copies that have a limit.
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

pub fn bundle(
    sh: &Shell,
    out: &Path,
    targets: &[&'static Target],
    gpu_arch: Option<String>,
    max_size: Option<u64>,
) -> Result<()> {
    let images =
        build::build(sh, &BuildOptions { targets: targets.to_vec(), gpu_arch, release: true, programs: Vec::new() })?;
    check_images(&images)?;
    crate::out_of_tree::check(sh, Gpus::detect())?;
    crate::std_programs::check(sh, targets)?;
    if targets.contains(&&NVPTX) {
        crate::out_of_tree_std::check(sh, Gpus::detect())?;
        crate::real_crates::check(sh, Gpus::detect())?;
    }
    let (loader, suite) = build_host_binaries(sh)?;
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot replace {}", out.display()))?;
    }
    let bin = out.join("bin");
    std::fs::create_dir_all(&bin)?;
    let bench = loader.with_file_name("gpu-bench");
    let test_loader = loader.with_file_name("gpu-test-loader");
    for binary in [&loader, &suite, &bench, &test_loader] {
        std::fs::copy(binary, bin.join(binary.file_name().expect("a file")))?;
    }
    std::fs::create_dir_all(out.join("images"))?;
    for &target in targets {
        let Some(dir) = gather_images(&images, target)? else { continue };
        let dest = out.join("images").join(target.name);
        cmd!(sh, "cp -r {dir} {dest}").run()?;
    }
    // The real crates' tests built for the host, which `./bench` times on this machine's CPU against their images.
    let host_tests = crate::real_crates::host_dir();
    if targets.contains(&&NVPTX) && host_tests.is_dir() {
        let into = out.join("host");
        cmd!(sh, "cp -r {host_tests} {into}").run()?;
    }
    // The nextest archive of the crate from outside the repository, which `run-tests` runs where cargo-nextest is.
    let nextest = crate::nextest::bundled_dir();
    if targets.contains(&&NVPTX) && nextest.is_dir() {
        let into = out.join("nextest");
        cmd!(sh, "cp -r {nextest} {into}").run()?;
    }
    for (name, text) in [("run-tests", RUN_TESTS), ("bench", BENCH)] {
        let script = out.join(name);
        std::fs::write(&script, text)?;
        make_executable(&script)?;
    }
    std::fs::write(out.join("README.md"), BUNDLE_README)?;
    // The bench's results name the commit they measured; a bundle has no repository to ask.
    std::fs::write(out.join("COMMIT"), cmd!(sh, "git describe --always --dirty --abbrev=7").read()? + "\n")?;
    let size = dir_size(out)?;
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    if let Some(limit) = max_size.filter(|&limit| size > limit) {
        bail!("the bundle at {} is {:.1} MiB, over --max-size ({:.1} MiB)", out.display(), mib(size), mib(limit));
    }
    println!("xtask: bundle at {} ({:.1} MiB): run {}/run-tests there", out.display(), mib(size), out.display());
    Ok(())
}

/// A size in bytes from a number and an optional binary unit: `4096`, `512K`, `64M`, `64MiB`, `1G`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        _ => return Err(format!("`{text}` is not a size: a number of bytes, or with K, M or G (KiB, MiB, GiB)")),
    };
    let number: u64 = number.parse().map_err(|_| format!("`{text}` does not start with a number of bytes"))?;
    number.checked_mul(1 << shift).ok_or_else(|| format!("`{text}` is more bytes than 2^64"))
}

const RUN_TESTS: &str = r#"#!/bin/sh
# Runs the GPU suite of this bundle on the GPUs of this machine; extra arguments go to gpu-suite (a name filter,
# --exact, --list, ...). Ends with `gpu: N passed, N failed` for each GPU vendor found. Where CUDA's ptxas is on
# PATH, each NVIDIA program also runs as a relocatable cubin (`ptxas -c`) and, with nvlink, as a linked one, both
# made here for this machine's GPU. `--sanitize[=TOOLS]` runs the NVIDIA programs as built under compute-sanitizer's
# tools instead (gpu-suite --help).
here=$(cd "$(dirname "$0")" && pwd)
status=0
ran=0
sanitize=0
for arg in "$@"; do
    case "$arg" in --sanitize|--sanitize=*) sanitize=1 ;; esac
done
if [ -e /dev/nvidiactl ] || command -v nvidia-smi >/dev/null 2>&1; then
    ran=1
    images="$here/images/nvptx"
    if [ "$sanitize" = 1 ]; then
        : # The tools run the programs as built: no cubins needed.
    elif command -v ptxas >/dev/null 2>&1; then
        arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
        [ "$arch" = sm_ ] && arch=sm_90
        echo "run-tests: making cubins for $arch with $(command -v ptxas)" >&2
        rm -f "$images"/*.cubin
        # One program per job: ptxas -c, then nvlink; a tool's messages are shown only when it fails.
        ls "$images"/*.ptx | xargs -P "$(nproc)" -I{} sh -c '
            ptx=$1; arch=$2; cubin=${ptx%.ptx}.cubin
            out=$(ptxas -c -arch="$arch" --maxrregcount 64 "$ptx" -o "$cubin" 2>&1) || {
                echo "run-tests: ptxas failed on $ptx: $out" >&2; exit 1; }
            command -v nvlink >/dev/null 2>&1 || exit 0
            out=$(nvlink -arch="$arch" "$cubin" -o "${ptx%.ptx}.linked.cubin" 2>&1) || {
                echo "run-tests: nvlink failed on $cubin: $out" >&2; exit 1; }
        ' run-tests {} "$arch" || status=1
        command -v nvlink >/dev/null 2>&1 || echo "run-tests: nvlink is not on PATH: no linked cubins" >&2
    else
        echo "run-tests: ptxas is not on PATH: the NVIDIA programs run as PTX only" >&2
    fi
    "$here/bin/gpu-suite" --loader "$here/bin/gpu-loader" --images "$images" --target nvptx "$@" || status=1
    # The crate of docs/testing-your-code.md as a nextest archive, run as a GPU machine without Rust runs it
    # ("Across GPU machines"): cargo-nextest and gpu-loader on PATH. Its report is the page's: 4 pass, 3 fail.
    if [ -d "$here/nextest" ] && [ "$sanitize" = 0 ]; then
        if command -v cargo-nextest >/dev/null 2>&1; then
            # From inside the crate: nextest reads the runner from the config of the folder it runs in.
            out=$(cd "$here/nextest/hello-gpu" && PATH="$here/bin:$PATH" cargo-nextest nextest run \
                --archive-file ../hello-gpu.tar.zst --workspace-remap . --no-fail-fast --test-threads 1 2>&1)
            summary=$(printf '%s\n' "$out" | grep 'Summary')
            case "$summary" in
                *"7 tests run: 4 passed, 3 failed, 1 skipped"*) echo "run-tests: nextest archive: ok:$summary" ;;
                *) printf '%s\n' "$out" >&2
                   echo "run-tests: nextest archive: FAILED: not 7 tests run: 4 passed, 3 failed, 1 skipped" >&2
                   status=1 ;;
            esac
        else
            echo "run-tests: cargo-nextest is not on PATH: the nextest archive (nextest/) was not run" >&2
        fi
    fi
fi
if [ -e /dev/kfd ] && [ "$sanitize" = 0 ]; then
    ran=1
    "$here/bin/gpu-suite" --loader "$here/bin/gpu-loader" --images "$here/images/amdgpu" --target amdgpu "$@" || status=1
fi
if [ "$ran" = 0 ]; then
    echo "run-tests: no NVIDIA or AMD GPU found on this machine" >&2
    exit 2
fi
exit $status
"#;

const BENCH: &str = r#"#!/bin/sh
# Runs the benchmarks on this machine's NVIDIA GPU: a table on stdout, JSON in ./bench.json, the table headed by the
# GPU, the bundle's commit and the date in ./bench.md. Extra arguments go to gpu-bench (--repeat N, --only NAME).
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/bin/gpu-bench" --images "$here/images/nvptx" --loader "$here/bin/gpu-loader" --host-tests "$here/host" \
    --json bench.json --markdown bench.md --commit "$(cat "$here/COMMIT")" "$@"
"#;

const BUNDLE_README: &str = "# GPU suite bundle\n\n\
Made by `cargo xtask bundle`: release host binaries (`bin/gpu-loader`, `bin/gpu-suite`, and `bin/gpu-test-loader`: \
gpu-loader with the test operations, which some test programs use) and every GPU test \
program with its expectations (`images/<target>/`). On an x86-64 Linux machine with an NVIDIA or AMD GPU and its \
driver, `./run-tests` runs the suite and ends with `gpu: N passed, N failed` (with CUDA's `ptxas` and `nvlink` on \
`PATH`, each NVIDIA program runs as PTX and as both kinds of cubin, made there); `./bench` runs the benchmarks. Run one program by hand with \
`bin/gpu-loader --threads 32 images/nvptx/hello.ptx`.\n";

fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = std::fs::metadata(path)?.permissions();
    permissions.set_mode(0o755);
    std::fs::set_permissions(path, permissions)?;
    Ok(())
}

fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        total += if metadata.is_dir() { dir_size(&entry.path())? } else { metadata.len() };
    }
    Ok(total)
}

#[cfg(test)]
mod tests;
