//! The pinned toolchain and the tools the GPU build needs; missing components are installed, or a clear error says
//! what to install.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

/// The rustup components device code needs: `rust-src` for `-Zbuild-std=core,alloc`, `llvm-tools` for the bitcode linker.
pub const DEVICE_COMPONENTS: [&str; 2] = ["rust-src", "llvm-tools"];

/// The environment of every cargo command that builds device code. With incremental compilation (the dev profile's
/// default) rustc loses the bitcode it embeds in amdgpu objects and stops with an internal compiler error, "cannot
/// find embedded bitcode"; so device builds never use it, whatever the profile says.
pub const DEVICE_CARGO_ENV: [(&str, &str); 1] = [("CARGO_INCREMENTAL", "0")];

/// The toolchain's sysroot, with the device components installed (installing them if missing).
pub fn ensure_device_toolchain(sh: &Shell) -> Result<PathBuf> {
    let sysroot = PathBuf::from(cmd!(sh, "rustc --print sysroot").read().context("cannot run rustc")?);
    let missing: Vec<&str> =
        DEVICE_COMPONENTS.into_iter().filter(|component| !component_present(&sysroot, component)).collect();
    if !missing.is_empty() {
        let list = missing.join(", ");
        eprintln!("xtask: installing rustup components {list}");
        cmd!(sh, "rustup component add {missing...}")
            .run()
            .with_context(|| format!("cannot install rustup components {list}: install them by hand"))?;
    }
    for component in DEVICE_COMPONENTS {
        if !component_present(&sysroot, component) {
            bail!("rustup component `{component}` is still missing from {}", sysroot.display());
        }
    }
    Ok(sysroot)
}

fn component_present(sysroot: &std::path::Path, component: &str) -> bool {
    match component {
        "rust-src" => sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml").exists(),
        "llvm-tools" => llvm_tools_dir(sysroot).join("llvm-link").exists(),
        _ => false,
    }
}

/// Where `llvm-tools` puts `llvm-link`, `opt`, `llc` and friends.
pub fn llvm_tools_dir(sysroot: &std::path::Path) -> PathBuf {
    sysroot.join("lib/rustlib").join(gpu_bitcode_linker::host_triple()).join("bin")
}

/// Finds a program on `PATH`.
pub use gpu_startup_setup::find_on_path as find_program;

/// Installs a rustup component of the pinned toolchain if it is missing (for example `miri`).
pub fn ensure_component(sh: &Shell, component: &str) -> Result<()> {
    let installed = cmd!(sh, "rustup component list --installed").quiet().read().unwrap_or_default();
    if installed.lines().any(|line| line.split('-').next() == Some(component)) {
        return Ok(());
    }
    eprintln!("xtask: installing rustup component {component}");
    cmd!(sh, "rustup component add {component}")
        .run()
        .with_context(|| format!("cannot install rustup component `{component}`: install it by hand"))
}

/// Installs a Debian package with apt-get when running as root on a machine that has it; otherwise fails with the
/// command to run.
pub fn install_debian_package(sh: &Shell, package: &str) -> Result<()> {
    let root = cmd!(sh, "id -u").quiet().read().is_ok_and(|uid| uid.trim() == "0");
    if !root || find_program("apt-get").is_none() {
        bail!("`{package}` is not installed: install it (Debian or Ubuntu: `sudo apt-get install {package}`)");
    }
    eprintln!("xtask: installing the Debian package {package}");
    cmd!(sh, "apt-get update -qq").run().context("apt-get update failed")?;
    cmd!(sh, "apt-get install -y -qq {package}")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .run()
        .with_context(|| format!("cannot install `{package}` with apt-get"))
}
