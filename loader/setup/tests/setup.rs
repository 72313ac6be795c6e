//! `cargo gpu-startup init` on real folders: a crate gets its files, a second run changes nothing, and a folder that
//! is not a crate, a malformed Cargo.toml or a config that contradicts the GPU build is refused in one line, with
//! nothing written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SETUP: &str = env!("CARGO_BIN_EXE_cargo-gpu-startup");

const FILES: [&str; 4] =
    [".cargo/nvptx64-gpu-startup.json", ".cargo/amdgcn-gpu-startup.json", "rust-toolchain.toml", ".cargo/config.toml"];

/// A fresh folder for one test, holding a crate when `manifest` is given.
fn scratch(test: &str, manifest: Option<&str>) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("setup").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(manifest) = manifest {
        std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    }
    dir
}

const MANIFEST: &str = "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2024\"\n";

/// Runs the tool as cargo does: `cargo-gpu-startup gpu-startup init ARGS...`.
fn init(dir: &Path, args: &[&str]) -> Output {
    Command::new(SETUP).arg("gpu-startup").arg("init").args(args).arg(dir).output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn one_line_error(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr.trim_end().to_owned()
}

fn contents(dir: &Path) -> Vec<Option<String>> {
    FILES.iter().map(|file| std::fs::read_to_string(dir.join(file)).ok()).collect()
}

#[test]
fn a_crate_gets_its_files_and_a_second_run_changes_nothing() {
    let dir = scratch("twice", Some(MANIFEST));
    let first = init(&dir, &["--gpu-arch", "sm_80"]);
    assert!(first.status.success(), "{first:?}");
    let report = stdout(&first);
    assert!(report.contains("builds for nvptx (sm_80); for amdgpu"), "{report}");
    for file in FILES {
        assert!(report.contains(&format!("created   {file}")), "{report}");
    }
    assert!(report.contains("next: add the dependency"), "{report}");
    let written = contents(&dir);
    let config = written[3].as_deref().unwrap();
    assert!(config.contains("target = \".cargo/nvptx64-gpu-startup.json\""), "{config}");
    assert!(config.contains("rustflags = [\"-Ctarget-cpu=sm_80\"]"), "{config}");
    let spec: serde_json::Value = serde_json::from_str(written[1].as_deref().unwrap()).unwrap();
    assert_eq!((&spec["executables"], &spec["exe-suffix"]), (&true.into(), &".elf".into()));
    let toolchain = written[2].as_deref().unwrap();
    assert!(toolchain.contains("channel = \"nightly-") && toolchain.contains("\"llvm-tools\""), "{toolchain}");

    let second = init(&dir, &[]);
    assert!(second.status.success(), "{second:?}");
    for file in FILES {
        assert!(stdout(&second).contains(&format!("unchanged {file}")), "{}", stdout(&second));
    }
    assert_eq!(contents(&dir), written);
}

#[test]
fn the_default_target_switches_and_stays_switched() {
    let dir = scratch("switch", Some(&format!("{MANIFEST}\n[dependencies]\ngpu-startup = {{ path = \"x\" }}\n")));
    let output = init(&dir, &["--target", "amdgpu"]);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains("builds for amdgpu (gfx90a); for nvptx"), "{}", stdout(&output));
    assert!(!stdout(&output).contains("next: add the dependency"), "{}", stdout(&output));
    let output = init(&dir, &[]);
    assert!(stdout(&output).contains("builds for amdgpu"), "{}", stdout(&output));
    let config = std::fs::read_to_string(dir.join(".cargo/config.toml")).unwrap();
    assert!(config.contains("target = \".cargo/amdgcn-gpu-startup.json\""), "{config}");
}

#[test]
fn a_folder_that_is_not_a_crate_is_refused_and_left_empty() {
    let dir = scratch("not-a-crate", None);
    let error = one_line_error(&init(&dir, &[]));
    assert_eq!(
        error,
        format!(
            "cargo-gpu-startup: {} is not a crate: it has no Cargo.toml (make one with `cargo new NAME`, or run this \
             in your crate's folder)",
            dir.display()
        )
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn a_contradicting_config_is_refused_and_nothing_is_written() {
    let dir = scratch("contradiction", Some(MANIFEST));
    std::fs::create_dir_all(dir.join(".cargo")).unwrap();
    let config = "[build]\ntarget = \"x86_64-unknown-linux-gnu\"\n";
    std::fs::write(dir.join(".cargo/config.toml"), config).unwrap();
    let error = one_line_error(&init(&dir, &[]));
    assert!(
        error.ends_with(
            "/.cargo/config.toml sets `build.target = \"x86_64-unknown-linux-gnu\"`, but a GPU build needs \
             \".cargo/nvptx64-gpu-startup.json\": change or remove that line"
        ),
        "{error}"
    );
    assert_eq!(contents(&dir), [None, None, None, Some(config.to_owned())]);
}

/// Every file and folder under `dir`, with each file's bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut found = BTreeMap::new();
    let mut folders = vec![dir.to_owned()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path.clone());
                found.insert(path, None);
            } else {
                found.insert(path.clone(), Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    found
}

#[test]
fn a_malformed_manifest_is_refused_naming_the_file_and_the_place_and_nothing_is_written() {
    let dir = scratch("malformed-manifest", Some(&format!("{MANIFEST}\n[dependencies\ngpu-startup = \"0.1\"\n")));
    std::fs::create_dir_all(dir.join(".cargo")).unwrap();
    std::fs::write(dir.join(".cargo/config.toml"), "[build]\njobs = 2\n").unwrap();
    let before = tree(&dir);
    let error = one_line_error(&init(&dir, &["--gpu-arch", "sm_80"]));
    let manifest = dir.join("Cargo.toml");
    assert!(
        error.starts_with(&format!(
            "cargo-gpu-startup: {} is not valid TOML: TOML parse error at line 6, column 14",
            manifest.display()
        )),
        "{error}"
    );
    assert_eq!(tree(&dir), before);
}

#[test]
fn another_toolchain_and_old_file_names_are_refused() {
    let dir = scratch("stable", Some(MANIFEST));
    std::fs::write(dir.join("rust-toolchain.toml"), "[toolchain]\nchannel = \"stable\"\n").unwrap();
    let error = one_line_error(&init(&dir, &[]));
    assert!(error.contains("rust-toolchain.toml pins `stable`, but GPU builds need nightly-"), "{error}");
    assert!(!dir.join(".cargo").exists());

    let dir = scratch("old-config", Some(MANIFEST));
    std::fs::create_dir_all(dir.join(".cargo")).unwrap();
    std::fs::write(dir.join(".cargo/config"), "").unwrap();
    let error = one_line_error(&init(&dir, &[]));
    assert!(error.ends_with(".cargo/config is the old name of .cargo/config.toml: rename it, then run this again"));
}

#[test]
fn bad_options_are_usage_errors() {
    let dir = scratch("options", Some(MANIFEST));
    let error = one_line_error(&init(&dir, &["--target", "amdgpu", "--gpu-arch", "sm_90"]));
    assert_eq!(error, "cargo-gpu-startup: `sm_90` is not an amdgpu architecture");
    let output = init(&dir, &["--target", "x86"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown GPU target `x86`"), "{output:?}");
    assert!(!dir.join(".cargo").exists());
}
