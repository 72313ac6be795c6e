//! The flags every clang compile for a GPU takes: the C and C++ programs' and the varargs check's.

use anyhow::Result;
use gpu_startup_targets::{ImageKind, Target};

/// clang's flags for `target` and `arch`, beyond what `cc` adds.
pub fn clang_flags(target: &'static Target, arch: &str) -> Result<Vec<String>> {
    let mut flags: Vec<String> = ["-nogpulib", "-ffreestanding", "-flto"].map(str::to_owned).into();
    flags.push(format!("{}={arch}", target.clang_arch_flag));
    if target.produces(ImageKind::Ptx) {
        // Without a CUDA installation clang assumes PTX 4.2, too old for any arch the startup supports.
        let ptx = gpu_bitcode_linker::min_ptx_version(arch)?;
        flags.extend(["-Xclang".into(), "-target-feature".into()]);
        flags.extend(["-Xclang".into(), format!("+ptx{ptx}")]);
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_startup_targets::{AMDGPU, NVPTX};

    #[test]
    fn nvptx_gets_a_ptx_version_that_its_arch_supports() {
        let flags = clang_flags(&NVPTX, "sm_90").unwrap();
        assert!(flags.contains(&"-march=sm_90".to_owned()) && flags.contains(&"+ptx78".to_owned()), "{flags:?}");
        assert!(clang_flags(&NVPTX, "sm_60").is_err());
        let flags = clang_flags(&AMDGPU, "gfx90a").unwrap();
        assert!(flags.contains(&"-mcpu=gfx90a".to_owned()) && flags.contains(&"-flto".to_owned()), "{flags:?}");
    }
}
