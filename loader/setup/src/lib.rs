//! `cargo gpu-startup init`: sets a crate up so that plain `cargo build` builds it for the GPU and `cargo run` runs
//! it there. It writes, in the crate's folder:
//!
//! - `rust-toolchain.toml`: the project's nightly and components ([`toolchain`]);
//! - in `.cargo`, `nvptx64-gpu-startup.json` and `amdgcn-gpu-startup.json`: target specs that allow executables,
//!   derived from that toolchain's own ([`spec`]);
//! - `.cargo/config.toml`: the default target, `build-std`, the linker, the runner, the architectures and the
//!   profiles GPU builds need ([`config`]).
//!
//! With `--std` it builds Rust's std for the default target into the user's cache ([`std_cache_dir`],
//! [`std_sysroot`]) unless it is there, and writes the std target's spec instead of the two specs, and a config that
//! builds against that std ([`config::Config::merge_std`]): a plain `bin` crate written against std then builds and
//! runs with `cargo build` and `cargo run`.
//!
//! It checks everything before it writes anything, writes each file whole (a temporary file renamed over it), and
//! leaves a file that already says what it should untouched: running it again changes nothing.

pub mod config;
pub mod spec;
pub mod std_sysroot;
pub mod toolchain;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

use config::{Config, Plan};
use gpu_startup_targets::{AMDGPU, NVPTX, Target};
use toolchain::Pin;

/// What to set up.
#[derive(Clone, Debug)]
pub struct InitOptions {
    /// The crate's folder (the one with `Cargo.toml`).
    pub dir: PathBuf,
    /// What `cargo build` builds for; by default what the config already says, else this machine's GPU's vendor.
    pub target: Option<&'static Target>,
    /// The architecture of that target (or of the target it belongs to, when no target is given); by default what
    /// the config already says, else this machine's GPU's, else sm_90 / gfx90a.
    pub gpu_arch: Option<String>,
    /// Set the crate up for Rust's std (`docs/std.md`): std is built for the GPU, or found built, in
    /// [`std_cache_dir`], and the crate builds against it.
    pub std: bool,
}

/// What a file of the setup went through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileChange {
    Created,
    Updated,
    Unchanged,
}

/// What `init` did.
#[derive(Debug)]
pub struct Setup {
    pub plan: Plan,
    /// Each file, relative to the crate's folder.
    pub files: Vec<(PathBuf, FileChange)>,
    /// Whether `Cargo.toml` names `gpu-startup` as a dependency.
    pub has_dependency: bool,
    /// Host tools the build and `cargo run` call that are not on `PATH`.
    pub missing_tools: Vec<&'static str>,
    /// For a std setup: the std it builds against, and whether this run built it.
    pub std: Option<std_sysroot::StdSysroot>,
}

/// Sets the crate in `options.dir` up; see the module's documentation.
pub fn init(options: &InitOptions) -> Result<Setup> {
    let dir = &options.dir;
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        bail!(
            "{} is not a crate: it has no Cargo.toml (make one with `cargo new NAME`, or run this in your crate's \
             folder)",
            dir.display()
        );
    }
    for (old, new) in [(".cargo/config", ".cargo/config.toml"), ("rust-toolchain", "rust-toolchain.toml")] {
        if dir.join(old).is_file() {
            bail!("{} is the old name of {new}: rename it, then run this again", dir.join(old).display());
        }
    }
    let has_dependency = depends_on_gpu_startup(&read_manifest(&manifest)?);

    let config_path = dir.join(".cargo/config.toml");
    let (config_text, config_name) =
        (read_optional(&config_path)?.unwrap_or_default(), config_path.display().to_string());
    let config = Config::parse(&config_text, &config_name)?;
    let plan = plan(options, &config)?;
    let toolchain_path = dir.join("rust-toolchain.toml");
    let pin = Pin::project();
    let toolchain_file = pin.merged_file(read_optional(&toolchain_path)?.as_deref(), &toolchain_path)?;
    // A std setup is for one target, the default: its place among the plan's architectures.
    let target = plan.default_target;
    let index = Target::ALL.iter().position(|&t| t == target).expect("a target of the plan");
    if options.std {
        // Checked before std is built, which takes a minute: a contradiction is reported at once.
        Config::parse(&config_text, &config_name)?.merge_std(
            target,
            &plan.archs[index],
            plan.replace_arch[index],
            Path::new("/"),
        )?;
    }
    let config_file = if options.std { None } else { Some(config.merge(&plan)?) };

    // Everything is checked: now the toolchain, and the specs it prints.
    let rustc = pin.install()?;
    let mut files = Vec::new();
    let mut std = None;
    if options.std {
        let spec = spec::executable_spec(target, &spec::rustc_spec(rustc.command(), target)?)?;
        let startup = startup_source(target).ok_or_else(|| {
            anyhow!("std needs the startup's sources to build its runtime, and they are not where this tool was built")
        })?;
        let cache = std_cache_dir()?;
        println!("cargo-gpu-startup: std for {} (built once per toolchain, in {})", target, cache.display());
        let built = std_sysroot::build(&rustc, target, &std_sysroot::std_spec(&spec)?, &startup, &cache)?;
        let spec_text = std::fs::read_to_string(&built.spec)
            .with_context(|| format!("cannot read the std spec {}", built.spec.display()))?;
        files.push((PathBuf::from(config::std_spec_path(target)), spec_text));
        let merged = Config::parse(&config_text, &config_name)?.merge_std(
            target,
            &plan.archs[index],
            plan.replace_arch[index],
            &built.sysroot,
        )?;
        files.push((PathBuf::from(".cargo/config.toml"), merged));
        std = Some(built);
    } else {
        for target in Target::ALL {
            let spec = spec::executable_spec(target, &spec::rustc_spec(rustc.command(), target)?)?;
            files.push((PathBuf::from(config::spec_path(target)), spec));
        }
    }
    files.push((PathBuf::from("rust-toolchain.toml"), toolchain_file));
    if let Some(config_file) = config_file {
        files.push((PathBuf::from(".cargo/config.toml"), config_file));
    }
    let files = files
        .into_iter()
        .map(|(path, text)| Ok((path.clone(), write_if_changed(&dir.join(&path), &text)?)))
        .collect::<Result<Vec<_>>>()?;

    Ok(Setup {
        plan,
        files,
        has_dependency,
        missing_tools: [config::LINKER, config::RUNNER]
            .into_iter()
            .filter(|tool| find_on_path(tool).is_none())
            .collect(),
        std,
    })
}

/// The target and architectures: what was asked for, else what the config says, else what this machine has.
fn plan(options: &InitOptions, config: &Config) -> Result<Plan> {
    let arch_target = match &options.gpu_arch {
        Some(arch) => Some(Target::ALL.into_iter().find(|target| target.accepts_arch(arch)).ok_or_else(|| {
            anyhow!("`{arch}` is not a GPU architecture the startup supports (NVIDIA sm_70 or later, AMD gfxNNN)")
        })?),
        None => None,
    };
    let default_target = match (options.target, arch_target) {
        (Some(target), Some(arch_target)) if target != arch_target => {
            bail!("`{}` is not an {target} architecture", options.gpu_arch.as_deref().unwrap_or_default())
        }
        (Some(target), _) | (None, Some(target)) => target,
        (None, None) => config.default_target().unwrap_or_else(machine_target),
    };
    let mut archs = [String::new(), String::new()];
    let mut replace_arch = [false, false];
    for (index, target) in Target::ALL.into_iter().enumerate() {
        archs[index] = match (&options.gpu_arch, arch_target == Some(target), config.arch(target)) {
            (Some(arch), true, _) => {
                replace_arch[index] = true;
                arch.clone()
            }
            (_, _, Some(existing)) => existing,
            _ => target.default_arch(),
        };
    }
    Ok(Plan { default_target, archs, replace_arch })
}

/// AMD when this machine has an AMD GPU and no NVIDIA one, else NVIDIA.
fn machine_target() -> &'static Target {
    if AMDGPU.detect_arch().is_some() && NVPTX.detect_arch().is_none() { &AMDGPU } else { &NVPTX }
}

fn read_optional(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes `text` to `path` whole (a temporary file renamed over it), unless it holds `text` already.
pub fn write_if_changed(path: &Path, text: &str) -> Result<FileChange> {
    let change = match read_optional(path)? {
        Some(existing) if existing == text => return Ok(FileChange::Unchanged),
        Some(_) => FileChange::Updated,
        None => FileChange::Created,
    };
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temporary = parent.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&temporary, text).with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot replace {}", path.display())
    })?;
    Ok(change)
}

/// The crate's `Cargo.toml`, refused when it is not TOML: cargo would refuse the crate anyway, and the setup is
/// for a crate that builds.
fn read_manifest(path: &Path) -> Result<toml_edit::DocumentMut> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.parse().map_err(|error| anyhow!("{} is not valid TOML: {}", path.display(), toolchain::one_line(&error)))
}

/// Whether a manifest names `gpu-startup` among its dependencies, for any target.
fn depends_on_gpu_startup(document: &toml_edit::DocumentMut) -> bool {
    let names = |table: Option<&toml_edit::Item>| table.and_then(|t| t.get("gpu-startup")).is_some();
    names(document.get("dependencies"))
        || document
            .get("target")
            .and_then(toml_edit::Item::as_table_like)
            .is_some_and(|targets| targets.iter().any(|(_, target)| names(target.get("dependencies"))))
}

/// The path of `gpu-startup` in the sources these tools were built from, when they are still there.
pub fn gpu_startup_source() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../startup-common/gpu-startup");
    path.join("Cargo.toml").is_file().then(|| path.canonicalize().ok()).flatten()
}

/// `target`'s startup crate's `Cargo.toml` in the sources these tools were built from, when they are still there:
/// a std setup builds the startup's runtime for std from it.
pub fn startup_source(target: &Target) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(target.startup_crate).join("Cargo.toml");
    path.is_file().then(|| path.canonicalize().ok()).flatten()
}

/// Where std is built for std setups, shared by every crate of the user's: `$GPU_STARTUP_CACHE_DIR/std`, else
/// `$XDG_CACHE_HOME/gpu-startup/std`, else `~/.cache/gpu-startup/std`.
pub fn std_cache_dir() -> Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    let base = var("GPU_STARTUP_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|dir| dir.join("gpu-startup")))
        .or_else(|| var("HOME").map(|home| home.join(".cache/gpu-startup")))
        .ok_or_else(|| anyhow!("no folder for std's cache: set GPU_STARTUP_CACHE_DIR or HOME"))?;
    Ok(base.join("std"))
}

/// The script that installs the host tools (`loader/install`) in the sources these tools were built from, when they
/// are still there.
pub fn install_script() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../install");
    path.is_file().then(|| path.canonicalize().ok()).flatten()
}

/// Finds a program on `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(target: Option<&'static Target>, gpu_arch: Option<&str>) -> InitOptions {
        InitOptions { dir: PathBuf::from("."), target, gpu_arch: gpu_arch.map(str::to_owned), std: false }
    }

    #[test]
    fn an_architecture_picks_its_target_and_replaces_the_configs() {
        let config =
            Config::parse("[target.amdgcn-gpu-startup]\nrustflags = [\"-Ctarget-cpu=gfx90a\"]\n", "x").unwrap();
        let plan = plan(&options(None, Some("gfx942")), &config).unwrap();
        assert_eq!(plan.default_target, &AMDGPU);
        assert_eq!(plan.archs[1], "gfx942");
        assert_eq!(plan.replace_arch, [false, true]);
    }

    #[test]
    fn without_options_the_config_decides() {
        let config = Config::parse(
            "[build]\ntarget = \".cargo/amdgcn-gpu-startup.json\"\n[target.nvptx64-gpu-startup]\nrustflags = \
             [\"-Ctarget-cpu=sm_80\"]\n[target.amdgcn-gpu-startup]\nrustflags = [\"-Ctarget-cpu=gfx942\"]\n",
            "x",
        )
        .unwrap();
        let plan = plan(&options(None, None), &config).unwrap();
        assert_eq!(plan.default_target, &AMDGPU);
        assert_eq!(plan.archs, ["sm_80".to_owned(), "gfx942".to_owned()]);
        assert_eq!(plan.replace_arch, [false, false]);
    }

    #[test]
    fn a_target_and_an_architecture_must_agree() {
        let config = Config::parse("", "x").unwrap();
        let error = plan(&options(Some(&NVPTX), Some("gfx90a")), &config).unwrap_err().to_string();
        assert_eq!(error, "`gfx90a` is not an nvptx architecture");
        let error = plan(&options(None, Some("sm_35")), &config).unwrap_err().to_string();
        assert!(error.starts_with("`sm_35` is not a GPU architecture the startup supports"), "{error}");
    }

    #[test]
    fn dependencies_are_found_in_every_table() {
        let depends = |manifest: &str| depends_on_gpu_startup(&manifest.parse().unwrap());
        assert!(depends("[dependencies]\ngpu-startup = { path = \"x\" }\n"));
        assert!(depends("[target.'cfg(target_os = \"cuda\")'.dependencies]\ngpu-startup = \"0.1\"\n"));
        assert!(!depends("[dependencies]\nserde = \"1\"\n[dev-dependencies]\ngpu-startup = \"1\"\n"));
    }

    #[test]
    fn files_are_written_whole_and_only_when_they_change() {
        let dir = std::env::temp_dir().join(format!("gpu-startup-setup-{}", std::process::id()));
        let path = dir.join(".cargo/config.toml");
        assert_eq!(write_if_changed(&path, "a = 1\n").unwrap(), FileChange::Created);
        assert_eq!(write_if_changed(&path, "a = 1\n").unwrap(), FileChange::Unchanged);
        assert_eq!(write_if_changed(&path, "a = 2\n").unwrap(), FileChange::Updated);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a = 2\n");
        let leftovers: Vec<_> =
            std::fs::read_dir(dir.join(".cargo")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, ["config.toml"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
