//! nextest on the out-of-tree crate's test binaries, without a GPU: `cargo nextest list`, which runs `gpu-loader IMAGE
//! --list --format terse` (and `--ignored`) through the crate's runner, must list the tests that `cargo test --
//! --list` lists, the ignored ones marked; `--partition hash:M/N` must split them into disjoint parts that add up to
//! them; and an archive (`cargo nextest archive`) must list the same, as a GPU machine without Rust would
//! (`docs/testing-your-code.md`, *With nextest*); the archive is kept for the bundle, whose `run-tests` runs it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

/// How many partitions the check splits the tests into.
const PARTITIONS: usize = 3;

/// Checks nextest's list of the crate's tests through `cargo` (which runs `cargo ARGS` in the crate) against `tests`
/// (their names) of which `ignored` are ignored, archiving them into `archive`; says so and returns `false` when
/// cargo-nextest is not installed.
pub fn check(
    cargo: &dyn Fn(&[&str]) -> Result<Output>,
    tests: &[String],
    ignored: &[String],
    archive: &std::path::Path,
) -> Result<bool> {
    if !cargo(&["nextest", "--version"]).is_ok_and(|output| output.status.success()) {
        println!("xtask: nextest check SKIPPED: cargo-nextest is not installed (`cargo install cargo-nextest`)");
        return Ok(false);
    }
    let expected: BTreeSet<(String, bool)> = tests.iter().map(|name| (name.clone(), ignored.contains(name))).collect();
    ensure!(expected.len() == tests.len(), "the crate's test binaries share test names: {tests:?}");
    let list = |extra: &[&str]| -> Result<BTreeSet<(String, bool)>> {
        let mut args = vec!["nextest", "list", "--message-format", "json", "--run-ignored", "all"];
        args.extend(extra);
        let output = cargo(&args)?;
        ensure!(
            output.status.success(),
            "`cargo {}` failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        listed_by_nextest(&String::from_utf8_lossy(&output.stdout))
    };
    let all = list(&[])?;
    ensure!(all == expected, "nextest lists {all:?}, but the test binaries hold {expected:?}");
    let mut parts = BTreeSet::new();
    for part in 1..=PARTITIONS {
        let partition = format!("hash:{part}/{PARTITIONS}");
        for test in list(&["--partition", &partition])? {
            ensure!(parts.insert(test.clone()), "{test:?} is in two partitions");
        }
    }
    ensure!(parts == expected, "the {PARTITIONS} partitions hold {parts:?}, not {expected:?}");
    let archive = archive.to_str().context("an archive path that is not UTF-8")?;
    let archived = cargo(&["nextest", "archive", "--archive-file", archive])?;
    ensure!(
        archived.status.success(),
        "`cargo nextest archive` failed:\n{}",
        String::from_utf8_lossy(&archived.stderr)
    );
    let from_archive = list(&["--archive-file", archive, "--workspace-remap", "."])?;
    ensure!(from_archive == expected, "nextest lists {from_archive:?} from the archive, not {expected:?}");
    println!(
        "xtask: nextest lists the out-of-tree crate's {} tests ({} ignored) through gpu-loader, partitions them \
         {PARTITIONS} ways, and lists them from an archive",
        expected.len(),
        ignored.len()
    );
    Ok(true)
}

/// Where the bundle takes the nextest archive from: the archive as `NAME.tar.zst`, and beside it, in `NAME/`, what
/// `--workspace-remap` needs of the crate (its manifest, and its `.cargo` with the runner).
pub fn bundled_dir() -> PathBuf {
    crate::project_root().join("target/gpu/nextest")
}

/// Keeps `archive`, the archive of the crate `name` in `dir` (none when nextest is not installed), for the bundle,
/// in [`bundled_dir`].
pub fn keep_for_the_bundle(dir: &Path, name: &str, archive: Option<&Path>) -> Result<()> {
    let kept = bundled_dir();
    let _ = std::fs::remove_dir_all(&kept);
    let Some(archive) = archive else { return Ok(()) };
    let remap = kept.join(name);
    std::fs::create_dir_all(remap.join(".cargo"))?;
    std::fs::copy(archive, kept.join(format!("{name}.tar.zst")))?;
    std::fs::copy(dir.join("Cargo.toml"), remap.join("Cargo.toml"))?;
    for entry in std::fs::read_dir(dir.join(".cargo"))? {
        let path = entry?.path();
        std::fs::copy(&path, remap.join(".cargo").join(path.file_name().context("a file")?))?;
    }
    Ok(())
}

/// The tests in `cargo nextest list --message-format json`'s output, each with whether it is ignored.
fn listed_by_nextest(json: &str) -> Result<BTreeSet<(String, bool)>> {
    let list: Value = serde_json::from_str(json).context("nextest's list is not JSON")?;
    let mut tests = BTreeSet::new();
    for suite in list["rust-suites"].as_object().context("no `rust-suites` in nextest's list")?.values() {
        for (name, case) in suite["testcases"].as_object().context("a suite without `testcases`")? {
            if case["filter-match"]["status"] == "matches" {
                tests.insert((name.clone(), case["ignored"] == true));
            }
        }
    }
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nextests_list_is_read_with_the_ignored_flags() {
        let json = r#"{ "rust-suites": { "hello-gpu::outcomes": { "testcases": {
            "adds": { "kind": "test", "ignored": false, "filter-match": { "status": "matches" } },
            "not_ready": { "kind": "test", "ignored": true, "filter-match": { "status": "matches" } },
            "other_part": { "kind": "test", "ignored": false, "filter-match": { "status": "mismatch" } }
        } } } }"#;
        let expected = BTreeSet::from([("adds".to_owned(), false), ("not_ready".to_owned(), true)]);
        assert_eq!(listed_by_nextest(json).unwrap(), expected);
        assert!(listed_by_nextest("{}").is_err());
        assert!(listed_by_nextest("not json").is_err());
    }
}
