//! Building a crate for the GPU the way any crate builds: with the target spec and the cargo settings that
//! `cargo gpu-startup init` writes (`gpu_startup_setup`), made here under `target/gpu-setup/` instead of in the
//! crate, and `gpu-bitcode-linker` found by name on `PATH`, as a user's build finds it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use gpu_startup_setup::config::{self, Config, Plan};
use gpu_startup_setup::spec;
use gpu_startup_setup::write_if_changed;
use gpu_startup_targets::Target;
use xshell::{Shell, cmd};

/// The cargo settings of a GPU build for one target and architecture: what `init` would write into a crate's
/// `.cargo/`.
#[derive(Clone, Debug)]
pub struct GpuSetup {
    pub target: &'static Target,
    pub arch: String,
    /// `.cargo/config.toml`, passed to cargo with `--config`.
    pub config: PathBuf,
    /// The target spec, passed with `--target`.
    pub spec: PathBuf,
}

impl GpuSetup {
    /// Writes `target/gpu-setup/<target>-<arch>/.cargo/` (only the files that change, so cargo's fingerprints hold).
    pub fn prepare(target: &'static Target, arch: &str) -> Result<Self> {
        let root = crate::project_root();
        let dir = root.join("target/gpu-setup").join(format!("{target}-{arch}"));
        for gpu in Target::ALL {
            let mut rustc = Command::new("rustc");
            rustc.current_dir(&root);
            let text = spec::executable_spec(gpu, &spec::rustc_spec(rustc, gpu)?)?;
            write_if_changed(&dir.join(config::spec_path(gpu)), &text)?;
        }
        let archs = Target::ALL.map(|gpu| if gpu == target { arch.to_owned() } else { gpu.fallback_arch.to_owned() });
        let plan = Plan { default_target: target, archs, replace_arch: [false; 2] };
        let config = dir.join(".cargo/config.toml");
        write_if_changed(&config, &Config::parse("", "config.toml")?.merge(&plan)?)?;
        Ok(Self { target, arch: arch.to_owned(), config, spec: dir.join(config::spec_path(target)) })
    }

    /// Builds the crate at `manifest`, or what `selection` (cargo's `--workspace`, `--package NAME`...) selects of
    /// its workspace, into `target_dir`: its programs (`cargo build`) or its test binaries (`cargo test --no-run`),
    /// as `what` says. Returns the GPU images cargo made. `tools` holds `gpu-bitcode-linker`.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        &self,
        sh: &Shell,
        what: Images,
        manifest: &Path,
        selection: &[String],
        release: bool,
        target_dir: &Path,
        tools: &Path,
    ) -> Result<Vec<Artifact>> {
        let profile = if release { "release" } else { "dev" };
        let (config, spec) = (&self.config, &self.spec);
        let path = std::env::join_paths(
            std::iter::once(tools.to_owned())
                .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )?;
        let command: &[&str] = match what {
            Images::Programs => &["build"],
            Images::Tests => &["test", "--no-run"],
        };
        let messages = cmd!(
            sh,
            "cargo {command...} --quiet --manifest-path {manifest} --config {config} --target {spec}
             --profile {profile} --target-dir {target_dir} --message-format=json-render-diagnostics {selection...}"
        )
        .env("PATH", path)
        .envs(crate::toolchain::DEVICE_CARGO_ENV)
        .read()
        .with_context(|| format!("building {} for {} ({}) failed", manifest.display(), self.target, self.arch))?;
        gpu_artifacts(&messages, what)
    }
}

/// What a build makes of a crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Images {
    /// Its programs: `bin` and `cdylib` targets.
    Programs,
    /// Its test binaries, as `cargo test` builds them.
    Tests,
}

/// A GPU image cargo built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// The folder of the crate it was built from.
    pub crate_dir: PathBuf,
    pub image: PathBuf,
    /// For a test binary of an integration test (`NAME.rs` in the crate's `tests` folder), `NAME`; `None` for a program or a crate's unit
    /// tests.
    pub integration_test: Option<String>,
}

impl Artifact {
    /// The image's name in an image folder: its crate's folder, and for an integration test `-NAME` after it.
    pub fn program(&self) -> Result<String> {
        let folder = self.crate_dir.file_name().context("a crate's folder")?.to_string_lossy().into_owned();
        Ok(match &self.integration_test {
            Some(test) => format!("{folder}-{test}"),
            None => folder,
        })
    }
}

/// The images of `what` among cargo's JSON messages: each `bin` target's executable and each `cdylib`'s `.ptx` or
/// `.elf`, or each test binary (`cargo test --no-run`, which builds a crate's programs too, for its integration
/// tests).
pub fn gpu_artifacts(messages: &str, what: Images) -> Result<Vec<Artifact>> {
    let mut artifacts = Vec::new();
    for line in messages.lines().filter(|line| line.starts_with('{')) {
        let message: serde_json::Value =
            serde_json::from_str(line).context("cargo printed a message that is not JSON")?;
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let kinds = message["target"]["kind"].as_array().cloned().unwrap_or_default();
        let test_binary = message["profile"]["test"] == true;
        if test_binary != (what == Images::Tests) {
            continue;
        }
        let image = if test_binary || kinds.iter().any(|kind| kind == "bin") {
            message["executable"].as_str().map(PathBuf::from)
        } else if kinds.iter().any(|kind| kind == "cdylib") {
            let files = message["filenames"].as_array().cloned().unwrap_or_default();
            files.iter().filter_map(|file| file.as_str()).map(PathBuf::from).find(|file| {
                file.extension().is_some_and(|ext| Target::ALL.iter().any(|gpu| ext == gpu.image_extension))
            })
        } else {
            None
        };
        let Some(image) = image else { continue };
        let manifest = message["manifest_path"].as_str().context("a compiler artifact without its manifest")?;
        let crate_dir = Path::new(manifest).parent().context("a manifest path without a folder")?.to_owned();
        let integration_test = (test_binary && kinds.iter().any(|kind| kind == "test"))
            .then(|| message["target"]["name"].as_str().map(str::to_owned))
            .flatten();
        artifacts.push(Artifact { crate_dir, image, integration_test });
    }
    Ok(artifacts)
}

/// The one image of the crate at `dir`, built for `target`: `cargo xtask run PATH`.
pub fn build_crate(sh: &Shell, dir: &Path, target: &'static Target, arch: &str, tools: &Path) -> Result<PathBuf> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        bail!("{} is not a crate: it has no Cargo.toml", dir.display());
    }
    let setup = GpuSetup::prepare(target, arch)?;
    let target_dir = crate::project_root().join("target/gpu-cargo").join(format!("{arch}-crates"));
    let mut images = setup.build(sh, Images::Programs, &manifest, &[], true, &target_dir, tools)?;
    match images.len() {
        1 => Ok(images.remove(0).image),
        0 => bail!("cargo built no GPU image from {} (a GPU program is a bin or a cdylib crate)", dir.display()),
        _ => bail!(
            "{} builds several GPU images ({}): run one with gpu-loader",
            dir.display(),
            images.iter().map(|a| a.image.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_picked_out_of_cargos_messages() {
        let messages = r#"{"reason":"compiler-artifact","manifest_path":"/w/core/Cargo.toml","target":{"kind":["lib"]},"filenames":["/t/libcore.rlib"],"executable":null}
{"reason":"compiler-artifact","manifest_path":"/w/hello/Cargo.toml","target":{"kind":["bin"]},"filenames":["/t/hello.ptx"],"executable":"/t/hello.ptx"}
{"reason":"compiler-artifact","manifest_path":"/w/or-results/Cargo.toml","target":{"kind":["cdylib"]},"filenames":["/t/or_results.elf"],"executable":null}
{"reason":"compiler-artifact","manifest_path":"/w/checks/Cargo.toml","target":{"kind":["lib"],"name":"checks"},"profile":{"test":true},"filenames":["/t/deps/checks-1.ptx"],"executable":"/t/deps/checks-1.ptx"}
{"reason":"compiler-artifact","manifest_path":"/w/checks/Cargo.toml","target":{"kind":["test"],"name":"rpc"},"profile":{"test":true},"filenames":["/t/deps/rpc-2.ptx"],"executable":"/t/deps/rpc-2.ptx"}
{"reason":"compiler-artifact","manifest_path":"/w/checks/Cargo.toml","target":{"kind":["lib"],"name":"checks"},"profile":{"test":false},"filenames":["/t/libchecks.rlib"],"executable":null}
{"reason":"build-script-executed","package_id":"x"}
{"reason":"build-finished","success":true}"#;
        let artifact = |dir: &str, image: &str, test: Option<&str>| Artifact {
            crate_dir: dir.into(),
            image: image.into(),
            integration_test: test.map(str::to_owned),
        };
        let programs = gpu_artifacts(messages, Images::Programs).unwrap();
        assert_eq!(
            programs,
            [artifact("/w/hello", "/t/hello.ptx", None), artifact("/w/or-results", "/t/or_results.elf", None)]
        );
        let tests = gpu_artifacts(messages, Images::Tests).unwrap();
        assert_eq!(
            tests,
            [
                artifact("/w/checks", "/t/deps/checks-1.ptx", None),
                artifact("/w/checks", "/t/deps/rpc-2.ptx", Some("rpc"))
            ]
        );
        let names: Vec<String> = programs.iter().chain(&tests).map(|artifact| artifact.program().unwrap()).collect();
        assert_eq!(names, ["hello", "or-results", "checks", "checks-rpc"]);
        assert!(gpu_artifacts("{not json", Images::Programs).is_err());
    }
}
