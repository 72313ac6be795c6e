//! `cargo xtask bundle`: the GPU suite and the benchmarks packed for a GPU machine without Rust, with the scripts
//! that run them there (`run-tests`, `bench`).

use std::path::Path;

use anyhow::{Context, Result, bail};
use gpu_startup_targets::{NVPTX, Target};
use xshell::{Shell, cmd};

use crate::build::{self, BuildOptions};
use crate::gpus::Gpus;
use crate::image::check_images;
use crate::suite::{build_host_binaries, gather_images};

/// `cargo xtask bundle`: a folder, `out`, that runs the GPU suite on an x86-64 Linux GPU machine without Rust: the
/// host binaries, every image of `targets` with its expectations, the scripts and a README. With `max_size` (bytes),
/// fails when the folder comes out larger, for copies that have a limit.
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

pub(crate) const RUN_TESTS: &str = r#"#!/bin/sh
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

pub(crate) fn make_executable(path: &Path) -> Result<()> {
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
