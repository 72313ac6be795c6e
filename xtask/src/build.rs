//! `cargo xtask build`: the startup and every GPU program in `tests/programs` for each GPU target.
//!
//! Output (documented in `docs/architecture.md`): `target/gpu/<target>/<arch>/<program>.<ext>` with `ext` = `ptx`
//! (and `cubin` and `linked.cubin` when `ptxas` and `nvlink` are on `PATH`) for NVIDIA and `elf` for AMD, next to a
//! copy of the program's `expect.toml`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

use crate::toolchain;

/// A GPU target the startup supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GpuTarget {
    Nvptx,
    Amdgpu,
}

impl GpuTarget {
    pub const ALL: [GpuTarget; 2] = [GpuTarget::Nvptx, GpuTarget::Amdgpu];

    pub fn triple(self) -> &'static str {
        match self {
            GpuTarget::Nvptx => "nvptx64-nvidia-cuda",
            GpuTarget::Amdgpu => "amdgcn-amd-amdhsa",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GpuTarget::Nvptx => "nvptx",
            GpuTarget::Amdgpu => "amdgpu",
        }
    }

    /// The architecture to build for when none is given: the machine's GPU if it has one of this vendor, else the
    /// H200's (sm_90) or the MI200's (gfx90a).
    pub fn default_arch(self, sh: &Shell) -> String {
        let detected = match self {
            GpuTarget::Nvptx => cmd!(sh, "nvidia-smi --query-gpu=compute_cap --format=csv,noheader")
                .quiet()
                .ignore_stderr()
                .read()
                .ok()
                .and_then(|out| out.lines().next().map(|cap| format!("sm_{}", cap.trim().replace('.', "")))),
            GpuTarget::Amdgpu => cmd!(sh, "amdgpu-arch")
                .quiet()
                .ignore_stderr()
                .read()
                .ok()
                .and_then(|out| out.lines().next().map(|arch| arch.trim().to_owned())),
        };
        detected.filter(|arch| self.accepts_arch(arch)).unwrap_or_else(|| match self {
            GpuTarget::Nvptx => "sm_90".into(),
            GpuTarget::Amdgpu => "gfx90a".into(),
        })
    }

    pub fn accepts_arch(self, arch: &str) -> bool {
        match self {
            GpuTarget::Nvptx => crate::linker::min_ptx_version(arch).is_ok(),
            GpuTarget::Amdgpu => {
                arch.strip_prefix("gfx").is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_hexdigit()))
            }
        }
    }

    /// The extension of the image file.
    pub fn image_extension(self) -> &'static str {
        match self {
            GpuTarget::Nvptx => "ptx",
            GpuTarget::Amdgpu => "elf",
        }
    }

    /// Extra codegen flags for `arch`. (The PTX ISA version follows from the CPU: the bitcode linker raises it.)
    pub fn rustflags(self, arch: &str) -> Result<Vec<String>> {
        Ok(vec![format!("-Ctarget-cpu={arch}")])
    }
}

impl fmt::Display for GpuTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GpuTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "nvptx" | "nvptx64" | "cuda" | "nvptx64-nvidia-cuda" => Ok(GpuTarget::Nvptx),
            "amdgpu" | "amdgcn" | "hsa" | "amdgcn-amd-amdhsa" => Ok(GpuTarget::Amdgpu),
            _ => Err(format!("unknown GPU target `{s}` (expected nvptx or amdgpu)")),
        }
    }
}

/// What to build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    pub targets: Vec<GpuTarget>,
    pub gpu_arch: Option<String>,
    pub release: bool,
    /// Build only these programs (all when empty).
    pub programs: Vec<String>,
}

/// One built image.
#[derive(Clone, Debug)]
pub struct BuiltImage {
    pub program: String,
    pub target: GpuTarget,
    pub arch: String,
    pub path: PathBuf,
}

/// The folder the images of one target and arch go to.
pub fn image_dir(target: GpuTarget, arch: &str) -> PathBuf {
    crate::project_root().join("target/gpu").join(target.name()).join(arch)
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

/// Builds the bitcode linker (a host binary of this crate) and returns its path.
pub fn build_linker(sh: &Shell) -> Result<PathBuf> {
    let root = crate::project_root();
    let _dir = sh.push_dir(&root);
    cmd!(sh, "cargo build --quiet --release --package xtask --bin gpu-bitcode-linker").run()?;
    Ok(root.join("target/release/gpu-bitcode-linker"))
}

/// Builds every program for every requested target; returns the images.
pub fn build(sh: &Shell, options: &BuildOptions) -> Result<Vec<BuiltImage>> {
    let sysroot = toolchain::ensure_device_toolchain(sh)?;
    let linker = build_linker(sh)?;
    let mut images = Vec::new();
    for &target in &options.targets {
        let arch = match &options.gpu_arch {
            Some(arch) if target.accepts_arch(arch) => arch.clone(),
            Some(arch) if options.targets.len() == 1 => bail!("`{arch}` is not a {target} architecture"),
            _ => target.default_arch(sh),
        };
        images.extend(build_target(sh, target, &arch, options, &linker, &sysroot)?);
    }
    Ok(images)
}

fn build_target(
    sh: &Shell,
    target: GpuTarget,
    arch: &str,
    options: &BuildOptions,
    linker: &Path,
    sysroot: &Path,
) -> Result<Vec<BuiltImage>> {
    let release = options.release;
    let programs: Vec<String> =
        rust_programs()?.into_iter().filter(|p| options.programs.is_empty() || options.programs.contains(p)).collect();
    let packages = if options.programs.is_empty() {
        vec!["--workspace".to_owned()]
    } else {
        programs.iter().flat_map(|p| ["--package".to_owned(), p.clone()]).collect()
    };
    let root = crate::project_root();
    let manifest = root.join("tests/programs/Cargo.toml");
    let cargo_target_dir = root.join("target/gpu-cargo").join(arch);
    let triple = target.triple();
    let profile = if release { "release" } else { "dev" };
    let rustflags = format!("target.{triple}.rustflags={:?}", target.rustflags(arch)?);
    // NVIDIA needs the project's bitcode linker; AMD links with the toolchain's rust-lld.
    let linker_config = match target {
        GpuTarget::Nvptx => {
            vec!["--config".to_owned(), format!("target.{triple}.linker={:?}", linker.display().to_string())]
        }
        GpuTarget::Amdgpu => Vec::new(),
    };
    let started = std::time::Instant::now();
    cmd!(
        sh,
        "cargo build --quiet --manifest-path {manifest} --target {triple} -Zbuild-std=core --profile {profile}
         --target-dir {cargo_target_dir} --config {rustflags} {linker_config...} {packages...}"
    )
    .env("GPU_LLVM_TOOLS_DIR", toolchain::llvm_tools_dir(sysroot))
    .envs(toolchain::DEVICE_CARGO_ENV)
    .run()
    .with_context(|| format!("building the GPU programs for {target} ({arch}) failed"))?;
    eprintln!("xtask: built the {target} programs for {arch} in {:.1?}", started.elapsed());

    let out_dir = image_dir(target, arch);
    if options.programs.is_empty() && out_dir.exists() {
        // A full build replaces the folder: an image of a program since removed would otherwise stay, and the
        // suite, the bundle and the static check would go on taking it for one of ours.
        std::fs::remove_dir_all(&out_dir).with_context(|| format!("cannot clear {}", out_dir.display()))?;
    }
    std::fs::create_dir_all(&out_dir)?;
    let profile_dir = cargo_target_dir.join(triple).join(if release { "release" } else { "debug" });
    let cubin_tools = CubinTools::find(target);
    let mut images = Vec::new();
    for program in programs {
        let artifact = rust_artifact(&profile_dir, target, &program)?;
        let image = out_dir.join(format!("{program}.{}", target.image_extension()));
        std::fs::copy(&artifact, &image)
            .with_context(|| format!("cannot copy {} to {}", artifact.display(), image.display()))?;
        copy_expectations(&root.join("tests/programs").join(&program), &out_dir, &program)?;
        if let Some(tools) = &cubin_tools {
            tools.make(sh, &image, arch)?;
        }
        images.push(BuiltImage { program, target, arch: arch.to_owned(), path: image });
    }
    if options.programs.is_empty() {
        // The C programs need a clang of the nightly's LLVM version, which not every distribution packages: without
        // one, the Rust programs still build and run, and the skip is said plainly.
        match crate::c_programs::find_clang(sh) {
            Ok(_) => images.extend(crate::c_programs::build(sh, target, arch, release, linker, sysroot, &out_dir)?),
            Err(error) => eprintln!("xtask: C programs SKIPPED for {target}: {error:#}"),
        }
    }
    Ok(images)
}

/// NVIDIA's tools that make cubins of a program's PTX, when they are installed (`ptxas`, and `nvlink` for a linked
/// cubin): the suite runs each program as PTX and as each kind of cubin.
pub struct CubinTools {
    ptxas: PathBuf,
    nvlink: Option<PathBuf>,
}

impl CubinTools {
    /// The tools on `PATH`, for NVIDIA targets where ptxas is installed.
    pub fn find(target: GpuTarget) -> Option<Self> {
        if target != GpuTarget::Nvptx {
            return None;
        }
        let ptxas = toolchain::find_program("ptxas")?;
        let nvlink = toolchain::find_program("nvlink");
        if nvlink.is_none() {
            eprintln!("xtask: nvlink is not on PATH: no linked cubins (only relocatable ones, from ptxas)");
        }
        Some(Self { ptxas, nvlink })
    }

    /// Makes `<program>.cubin` of `<program>.ptx`, relocatable (`ptxas -c`), as the loader's JIT linker compiles
    /// PTX: a function's address then means the same in every kernel (see loader/src/cuda.rs), and 64 registers let
    /// blocks of 1024 threads launch; then `<program>.linked.cubin` of that, with nvlink. (ptxas without `-c`
    /// compiles whole-program, which the loader refuses.)
    pub fn make(&self, sh: &Shell, ptx: &Path, arch: &str) -> Result<()> {
        let (ptxas, cubin) = (&self.ptxas, ptx.with_extension("cubin"));
        cmd!(sh, "{ptxas} -c -arch={arch} --maxrregcount 64 {ptx} -o {cubin}").run()?;
        if let Some(nvlink) = &self.nvlink {
            let linked = ptx.with_extension("linked.cubin");
            cmd!(sh, "{nvlink} -arch={arch} {cubin} -o {linked}").run()?;
        }
        Ok(())
    }
}

/// Where cargo put a program's image: `<name>.ptx` for NVIDIA, `<name>.elf` (or `lib<name>.so`) for AMD.
fn rust_artifact(profile_dir: &Path, target: GpuTarget, program: &str) -> Result<PathBuf> {
    let stem = program.replace('-', "_");
    let candidates = match target {
        GpuTarget::Nvptx => vec![format!("{stem}.ptx")],
        GpuTarget::Amdgpu => vec![format!("{stem}.elf"), format!("lib{stem}.so"), format!("{stem}.so")],
    };
    candidates
        .iter()
        .map(|name| profile_dir.join(name))
        .find(|path| path.is_file())
        .with_context(|| format!("cargo built no image for `{program}` in {}", profile_dir.display()))
}

/// Copies `expect.toml` as `<program>.expect.toml`, and each further `expect.<variant>.toml` (another way to run the
/// same image) as `<program>.<variant>.expect.toml`.
pub fn copy_expectations(source_dir: &Path, out_dir: &Path, program: &str) -> Result<()> {
    for entry in std::fs::read_dir(source_dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("expect").and_then(|rest| rest.strip_suffix(".toml")) else { continue };
        let target = match rest.strip_prefix('.') {
            Some(variant) if !variant.is_empty() => format!("{program}.{variant}.expect.toml"),
            _ if rest.is_empty() => format!("{program}.expect.toml"),
            _ => continue,
        };
        std::fs::copy(source_dir.join(&name), out_dir.join(target))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archs_belong_to_their_target() {
        assert!(GpuTarget::Nvptx.accepts_arch("sm_90"));
        assert!(!GpuTarget::Nvptx.accepts_arch("sm_61"));
        assert!(!GpuTarget::Nvptx.accepts_arch("gfx90a"));
        assert!(GpuTarget::Amdgpu.accepts_arch("gfx90a"));
        assert!(GpuTarget::Amdgpu.accepts_arch("gfx1030"));
        assert!(!GpuTarget::Amdgpu.accepts_arch("sm_90"));
        assert!(!GpuTarget::Amdgpu.accepts_arch("gfx"));
    }

    #[test]
    fn targets_parse_from_their_usual_names() {
        assert_eq!("nvptx".parse(), Ok(GpuTarget::Nvptx));
        assert_eq!("amdgcn-amd-amdhsa".parse(), Ok(GpuTarget::Amdgpu));
        assert!("x86".parse::<GpuTarget>().unwrap_err().contains("unknown GPU target"));
    }
}
