//! The GPU targets of the startup, one [`Target`] descriptor each ([`NVPTX`], [`AMDGPU`]): what `cargo gpu-startup`,
//! `cargo xtask` and `gpu-loader` know of a target, in one place. Code asks a descriptor for a fact instead of
//! matching on the target; a new target is a new descriptor here, its backend in the loader and the image kinds it
//! produces (`docs/architecture.md`, "A new target").

mod arch;
mod image;

use std::fmt;
use std::hash::{Hash, Hasher};

pub use arch::{PtxArchError, min_ptx_version};
pub use image::ImageKind;

/// The GPU runtime that loads a target's images and runs its kernels; the loader opens the backend of this name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// NVIDIA's CUDA driver API.
    Cuda,
    /// The ROCm runtime (HSA).
    Hsa,
}

/// What links a target's programs: rustc's linker flavor for it, and what the C and C++ programs are linked with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linker {
    /// `gpu-bitcode-linker` (rustc's `llbc` flavor): bitcode in, PTX out.
    BitcodeLinker,
    /// The toolchain's `rust-lld`, with LTO: bitcode in, a linked ELF out.
    RustLld,
}

/// A GPU target the startup supports, and everything the tools know of it. Descriptors compare by [`Target::name`].
#[derive(Debug)]
pub struct Target {
    /// The short name used on command lines and in folder names (`target/gpu/<name>/<arch>/`).
    pub name: &'static str,
    /// rustc's built-in target, which the target spec is derived from.
    pub triple: &'static str,
    /// The other names a command line may give it (`--target`).
    pub aliases: &'static [&'static str],
    /// The vendor, for messages.
    pub vendor: &'static str,
    /// The architecture to build for on a machine without a GPU of this target.
    pub fallback_arch: &'static str,
    /// How this machine's GPU of this target names its architecture, if it has one.
    detect_arch: fn() -> Option<String>,
    /// Whether an architecture is one of this target's that the startup supports.
    accepts_arch: fn(&str) -> bool,
    /// The kinds of image its builds produce, the one the build writes first.
    pub image_kinds: &'static [ImageKind],
    /// The extension of the image file a build writes (a build's image, before any other kind is made of it).
    pub image_extension: &'static str,
    /// The name of the derived target spec: its file is `<name>.json`, cargo builds into `target/<name>/`, and its
    /// config table is `[target.<name>]`.
    pub spec_name: &'static str,
    /// The executable suffix the derived spec sets, where rustc's own gives none.
    pub spec_exe_suffix: Option<&'static str>,
    /// What an executable is linked with, after rustc's own arguments.
    pub executable_link_args: &'static [&'static str],
    /// What links its programs.
    pub linker: Linker,
    /// Whether the target requires LTO: the startup library the C and C++ programs link with is then bitcode
    /// objects (`-Clinker-plugin-lto`).
    pub requires_lto: bool,
    /// The crate of the startup for this target.
    pub startup_crate: &'static str,
    /// clang's flag that names the architecture (`-march`, `-mcpu`).
    pub clang_arch_flag: &'static str,
    /// What the setup's config says of this target, in a comment above its table.
    pub summary: &'static str,
    /// The backend that runs its images.
    pub backend: BackendKind,
}

/// NVIDIA GPUs: PTX from the bitcode linker, run through CUDA.
pub static NVPTX: Target = Target {
    name: "nvptx",
    triple: "nvptx64-nvidia-cuda",
    aliases: &["nvptx64", "cuda"],
    vendor: "NVIDIA",
    fallback_arch: "sm_90",
    detect_arch: arch::detect_nvidia,
    accepts_arch: |arch| min_ptx_version(arch).is_ok(),
    image_kinds: &[ImageKind::Ptx, ImageKind::Cubin],
    image_extension: "ptx",
    spec_name: "nvptx64-gpu-startup",
    spec_exe_suffix: None,
    executable_link_args: &[],
    linker: Linker::BitcodeLinker,
    requires_lto: false,
    startup_crate: "startup-nvptx",
    clang_arch_flag: "-march",
    summary: "NVIDIA: PTX through gpu-bitcode-linker; `cargo run` runs it with gpu-loader",
    backend: BackendKind::Cuda,
};

/// AMD GPUs: code objects from rust-lld, run through HSA.
pub static AMDGPU: Target = Target {
    name: "amdgpu",
    triple: "amdgcn-amd-amdhsa",
    aliases: &["amdgcn", "hsa"],
    vendor: "AMD",
    fallback_arch: "gfx90a",
    detect_arch: arch::detect_amd,
    accepts_arch: arch::is_gfx,
    image_kinds: &[ImageKind::AmdCodeObject],
    image_extension: "elf",
    spec_name: "amdgcn-gpu-startup",
    // Executables are named like the images `gpu-loader` takes; rustc's spec gives them no suffix.
    spec_exe_suffix: Some(".elf"),
    // A shared code object (`ET_DYN`, the only kind the HSA loader takes), with every symbol bound inside it (rustc
    // compiles an executable's code for symbols that cannot be preempted), and no undefined symbol left for the GPU
    // loader to fail on.
    executable_link_args: &["-shared", "-Bsymbolic", "--no-undefined"],
    linker: Linker::RustLld,
    requires_lto: true,
    startup_crate: "startup-amdgpu",
    clang_arch_flag: "-mcpu",
    summary: "AMD: code objects through rust-lld (`--target .cargo/amdgcn-gpu-startup.json`)",
    backend: BackendKind::Hsa,
};

impl Target {
    /// Every target, in the order configs and plans list them.
    pub const ALL: [&'static Target; 2] = [&NVPTX, &AMDGPU];

    /// The target a command line names: its name, its triple or an alias.
    pub fn parse(name: &str) -> Result<&'static Target, String> {
        Self::ALL
            .into_iter()
            .find(|target| name == target.name || name == target.triple || target.aliases.contains(&name))
            .ok_or_else(|| format!("unknown GPU target `{name}` (expected nvptx or amdgpu)"))
    }

    /// The architecture to build for when none is given: the machine's GPU if it has one of this target, else
    /// [`Target::fallback_arch`] (the H200's sm_90, the MI200's gfx90a).
    pub fn default_arch(&self) -> String {
        self.detect_arch().unwrap_or_else(|| self.fallback_arch.to_owned())
    }

    /// The architecture of this machine's first GPU of this target (`nvidia-smi`, `amdgpu-arch`), if it has one.
    pub fn detect_arch(&self) -> Option<String> {
        (self.detect_arch)().filter(|arch| self.accepts_arch(arch))
    }

    /// Whether `arch` names an architecture of this target that the startup supports.
    pub fn accepts_arch(&self, arch: &str) -> bool {
        (self.accepts_arch)(arch)
    }

    /// The codegen flags for `arch`: the CPU, for the program and for `core` alike. (For PTX the ISA version follows
    /// from the CPU: the bitcode linker raises it.)
    pub fn rustflags(&self, arch: &str) -> Vec<String> {
        vec![format!("-Ctarget-cpu={arch}")]
    }

    /// The spec file's name.
    pub fn spec_file_name(&self) -> String {
        format!("{}.json", self.spec_name)
    }

    /// Whether its builds produce images of `kind`.
    pub fn produces(&self, kind: ImageKind) -> bool {
        self.image_kinds.contains(&kind)
    }
}

impl PartialEq for Target {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Target {}

impl Hash for Target {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archs_belong_to_their_target() {
        assert!(NVPTX.accepts_arch("sm_90"));
        assert!(!NVPTX.accepts_arch("sm_61"));
        assert!(!NVPTX.accepts_arch("gfx90a"));
        assert!(AMDGPU.accepts_arch("gfx90a"));
        assert!(AMDGPU.accepts_arch("gfx1030"));
        assert!(!AMDGPU.accepts_arch("sm_90"));
        assert!(!AMDGPU.accepts_arch("gfx"));
    }

    #[test]
    fn targets_parse_from_their_usual_names() {
        assert_eq!(Target::parse("nvptx"), Ok(&NVPTX));
        assert_eq!(Target::parse("cuda"), Ok(&NVPTX));
        assert_eq!(Target::parse("amdgcn-amd-amdhsa"), Ok(&AMDGPU));
        assert_eq!(Target::parse("hsa"), Ok(&AMDGPU));
        assert!(Target::parse("x86").unwrap_err().contains("unknown GPU target"));
    }

    #[test]
    fn fallback_archs_are_accepted() {
        for target in Target::ALL {
            assert!(target.accepts_arch(target.fallback_arch), "{target}");
        }
    }

    #[test]
    fn each_image_kind_belongs_to_the_one_target_that_produces_it() {
        for kind in ImageKind::ALL {
            let producers: Vec<_> = Target::ALL.into_iter().filter(|target| target.produces(kind)).collect();
            assert_eq!(producers, [kind.target()], "{kind:?}");
        }
        for target in Target::ALL {
            assert!(!target.image_kinds.is_empty(), "{target}");
        }
    }
}
