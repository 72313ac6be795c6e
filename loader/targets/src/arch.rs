//! Architectures: which a target accepts, which this machine's GPU has, and the PTX ISA version each NVIDIA one
//! needs.

use std::process::{Command, Stdio};

/// Why an architecture has no PTX ISA version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxArchError {
    /// It is no `sm_NN`.
    NotNvidia,
    /// It is older than sm_70, which the startup needs (independent thread scheduling).
    TooOld,
}

/// The lowest PTX ISA version (times ten) that supports `arch`, from the PTX ISA manual's target table.
pub fn min_ptx_version(arch: &str) -> Result<u32, PtxArchError> {
    let sm = arch.strip_prefix("sm_").and_then(sm_number).ok_or(PtxArchError::NotNvidia)?;
    Ok(match sm {
        0..=69 => return Err(PtxArchError::TooOld),
        70..=72 => 60,
        73..=75 => 63,
        76..=80 => 70,
        81..=86 => 71,
        87 => 74,
        88..=89 => 78,
        90..=99 => 78,
        100..=101 => 86,
        _ => 87,
    })
}

/// The number of `sm_NN`, `sm_NNa` or `sm_NNf`.
fn sm_number(digits: &str) -> Option<u32> {
    digits.trim_end_matches(['a', 'f']).parse().ok()
}

/// `gfx` and hex digits: the AMD architectures.
pub(crate) fn is_gfx(arch: &str) -> bool {
    arch.strip_prefix("gfx").is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The first NVIDIA GPU's compute capability as an architecture (`9.0` is `sm_90`).
pub(crate) fn detect_nvidia() -> Option<String> {
    first_line_of("nvidia-smi", &["--query-gpu=compute_cap", "--format=csv,noheader"])
        .map(|cap| format!("sm_{}", cap.replace('.', "")))
}

/// The first AMD GPU's architecture.
pub(crate) fn detect_amd() -> Option<String> {
    first_line_of("amdgpu-arch", &[])
}

/// The first non-empty line `program` prints, or `None` when it is missing or fails.
fn first_line_of(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8_lossy(&output.stdout).lines().map(str::trim).find(|line| !line.is_empty()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_versions_follow_the_table() {
        assert_eq!(min_ptx_version("sm_70"), Ok(60));
        assert_eq!(min_ptx_version("sm_80"), Ok(70));
        assert_eq!(min_ptx_version("sm_90"), Ok(78));
        assert_eq!(min_ptx_version("sm_90a"), Ok(78));
        assert_eq!(min_ptx_version("sm_60"), Err(PtxArchError::TooOld));
        assert_eq!(min_ptx_version("gfx90a"), Err(PtxArchError::NotNvidia));
    }
}
