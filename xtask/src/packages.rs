//! The crates a user installs or depends on (every workspace member without `publish = false`) package on their
//! own: `cargo package` makes each from its folder alone. Each has a `README.md` and the repository's `LICENSE`,
//! inherits the workspace's metadata with a description of its own, is depended on with a version as well as a path,
//! and reads no file outside its folder at build time (`include_str!`, `include_bytes!`, `include!`, `#[path]`): a
//! file it needs from elsewhere in the repository is a link in its folder, which `cargo package` turns into a copy.
//! A test, `cargo test -p xtask packages`, part of `cargo xtask test`.

use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// The metadata every published crate takes from `[workspace.package]`.
const INHERITED: [&str; 5] = ["version", "edition", "license", "repository", "rust-version"];

fn manifest(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    text.parse().unwrap_or_else(|error| panic!("{} is not TOML: {error}", path.display()))
}

/// The folders of the workspace's published crates, relative to the root.
fn published_crates(root: &Path) -> Vec<String> {
    let workspace = manifest(&root.join("Cargo.toml"));
    let members = workspace["workspace"]["members"].as_array().expect("workspace.members is a list");
    members
        .iter()
        .map(|member| member.as_str().expect("a member is a path").to_owned())
        .filter(|member| {
            let package = manifest(&root.join(member).join("Cargo.toml"));
            package["package"].get("publish").and_then(toml::Value::as_bool) != Some(false)
        })
        .collect()
}

/// `path` without `.` and `..`, as far as its own components tell.
fn normalized(path: &Path) -> PathBuf {
    let mut result = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir if result.file_name().is_some() => {
                result.pop();
            }
            other => result.push(other),
        }
    }
    result
}

/// The Rust files of the crate in `dir`: everything under it but nested packages (a folder with a `Cargo.toml` of
/// its own, which `cargo package` leaves out too) and build output.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("read a crate folder").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if !path.join("Cargo.toml").exists() && path.file_name().is_some_and(|name| name != "target") {
                rust_files(&path, files);
            }
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

/// What a crate reads at build time: the paths of its `include_str!`, `include_bytes!`, `include!` and `#[path]`.
static BUILD_TIME_READ: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\b(?:include_str|include_bytes|include)!\(\s*"([^"]+)"|#\[path\s*=\s*"([^"]+)"\]"#).unwrap()
});

/// Every finding for the crate in `crate_dir` (relative to `root`), whose `LICENSE` must hold `licence`.
fn problems_of(root: &Path, crate_dir: &str, licence: &[u8]) -> Vec<String> {
    let dir = root.join(crate_dir);
    let mut problems = Vec::new();
    let package = manifest(&dir.join("Cargo.toml"));
    let package = package["package"].as_table().expect("a [package] table");
    for key in INHERITED {
        let inherited = package.get(key).and_then(|value| value.get("workspace")).and_then(toml::Value::as_bool);
        if inherited != Some(true) {
            problems.push(format!("{crate_dir}/Cargo.toml: `{key}` is not `{key}.workspace = true`"));
        }
    }
    if !package.get("description").and_then(toml::Value::as_str).is_some_and(|text| !text.is_empty()) {
        problems.push(format!("{crate_dir}/Cargo.toml: no description of its own"));
    }
    if !dir.join("README.md").is_file() {
        problems.push(format!("{crate_dir} has no README.md"));
    }
    if std::fs::read(dir.join("LICENSE")).ok().as_deref() != Some(licence) {
        problems.push(format!("{crate_dir}/LICENSE is missing or not the repository's LICENSE (link it)"));
    }
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read a Rust file");
        for captures in BUILD_TIME_READ.captures_iter(&text) {
            let read = captures.get(1).or_else(|| captures.get(2)).expect("a path").as_str();
            let resolved = normalized(&file.parent().expect("a folder").join(read));
            if !resolved.starts_with(&dir) {
                let shown = file.strip_prefix(root).unwrap_or(&file).display().to_string();
                problems.push(format!(
                    "{shown} reads `{read}`, outside {crate_dir}: link the file into the crate's folder"
                ));
            }
        }
    }
    problems
}

#[test]
fn published_crates_package_on_their_own() {
    let root = crate::project_root();
    let crates = published_crates(&root);
    for expected in [
        "startup-common",
        "startup-common/protocol",
        "startup-common/gpu-startup",
        "loader",
        "loader/linker",
        "loader/setup",
        "loader/targets",
    ] {
        assert!(crates.iter().any(|c| c == expected), "{expected} is not among the published crates: {crates:?}");
    }
    let licence = std::fs::read(root.join("LICENSE")).expect("the repository's LICENSE");
    let mut problems: Vec<String> =
        crates.iter().flat_map(|crate_dir| problems_of(&root, crate_dir, &licence)).collect();

    let workspace = manifest(&root.join("Cargo.toml"));
    let version = workspace["workspace"]["package"]["version"].as_str().expect("workspace.package.version");
    let dependencies = workspace["workspace"]["dependencies"].as_table().expect("workspace.dependencies");
    for (name, dependency) in dependencies {
        if dependency.get("path").is_some() && dependency.get("version").and_then(toml::Value::as_str) != Some(version)
        {
            problems.push(format!("Cargo.toml: the path dependency `{name}` has no `version = \"{version}\"`"));
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn a_read_outside_the_crate_is_found() {
    let dir = std::env::temp_dir().join(format!("xtask-packages-{}", std::process::id()));
    let crate_dir = dir.join("member");
    std::fs::create_dir_all(crate_dir.join("src")).unwrap();
    std::fs::write(crate_dir.join("Cargo.toml"), "[package]\nname = \"member\"\n").unwrap();
    let source = "//! x\nconst A: &str = include_str!(\"../Cargo.toml\");\nconst B: &str = include_str!(\"../../x\");\n\
                  #[path = \"../../y.rs\"]\nmod y;\n";
    std::fs::write(crate_dir.join("src/lib.rs"), source).unwrap();
    let problems = problems_of(&dir, "member", b"the licence");
    std::fs::remove_dir_all(&dir).unwrap();
    let reads: Vec<_> = problems.iter().filter(|problem| problem.contains(" reads ")).collect();
    assert_eq!(reads.len(), 2, "{problems:#?}");
    assert!(reads[0].contains("`../../x`") && reads[1].contains("`../../y.rs`"), "{reads:?}");
    for missing in ["`version` is not", "`rust-version` is not", "no description", "no README.md", "member/LICENSE"] {
        assert!(problems.iter().any(|problem| problem.contains(missing)), "{missing}: {problems:#?}");
    }
}
