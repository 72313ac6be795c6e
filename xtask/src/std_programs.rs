//! Rust's std for the GPU, checked without a GPU: std and the startup's runtime for it are built for the NVIDIA
//! target (`gpu_startup_setup::std_sysroot`, kept in `target/gpu-startup-cache/std/`), the programs of
//! `tests/programs-std` are built against them with the bitcode linker, and each image must hold the startup's three
//! kernels and leave no function undefined (`docs/std.md`). The images go to `target/gpu/std/nvptx/` with their
//! programs' `expect.toml`, for the bundle's GPU suite.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use gpu_startup_setup::std_sysroot::{self, std_spec_name};
use gpu_startup_setup::toolchain::Rustc;
use gpu_startup_targets::{ImageKind, Target};
use xshell::{Shell, cmd};

use crate::image::BuiltImage;

/// The programs' workspace.
const PROGRAMS: &str = "tests/programs-std";

/// The members whose `#[test]`s make libtest binaries: the runner's behaviour, and its cost per test (`gpu-bench`).
const LIBTEST_PACKAGES: [&str; 2] = ["libtest-std", "thousand-std"];

/// The kernels every image holds.
const KERNELS: [&str; 3] = ["_begin", "_start", "_end"];

/// Builds std and the std programs for each of `targets` and checks their images; returns the images.
pub fn check(sh: &Shell, targets: &[&'static Target]) -> Result<Vec<PathBuf>> {
    let mut images = Vec::new();
    for &target in targets {
        images.extend(check_target(sh, target)?);
    }
    Ok(images)
}

/// Builds std and the std programs for `target` and checks their images; returns the images.
fn check_target(sh: &Shell, target: &'static Target) -> Result<Vec<PathBuf>> {
    let root = crate::project_root();
    let rustc = Rustc::on_path();
    let spec = gpu_startup_setup::spec::rustc_spec(rustc.command(), target)?;
    let spec = std_sysroot::std_spec(&gpu_startup_setup::spec::executable_spec(target, &spec)?)?;
    let startup = root.join(target.startup_crate).join("Cargo.toml");
    let std = std_sysroot::build(&rustc, target, &spec, &startup, &std_cache())?;
    let state = if std.built { "built" } else { "found built" };
    println!("xtask: std for {} {state} ({})", target.name, std.sysroot.display());
    let linker = crate::build::build_linker(sh)?;
    let target_dir = root.join("target/gpu-std/programs");
    let manifest = root.join(PROGRAMS).join("Cargo.toml");
    let spec_file = &std.spec;
    let rustflags = format!(
        "--sysroot {} -Ctarget-cpu={} -Clinker={}",
        std.sysroot.display(),
        target.fallback_arch,
        linker.display()
    );
    let out = target_dir.join(std_spec_name(target)).join("release");
    relink_if_runtime_or_linker_changed(&std.runtime, &linker, &target_dir, &out, target)?;
    cmd!(
        sh,
        "cargo build --quiet --release --manifest-path {manifest} --target {spec_file} -Zjson-target-spec --target-dir {target_dir}"
    )
    .env("RUSTFLAGS", &rustflags)
    .run()?;
    let published = out_dir(target);
    let _ = std::fs::remove_dir_all(&published);
    std::fs::create_dir_all(&published)?;
    let mut images = Vec::new();
    let extension = target.image_extension;
    for program in programs()? {
        let member = program.strip_suffix("-std").expect("programs are named <member>-std");
        let image = out.join(format!("{program}.{extension}"));
        images.push(publish(&root, target, &program, member, &image, &published)?);
    }
    // The libtest binaries: `cargo test`'s build of `#[test]`s, with the test profile, as a user's `cargo test` makes
    // them.
    for package in LIBTEST_PACKAGES {
        let messages = cmd!(
            sh,
            "cargo test --no-run --quiet --manifest-path {manifest} --target {spec_file} -Zjson-target-spec -Zpanic-abort-tests --target-dir {target_dir} --package {package} --lib --message-format json"
        )
        .env("RUSTFLAGS", &rustflags)
        .read()?;
        let binary = test_executable(&messages)
            .with_context(|| format!("cargo test --no-run named no test binary of {package}"))?;
        let member = package.strip_suffix("-std").expect("named <member>-std");
        images.push(publish(&root, target, package, member, &binary, &published)?);
    }
    Ok(images)
}

/// Checks the image at `image`, the program `program` of the member folder `member`, and puts it into `published`
/// with the member's expectations (`expect.toml` the program's case, `expect.VARIANT.toml` a variant's, as in
/// tests/programs); the published image.
fn publish(
    root: &Path,
    target: &'static Target,
    program: &str,
    member: &str,
    image: &Path,
    published: &Path,
) -> Result<PathBuf> {
    let bytes = std::fs::read(image).with_context(|| format!("no image {}", image.display()))?;
    if target.produces(ImageKind::Ptx) {
        let ptx = String::from_utf8_lossy(&bytes);
        let unknown = undefined_functions(&ptx);
        ensure!(
            unknown.is_empty(),
            "{} calls functions that neither it nor the startup's runtime for std defines: {}",
            image.display(),
            unknown.join(", ")
        );
        for kernel in KERNELS {
            ensure!(
                ptx.contains(&format!(".entry {kernel}(")),
                "{} has no kernel `{kernel}`: the startup's runtime was not linked in",
                image.display()
            );
        }
    }
    // An AMD code object leaves nothing undefined (ld.lld links it with `--no-undefined`); the static check reads its
    // kernels' descriptors and metadata as the loader will.
    let built = BuiltImage { program: program.to_owned(), target, arch: String::new(), path: image.to_owned() };
    crate::image::check_images(std::slice::from_ref(&built))?;
    println!("xtask: {program} for {}: {} KB, with the startup's kernels", target.name, bytes.len() / 1000);
    for entry in std::fs::read_dir(root.join(PROGRAMS).join(member))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
        let Some(variant) = name.strip_prefix("expect").and_then(|rest| rest.strip_suffix(".toml")) else {
            continue;
        };
        std::fs::copy(&path, published.join(format!("{program}{variant}.expect.toml")))
            .with_context(|| format!("cannot copy {}", path.display()))?;
    }
    let published = published.join(format!("{program}.{}", target.image_extension));
    std::fs::write(&published, bytes)?;
    Ok(published)
}

/// The test binary that `cargo test --no-run --message-format json` reported (`executable` of its artifact).
pub fn test_executable(messages: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
}

/// Removes the linked images under `out` when the startup's runtime for std (`runtime`, rlibs the bitcode linker adds
/// to every program) or the bitcode linker itself changed since they were linked, so that cargo links them again:
/// cargo knows neither, only the linker's path.
fn relink_if_runtime_or_linker_changed(
    runtime: &Path,
    linker: &Path,
    target_dir: &Path,
    out: &Path,
    target: &'static Target,
) -> Result<()> {
    let mut inputs = vec![linker.to_owned()];
    for entry in std::fs::read_dir(runtime).with_context(|| format!("cannot read {}", runtime.display()))? {
        inputs.push(entry?.path());
    }
    let mut hashes = Vec::new();
    for path in inputs {
        // By content: the runtime is copied into place anew on every build, and the linker rebuilt.
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(
            &std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?,
            &mut hasher,
        );
        hashes.push(format!("{} {:016x}", path.display(), std::hash::Hasher::finish(&hasher)));
    }
    hashes.sort();
    let stamp = target_dir.join(format!("runtime-{}.stamp", target.name));
    let now = hashes.join("\n");
    if std::fs::read_to_string(&stamp).is_ok_and(|before| before == now) {
        return Ok(());
    }
    let debug = out.with_file_name("debug");
    for dir in [out.to_owned(), out.join("deps"), debug.clone(), debug.join("deps")] {
        for entry in std::fs::read_dir(&dir).into_iter().flatten() {
            let path = entry?.path();
            if path.extension().is_some_and(|extension| extension == target.image_extension) {
                std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
            }
        }
    }
    std::fs::create_dir_all(target_dir)?;
    std::fs::write(&stamp, now).with_context(|| format!("cannot write {}", stamp.display()))
}

/// Where std is built for `cargo xtask` (the std programs and the out-of-tree crate's `init --std`, which finds it
/// there through `GPU_STARTUP_CACHE_DIR`): `<cache>/std`, as `gpu_startup_setup::std_cache_dir` names it.
pub fn cache_dir() -> PathBuf {
    crate::project_root().join("target/gpu-startup-cache")
}

fn std_cache() -> PathBuf {
    cache_dir().join("std")
}

/// Where the std programs' images for `target` and their expectations go, for the suite and the bundle.
pub fn out_dir(target: &'static Target) -> PathBuf {
    crate::project_root().join("target/gpu/std").join(target.name)
}

/// The programs of the workspace: its members' folder names, each built as the binary `<folder>-std`, but for the
/// libraries.
fn programs() -> Result<Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Manifest {
        workspace: Workspace,
    }
    #[derive(serde::Deserialize)]
    struct Workspace {
        members: Vec<String>,
    }
    let path = crate::project_root().join(PROGRAMS).join("Cargo.toml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let manifest: Manifest = toml::from_str(&text).with_context(|| format!("{} names no members", path.display()))?;
    // A member without `src/main.rs` is a library, whose tests make the libtest binary.
    let root = crate::project_root().join(PROGRAMS);
    Ok(manifest
        .workspace
        .members
        .into_iter()
        .filter(|member| root.join(member).join("src/main.rs").is_file())
        .map(|member| format!("{member}-std"))
        .collect())
}

/// The functions a PTX image declares `.extern`: called, not defined.
pub fn undefined_functions(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|line| line.trim_start().strip_prefix(".extern .func"))
        .filter_map(|rest| {
            // `.extern .func (.param .b64 func_retval0) name(` or `.extern .func name(`: the name follows the return
            // value's parentheses, if any.
            let rest = rest.trim_start();
            let rest = if rest.starts_with('(') { &rest[rest.find(')')? + 1..] } else { rest };
            let name: String =
                rest.trim_start().chars().take_while(|c| c.is_alphanumeric() || "_$.".contains(*c)).collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn undefined_functions_are_read_with_and_without_a_return_value() {
        let ptx = ".extern .func  (.param .b64 func_retval0) sys_write\n(\n\t.param .b32 sys_write_param_0\n);\n\
                   .extern .func sys_abort\n()\n;\n.visible .func f()\n";
        assert_eq!(super::undefined_functions(ptx), ["sys_write", "sys_abort"]);
    }
}
