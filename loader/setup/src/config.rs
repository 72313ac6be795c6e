//! The crate's `.cargo/config.toml` for GPU builds, merged into what is there: every key the GPU build needs is added
//! where missing, kept where it already says the same (or is the user's choice to make: a runner with options, their
//! own linker, another architecture), and refused with a message naming it where it contradicts the GPU build.
//! Everything else in the file, comments included, stays as it was.

use std::path::Path;

use anyhow::{Result, anyhow};
use toml_edit::{Array, DocumentMut, Item, Table, Value};

use gpu_startup_targets::{ImageKind, Linker, Target};

/// The folder, next to `config.toml`, that holds the target specs.
pub const SPEC_DIR: &str = ".cargo";

/// The linker and runner, found by name on `PATH` (`loader/install` puts them there).
pub const LINKER: &str = "gpu-bitcode-linker";
pub const RUNNER: &str = "gpu-loader";

/// The value `build.target` has for `target`: the spec's path relative to the crate, which is how cargo reads a
/// relative path in `.cargo/config.toml`.
pub fn spec_path(target: &'static Target) -> String {
    format!("{SPEC_DIR}/{}", target.spec_file_name())
}

/// The GPU build a crate is set up for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// What `cargo build` builds for.
    pub default_target: &'static Target,
    /// The architecture of each target, in [`Target::ALL`]'s order.
    pub archs: [String; 2],
    /// Replace an architecture the config already names with `archs`' (it was given on the command line).
    pub replace_arch: [bool; 2],
}

/// A crate's config, parsed.
pub struct Config {
    document: DocumentMut,
    /// How to name the file in messages.
    name: String,
}

impl Config {
    /// Parses `text` (the file's content, empty when there is none); `name` names the file in messages.
    pub fn parse(text: &str, name: &str) -> Result<Self> {
        let document = text
            .parse::<DocumentMut>()
            .map_err(|error| anyhow!("{name} is not valid TOML: {}", super::toolchain::one_line(&error)))?;
        Ok(Self { document, name: name.to_owned() })
    }

    /// The GPU target `build.target` names, when it names one of the specs.
    pub fn default_target(&self) -> Option<&'static Target> {
        let target = self.document.get("build")?.get("target")?.as_str()?;
        Target::ALL.into_iter().find(|&gpu| target == spec_path(gpu) || target == std_spec_path(gpu))
    }

    /// The architecture the config builds `target` for (its `-Ctarget-cpu=`).
    pub fn arch(&self, target: &'static Target) -> Option<String> {
        let flags = self.document.get("target")?.get(target.spec_name)?.get("rustflags")?.as_array()?;
        flags.iter().filter_map(Value::as_str).find_map(|flag| flag.strip_prefix("-Ctarget-cpu=")).map(str::to_owned)
    }

    /// Merges what `plan` needs; the file's new text.
    pub fn merge(mut self, plan: &Plan) -> Result<String> {
        let name = self.name.clone();
        let conflict = |key: &str, found: String, wanted: &str| {
            anyhow!("{name} sets `{key} = {found}`, but a GPU build needs {wanted}: change or remove that line")
        };
        let document = &mut self.document;
        if document.is_empty() {
            document.decor_mut().set_prefix(
                "# The GPU build of this crate, written by `cargo gpu-startup init` (run it again to update it: it \
                 keeps\n# what else you write here). docs/your-own-crate.md in the gpu-startup repository says what \
                 each line is for.\n",
            );
        }

        let build = table(document.as_table_mut(), "build", &name, "builds for the GPU target by default")?;
        let wanted = spec_path(plan.default_target);
        match build.get("target") {
            None => {}
            Some(item) if item.as_str().is_some_and(|t| Target::ALL.iter().any(|&gpu| t == spec_path(gpu))) => {}
            Some(item) => return Err(conflict("build.target", item_text(item), &format!("\"{wanted}\""))),
        }
        build.insert("target", Item::Value(wanted.into()));

        let unstable = table(document.as_table_mut(), "unstable", &name, "the nightly cargo features GPU builds use")?;
        require_in_list(unstable, "build-std", "core", &name, "`core` built from source for the GPU")?;
        require_in_list(
            unstable,
            "build-std",
            "alloc",
            &name,
            "`alloc` too: `Vec`, `String`, `Box` on the device heap",
        )?;
        require_in_list(
            unstable,
            "build-std-features",
            "compiler-builtins-mem",
            &name,
            "`memcpy`, `memcmp` and `strlen` for the GPU",
        )?;
        require_flags(unstable, &conflict)?;

        let targets = table(document.as_table_mut(), "target", &name, "")?;
        targets.set_implicit(true);
        for (index, target) in Target::ALL.into_iter().enumerate() {
            let key = target.spec_name;
            let section = table(targets, key, &format!("{name} (target.{key})"), target.summary)?;
            // rustc's own linker serves every target but the one whose linker is ours.
            if target.linker == Linker::BitcodeLinker && !section.contains_key("linker") {
                section.insert("linker", Item::Value(LINKER.into()));
            }
            if !section.contains_key("runner") {
                section.insert("runner", Item::Value(RUNNER.into()));
            }
            let cpu = format!("-Ctarget-cpu={}", plan.archs[index]);
            match section.get_mut("rustflags") {
                None => {
                    section.insert("rustflags", Item::Value(Value::Array(Array::from_iter([cpu]))));
                }
                Some(item) => {
                    let Some(flags) = item.as_array_mut() else {
                        return Err(anyhow!("{name}: `target.{key}.rustflags` is not a list: write it as [\"...\"]"));
                    };
                    let existing =
                        flags.iter().position(|flag| flag.as_str().is_some_and(|f| f.starts_with("-Ctarget-cpu=")));
                    match existing {
                        None => flags.push(cpu),
                        Some(at) if plan.replace_arch[index] => {
                            flags.replace(at, cpu);
                        }
                        Some(_) => {}
                    }
                }
            }
        }

        merge_profiles(document, &name)?;
        Ok(self.document.to_string())
    }
}

/// The value `build.target` has for a crate set up for std (`cargo gpu-startup init --std`).
pub fn std_spec_path(target: &Target) -> String {
    format!("{SPEC_DIR}/{}.json", crate::std_sysroot::std_spec_name(target))
}

impl Config {
    /// Merges what a std build for `target` (`arch`, replacing an architecture already there when `replace_arch`)
    /// needs: std from `sysroot`, not built by cargo; the file's new text.
    pub fn merge_std(mut self, target: &Target, arch: &str, replace_arch: bool, sysroot: &Path) -> Result<String> {
        let name = self.name.clone();
        let conflict = |key: &str, found: String, wanted: &str| {
            anyhow!("{name} sets `{key} = {found}`, but a std GPU build needs {wanted}: change or remove that line")
        };
        let document = &mut self.document;
        if document.is_empty() {
            document.decor_mut().set_prefix(
                "# The GPU build of this crate with Rust's std, written by `cargo gpu-startup init --std` (run it again \
                 to\n# update it: it keeps what else you write here). docs/std.md in the gpu-startup repository says \
                 what each\n# line is for.\n",
            );
        }
        let wanted = std_spec_path(target);
        let build = table(document.as_table_mut(), "build", &name, "builds for the GPU target with std by default")?;
        match build.get("target") {
            None => {}
            Some(item)
                if item
                    .as_str()
                    .is_some_and(|t| Target::ALL.iter().any(|&gpu| t == spec_path(gpu) || t == std_spec_path(gpu))) => {
            }
            Some(item) => return Err(conflict("build.target", item_text(item), &format!("\"{wanted}\""))),
        }
        build.insert("target", Item::Value(wanted.into()));

        let unstable = table(document.as_table_mut(), "unstable", &name, "the nightly cargo features GPU builds use")?;
        for key in ["build-std", "build-std-features"] {
            if let Some(item) = unstable.get(key) {
                return Err(conflict(
                    &format!("unstable.{key}"),
                    item_text(item),
                    "std from its sysroot, not built by cargo",
                ));
            }
        }
        require_flags(unstable, &conflict)?;

        let targets = table(document.as_table_mut(), "target", &name, "")?;
        targets.set_implicit(true);
        let key = crate::std_sysroot::std_spec_name(target);
        let section = table(
            targets,
            &key,
            &format!("{name} (target.{key})"),
            &format!(
                "{} with std: {} through gpu-bitcode-linker, std from the sysroot `init --std` built; `cargo run` runs \
                 it with gpu-loader",
                target.vendor,
                if target.produces(ImageKind::Ptx) { "PTX" } else { "code objects" }
            ),
        )?;
        if !section.contains_key("linker") {
            section.insert("linker", Item::Value(LINKER.into()));
        }
        if !section.contains_key("runner") {
            section.insert("runner", Item::Value(RUNNER.into()));
        }
        let sysroot =
            sysroot.to_str().ok_or_else(|| anyhow!("the std sysroot's path is not UTF-8: {}", sysroot.display()))?;
        let cpu = format!("-Ctarget-cpu={arch}");
        for key_of_flags in ["rustflags", "rustdocflags"] {
            let flags = section.entry(key_of_flags).or_insert(Item::Value(Value::Array(Array::new())));
            let Some(flags) = flags.as_array_mut() else {
                return Err(anyhow!("{name}: `target.{key}.{key_of_flags}` is not a list: write it as [\"...\"]"));
            };
            set_sysroot_and_cpu(flags, sysroot, &cpu, replace_arch);
            if key_of_flags == "rustdocflags" {
                // Merged doctests (edition 2024) run each example by starting the merged binary again as a process,
                // which a GPU program cannot do: each example is a std program of its own, run by the runner.
                for flag in ["-Zunstable-options", MERGE_DOCTESTS] {
                    if !flags.iter().any(|existing| existing.as_str() == Some(flag)) {
                        flags.push(flag);
                    }
                }
            }
        }
        merge_profiles(document, &name)?;
        Ok(self.document.to_string())
    }
}

/// rustdoc's option that compiles each doc example into a program of its own.
const MERGE_DOCTESTS: &str = "--merge-doctests=no";

/// Puts std's `sysroot` into a list of rustc or rustdoc flags, and the architecture `cpu` unless the list names one
/// and `replace_arch` is false.
fn set_sysroot_and_cpu(flags: &mut Array, sysroot: &str, cpu: &str, replace_arch: bool) {
    // The sysroot's folder names the toolchain, spec and patches it was built for: always the one just built.
    let sysroot_at = flags.iter().position(|flag| flag.as_str() == Some("--sysroot"));
    match sysroot_at {
        Some(at) if at + 1 < flags.len() => {
            flags.replace(at + 1, sysroot);
        }
        Some(_) => flags.push(sysroot),
        None => {
            flags.insert(0, "--sysroot");
            flags.insert(1, sysroot);
        }
    }
    let cpu_at = flags.iter().position(|flag| flag.as_str().is_some_and(|f| f.starts_with("-Ctarget-cpu=")));
    match cpu_at {
        None => flags.push(cpu),
        Some(at) if replace_arch => {
            flags.replace(at, cpu);
        }
        Some(_) => {}
    }
}

/// The profiles every GPU build needs: no unwinding, no incremental builds, no debug info by default.
fn merge_profiles(document: &mut DocumentMut, name: &str) -> Result<()> {
    let conflict = |key: &str, found: String, wanted: &str| {
        anyhow!("{name} sets `{key} = {found}`, but a GPU build needs {wanted}: change or remove that line")
    };
    let profiles = table(document.as_table_mut(), "profile", name, "")?;
    profiles.set_implicit(true);
    for profile in ["dev", "release"] {
        let what = if profile == "dev" {
            "the GPU cannot unwind; amdgpu builds fail with incremental compilation; debug info only bloats images"
        } else {
            ""
        };
        let section = table(profiles, profile, name, what)?;
        match section.get("panic") {
            None => {
                section.insert("panic", Item::Value("abort".into()));
            }
            Some(item) if item.as_str() == Some("abort") => {}
            Some(item) => return Err(conflict(&format!("profile.{profile}.panic"), item_text(item), "\"abort\"")),
        }
        if profile == "dev" {
            match section.get("incremental") {
                None => {
                    section.insert("incremental", Item::Value(false.into()));
                }
                Some(item) if item.as_bool() == Some(false) => {}
                Some(item) => return Err(conflict("profile.dev.incremental", item_text(item), "false")),
            }
            if !section.contains_key("debug") {
                section.insert("debug", Item::Value(false.into()));
            }
        }
    }
    Ok(())
}

/// The table `key` of `parent`, made (with `comment` above it) when missing; refused when `key` holds something
/// else.
fn table<'a>(parent: &'a mut Table, key: &str, name: &str, comment: &str) -> Result<&'a mut Table> {
    let item = parent.entry(key).or_insert_with(|| {
        let mut table = Table::new();
        if !comment.is_empty() {
            table.decor_mut().set_prefix(format!("\n# {comment}\n"));
        }
        Item::Table(table)
    });
    // An inline table (`build = { target = "..." }`) becomes a standard one, keys and values kept.
    if let Item::Value(Value::InlineTable(inline)) = item {
        let table = std::mem::take(inline).into_table();
        *item = Item::Table(table);
        if let Some(mut key) = parent.key_mut(key) {
            key.leaf_decor_mut().clear();
        }
    }
    parent.get_mut(key).and_then(Item::as_table_mut).ok_or_else(|| anyhow!("{name}: `{key}` is not a table"))
}

/// Makes `key` (a list of strings) hold `required`.
/// The nightly cargo flags every GPU build turns on: targets given as JSON files, and `panic-abort-tests`, with
/// which libtest runs each test in a process of its own (which the loader plays), where without it libtest runs the
/// tests on threads of its one process, and the GPU has no threads to start. `conflict` words a flag set otherwise.
fn require_flags(unstable: &mut Table, conflict: &dyn Fn(&str, String, &str) -> anyhow::Error) -> Result<()> {
    for flag in ["json-target-spec", "panic-abort-tests"] {
        match unstable.get(flag) {
            None => {
                unstable.insert(flag, Item::Value(true.into()));
            }
            Some(item) if item.as_bool() == Some(true) => {}
            Some(item) => return Err(conflict(&format!("unstable.{flag}"), item_text(item), "true")),
        }
    }
    Ok(())
}

fn require_in_list(table: &mut Table, key: &str, required: &str, name: &str, why: &str) -> Result<()> {
    let item = table.entry(key).or_insert(Item::Value(Value::Array(Array::new())));
    let Some(list) = item.as_array_mut() else {
        return Err(anyhow!(
            "{name} sets `unstable.{key} = {}`, but a GPU build needs a list with \"{required}\" ({why}): change or remove that line",
            item_text(item)
        ));
    };
    if !list.iter().any(|value| value.as_str() == Some(required)) {
        list.push(required);
    }
    Ok(())
}

fn item_text(item: &Item) -> String {
    item.to_string().trim().to_owned()
}

#[cfg(test)]
mod tests;
