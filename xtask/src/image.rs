//! Where built images go and what every image gets there, whatever built it (`crate::build` for the Rust programs,
//! `crate::c_programs` for the C and C++ ones): a copy of its program's expectations and, for NVIDIA where the tools
//! are installed, its cubins.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use gpu_startup_targets::{ImageKind, Target};
use xshell::{Shell, cmd};

use crate::toolchain;

/// One built image.
#[derive(Clone, Debug)]
pub struct BuiltImage {
    pub program: String,
    pub target: &'static Target,
    pub arch: String,
    pub path: PathBuf,
}

/// The folder of the images of one target and arch, `target/gpu/<target>/<arch>/`, with the tools that make cubins
/// there.
pub struct ImageFolder {
    pub target: &'static Target,
    pub arch: String,
    pub dir: PathBuf,
    cubin_tools: Option<CubinTools>,
}

impl ImageFolder {
    pub fn new(target: &'static Target, arch: &str) -> Self {
        let dir = crate::project_root().join("target/gpu").join(target.name).join(arch);
        Self { target, arch: arch.to_owned(), dir, cubin_tools: CubinTools::find(target) }
    }

    /// Where the image of `program` goes: `<program>.<ext>` in the folder.
    pub fn image_path(&self, program: &str) -> PathBuf {
        self.dir.join(format!("{program}.{}", self.target.image_extension))
    }

    /// The steps after the image of `program` is at [`ImageFolder::image_path`]: copies the expectations in
    /// `source_dir` next to it (none for an image that has no folder of its own), and makes its cubins.
    pub fn add(&self, sh: &Shell, program: String, source_dir: Option<&Path>) -> Result<BuiltImage> {
        let path = self.image_path(&program);
        if let Some(source_dir) = source_dir {
            copy_expectations(source_dir, &self.dir, &program)?;
        }
        if let Some(tools) = &self.cubin_tools {
            tools.make(sh, &path, &self.arch)?;
        }
        Ok(BuiltImage { program, target: self.target, arch: self.arch.clone(), path })
    }
}

/// NVIDIA's tools that make cubins of a program's PTX, when they are installed (`ptxas`, and `nvlink` for a linked
/// cubin): the suite runs each program as PTX and as each kind of cubin.
struct CubinTools {
    ptxas: PathBuf,
    nvlink: Option<PathBuf>,
}

impl CubinTools {
    /// The tools on `PATH`, for NVIDIA targets where ptxas is installed.
    fn find(target: &'static Target) -> Option<Self> {
        if !target.produces(ImageKind::Cubin) {
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
    fn make(&self, sh: &Shell, ptx: &Path, arch: &str) -> Result<()> {
        let (ptxas, cubin) = (&self.ptxas, ptx.with_extension("cubin"));
        cmd!(sh, "{ptxas} -c -arch={arch} --maxrregcount 64 {ptx} -o {cubin}").run()?;
        if let Some(nvlink) = &self.nvlink {
            let linked = ptx.with_extension("linked.cubin");
            cmd!(sh, "{nvlink} -arch={arch} {cubin} -o {linked}").run()?;
        }
        Ok(())
    }
}

/// Copies `expect.toml` as `<program>.expect.toml`, and each further `expect.<variant>.toml` (another way to run the
/// same image) as `<program>.<variant>.expect.toml`.
fn copy_expectations(source_dir: &Path, out_dir: &Path, program: &str) -> Result<()> {
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

/// Checks every image statically: the three kernels with the ABI's parameters (for AMD, against the code object's
/// metadata note), well-formed constructor symbols, a `main` or a well-formed test table, and for NVIDIA sm_90 or
/// later the marker that lets the loader launch each kernel early. Needs no GPU.
pub fn check_images(images: &[BuiltImage]) -> Result<()> {
    let mut checked = 0;
    for built in images {
        let cubins = ["cubin", "linked.cubin"].map(|extension| built.path.with_extension(extension));
        for path in std::iter::once(built.path.clone()).chain(cubins.into_iter().filter(|cubin| cubin.is_file())) {
            let image = gpu_loader::image::Image::read(&path)?;
            image.check_startup_abi()?;
            gpu_loader::ctors::ConstructorTable::of(&image)?;
            let tests = gpu_loader::test_list::read(&image)?;
            if tests.is_empty() && image.lacks_own_main()? {
                bail!("{}: defines neither `main` nor tests", path.display());
            }
            if built.target.produces(ImageKind::Ptx)
                && arch_launches_early(&built.arch)
                && !image.defines_early_launch_marker()
            {
                bail!(
                    "{}: is built for {} but does not define the startup's early-launch marker: the loader would launch \
                     its kernels one after another (did the link drop it?)",
                    path.display(),
                    built.arch
                );
            }
            checked += 1;
        }
    }
    println!("xtask: static check passed for {checked} GPU images");
    Ok(())
}

/// PTX size budgets of release images, in bytes (1 KB = 1,000): the driver compiles every byte at a fresh image's
/// first run, so what the runtime links into a program that uses little of it is time on every edit–test loop.
/// A program that does nothing gets the three kernels and nothing of printing or panicking.
const PTX_SIZE_BUDGETS: &[(&str, u64)] = &[("empty", 45_000)];

/// Fails when a release PTX image of [`PTX_SIZE_BUDGETS`] is over its budget, naming the image, its size and the
/// budget; prints the sizes checked.
pub fn check_size_budgets(images: &[BuiltImage]) -> Result<()> {
    for built in images.iter().filter(|built| built.target.produces(ImageKind::Ptx)) {
        let Some(&(_, budget)) = PTX_SIZE_BUDGETS.iter().find(|(program, _)| *program == built.program) else {
            continue;
        };
        let bytes =
            std::fs::metadata(&built.path).with_context(|| format!("cannot read {}", built.path.display()))?.len();
        if bytes > budget {
            bail!(
                "{}: {bytes} bytes of PTX, over its budget of {budget}: something the runtime links in is reachable \
                 from the kernels (a panic, a print) where it was not before",
                built.path.display()
            );
        }
        println!("xtask: {}: {bytes} bytes of PTX, within its budget of {budget}", built.path.display());
    }
    Ok(())
}

/// Whether the NVIDIA startup built for `arch` (`sm_90`, `sm_90a`, ...) launches early: sm_90 and later have
/// programmatic dependent launch.
fn arch_launches_early(arch: &str) -> bool {
    let digits: String = arch.trim_start_matches("sm_").chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<u32>().is_ok_and(|version| version >= 90)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_startup_targets::NVPTX;

    /// The three kernels with the ABI's parameters and a `main`, for sm_90, with `extra` among the globals.
    fn ptx(extra: &str) -> String {
        format!(
            ".version 7.8\n.target sm_90\n.address_size 64\n{extra}\n\
             .visible .entry _begin(.param .align 8 .b8 _begin_param_0[56])\n{{ ret; }}\n\
             .visible .entry _start(.param .align 8 .b8 _start_param_0[40])\n{{ griddepcontrol.wait; ret; }}\n\
             .visible .entry _end(.param .align 8 .b8 _end_param_0[8])\n{{ griddepcontrol.wait; ret; }}\n\
             .visible .func (.param .b32 func_retval0) main(.param .b32 main_param_0)\n{{ ret; }}\n"
        )
    }

    #[test]
    fn an_sm_90_image_without_the_early_launch_marker_fails_the_check() {
        let dir = std::env::temp_dir().join(format!("xtask-marker-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = ".visible .global .align 1 .b8 __gpu_startup_early_launch[1] = {1};";
        let built = |name: &str, text: String, arch: &str| {
            let path = dir.join(format!("{name}.ptx"));
            std::fs::write(&path, text).unwrap();
            BuiltImage { program: name.into(), target: &NVPTX, arch: arch.into(), path }
        };
        check_images(&[built("marked", ptx(marker), "sm_90"), built("older", ptx(""), "sm_80")]).unwrap();
        let error = check_images(&[built("unmarked", ptx(""), "sm_90")]).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            error.contains("unmarked.ptx: is built for sm_90 but does not define the startup's early-launch marker"),
            "{error}"
        );
    }

    #[test]
    fn an_image_over_its_size_budget_fails_the_check() {
        let dir = std::env::temp_dir().join(format!("xtask-budget-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let built = |program: &str, bytes: usize| {
            let path = dir.join(format!("{program}.ptx"));
            std::fs::write(&path, vec![b' '; bytes]).unwrap();
            BuiltImage { program: program.into(), target: &NVPTX, arch: "sm_90".into(), path }
        };
        check_size_budgets(&[built("empty", 45_000), built("hello", 10_000_000)]).unwrap();
        let error = check_size_budgets(&[built("empty", 45_001)]).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(error.contains("empty.ptx: 45001 bytes of PTX, over its budget of 45000"), "{error}");
    }

    #[test]
    fn sm_90_and_later_launch_early() {
        for (arch, early) in [("sm_90", true), ("sm_90a", true), ("sm_100", true), ("sm_89", false), ("sm_80", false)] {
            assert_eq!(arch_launches_early(arch), early, "{arch}");
        }
    }
}
