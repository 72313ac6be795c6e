//! The two GPU targets the startup supports: their triples, architectures and image files. The setup command
//! (`cargo gpu-startup`) and `cargo xtask` both build through these.

pub mod spec;

use std::fmt;
use std::process::{Command, Stdio};
use std::str::FromStr;

/// A GPU target the startup supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GpuTarget {
    Nvptx,
    Amdgpu,
}

impl GpuTarget {
    pub const ALL: [GpuTarget; 2] = [GpuTarget::Nvptx, GpuTarget::Amdgpu];

    /// rustc's built-in target, which the target spec is derived from.
    pub fn triple(self) -> &'static str {
        match self {
            GpuTarget::Nvptx => "nvptx64-nvidia-cuda",
            GpuTarget::Amdgpu => "amdgcn-amd-amdhsa",
        }
    }

    /// The short name used on command lines and in folder names (`target/gpu/<name>/<arch>/`).
    pub fn name(self) -> &'static str {
        match self {
            GpuTarget::Nvptx => "nvptx",
            GpuTarget::Amdgpu => "amdgpu",
        }
    }

    /// The architecture to build for when none is given: the machine's GPU if it has one of this vendor, else the
    /// H200's (sm_90) or the MI200's (gfx90a).
    pub fn default_arch(self) -> String {
        self.detect_arch().unwrap_or_else(|| self.fallback_arch().to_owned())
    }

    /// The architecture of this machine's first GPU of this vendor (`nvidia-smi`, `amdgpu-arch`), if it has one.
    pub fn detect_arch(self) -> Option<String> {
        let detected = match self {
            GpuTarget::Nvptx => first_line_of("nvidia-smi", &["--query-gpu=compute_cap", "--format=csv,noheader"])
                .map(|cap| format!("sm_{}", cap.replace('.', ""))),
            GpuTarget::Amdgpu => first_line_of("amdgpu-arch", &[]),
        };
        detected.filter(|arch| self.accepts_arch(arch))
    }

    /// The architecture to build for on a machine without a GPU of this vendor.
    pub fn fallback_arch(self) -> &'static str {
        match self {
            GpuTarget::Nvptx => "sm_90",
            GpuTarget::Amdgpu => "gfx90a",
        }
    }

    /// Whether `arch` names an architecture of this target that the startup supports.
    pub fn accepts_arch(self, arch: &str) -> bool {
        match self {
            GpuTarget::Nvptx => gpu_bitcode_linker::min_ptx_version(arch).is_ok(),
            GpuTarget::Amdgpu => {
                arch.strip_prefix("gfx").is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_hexdigit()))
            }
        }
    }

    /// The codegen flags for `arch`: the CPU, for the program and for `core` alike. (The PTX ISA version follows
    /// from the CPU: the bitcode linker raises it.)
    pub fn rustflags(self, arch: &str) -> Vec<String> {
        vec![format!("-Ctarget-cpu={arch}")]
    }

    /// The extension of the image file.
    pub fn image_extension(self) -> &'static str {
        match self {
            GpuTarget::Nvptx => "ptx",
            GpuTarget::Amdgpu => "elf",
        }
    }
}

/// The first non-empty line `program` prints, or `None` when it is missing or fails.
fn first_line_of(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8_lossy(&output.stdout).lines().map(str::trim).find(|line| !line.is_empty()).map(str::to_owned)
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

    #[test]
    fn fallback_archs_are_accepted() {
        for target in GpuTarget::ALL {
            assert!(target.accepts_arch(target.fallback_arch()), "{target}");
        }
    }
}
