//! `cargo xtask build`: the startup and every GPU program in `tests/programs` for each GPU target, built as any crate
//! is built for the GPU (`crate::gpu_cargo`).
//!
//! Output (documented in `docs/architecture.md`): `target/gpu/<target>/<arch>/<program>.<ext>` with `ext` = `ptx`
//! (and `cubin` and `linked.cubin` when `ptxas` and `nvlink` are on `PATH`) for NVIDIA and `elf` for AMD, next to
//! copies of the program's `expect.toml` and `expect.<variant>.toml` (`crate::image`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

use gpu_startup_targets::Target;

use crate::gpu_cargo::{GpuSetup, Images};
use crate::image::{BuiltImage, ImageFolder};
use crate::toolchain;

/// What to build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    pub targets: Vec<&'static Target>,
    pub gpu_arch: Option<String>,
    pub release: bool,
    /// Build only these programs (all when empty).
    pub programs: Vec<String>,
}

/// The Rust GPU programs: every folder of `tests/programs` with a `Cargo.toml`.
pub fn rust_programs() -> Result<Vec<String>> {
    let dir = crate::project_root().join("tests/programs");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry?;
        if entry.path().join("Cargo.toml").is_file() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// The test crates of `tests/programs`: libraries (a `src/lib.rs`, no `crate-type`) whose tests `cargo test --no-run`
/// builds into test binaries, named after their folders like the programs.
pub fn test_crates() -> Result<Vec<String>> {
    let dir = crate::project_root().join("tests/programs");
    let mut names = Vec::new();
    for name in rust_programs()? {
        let manifest = dir.join(&name).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).with_context(|| format!("cannot read {}", manifest.display()))?;
        let manifest: toml::Value = text.parse().with_context(|| format!("{} is not TOML", manifest.display()))?;
        let crate_type = manifest.get("lib").and_then(|lib| lib.get("crate-type"));
        if crate_type.is_none() && dir.join(&name).join("src/lib.rs").is_file() {
            names.push(name);
        }
    }
    Ok(names)
}

/// Builds the bitcode linker (the binary of `loader/linker`) and returns its path.
pub fn build_linker(sh: &Shell) -> Result<PathBuf> {
    let root = crate::project_root();
    cmd!(sh, "cargo build --quiet --release --package gpu-bitcode-linker --bin gpu-bitcode-linker").run()?;
    Ok(root.join("target/release/gpu-bitcode-linker"))
}

/// The architecture to build `target` for: `requested` when it is one of the target's (and an error when it is not
/// and the build is for this target `alone`), else the machine's or the fallback.
pub fn arch_for(target: &'static Target, requested: Option<&str>, alone: bool) -> Result<String> {
    Ok(match requested {
        Some(arch) if target.accepts_arch(arch) => arch.to_owned(),
        Some(arch) if alone => bail!("`{arch}` is not a {target} architecture"),
        _ => target.default_arch(),
    })
}

/// Builds every program for every requested target; returns the images.
pub fn build(sh: &Shell, options: &BuildOptions) -> Result<Vec<BuiltImage>> {
    let sysroot = toolchain::ensure_device_toolchain(sh)?;
    let linker = build_linker(sh)?;
    let mut images = Vec::new();
    for &target in &options.targets {
        let arch = arch_for(target, options.gpu_arch.as_deref(), options.targets.len() == 1)?;
        images.extend(build_target(sh, target, &arch, options, &linker, &sysroot)?);
    }
    Ok(images)
}

fn build_target(
    sh: &Shell,
    target: &'static Target,
    arch: &str,
    options: &BuildOptions,
    linker: &Path,
    sysroot: &Path,
) -> Result<Vec<BuiltImage>> {
    let release = options.release;
    let root = crate::project_root();
    let setup = GpuSetup::prepare(target, arch)?;
    let tools = linker.parent().context("the linker's folder")?;
    let started = std::time::Instant::now();
    let test_crates = test_crates()?;
    let package = |name: &String| ["--package".to_owned(), name.clone()];
    // Everything, or the programs asked for; then the test crates among them, as `cargo test` builds them.
    let programs: Vec<String> = if options.programs.is_empty() {
        vec!["--workspace".to_owned()]
    } else {
        options.programs.iter().filter(|p| !test_crates.contains(p)).flat_map(package).collect()
    };
    let tests: Vec<String> = test_crates
        .iter()
        .filter(|name| options.programs.is_empty() || options.programs.contains(name))
        .flat_map(package)
        .collect();
    let (manifest, target_dir) = (root.join("tests/programs/Cargo.toml"), root.join("target/gpu-cargo").join(arch));
    let mut artifacts = Vec::new();
    for (what, selection) in [(Images::Programs, programs), (Images::Tests, tests)] {
        if !selection.is_empty() {
            artifacts.extend(setup.build(sh, what, &manifest, &selection, release, &target_dir, tools)?);
        }
    }
    eprintln!("xtask: built the {target} programs for {arch} in {:.1?}", started.elapsed());

    let folder = ImageFolder::new(target, arch);
    let out_dir = &folder.dir;
    if options.programs.is_empty() && out_dir.exists() {
        // A full build replaces the folder: an image of a program since removed would otherwise stay, and the
        // suite, the bundle and the static check would go on taking it for one of ours.
        std::fs::remove_dir_all(out_dir).with_context(|| format!("cannot clear {}", out_dir.display()))?;
    }
    std::fs::create_dir_all(out_dir)?;
    let mut images = Vec::new();
    for artifact in artifacts {
        let program = artifact.program()?;
        let image = folder.image_path(&program);
        std::fs::copy(&artifact.image, &image)
            .with_context(|| format!("cannot copy {} to {}", artifact.image.display(), image.display()))?;
        // An integration test has no expectations of its own: its crate's are its library's.
        let expectations = artifact.integration_test.is_none().then_some(artifact.crate_dir.as_path());
        images.push(folder.add(sh, program, expectations)?);
    }
    let missing: Vec<_> = options.programs.iter().filter(|p| !images.iter().any(|i| &i.program == *p)).collect();
    if !missing.is_empty() {
        bail!("cargo built no image for {missing:?}");
    }
    if options.programs.is_empty() {
        // The C programs need a clang of the nightly's LLVM version, which not every distribution packages: without
        // one, the Rust programs still build and run, and the skip is said plainly.
        match crate::c_programs::find_clang(sh) {
            Ok(_) => images.extend(crate::c_programs::build(sh, &folder, release, linker, sysroot)?),
            Err(error) => eprintln!("xtask: C programs SKIPPED for {target}: {error:#}"),
        }
    }
    Ok(images)
}
