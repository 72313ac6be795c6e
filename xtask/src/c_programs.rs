//! The C and C++ test programs: every `tests/programs-c/<name>/main.c` and `tests/programs-cpp/<name>/main.cpp`,
//! compiled with clang (the same LLVM major as the nightly, so its bitcode links with Rust's; C++ in clang++'s
//! driver mode) through the `cc` crate, and linked with the startup into `<name>.<ext>` of the target's image folder,
//! which gives it copies of its `expect.toml` and `expect.<variant>.toml` files and its cubins (`crate::image`).
//! `docs/c-programs.md` describes the same steps for users.
//!
//! The startup comes as a static library of LLVM bitcode, built once per target and arch with
//! `cargo rustc --crate-type staticlib` in its own cargo target dir (`target/gpu-cargo/<arch>-startup`):
//! - NVIDIA: rustc's objects for nvptx are bitcode anyway; the project's bitcode linker links them with the
//!   program's bitcode, internalizes, optimizes and emits PTX. llc turns clang's `llvm.global_ctors`/`global_dtors`
//!   into the `__init_array_object_<name>_<hash>_<priority>` globals that the loader gathers.
//! - AMD: `-Clinker-plugin-lto` makes the archive bitcode too, and lld links it with the program's bitcode through
//!   LTO into an ET_DYN code object; constructors land in `.init_array.N` sections, which lld sorts and bounds.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use xshell::{Shell, cmd};

use gpu_startup_targets::{Linker, Target};

use crate::clang::clang_flags;
use crate::image::{BuiltImage, ImageFolder};
use crate::toolchain;

/// The languages of the programs built here, each with its folder of programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    C,
    Cxx,
}

impl Language {
    pub const ALL: [Language; 2] = [Language::C, Language::Cxx];

    /// Where its programs live, relative to the project root.
    pub fn programs_dir(self) -> &'static str {
        match self {
            Language::C => "tests/programs-c",
            Language::Cxx => "tests/programs-cpp",
        }
    }

    /// The one source file of a program.
    pub fn source(self) -> &'static str {
        match self {
            Language::C => "main.c",
            Language::Cxx => "main.cpp",
        }
    }

    /// clang's flags for the language beyond [`clang_flags`]: C++ as freestanding GPU code has no exceptions, no RTTI
    /// and no standard library beyond what the startup's headers give (`docs/c-programs.md`).
    pub fn flags(self) -> &'static [&'static str] {
        match self {
            Language::C => &[],
            Language::Cxx => &["--driver-mode=g++", "-fno-exceptions", "-fno-rtti", "-nostdinc++"],
        }
    }
}

/// A program of `tests/programs-c` or `tests/programs-cpp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    pub language: Language,
}

impl Program {
    /// The program's folder in the project at `root`.
    pub fn dir(&self, root: &Path) -> PathBuf {
        root.join(self.language.programs_dir()).join(&self.name)
    }
}
/// The header C programs include, relative to the project root.
pub const INCLUDE_DIR: &str = "startup-common/include";

/// Builds every C and C++ program for the target and arch of `folder` into it; returns the images.
pub fn build(
    sh: &Shell,
    folder: &ImageFolder,
    release: bool,
    linker: &Path,
    sysroot: &Path,
) -> Result<Vec<BuiltImage>> {
    let (target, arch) = (folder.target, folder.arch.as_str());
    let root = crate::project_root();
    let programs = programs(&root)?;
    if programs.is_empty() {
        return Ok(Vec::new());
    }
    let started = std::time::Instant::now();
    let clang = find_clang(sh)?;
    let startup = build_startup(sh, target, arch, release)?;
    let work_dir = root.join("target/gpu-cargo").join(format!("{arch}-c"));
    crate::varargs::check(sh, &clang, target, arch, sysroot, &startup, &work_dir.join("varargs-probe"))?;
    std::fs::create_dir_all(&folder.dir)?;
    let mut images = Vec::new();
    for program in programs {
        let (source_dir, Program { name, language }) = (program.dir(&root), program);
        let source = source_dir.join(language.source());
        let objects = compile(&clang, target, arch, release, language, &source, &work_dir.join(&name))
            .with_context(|| format!("compiling the {language:?} program `{name}` for {target} ({arch}) failed"))?;
        let image = folder.image_path(&name);
        link(sh, target, arch, release, linker, sysroot, &objects, &startup, &image)
            .with_context(|| format!("linking the {language:?} program `{name}` for {target} ({arch}) failed"))?;
        images.push(folder.add(sh, name, Some(&source_dir))?);
    }
    eprintln!("xtask: built the {target} C and C++ programs for {arch} in {:.1?}", started.elapsed());
    Ok(images)
}

/// The C and C++ programs under `root`: every folder of a language's programs folder with the language's source,
/// sorted by name. Two programs of one name (one C, one C++) would build one image: an error.
pub fn programs(root: &Path) -> Result<Vec<Program>> {
    let mut programs = Vec::new();
    for language in Language::ALL {
        let dir = root.join(language.programs_dir());
        if !dir.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))? {
            let entry = entry?;
            if entry.path().join(language.source()).is_file() {
                programs.push(Program { name: entry.file_name().to_string_lossy().into_owned(), language });
            }
        }
    }
    programs.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = programs.windows(2).find(|pair| pair[0].name == pair[1].name) {
        let [first, second] = [&pair[0], &pair[1]].map(|program| program.dir(root));
        bail!("two programs are named `{}`: {} and {}", pair[0].name, first.display(), second.display());
    }
    Ok(programs)
}

/// The LLVM major version of the nightly (`rustc -vV`'s `LLVM version: 22.1.2`).
fn rustc_llvm_major(sh: &Shell) -> Result<u32> {
    let version = cmd!(sh, "rustc -vV").quiet().read().context("cannot run rustc")?;
    version
        .lines()
        .find_map(|line| line.strip_prefix("LLVM version:"))
        .and_then(|v| v.trim().split('.').next()?.parse().ok())
        .context("rustc -vV names no LLVM version")
}

/// The major version in `clang --version`'s first line (`Debian clang version 22.1.0 (...)`).
fn clang_major(version_output: &str) -> Option<u32> {
    let line = version_output.lines().next()?;
    let rest = &line[line.find("clang version ")? + "clang version ".len()..];
    rest.split(['.', ' ', '-']).next()?.parse().ok()
}

/// The clang to compile with: `$GPU_CLANG`, else `clang-<N>` or `clang` on `PATH`, where N is the nightly's LLVM
/// major. Its LLVM must be that major, or its bitcode would not link with Rust's.
pub fn find_clang(sh: &Shell) -> Result<PathBuf> {
    let major = rustc_llvm_major(sh)?;
    let clang = match std::env::var_os("GPU_CLANG") {
        Some(clang) => PathBuf::from(clang),
        None => match toolchain::find_program(&format!("clang-{major}")).or_else(|| toolchain::find_program("clang")) {
            Some(clang) => clang,
            None => {
                toolchain::install_debian_package(sh, &format!("clang-{major}"))
                    .with_context(|| format!("the C programs need clang {major}"))?;
                toolchain::find_program(&format!("clang-{major}"))
                    .with_context(|| format!("clang-{major} is still not on PATH after installing it"))?
            }
        },
    };
    let version =
        cmd!(sh, "{clang} --version").quiet().read().with_context(|| format!("cannot run {}", clang.display()))?;
    match clang_major(&version) {
        Some(found) if found == major => Ok(clang),
        found => bail!(
            "{} is clang {found:?}, but the nightly's LLVM is {major}: their bitcode would not link (set GPU_CLANG to a \
             clang {major})",
            clang.display()
        ),
    }
}

/// The rustflags of the startup library: the arch everywhere (core included) and, for a target that requires LTO,
/// bitcode objects.
fn startup_rustflags(target: &'static Target, arch: &str) -> Vec<String> {
    let mut flags = vec![format!("-Ctarget-cpu={arch}")];
    if target.requires_lto {
        flags.push("-Clinker-plugin-lto".to_owned());
    }
    flags
}

/// Builds the target crate of the startup as a static library of bitcode; returns the archive's path.
pub fn build_startup(sh: &Shell, target: &'static Target, arch: &str, release: bool) -> Result<PathBuf> {
    let root = crate::project_root();
    let package = target.startup_crate;
    let triple = target.triple;
    let target_dir = root.join("target/gpu-cargo").join(format!("{arch}-startup"));
    let (profile, profile_dir) = if release { ("release", "release") } else { ("dev", "debug") };
    // Plain bitcode objects: no LTO inside the archive (AMD's target does its own), one module per crate, aborting
    // panics, no debug info; a dev build is optimized a little, as the Rust programs' dev profile is.
    let config = [
        format!("target.{triple}.rustflags={:?}", startup_rustflags(target, arch)),
        format!("profile.{profile}.lto=false"),
        format!("profile.{profile}.codegen-units=1"),
        format!("profile.{profile}.panic=\"abort\""),
        format!("profile.{profile}.debug=false"),
        format!("profile.{profile}.opt-level={}", if release { 3 } else { 1 }),
    ];
    let config: Vec<String> = config.into_iter().flat_map(|c| ["--config".to_owned(), c]).collect();
    cmd!(
        sh,
        "cargo rustc --quiet -p {package} --target {triple} -Zbuild-std=core --profile {profile}
         --target-dir {target_dir} {config...} --crate-type staticlib"
    )
    .envs(toolchain::DEVICE_CARGO_ENV)
    .run()
    .with_context(|| format!("building {package} as a static library for {arch} failed"))?;
    let archive = target_dir.join(triple).join(profile_dir).join(format!("lib{}.a", package.replace('-', "_")));
    ensure!(archive.is_file(), "cargo built no {}", archive.display());
    Ok(archive)
}

/// Compiles `source` to LLVM bitcode objects in `out_dir` with the `cc` crate; returns the objects.
fn compile(
    clang: &Path,
    target: &'static Target,
    arch: &str,
    release: bool,
    language: Language,
    source: &Path,
    out_dir: &Path,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out_dir)?;
    let mut build = cc::Build::new();
    build
        .compiler(clang)
        .target(target.triple)
        .host(gpu_bitcode_linker::host_triple())
        .opt_level(if release { 3 } else { 1 })
        .debug(false)
        .pic(false)
        .out_dir(out_dir)
        .cargo_metadata(false)
        .emit_rerun_if_env_changed(false)
        .warnings(true)
        .extra_warnings(true)
        .include(crate::project_root().join(INCLUDE_DIR))
        .cpp(language == Language::Cxx)
        .file(source);
    for flag in clang_flags(target, arch)? {
        build.flag(flag);
    }
    for flag in language.flags() {
        build.flag(flag);
    }
    let objects = build.try_compile_intermediates().map_err(|error| anyhow::anyhow!("{error}"))?;
    for object in &objects {
        let bytes = std::fs::read(object).with_context(|| format!("cannot read {}", object.display()))?;
        ensure!(
            gpu_bitcode_linker::is_bitcode(&bytes),
            "{} is not LLVM bitcode (was -flto dropped?)",
            object.display()
        );
    }
    Ok(objects)
}

/// Links the program's objects with the startup archive into `image`.
#[allow(clippy::too_many_arguments)]
fn link(
    sh: &Shell,
    target: &'static Target,
    arch: &str,
    release: bool,
    linker: &Path,
    sysroot: &Path,
    objects: &[PathBuf],
    startup: &Path,
    image: &Path,
) -> Result<()> {
    let opt = if release { "-O3" } else { "-O1" };
    match target.linker {
        Linker::BitcodeLinker => {
            let triple = target.triple;
            cmd!(sh, "{linker} {objects...} {startup} --target {triple} --target-cpu {arch} -o {image} {opt}")
                .env("GPU_LLVM_TOOLS_DIR", toolchain::llvm_tools_dir(sysroot))
                .run()?;
        }
        Linker::RustLld => {
            // rust-lld is the lld that links the Rust programs for AMD, with exactly the nightly's LLVM.
            let lld = toolchain::llvm_tools_dir(sysroot).join("rust-lld");
            let (mcpu, lto_opt) = (format!("-plugin-opt=mcpu={arch}"), format!("--lto-{}", &opt[1..]));
            // `--no-undefined`: a shared object may otherwise keep undefined symbols, which fail only when loaded.
            cmd!(sh, "{lld} -flavor gnu -shared --no-undefined {mcpu} {lto_opt} {objects...} {startup} -o {image}")
                .run()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_startup_targets::{AMDGPU, NVPTX};

    #[test]
    fn clang_versions_are_read_from_the_first_line() {
        assert_eq!(clang_major("Debian clang version 22.1.0 (++20260101)\nTarget: x86_64-pc-linux-gnu"), Some(22));
        assert_eq!(clang_major("clang version 21.0.0git (https://github.com/llvm/llvm-project abc)"), Some(21));
        assert_eq!(clang_major("Apple clang version 17.0.0 (clang-1700.0.13.3)"), Some(17));
        assert_eq!(clang_major("gcc (Debian 12.2.0-14) 12.2.0"), None);
    }

    #[test]
    fn amd_startup_objects_are_bitcode() {
        assert!(startup_rustflags(&AMDGPU, "gfx90a").contains(&"-Clinker-plugin-lto".to_owned()));
        assert_eq!(startup_rustflags(&NVPTX, "sm_90"), ["-Ctarget-cpu=sm_90"]);
    }

    #[test]
    fn every_c_and_cxx_program_has_a_source_and_expectations() {
        let root = crate::project_root();
        let programs = programs(&root).unwrap();
        assert!(programs.iter().filter(|p| p.language == Language::C).count() >= 2, "{programs:?}");
        assert!(programs.iter().any(|p| p.language == Language::Cxx), "{programs:?}");
        for program in programs {
            assert!(program.dir(&root).join("expect.toml").is_file(), "{program:?} has no expect.toml");
        }
    }

    #[test]
    fn a_name_taken_by_a_c_and_a_cxx_program_is_refused() {
        let root = std::env::temp_dir().join(format!("xtask-programs-{}", std::process::id()));
        for (language, name) in [(Language::C, "twice"), (Language::Cxx, "twice"), (Language::Cxx, "once")] {
            let dir = root.join(language.programs_dir()).join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(language.source()), "").unwrap();
        }
        std::fs::create_dir_all(root.join("tests/programs-c/no-source")).unwrap();
        let error = programs(&root).unwrap_err().to_string();
        assert!(error.contains("two programs are named `twice`"), "{error}");
        std::fs::remove_dir_all(root.join("tests/programs-c/twice")).unwrap();
        let found = programs(&root).unwrap();
        assert_eq!(
            found.iter().map(|p| (p.name.as_str(), p.language)).collect::<Vec<_>>(),
            [("once", Language::Cxx), ("twice", Language::Cxx)]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
