//! The crate's `.cargo/config.toml` for GPU builds, merged into what is there: every key the GPU build needs is added
//! where missing, kept where it already says the same (or is the user's choice to make: a runner with options, their
//! own linker, another architecture), and refused with a message naming it where it contradicts the GPU build.
//! Everything else in the file, comments included, stays as it was.

use anyhow::{Result, anyhow};
use toml_edit::{Array, DocumentMut, Item, Table, Value};

use gpu_startup_targets::{Linker, Target};

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
        Target::ALL.into_iter().find(|&gpu| target == spec_path(gpu))
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
        for flag in ["json-target-spec", "panic-abort-tests"] {
            match unstable.get(flag) {
                None => {
                    unstable.insert(flag, Item::Value(true.into()));
                }
                Some(item) if item.as_bool() == Some(true) => {}
                Some(item) => return Err(conflict(&format!("unstable.{flag}"), item_text(item), "true")),
            }
        }

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

        let profiles = table(document.as_table_mut(), "profile", &name, "")?;
        profiles.set_implicit(true);
        for profile in ["dev", "release"] {
            let what = if profile == "dev" {
                "the GPU cannot unwind; amdgpu builds fail with incremental compilation; debug info only bloats images"
            } else {
                ""
            };
            let section = table(profiles, profile, &name, what)?;
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
        Ok(self.document.to_string())
    }
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
mod tests {
    use super::*;
    use gpu_startup_targets::{AMDGPU, NVPTX};

    fn plan() -> Plan {
        Plan { default_target: &NVPTX, archs: ["sm_90".into(), "gfx90a".into()], replace_arch: [false, false] }
    }

    fn merged(text: &str, plan: &Plan) -> Result<String> {
        Config::parse(text, ".cargo/config.toml")?.merge(plan)
    }

    const FRESH: &str = r#"# The GPU build of this crate, written by `cargo gpu-startup init` (run it again to update it: it keeps
# what else you write here). docs/your-own-crate.md in the gpu-startup repository says what each line is for.

# builds for the GPU target by default
[build]
target = ".cargo/nvptx64-gpu-startup.json"

# the nightly cargo features GPU builds use
[unstable]
build-std = ["core", "alloc"]
build-std-features = ["compiler-builtins-mem"]
json-target-spec = true
panic-abort-tests = true

# NVIDIA: PTX through gpu-bitcode-linker; `cargo run` runs it with gpu-loader
[target.nvptx64-gpu-startup]
linker = "gpu-bitcode-linker"
runner = "gpu-loader"
rustflags = ["-Ctarget-cpu=sm_90"]

# AMD: code objects through rust-lld (`--target .cargo/amdgcn-gpu-startup.json`)
[target.amdgcn-gpu-startup]
runner = "gpu-loader"
rustflags = ["-Ctarget-cpu=gfx90a"]

# the GPU cannot unwind; amdgpu builds fail with incremental compilation; debug info only bloats images
[profile.dev]
panic = "abort"
incremental = false
debug = false

[profile.release]
panic = "abort"
"#;

    #[test]
    fn a_fresh_config_has_every_line_and_a_second_merge_changes_nothing() {
        let text = merged("", &plan()).unwrap();
        assert_eq!(text, FRESH);
        assert_eq!(merged(&text, &plan()).unwrap(), text);
        let config = Config::parse(&text, "x").unwrap();
        assert_eq!(config.default_target(), Some(&NVPTX));
        assert_eq!(config.arch(&AMDGPU).as_deref(), Some("gfx90a"));
    }

    #[test]
    fn the_users_own_lines_and_choices_stay() {
        let existing = "# my settings\n[alias]\nb = \"build\"\n\n[target.nvptx64-gpu-startup]\nrunner = \"gpu-loader \
                        --threads 256\" # wide\nrustflags = [\"-Ctarget-cpu=sm_80\", \"-Cdebug-assertions\"]\n\n\
                        [profile.dev]\ndebug = true\n";
        let text = merged(existing, &plan()).unwrap();
        assert!(text.starts_with("# my settings\n[alias]\nb = \"build\"\n"), "{text}");
        assert!(text.contains("runner = \"gpu-loader --threads 256\" # wide\n"), "{text}");
        assert!(text.contains("rustflags = [\"-Ctarget-cpu=sm_80\", \"-Cdebug-assertions\"]"), "{text}");
        assert!(text.contains("linker = \"gpu-bitcode-linker\""), "{text}");
        assert!(text.contains("debug = true"), "{text}");
        assert_eq!(merged(&text, &plan()).unwrap(), text);
    }

    #[test]
    fn an_architecture_given_on_the_command_line_replaces_the_old_one() {
        let text = merged("", &plan()).unwrap();
        let replace = Plan { archs: ["sm_80".into(), "gfx942".into()], replace_arch: [true, false], ..plan() };
        let text = merged(&text, &replace).unwrap();
        let config = Config::parse(&text, "x").unwrap();
        assert_eq!(config.arch(&NVPTX).as_deref(), Some("sm_80"));
        assert_eq!(config.arch(&AMDGPU).as_deref(), Some("gfx90a"));
    }

    #[test]
    fn switching_the_default_target_is_allowed() {
        let text = merged("", &plan()).unwrap();
        let text = merged(&text, &Plan { default_target: &AMDGPU, ..plan() }).unwrap();
        assert!(text.contains("target = \".cargo/amdgcn-gpu-startup.json\""), "{text}");
        assert_eq!(Config::parse(&text, "x").unwrap().default_target(), Some(&AMDGPU));
    }

    #[test]
    fn lists_and_inline_tables_are_merged() {
        let existing =
            "build = { jobs = 2 }\n[unstable]\nbuild-std = [\"core\", \"alloc\"]\nbuild-std-features = [\"x\"]\n";
        let text = merged(existing, &plan()).unwrap();
        assert!(text.contains("[build]\njobs = 2\ntarget = \".cargo/nvptx64-gpu-startup.json\"\n"), "{text}");
        assert!(text.contains("build-std = [\"core\", \"alloc\"]"), "{text}");
        assert!(text.contains("build-std-features = [\"x\", \"compiler-builtins-mem\"]"), "{text}");
    }

    #[test]
    fn contradictions_are_refused_naming_the_line() {
        for (existing, message) in [
            (
                "[build]\ntarget = \"thumbv7em-none-eabihf\"\n",
                "sets `build.target = \"thumbv7em-none-eabihf\"`, but a GPU build needs \".cargo/nvptx64-gpu-startup.json\"",
            ),
            (
                "[profile.dev]\npanic = \"unwind\"\n",
                "sets `profile.dev.panic = \"unwind\"`, but a GPU build needs \"abort\"",
            ),
            ("[profile.release]\npanic = \"unwind\"\n", "sets `profile.release.panic = \"unwind\"`"),
            (
                "[profile.dev]\nincremental = true\n",
                "sets `profile.dev.incremental = true`, but a GPU build needs false",
            ),
            (
                "[unstable]\njson-target-spec = false\n",
                "sets `unstable.json-target-spec = false`, but a GPU build needs true",
            ),
            (
                "[unstable]\nbuild-std = \"core\"\n",
                "sets `unstable.build-std = \"core\"`, but a GPU build needs a list with \"core\"",
            ),
            ("build = 3\n", "`build` is not a table"),
            (
                "[target.nvptx64-gpu-startup]\nrustflags = \"-Ctarget-cpu=sm_90\"\n",
                "`target.nvptx64-gpu-startup.rustflags` is not a list",
            ),
        ] {
            let error = merged(existing, &plan()).unwrap_err().to_string();
            assert!(error.starts_with(".cargo/config.toml"), "{error}");
            assert!(error.contains(message), "{existing}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
        let error = merged("[build", &plan()).unwrap_err().to_string();
        assert!(error.starts_with(".cargo/config.toml is not valid TOML: "), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }
}
