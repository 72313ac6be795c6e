//! An nvptx build links through `gpu-bitcode-linker`, which rustup cannot install. When it is missing, this says how
//! to install it, before rustc fails at the link with a message that does not.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo::rerun-if-env-changed=PATH");
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("nvptx64") {
        return;
    }
    // Cargo hands build scripts the linker it resolved for the target (`target.<name>.linker`).
    let problem = match std::env::var_os("RUSTC_LINKER") {
        None => "no linker is set for the nvptx target: run `cargo gpu-startup init` in your crate, which sets \
                 `linker = \"gpu-bitcode-linker\"` in .cargo/config.toml"
            .to_owned(),
        Some(linker) if find(&linker).is_none() => {
            format!("the nvptx linker `{}` is not installed (or not on PATH)", Path::new(&linker).display())
        }
        Some(_) => return,
    };
    println!("cargo::error={problem}; {}", install_hint());
}

/// The command that installs the host tools, from the sources this crate was built from when they are at hand.
fn install_hint() -> String {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let script = manifest_dir.join("../../loader/install");
    match script.is_file().then(|| script.canonicalize().ok()).flatten() {
        Some(script) => format!(
            "install it with the other host tools: `{}` (gpu-loader, gpu-bitcode-linker, cargo-gpu-startup)",
            script.display()
        ),
        None => "install it with the other host tools: `loader/install` in the gpu-startup repository \
                 (gpu-loader, gpu-bitcode-linker, cargo-gpu-startup)"
            .to_owned(),
    }
}

/// The program `linker` names: a path as it is, a bare name on `PATH`.
fn find(linker: &OsStr) -> Option<PathBuf> {
    let linker = Path::new(linker);
    if linker.components().count() > 1 {
        return linker.is_file().then(|| linker.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(linker)).find(|candidate| candidate.is_file())
}
