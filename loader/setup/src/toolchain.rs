//! The toolchain a GPU crate pins: the nightly and components of this repository's own `rust-toolchain.toml`, read
//! when the tools are built (through `pinned-toolchain.toml`, a link to it that `cargo package` turns into a copy), so
//! that a user's crate builds with exactly what the startup is built and tested with.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use toml_edit::{Array, DocumentMut, Item, Value};

/// This repository's toolchain file.
const PROJECT_TOOLCHAIN: &str = include_str!("../pinned-toolchain.toml");

/// How a toolchain file this command wrote starts: its pin is the tools', to update when they pin another.
const WRITTEN_BY_INIT: &str = "# The nightly that builds this crate for the GPU (written by `cargo gpu-startup init`)";

/// A pinned toolchain: its channel and the components the GPU build needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    pub channel: String,
    pub components: Vec<String>,
    pub profile: String,
}

impl Pin {
    /// The project's pin.
    pub fn project() -> Self {
        Self::parse(PROJECT_TOOLCHAIN).expect("the project's rust-toolchain.toml names a channel and its components")
    }

    fn parse(text: &str) -> Result<Self> {
        let document: DocumentMut = text.parse()?;
        let toolchain = document.get("toolchain").context("no [toolchain] table")?;
        let channel = toolchain.get("channel").and_then(Item::as_str).context("no channel")?.to_owned();
        let components = toolchain
            .get("components")
            .and_then(Item::as_array)
            .map(|array| array.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let profile = toolchain.get("profile").and_then(Item::as_str).unwrap_or("default").to_owned();
        Ok(Self { channel, components, profile })
    }

    /// A fresh `rust-toolchain.toml` for a crate.
    pub fn file(&self) -> String {
        let components: Vec<String> = self.components.iter().map(|c| format!("{c:?}")).collect();
        format!(
            "{WRITTEN_BY_INIT}: `-Zbuild-std` builds\n\
             # `core` and `alloc` from `rust-src`, and gpu-bitcode-linker runs `llvm-link`, `opt` and `llc` from\n\
             # `llvm-tools`.\n\
             [toolchain]\n\
             channel = {:?}\n\
             components = [{}]\n\
             profile = {:?}\n",
            self.channel,
            components.join(", "),
            self.profile
        )
    }

    /// The crate's toolchain file with this pin: a fresh one, or `existing` with the missing components added (and,
    /// in a file this command wrote, an older pin replaced). An existing file of the user's that pins another
    /// toolchain is refused, naming both.
    pub fn merged_file(&self, existing: Option<&str>, path: &Path) -> Result<String> {
        let Some(existing) = existing else { return Ok(self.file()) };
        let mut document: DocumentMut = existing
            .parse()
            .map_err(|error| anyhow::anyhow!("{} is not valid TOML: {}", path.display(), one_line(&error)))?;
        let refuse = |found: &str| {
            anyhow::anyhow!(
                "{} pins {found}, but GPU builds need {} with {}: pin that instead, or remove the file",
                path.display(),
                self.channel,
                self.components.join(", ")
            )
        };
        let Some(toolchain) = document.get_mut("toolchain").and_then(Item::as_table_like_mut) else {
            return Err(refuse("no [toolchain] table"));
        };
        if toolchain.contains_key("path") {
            return Err(refuse("a custom toolchain (`path`)"));
        }
        match toolchain.get("channel").and_then(Item::as_str) {
            Some(channel) if channel == self.channel => {}
            Some(_) if existing.starts_with(WRITTEN_BY_INIT) => {
                toolchain.insert("channel", Item::Value(self.channel.as_str().into()));
            }
            Some(channel) => return Err(refuse(&format!("`{channel}`"))),
            None => return Err(refuse("no channel")),
        }
        let components = toolchain.entry("components").or_insert(Item::Value(Value::Array(Array::new())));
        let Some(components) = components.as_array_mut() else {
            bail!("{}: `components` is not a list", path.display());
        };
        for component in &self.components {
            if !components.iter().any(|existing| existing.as_str() == Some(component)) {
                components.push(component.as_str());
            }
        }
        Ok(document.to_string())
    }

    /// Installs the toolchain and its components with rustup (nothing to do when they are there); returns how to run
    /// its `rustc`. Without rustup, the `rustc` on `PATH` it is.
    pub fn install(&self) -> Result<Rustc> {
        if crate::find_on_path("rustup").is_none() {
            return Ok(Rustc::on_path());
        }
        let mut install = Command::new("rustup");
        install.args(["toolchain", "install", &self.channel, "--profile", &self.profile]);
        for component in &self.components {
            install.args(["--component", component]);
        }
        let output = install.output().context("cannot run rustup")?;
        if !output.status.success() {
            bail!(
                "`rustup toolchain install {}` failed: {}",
                self.channel,
                one_line(&String::from_utf8_lossy(&output.stderr).trim())
            );
        }
        Ok(Rustc { program: "rustup".into(), prefix: vec!["run".into(), self.channel.clone(), "rustc".into()] })
    }
}

/// How to run the pinned toolchain's `rustc`.
#[derive(Clone, Debug)]
pub struct Rustc {
    program: String,
    prefix: Vec<String>,
}

impl Rustc {
    /// The `rustc` on `PATH`, whichever toolchain it runs (under rustup, the one the working folder pins).
    pub fn on_path() -> Self {
        Rustc { program: "rustc".into(), prefix: Vec::new() }
    }

    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.prefix);
        command
    }

    /// Another tool of the same toolchain (`cargo`), run the way its `rustc` is.
    pub fn tool(&self, name: &str) -> Command {
        match self.prefix.split_last() {
            Some((_, run)) => {
                let mut command = Command::new(&self.program);
                command.args(run).arg(name);
                command
            }
            None => Command::new(name),
        }
    }
}

/// An error's text on one line.
pub(crate) fn one_line(error: &dyn std::fmt::Display) -> String {
    error.to_string().lines().map(str::trim).filter(|line| !line.is_empty()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin() -> Pin {
        Pin {
            channel: "nightly-2026-05-20".into(),
            components: vec!["rust-src".into(), "llvm-tools".into()],
            profile: "minimal".into(),
        }
    }

    #[test]
    fn the_project_pin_is_a_dated_nightly_with_the_device_components() {
        let pin = Pin::project();
        assert!(pin.channel.starts_with("nightly-"), "{pin:?}");
        for component in ["rust-src", "llvm-tools"] {
            assert!(pin.components.iter().any(|c| c == component), "{pin:?}");
        }
        assert_eq!(Pin::parse(&pin.file()).unwrap(), pin);
    }

    #[test]
    fn an_existing_file_of_the_same_nightly_gets_the_missing_components() {
        let path = Path::new("rust-toolchain.toml");
        let existing = "[toolchain]\nchannel = \"nightly-2026-05-20\" # ours\ncomponents = [\"miri\", \"rust-src\"]\n";
        let merged = pin().merged_file(Some(existing), path).unwrap();
        assert_eq!(
            merged,
            "[toolchain]\nchannel = \"nightly-2026-05-20\" # ours\ncomponents = [\"miri\", \"rust-src\", \"llvm-tools\"]\n"
        );
        assert_eq!(pin().merged_file(Some(&merged), path).unwrap(), merged);
        assert_eq!(pin().merged_file(None, path).unwrap(), pin().file());
    }

    #[test]
    fn a_file_this_command_wrote_follows_the_tools_pin() {
        let path = Path::new("rust-toolchain.toml");
        let older = Pin { channel: "nightly-2026-01-01".into(), ..pin() }.file();
        assert_eq!(pin().merged_file(Some(&older), path).unwrap(), pin().file());
    }

    #[test]
    fn another_toolchain_is_refused_with_what_to_pin() {
        let path = Path::new("crate/rust-toolchain.toml");
        for (existing, found) in [
            ("[toolchain]\nchannel = \"stable\"\n", "pins `stable`"),
            ("[toolchain]\npath = \"/opt/rust\"\n", "pins a custom toolchain (`path`)"),
            ("[toolchain]\nprofile = \"minimal\"\n", "pins no channel"),
            ("channel = \"nightly\"\n", "pins no [toolchain] table"),
        ] {
            let error = pin().merged_file(Some(existing), path).unwrap_err().to_string();
            assert_eq!(
                error,
                format!(
                    "crate/rust-toolchain.toml {found}, but GPU builds need nightly-2026-05-20 with rust-src, \
                     llvm-tools: pin that instead, or remove the file"
                )
            );
        }
        let error = pin().merged_file(Some("[toolchain"), path).unwrap_err().to_string();
        assert!(error.starts_with("crate/rust-toolchain.toml is not valid TOML: "), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }
}
