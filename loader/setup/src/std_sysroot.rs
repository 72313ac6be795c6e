//! Rust's std for a GPU target, built from the toolchain's own library sources (`rust-src`) with the project's
//! patches applied (`loader/setup/std-patches/`, each saying why and which upstream change would remove it), into a
//! sysroot that the target's builds use with `--sysroot` (`docs/std.md`).
//!
//! std is built for its Hermit layer (the target spec says `"os": "hermit"`), which calls a small C-like ABI
//! (`sys_write`, `sys_malloc`, ...) that the startup serves: the startup's runtime is built for the same spec and
//! sysroot, and the spec has the bitcode linker add it to every program. Thread-locals are emulated
//! (`"tls-model": "emulated"`): the bitcode linker routes every access through `__emutls_get_address`
//! (`gpu-bitcode-linker`'s `thread_locals`).
//!
//! std is built as the library's own Cargo workspace (the `Cargo.toml` of Rust's `library` folder), the way Rust's
//! bootstrap builds it: `RUSTC_BOOTSTRAP=1` and `-Zforce-unstable-if-unmarked`, nothing meant only for cargo's
//! tests. The result is kept in a cache folder named by a hash of the toolchain's version, the spec and the patches,
//! so it is built once per toolchain; a build goes to a temporary folder renamed into place, so that builds running
//! at once do not meet.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Map, Value};

use gpu_startup_targets::{BackendKind, Target};

use crate::toolchain::{Rustc, one_line};

/// The patches to Rust's library, in the order they apply: (file name, text).
pub const PATCHES: &[(&str, &str)] = &[
    ("0001-min-align-for-gpus.patch", include_str!("../std-patches/0001-min-align-for-gpus.patch")),
    ("0002-hermit-env-at-first-use.patch", include_str!("../std-patches/0002-hermit-env-at-first-use.patch")),
    (
        "0003-hermit-read-dir-of-an-empty-directory.patch",
        include_str!("../std-patches/0003-hermit-read-dir-of-an-empty-directory.patch"),
    ),
    (
        "0004-hermit-error-kinds-as-on-unix.patch",
        include_str!("../std-patches/0004-hermit-error-kinds-as-on-unix.patch"),
    ),
    (
        "0005-gpu-panics-end-as-the-startups.patch",
        include_str!("../std-patches/0005-gpu-panics-end-as-the-startups.patch"),
    ),
    ("0006-gpu-threads-named-and-ended.patch", include_str!("../std-patches/0006-gpu-threads-named-and-ended.patch")),
    ("0007-gpu-current-directory.patch", include_str!("../std-patches/0007-gpu-current-directory.patch")),
    (
        "0008-gpu-print-without-the-stream-lock.patch",
        include_str!("../std-patches/0008-gpu-print-without-the-stream-lock.patch"),
    ),
];

/// The crates of the library that a std program links: std, the panic runtime the GPU targets use, and libtest, for
/// `#[test]`s.
const CRATES: &[&str] = &["std", "panic_abort", "test"];

/// The name of `target`'s std spec: its file is `<name>.json`, and its libraries are in the sysroot's
/// `lib/rustlib/<name>/lib`.
pub fn std_spec_name(target: &Target) -> String {
    format!("{}-std", target.spec_name)
}

/// The spec of `target` for std programs, from its spec for executables ([`crate::spec::executable_spec`]): std's
/// Hermit layer, emulated thread-locals, and no dynamic linking (std is built as an rlib alone). An AMD program is
/// built as NVIDIA's are, as bitcode that `gpu-bitcode-linker` links: rustc's own AMD code generation cannot lower a
/// thread-local, which the linker rewrites into a call of the runtime before code generation.
pub fn std_spec(executable_spec: &str) -> Result<String> {
    let mut spec: Map<String, Value> =
        serde_json::from_str(executable_spec).context("the executable spec is not a JSON object")?;
    if spec.get("arch").and_then(Value::as_str) == Some("amdgpu") {
        for key in ["linker", "pre-link-args", "requires-lto"] {
            spec.remove(key);
        }
        spec.insert("linker-flavor".into(), "llbc".into());
        spec.insert("obj-is-bitcode".into(), true.into());
    }
    spec.insert("os".into(), "hermit".into());
    spec.insert("has-thread-local".into(), true.into());
    spec.insert("tls-model".into(), "emulated".into());
    spec.insert("dynamic-linking".into(), false.into());
    if let Some(Value::Object(metadata)) = spec.get_mut("metadata") {
        metadata.insert("std".into(), true.into());
    }
    let mut text = serde_json::to_string_pretty(&spec).expect("a JSON object serializes");
    text.push('\n');
    Ok(text)
}

/// A built std: the sysroot to pass with `--sysroot`, the spec to build with, and the startup's runtime that the
/// spec has the bitcode linker add to every program (`--runtime`).
#[derive(Clone, Debug)]
pub struct StdSysroot {
    pub sysroot: PathBuf,
    pub spec: PathBuf,
    pub runtime: PathBuf,
    /// Whether this call built std (false: it was in the cache).
    pub built: bool,
}

/// std for `target`, built with the toolchain `rustc` runs (whose `cargo` builds it) from `std_spec` (the text of
/// its spec, [`std_spec`]), kept under `cache`; then the startup crate of `startup` (its `Cargo.toml`), built for
/// it without its panic handler and global allocator (std has its own) as the runtime every std program links.
/// std is built once per toolchain, spec and patches; the runtime each time, which cargo makes quick when its
/// sources did not change.
pub fn build(rustc: &Rustc, target: &Target, std_spec: &str, startup: &Path, cache: &Path) -> Result<StdSysroot> {
    let std = build_std(rustc, target, std_spec, cache)?;
    build_runtime(rustc, &std, startup, target)
        .with_context(|| format!("building the startup's runtime for std on {}", target.name))?;
    Ok(std)
}

/// std alone, as [`build`] describes.
fn build_std(rustc: &Rustc, target: &Target, std_spec: &str, cache: &Path) -> Result<StdSysroot> {
    let name = std_spec_name(target);
    let toolchain_sysroot = PathBuf::from(output_of(rustc.command().args(["--print", "sysroot"]))?.trim());
    let version = output_of(rustc.command().arg("-vV"))?;
    // The spec as programs get it, but for the cache folder in its runtime's path, which the key names.
    let spec_shape = with_runtime(std_spec, Path::new("runtime"))?;
    let patches = PATCHES.iter().map(|(_, text)| *text).collect::<String>();
    let key = cache_key(&[&version, &spec_shape, &patches, &CRATES.join(" ")]);
    let dir = cache.join(format!("{name}-{key}"));
    let runtime = dir.join("sysroot/lib/rustlib").join(&name).join("runtime");
    let result = StdSysroot {
        sysroot: dir.join("sysroot"),
        spec: dir.join(format!("{name}.json")),
        runtime: runtime.clone(),
        built: false,
    };
    if dir.join("complete").is_file() {
        return Ok(result);
    }
    // The spec names where the runtime will be: std is built with the very spec programs use, as rustc tells
    // targets apart by their spec's contents.
    let std_spec = with_runtime(std_spec, &runtime)?;
    let work = cache.join(format!("{name}-{key}.tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let built = build_in(rustc, &toolchain_sysroot, target, &std_spec, &work);
    if let Err(error) = built {
        return Err(error.context(format!("building std for {} (its files: {})", target.name, work.display())));
    }
    // Another build may have finished first: then its result stands, and this one goes.
    if std::fs::rename(&work, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&work);
        ensure!(dir.join("complete").is_file(), "cannot move the built std to {}", dir.display());
    }
    Ok(StdSysroot { built: true, ..result })
}

/// `spec` with the bitcode linker told to link every rlib of `runtime` into each program.
fn with_runtime(spec: &str, runtime: &Path) -> Result<String> {
    let mut spec: Map<String, Value> = serde_json::from_str(spec).context("the std spec is not a JSON object")?;
    let runtime = runtime.to_str().context("the cache folder's path is not UTF-8")?;
    let mut args = Map::new();
    args.insert("llbc".into(), Value::from(vec!["--runtime", runtime]));
    spec.insert("post-link-args".into(), Value::Object(args));
    let mut text = serde_json::to_string_pretty(&spec).expect("a JSON object serializes");
    text.push('\n');
    Ok(text)
}

/// Builds the startup crate of `startup` (its `Cargo.toml`) for `std`'s spec and sysroot, without its default
/// features, and puts its rlibs and its dependencies' in `std.runtime` (the sysroot's own crates are not among them:
/// every program links those anyway).
fn build_runtime(rustc: &Rustc, std: &StdSysroot, startup: &Path, target: &Target) -> Result<()> {
    let build_dir = std.sysroot.with_file_name("runtime-build");
    let cargo = cargo_build(rustc, startup, &build_dir, &std.spec);
    let rustflags = format!("--sysroot {}{}", std.sysroot.display(), cpu_flag(target));
    let rlibs = rlibs_built(cargo, &rustflags, &startup.display().to_string())?;
    ensure!(!rlibs.is_empty(), "cargo built {} but reported no rlib", startup.display());
    let _ = std::fs::remove_dir_all(&std.runtime);
    copy_into(&rlibs, &std.runtime)
}

/// Builds std in `work`: the patched library, the spec, the sysroot, and the file `complete` last.
fn build_in(rustc: &Rustc, toolchain_sysroot: &Path, target: &Target, std_spec: &str, work: &Path) -> Result<()> {
    let name = &std_spec_name(target);
    let sources = toolchain_sysroot.join("lib/rustlib/src/rust/library");
    ensure!(
        sources.join("Cargo.toml").is_file(),
        "the toolchain has no library sources at {} (rustup component add rust-src)",
        sources.display()
    );
    let library = work.join("library");
    copy_tree(&sources, &library)?;
    for (file, text) in PATCHES {
        apply_patch(&library, file, text)?;
    }
    let spec = work.join(format!("{name}.json"));
    std::fs::write(&spec, std_spec).with_context(|| format!("cannot write {}", spec.display()))?;

    let mut cargo = cargo_build(rustc, &library.join("Cargo.toml"), &work.join("target"), &spec);
    cargo
        .args(["--features", "std/compiler-builtins-mem"])
        .args(CRATES.iter().flat_map(|name| ["-p", name]))
        // What Rust's bootstrap gives the library's build: its unstable features, and every crate it depends on
        // marked unstable, as the crates of a sysroot are.
        .env("RUSTC_BOOTSTRAP", "1");
    let rlibs = rlibs_built(cargo, &format!("-Zforce-unstable-if-unmarked{}", cpu_flag(target)), "std")?;
    ensure!(rlibs.iter().any(|rlib| rlib.ends_with("libstd.rlib")), "cargo built std but reported no libstd.rlib");

    let rustlib = work.join("sysroot/lib/rustlib");
    copy_into(&rlibs, &rustlib.join(name).join("lib"))?;
    // The host's part of the toolchain, where rustc's `-L` to the target's libraries leads the bitcode linker to
    // the LLVM tools (`<sysroot>/lib/rustlib/<host>/bin`).
    let host = host_triple(&output_of(rustc.command().arg("-vV"))?)?;
    std::os::unix::fs::symlink(toolchain_sysroot.join("lib/rustlib").join(&host), rustlib.join(&host))
        .with_context(|| format!("cannot link the host's libraries into {}", rustlib.display()))?;
    // The sources and the build are not needed once the libraries are in place.
    let _ = std::fs::remove_dir_all(&library);
    let _ = std::fs::remove_dir_all(work.join("target"));
    std::fs::write(work.join("complete"), "").context("cannot mark the built std complete")?;
    Ok(())
}

/// The CPU flag for rustc where `target` has no default CPU (AMD's spec asks for one): its fallback architecture,
/// as a program's build gives by default. Empty for NVIDIA, whose std is built for rustc's default (`sm_70`) and
/// serves every later architecture.
fn cpu_flag(target: &Target) -> String {
    if target.backend == BackendKind::Hsa { format!(" -Ctarget-cpu={}", target.fallback_arch) } else { String::new() }
}

/// `cargo build --release` of the package or workspace of `manifest` for the spec at `spec`, without default
/// features, into `target_dir`.
fn cargo_build(rustc: &Rustc, manifest: &Path, target_dir: &Path, spec: &Path) -> Command {
    let mut cargo = rustc.tool("cargo");
    cargo.args(["build", "--release", "--no-default-features", "-Zjson-target-spec"]);
    cargo.arg("--manifest-path").arg(manifest).arg("--target-dir").arg(target_dir).arg("--target").arg(spec);
    cargo
}

/// Copies each of `rlibs` into `dir`, which it makes.
fn copy_into(rlibs: &[PathBuf], dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for rlib in rlibs {
        let file = rlib.file_name().context("an artifact without a file name")?;
        std::fs::copy(rlib, dir.join(file)).with_context(|| format!("cannot copy {}", rlib.display()))?;
    }
    Ok(())
}

/// Runs the cargo build `cargo` with `rustflags` for its target (and none from the caller's environment) and returns
/// the rlibs it made; an error with cargo's first error line, naming `what` it built, when it fails.
fn rlibs_built(mut cargo: Command, rustflags: &str, what: &str) -> Result<Vec<PathBuf>> {
    cargo
        .args(["--message-format", "json-render-diagnostics"])
        .env("RUSTFLAGS", rustflags)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    let output = cargo.output().with_context(|| format!("cannot run cargo to build {what}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().find(|line| line.starts_with("error")).unwrap_or("no error message");
        bail!("cargo could not build {what}: {}", one_line(&first));
    }
    Ok(artifacts(&String::from_utf8_lossy(&output.stdout)))
}

/// The rlibs of the `compiler-artifact` messages of a cargo build (`--message-format json`).
fn artifacts(messages: &str) -> Vec<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .flat_map(|message| {
            message["filenames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|file| file.ends_with(".rlib"))
                .map(PathBuf::from)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Applies the unified diff `text` (after its explanation: from its first `--- ` line) to the library at `library`,
/// whose paths it gives as `a/<path>`; one patch may change several files, each from its own `--- ` line.
fn apply_patch(library: &Path, file: &str, text: &str) -> Result<()> {
    let start = text.find("\n--- ").map(|at| at + 1).with_context(|| format!("patch {file} has no `--- ` line"))?;
    let diff = &text[start..];
    let mut starts: Vec<usize> = diff.match_indices("\n--- ").map(|(at, _)| at + 1).collect();
    starts.insert(0, 0);
    starts.push(diff.len());
    for section in starts.windows(2).map(|bounds| &diff[bounds[0]..bounds[1]]) {
        apply_file_diff(library, file, section)?;
    }
    Ok(())
}

/// Applies `section`, the part of patch `file` that changes one file, to the library at `library`.
fn apply_file_diff(library: &Path, file: &str, section: &str) -> Result<()> {
    let patch = diffy::Patch::from_str(section).with_context(|| format!("patch {file} is not a diff"))?;
    let path = patch
        .original()
        .and_then(|path| path.strip_prefix("a/"))
        .with_context(|| format!("patch {file} names no `a/` file"))?;
    let target = library.join(path);
    let base = std::fs::read_to_string(&target).with_context(|| format!("patch {file}: cannot read {path}"))?;
    let patched = diffy::apply(&base, &patch)
        .with_context(|| format!("patch {file} does not apply to this toolchain's {path}"))?;
    std::fs::write(&target, patched).with_context(|| format!("cannot write {}", target.display()))
}

/// Copies the folder `from` to `to` (which must not exist), files and folders; links are copied as links.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))? {
        let entry = entry?;
        let (source, destination) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&source, &destination)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &destination)?;
        } else {
            std::fs::copy(&source, &destination).with_context(|| format!("cannot copy {}", source.display()))?;
        }
    }
    Ok(())
}

/// The host triple in `rustc -vV`'s output.
fn host_triple(version: &str) -> Result<String> {
    version
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(|host| host.trim().to_owned())
        .context("`rustc -vV` names no host")
}

/// A command's stdout, or an error with the first line of its stderr.
fn output_of(command: &mut Command) -> Result<String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command.output().with_context(|| format!("cannot run {program}"))?;
    if !output.status.success() {
        bail!("{program} failed: {}", one_line(&String::from_utf8_lossy(&output.stderr).trim()));
    }
    String::from_utf8(output.stdout).with_context(|| format!("{program} printed something that is not UTF-8"))
}

/// A name for the cache folder from `parts`.
fn cache_key(parts: &[&str]) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    parts.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_std_spec_is_hermit_with_emulated_thread_locals_and_keeps_the_rest() {
        let spec =
            std_spec(r#"{"arch": "nvptx64", "os": "cuda", "dynamic-linking": true, "metadata": {"std": false}}"#)
                .unwrap();
        let spec: Map<String, Value> = serde_json::from_str(&spec).unwrap();
        assert_eq!(spec["os"], "hermit");
        assert_eq!(spec["has-thread-local"], true);
        assert_eq!(spec["tls-model"], "emulated");
        assert_eq!(spec["dynamic-linking"], false);
        assert_eq!(spec["metadata"]["std"], true);
        assert_eq!(spec["arch"], "nvptx64");
    }

    #[test]
    fn an_amd_std_spec_is_linked_as_bitcode_by_the_bitcode_linker() {
        let executable = r#"{"arch": "amdgpu", "linker": "rust-lld", "linker-flavor": "gnu-lld", "requires-lto": true,
            "pre-link-args": {"gnu-lld": ["-shared"]}, "metadata": {"std": false}}"#;
        let spec: Map<String, Value> = serde_json::from_str(&std_spec(executable).unwrap()).unwrap();
        assert_eq!(spec["linker-flavor"], "llbc");
        assert_eq!(spec["obj-is-bitcode"], true);
        for gone in ["linker", "pre-link-args", "requires-lto"] {
            assert!(!spec.contains_key(gone), "{gone}");
        }
        assert_eq!(spec["os"], "hermit");
    }

    #[test]
    fn every_patch_names_its_reason_and_upstream_fix_and_is_a_diff_of_library_files() {
        for (file, text) in PATCHES {
            let (explanation, diff) = text.split_at(text.find("\n--- ").unwrap() + 1);
            assert!(explanation.starts_with("Why: "), "{file}");
            assert!(explanation.contains("\nUpstream: "), "{file}");
            for section in diff.split("\n--- ").map(|section| section.trim_start_matches("--- ")) {
                let section = format!("--- {section}");
                let patch = diffy::Patch::from_str(&section).unwrap();
                assert!(patch.original().unwrap().starts_with("a/"), "{file}");
            }
        }
    }

    #[test]
    fn a_patch_of_several_files_changes_each() {
        let dir = std::env::temp_dir().join(format!("gpu-std-patches-{}", std::process::id()));
        for name in ["a.rs", "b.rs"] {
            std::fs::create_dir_all(dir.join("std")).unwrap();
            std::fs::write(dir.join("std").join(name), "one\ntwo\n").unwrap();
        }
        let patch = "Why: a test.\nUpstream: none.\n\n--- a/std/a.rs\n+++ b/std/a.rs\n@@ -1,2 +1,2 @@\n-one\n+1\n two\n\
                     --- a/std/b.rs\n+++ b/std/b.rs\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n";
        apply_patch(&dir, "t.patch", patch).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("std/a.rs")).unwrap(), "1\ntwo\n");
        assert_eq!(std::fs::read_to_string(dir.join("std/b.rs")).unwrap(), "one\n2\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_patch_applies_to_its_file_and_one_that_does_not_fit_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("gpu-std-patch-{}", std::process::id()));
        let file = dir.join("std/src/lib.rs");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "one\ntwo\nthree\n").unwrap();
        let patch = "Why: a test.\nUpstream: none.\n\n--- a/std/src/lib.rs\n+++ b/std/src/lib.rs\n@@ -1,3 +1,4 @@\n one\n+one and a half\n two\n three\n";
        apply_patch(&dir, "t.patch", patch).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\none and a half\ntwo\nthree\n");
        std::fs::write(&file, "something else\n").unwrap();
        let error = format!("{:#}", apply_patch(&dir, "t.patch", patch).unwrap_err());
        assert!(error.starts_with("patch t.patch does not apply to this toolchain's std/src/lib.rs"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rlibs_are_read_from_cargo_messages() {
        let messages = concat!(
            r#"{"reason":"compiler-artifact","filenames":["/t/libstd.rlib","/t/libstd.rmeta"]}"#,
            "\n",
            r#"{"reason":"build-script-executed","filenames":["/t/x.rlib"]}"#,
            "\nnot json\n",
            r#"{"reason":"compiler-artifact","filenames":["/t/libcore-1.rlib"]}"#,
        );
        assert_eq!(artifacts(messages), [PathBuf::from("/t/libstd.rlib"), PathBuf::from("/t/libcore-1.rlib")]);
    }
}
