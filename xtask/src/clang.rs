//! The flags every clang compile for a GPU takes: the C and C++ programs' and the varargs check's.

use anyhow::Result;
use gpu_startup_setup::target::GpuTarget;

/// clang's flags for `target` and `arch`, beyond what `cc` adds.
pub fn clang_flags(target: GpuTarget, arch: &str) -> Result<Vec<String>> {
    let mut flags: Vec<String> = ["-nogpulib", "-ffreestanding", "-flto"].map(str::to_owned).into();
    match target {
        GpuTarget::Nvptx => {
            // Without a CUDA installation clang assumes PTX 4.2, too old for any arch the startup supports.
            let ptx = gpu_bitcode_linker::min_ptx_version(arch)?;
            flags.extend([format!("-march={arch}"), "-Xclang".into(), "-target-feature".into()]);
            flags.extend(["-Xclang".into(), format!("+ptx{ptx}")]);
        }
        GpuTarget::Amdgpu => flags.push(format!("-mcpu={arch}")),
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvptx_gets_a_ptx_version_that_its_arch_supports() {
        let flags = clang_flags(GpuTarget::Nvptx, "sm_90").unwrap();
        assert!(flags.contains(&"-march=sm_90".to_owned()) && flags.contains(&"+ptx78".to_owned()), "{flags:?}");
        assert!(clang_flags(GpuTarget::Nvptx, "sm_60").is_err());
        let flags = clang_flags(GpuTarget::Amdgpu, "gfx90a").unwrap();
        assert!(flags.contains(&"-mcpu=gfx90a".to_owned()) && flags.contains(&"-flto".to_owned()), "{flags:?}");
    }
}
