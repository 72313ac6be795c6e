//! Target specs that let cargo build GPU executables.
//!
//! rustc's `nvptx64-nvidia-cuda` and `amdgcn-amd-amdhsa` allow only `cdylib` crates (`only-cdylib`, and for AMD
//! `executables: false`), so `cargo run` and `cargo test` cannot work with them. A spec derived from rustc's own
//! (`rustc -Z unstable-options --print target-spec-json`) lifts that, used with `-Zjson-target-spec
//! -Zbuild-std=core`. Deriving it from the toolchain that builds with it, rather than shipping a copy, keeps the
//! data layout and every other field right for that nightly.

use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Map, Value};

use gpu_startup_targets::Target;

/// rustc's own spec of `target`'s built-in triple, as the toolchain's `rustc` (the command `rustc`, which the caller
/// points at the toolchain) prints it.
pub fn rustc_spec(mut rustc: Command, target: &Target) -> Result<String> {
    let triple = target.triple;
    rustc.args(["-Z", "unstable-options", "--print", "target-spec-json", "--target", triple]);
    let output = rustc.output().with_context(|| format!("cannot run {}", rustc.get_program().to_string_lossy()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        bail!(
            "`rustc --print target-spec-json --target {triple}` failed: {}",
            stderr.lines().find(|line| !line.trim().is_empty()).unwrap_or("no message").trim()
        );
    }
    String::from_utf8(output.stdout).context("rustc printed a target spec that is not UTF-8")
}

/// The spec for GPU executables, derived from rustc's spec of the same target (see the module's comment).
pub fn executable_spec(target: &Target, rustc_spec: &str) -> Result<String> {
    let mut spec: Map<String, Value> =
        serde_json::from_str(rustc_spec).context("rustc's target spec is not a JSON object")?;
    let llvm_target = spec.get("llvm-target").and_then(Value::as_str);
    ensure!(
        llvm_target == Some(target.triple),
        "rustc's target spec is for {}, not {}",
        llvm_target.unwrap_or("an unnamed target"),
        target.triple
    );
    spec.insert("only-cdylib".into(), Value::Bool(false));
    spec.insert("executables".into(), Value::Bool(true));
    if let Some(suffix) = target.spec_exe_suffix {
        spec.insert("exe-suffix".into(), Value::String(suffix.into()));
    }
    if !target.executable_link_args.is_empty() {
        let flavor = spec.get("linker-flavor").and_then(Value::as_str).unwrap_or("gnu-lld").to_owned();
        let pre_link_args = spec.entry("pre-link-args").or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(by_flavor) = pre_link_args else { bail!("rustc's `pre-link-args` is not a JSON object") };
        let Value::Array(args) = by_flavor.entry(flavor).or_insert_with(|| Value::Array(Vec::new())) else {
            bail!("rustc's `pre-link-args` are not lists of arguments")
        };
        for &arg in target.executable_link_args {
            if !args.iter().any(|existing| existing.as_str() == Some(arg)) {
                args.push(Value::String(arg.into()));
            }
        }
    }
    let mut text = serde_json::to_string_pretty(&spec).expect("a JSON object serializes");
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_startup_targets::{AMDGPU, NVPTX};

    const NVPTX_SPEC: &str = r#"{"arch": "nvptx64", "exe-suffix": ".ptx", "linker-flavor": "llbc",
        "llvm-target": "nvptx64-nvidia-cuda", "only-cdylib": true, "os": "cuda"}"#;
    const AMD: &str = r#"{"arch": "amdgpu", "executables": false, "linker": "rust-lld", "linker-flavor": "gnu-lld",
        "llvm-target": "amdgcn-amd-amdhsa", "only-cdylib": true, "requires-lto": true}"#;

    fn parse(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn executables_are_allowed_and_everything_else_is_kept() {
        let spec = parse(&executable_spec(&NVPTX, NVPTX_SPEC).unwrap());
        assert_eq!(spec["only-cdylib"], false);
        assert_eq!(spec["executables"], true);
        assert_eq!(spec["exe-suffix"], ".ptx");
        assert_eq!(spec["linker-flavor"], "llbc");
        assert!(!spec.contains_key("pre-link-args"));
    }

    #[test]
    fn amd_executables_are_shared_code_objects_named_elf() {
        let spec = parse(&executable_spec(&AMDGPU, AMD).unwrap());
        assert_eq!(spec["executables"], true);
        assert_eq!(spec["only-cdylib"], false);
        assert_eq!(spec["exe-suffix"], ".elf");
        assert_eq!(spec["requires-lto"], true);
        assert_eq!(spec["pre-link-args"]["gnu-lld"], serde_json::json!(["-shared", "-Bsymbolic", "--no-undefined"]));
    }

    #[test]
    fn existing_link_arguments_are_kept_and_ours_added_once() {
        let with_args =
            AMD.replace("\"requires-lto\"", "\"pre-link-args\": {\"gnu-lld\": [\"-z\", \"-shared\"]}, \"x\"");
        let spec = parse(&executable_spec(&AMDGPU, &with_args).unwrap());
        assert_eq!(
            spec["pre-link-args"]["gnu-lld"],
            serde_json::json!(["-z", "-shared", "-Bsymbolic", "--no-undefined"])
        );
        let twice = executable_spec(&AMDGPU, &executable_spec(&AMDGPU, AMD).unwrap()).unwrap();
        assert_eq!(twice, executable_spec(&AMDGPU, AMD).unwrap());
    }

    #[test]
    fn a_spec_of_another_target_or_not_json_is_refused() {
        let error = executable_spec(&AMDGPU, NVPTX_SPEC).unwrap_err().to_string();
        assert_eq!(error, "rustc's target spec is for nvptx64-nvidia-cuda, not amdgcn-amd-amdhsa");
        let error = executable_spec(&NVPTX, "error: unknown print request").unwrap_err().to_string();
        assert!(error.contains("not a JSON object"), "{error}");
    }

    /// The toolchain that builds this crate is the pinned nightly: its specs must still have the fields the
    /// derivation changes, with the values it expects to change.
    #[test]
    fn the_pinned_toolchains_specs_derive() {
        for target in Target::ALL {
            let mut rustc = Command::new("rustc");
            rustc.current_dir(env!("CARGO_MANIFEST_DIR"));
            let original = parse(&rustc_spec(rustc, target).unwrap());
            assert_eq!(original["only-cdylib"], true, "{target}");
            let derived = parse(&executable_spec(target, &serde_json::to_string(&original).unwrap()).unwrap());
            assert_eq!(derived["executables"], true, "{target}");
            assert_eq!(derived["data-layout"], original["data-layout"], "{target}");
        }
    }
}
