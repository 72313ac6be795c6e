//! nextest on the GPU test binaries, without a GPU: `cargo nextest list` with `gpu-loader` as the target runner
//! must list what the image's test table holds, ignored tests apart, and `--partition hash:M/N` must split them into
//! disjoint parts that add up to the whole (docs/testing-your-code.md, *With nextest*).
//!
//! cargo cannot build these images as test binaries yet, so nextest gets them through `--binaries-metadata`: the
//! installed nextest describes a trivial host crate's test binary, and the description is changed to name a GPU
//! image and a GPU target, whose runner comes from `CARGO_TARGET_<TRIPLE>_RUNNER`.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use xshell::{Shell, cmd};

use crate::build::GpuTarget;

/// How many partitions the check splits the tests into.
const PARTITIONS: usize = 3;

/// Checks the test binaries among `images` (`(target, image)`) with `loader` as the runner; says so and returns
/// when cargo-nextest is not installed.
pub fn check(sh: &Shell, loader: &Path, images: &[(GpuTarget, &Path)]) -> Result<()> {
    if cmd!(sh, "cargo nextest --version").quiet().ignore_stdout().ignore_stderr().run().is_err() {
        println!("xtask: nextest check SKIPPED: cargo-nextest is not installed (`cargo install cargo-nextest`)");
        return Ok(());
    }
    let work = crate::project_root().join("target/nextest-check");
    let host_binaries = host_crate_binaries(sh, &work)?;
    let metadata = work.join("cargo-metadata.json");
    for &(target, image) in images {
        let tests = listed_by_loader(sh, loader, image)?;
        let binaries = work.join(format!("binaries-{}.json", target.name()));
        std::fs::write(&binaries, serde_json::to_string(&as_gpu_binary(&host_binaries, target, image)?)?)?;
        let triple = target.triple();
        let runner_variable = format!("CARGO_TARGET_{}_RUNNER", triple.to_uppercase().replace('-', "_"));
        let list = |extra: &[&str]| -> Result<BTreeSet<(String, bool)>> {
            let _dir = sh.push_dir(&work);
            let output = cmd!(
                sh,
                "cargo nextest list --binaries-metadata {binaries} --cargo-metadata {metadata} --message-format json
                 {extra...}"
            )
            .env(&runner_variable, loader)
            .quiet()
            .ignore_stderr()
            .read()?;
            listed_by_nextest(&output)
        };
        let all = list(&["--run-ignored", "all"])?;
        ensure!(all == tests, "nextest lists {all:?} for {}, but its test table holds {tests:?}", image.display());
        let mut parts = BTreeSet::new();
        for part in 1..=PARTITIONS {
            let partition = format!("hash:{part}/{PARTITIONS}");
            for test in list(&["--run-ignored", "all", "--partition", &partition])? {
                ensure!(parts.insert(test.clone()), "{test:?} is in two partitions of {}", image.display());
            }
        }
        ensure!(parts == tests, "the {PARTITIONS} partitions of {} hold {parts:?}, not {tests:?}", image.display());
        println!(
            "xtask: nextest lists the {} tests of {} ({} ignored) and partitions them {PARTITIONS} ways",
            tests.len(),
            image.display(),
            tests.iter().filter(|(_, ignored)| *ignored).count()
        );
    }
    Ok(())
}

/// The tests `gpu-loader IMAGE --list` names, each with whether it is ignored.
fn listed_by_loader(sh: &Shell, loader: &Path, image: &Path) -> Result<BTreeSet<(String, bool)>> {
    let names = |extra: &[&str]| -> Result<BTreeSet<String>> {
        let listing = cmd!(sh, "{loader} {image} --list --format terse {extra...}").quiet().read()?;
        listing
            .lines()
            .map(|line| line.strip_suffix(": test").map(str::to_owned).with_context(|| format!("odd line {line:?}")))
            .collect()
    };
    let ignored = names(&["--ignored"])?;
    Ok(names(&[])?.into_iter().map(|name| (name.clone(), ignored.contains(&name))).collect())
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

/// A trivial host crate with one unit test, and nextest's description of its test binary (`--list-type
/// binaries-only`); cargo's metadata of the crate goes to `cargo-metadata.json` beside it.
fn host_crate_binaries(sh: &Shell, work: &Path) -> Result<Value> {
    std::fs::create_dir_all(work.join("src"))?;
    std::fs::write(
        work.join("Cargo.toml"),
        "[package]\nname = \"gpu-tests\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )?;
    std::fs::write(work.join("src/lib.rs"), "#[test]\nfn on_the_host() {}\n")?;
    let _dir = sh.push_dir(work);
    let target_dir = work.join("target");
    let metadata = cmd!(sh, "cargo metadata --format-version 1 --offline").quiet().read()?;
    std::fs::write(work.join("cargo-metadata.json"), metadata)?;
    let binaries = cmd!(sh, "cargo nextest list --list-type binaries-only --message-format json")
        .env("CARGO_TARGET_DIR", &target_dir)
        .quiet()
        .ignore_stderr()
        .read()
        .context("nextest could not describe a trivial host crate")?;
    serde_json::from_str(&binaries).context("nextest's description of the host crate is not JSON")
}

/// `host` (nextest's description of the host crate's test binary) changed to name `image`, built for `target`.
fn as_gpu_binary(host: &Value, target: GpuTarget, image: &Path) -> Result<Value> {
    let mut binaries = host.clone();
    let platform = serde_json::json!({ "triple": target.triple(), "target-features": "unknown" });
    let meta = &mut binaries["rust-build-meta"];
    meta["target-platforms"] = serde_json::json!([platform]);
    meta["platforms"]["targets"] = serde_json::json!([{
        "platform": platform,
        "libdir": { "status": "unavailable", "reason": "test" }
    }]);
    let binaries_map =
        binaries["rust-binaries"].as_object_mut().context("no `rust-binaries` in nextest's description")?;
    let Some(binary) = binaries_map.values_mut().next() else { bail!("nextest described no test binary") };
    binary["binary-path"] = Value::from(image.to_str().context("an image path that is not UTF-8")?);
    binary["build-platform"] = Value::from("target");
    Ok(binaries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nextests_list_is_read_with_the_ignored_flags() {
        let json = r#"{ "rust-suites": { "gpu-tests": { "testcases": {
            "adds": { "kind": "test", "ignored": false, "filter-match": { "status": "matches" } },
            "not_ready": { "kind": "test", "ignored": true, "filter-match": { "status": "matches" } },
            "other_part": { "kind": "test", "ignored": false, "filter-match": { "status": "mismatch" } }
        } } } }"#;
        let expected = BTreeSet::from([("adds".to_owned(), false), ("not_ready".to_owned(), true)]);
        assert_eq!(listed_by_nextest(json).unwrap(), expected);
        assert!(listed_by_nextest("{}").is_err());
        assert!(listed_by_nextest("not json").is_err());
    }

    #[test]
    fn the_host_binary_becomes_the_gpu_image() {
        let host = serde_json::json!({
            "rust-build-meta": { "target-platforms": [{ "triple": "x86_64-unknown-linux-gnu" }], "platforms": {} },
            "rust-binaries": { "gpu-tests": { "binary-path": "/t/debug/deps/gpu_tests-1", "build-platform": "host" } }
        });
        let gpu = as_gpu_binary(&host, GpuTarget::Amdgpu, Path::new("/images/test-outcomes.elf")).unwrap();
        assert_eq!(gpu["rust-build-meta"]["target-platforms"][0]["triple"], "amdgcn-amd-amdhsa");
        assert_eq!(gpu["rust-build-meta"]["platforms"]["targets"][0]["platform"]["triple"], "amdgcn-amd-amdhsa");
        let binary = &gpu["rust-binaries"]["gpu-tests"];
        assert_eq!(
            (binary["binary-path"].as_str(), binary["build-platform"].as_str()),
            (Some("/images/test-outcomes.elf"), Some("target"))
        );
        assert!(as_gpu_binary(&serde_json::json!({ "rust-binaries": {} }), GpuTarget::Nvptx, Path::new("x")).is_err());
    }
}
