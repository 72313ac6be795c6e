//! Real crates' own test suites on the GPU: [`CRATES`] at pinned versions, their sources as the registry has them (a
//! fresh copy of each, in a temporary folder), set up with `cargo gpu-startup init --std` and nothing else
//! changed. `cargo test --no-run` must build their unit and integration tests into libtest binaries, and rustdoc their
//! doc examples into programs; every image is checked statically and goes to `target/gpu/real-crates/nvptx/` with
//! the recorded report as its expectation, for the bundle's GPU suite. On a machine with an NVIDIA GPU, `cargo test`
//! runs each crate's whole suite there and must pass at least the recorded number of tests
//! (`docs/testing-your-code.md`, "Real crates").

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use gpu_startup_targets::NVPTX;
use xshell::{Shell, cmd};

use crate::image::BuiltImage;
use crate::out_of_tree::{install_tools, plain_cargo, prepend_path, stderr_of};

/// A crate whose own suite runs on the GPU, and the tests of it that pass there.
pub struct RealCrate {
    pub name: &'static str,
    pub version: &'static str,
    /// The tests of each test binary (by its target's name; the unit tests' is the library's) that pass on the GPU.
    pub binaries: &'static [(&'static str, u32)],
    /// The doc examples that pass on the GPU.
    pub doc_examples: u32,
}

impl RealCrate {
    /// Every test of the crate that passes on the GPU.
    pub fn passing(&self) -> u32 {
        self.binaries.iter().map(|(_, passed)| passed).sum::<u32>() + self.doc_examples
    }
}

/// The crates, at the newest release whose tests build for the GPU. Newer releases of both add `criterion` as a
/// dev-dependency for their benchmarks, and criterion needs `page_size` 0.6, which builds only for Unix, Windows and
/// WebAssembly (its `get_granularity` has no fallback) and so not for std's Hermit layer, the GPU's.
pub const CRATES: [RealCrate; 2] = [
    RealCrate { name: "itoa", version: "1.0.15", binaries: &[("itoa", 0), ("test", 10)], doc_examples: 2 },
    RealCrate {
        name: "semver",
        version: "1.0.27",
        binaries: &[
            ("semver", 0),
            ("test_autotrait", 1),
            ("test_identifier", 3),
            ("test_version", 10),
            ("test_version_req", 20),
        ],
        doc_examples: 4,
    },
];

/// Builds and checks every crate's tests and copies them out; with an NVIDIA GPU, runs each suite with `cargo test`.
pub fn check(sh: &Shell, gpus: crate::gpus::Gpus) -> Result<Vec<BuiltImage>> {
    let tools = install_tools(sh)?;
    let path = prepend_path(&tools)?;
    // Outside the repository: a crate inside it would take the repository's workspace for its own.
    let work = std::env::temp_dir().join(format!("real-crates-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(out_dir());
    let _ = std::fs::remove_dir_all(host_dir());
    std::fs::create_dir_all(&work)?;
    let result = check_all(sh, &work, &path, gpus);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn check_all(sh: &Shell, work: &Path, path: &std::ffi::OsString, gpus: crate::gpus::Gpus) -> Result<Vec<BuiltImage>> {
    let sources = registry_sources(sh, work)?;
    let mut images = Vec::new();
    for (real, source) in CRATES.iter().zip(sources) {
        let dir = work.join(format!("{}-{}", real.name, real.version));
        let result = check_crate(sh, real, &source, &dir, path, gpus, &mut images);
        result.with_context(|| format!("{} {} ({})", real.name, real.version, dir.display()))?;
    }
    Ok(images)
}

/// Where the crates' images and expectations go, for the bundle.
pub fn out_dir() -> PathBuf {
    crate::project_root().join("target/gpu/real-crates").join(NVPTX.name)
}

/// The folder of each crate's sources in cargo's registry cache, fetched (as `cargo` fetches a dependency) by a crate
/// that depends on the pinned versions.
fn registry_sources(sh: &Shell, work: &Path) -> Result<Vec<PathBuf>> {
    let fetcher = work.join("fetch");
    let _ = std::fs::remove_dir_all(&fetcher);
    std::fs::create_dir_all(fetcher.join("src"))?;
    std::fs::write(fetcher.join("src/lib.rs"), "")?;
    let dependencies: String = CRATES.iter().map(|real| format!("{} = \"={}\"\n", real.name, real.version)).collect();
    std::fs::write(
        fetcher.join("Cargo.toml"),
        format!(
            "[package]\nname = \"fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[dependencies]\n{dependencies}\n[workspace]\n"
        ),
    )?;
    let manifest = fetcher.join("Cargo.toml");
    let metadata = cmd!(sh, "cargo metadata --quiet --format-version 1 --manifest-path {manifest}")
        .read()
        .context("cannot fetch the crates from the registry (`cargo metadata`)")?;
    let metadata: serde_json::Value = serde_json::from_str(&metadata).context("cargo metadata's output")?;
    let packages = metadata["packages"].as_array().context("no packages in cargo metadata's output")?;
    CRATES
        .iter()
        .map(|real| {
            let package = packages
                .iter()
                .find(|package| package["name"] == real.name && package["version"] == real.version)
                .with_context(|| format!("cargo metadata lists no {} {}", real.name, real.version))?;
            let manifest = package["manifest_path"].as_str().context("a package without manifest_path")?;
            Ok(Path::new(manifest).parent().context("a manifest without a folder")?.to_owned())
        })
        .collect()
}

fn check_crate(
    sh: &Shell,
    real: &RealCrate,
    source: &Path,
    dir: &Path,
    path: &std::ffi::OsString,
    gpus: crate::gpus::Gpus,
    images: &mut Vec<BuiltImage>,
) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    cmd!(sh, "cp -r {source} {dir}").run()?;
    let cargo = |args: &[&str]| plain_cargo(dir, path, args);
    let init = Command::new("cargo")
        .args(["gpu-startup", "init", "--std"])
        .current_dir(dir)
        .env("PATH", path)
        .env("GPU_STARTUP_CACHE_DIR", crate::std_programs::cache_dir())
        .output()
        .context("cannot run cargo gpu-startup")?;
    ensure!(init.status.success(), "`cargo gpu-startup init --std` failed:\n{}", stderr_of(&init));

    let built = cargo(&["test", "--no-run", "--message-format", "json"])?;
    ensure!(built.status.success(), "`cargo test --no-run` failed:\n{}", stderr_of(&built));
    let binaries = test_binaries(&String::from_utf8_lossy(&built.stdout))?;
    let mut names: Vec<&str> = binaries.iter().map(|(name, _)| name.as_str()).collect();
    names.sort_unstable();
    let mut recorded: Vec<&str> = real.binaries.iter().map(|(name, _)| *name).collect();
    recorded.sort_unstable();
    ensure!(names == recorded, "`cargo test --no-run` built test binaries {names:?}, not {recorded:?}");
    let prefix = format!("{}-{}", real.name, real.version);
    for (name, image) in &binaries {
        let ptx = std::fs::read_to_string(image).with_context(|| format!("cannot read {}", image.display()))?;
        ensure!(ptx.contains(gpu_startup_protocol::abi::LIBTEST_MARKER), "{} is no libtest binary", image.display());
        let undefined = crate::std_programs::undefined_functions(&ptx);
        ensure!(undefined.is_empty(), "{} leaves functions undefined: {}", image.display(), undefined.join(", "));
        let built = BuiltImage { program: name.clone(), target: &NVPTX, arch: String::new(), path: image.clone() };
        crate::image::check_images(std::slice::from_ref(&built))?;
        let passed = real.binaries.iter().find(|(recorded, _)| recorded == name).map_or(0, |(_, passed)| *passed);
        let expectation = format!(
            "# The {name} tests of {prefix}, from the registry, on one GPU thread each: all pass.\nexit-code = 0\n\
             stdout-matches = ['(?m)^test result: ok\\. {passed} passed; 0 failed; 0 ignored; ']\nmax-seconds = 240\n"
        );
        images.push(copy_to(image, &format!("{}-{name}", real.name), &expectation)?);
    }
    let doctests = crate::doctests::build(&cargo, dir, &dir.join("target/doctests"))?;
    ensure!(
        doctests.len() as u32 == real.doc_examples,
        "rustdoc built {} doc examples, not {}: {doctests:?}",
        doctests.len(),
        real.doc_examples
    );
    for doctest in &doctests {
        let expectation = doctest.expectation(&format!("{prefix}, from the registry"));
        images.push(copy_to(&doctest.image, &format!("{}-doc-{}", real.name, doctest.folder), &expectation)?);
    }
    build_for_host(&cargo, real, dir, &binaries, &doctests)?;

    if gpus.nvidia {
        let run = cargo(&["test", "--no-fail-fast"])?;
        let report = String::from_utf8_lossy(&run.stdout);
        let counts = Counts::of(&report);
        println!(
            "xtask: {prefix}'s own tests on the GPU: {} passed, {} failed, {} ignored",
            counts.passed, counts.failed, counts.ignored
        );
        ensure!(
            counts.passed >= real.passing(),
            "only {} of {prefix}'s tests passed on the GPU, {} recorded:\n{report}{}",
            counts.passed,
            real.passing(),
            stderr_of(&run)
        );
    } else {
        println!(
            "xtask: {prefix}'s own tests built for the GPU ({} test binaries, {} doc examples) and checked",
            binaries.len(),
            doctests.len()
        );
    }
    Ok(())
}

/// Where the crates' tests built for the host go, for the bundle: `gpu-bench`'s `real-crate-suite` runs them on the
/// GPU machine's CPU against their GPU images.
pub fn host_dir() -> PathBuf {
    crate::project_root().join("target/gpu/real-crates/host")
}

/// Builds the crate's test binaries and doc examples for the host, as `cargo test` builds them there, and copies
/// them to [`host_dir`] under their GPU images' names (`binaries` and `doctests`: the GPU builds), without debug
/// information (it would be most of a bundle's size).
fn build_for_host(
    cargo: &dyn Fn(&[&str]) -> Result<std::process::Output>,
    real: &RealCrate,
    dir: &Path,
    binaries: &[(String, PathBuf)],
    doctests: &[crate::doctests::Doctest],
) -> Result<()> {
    let version = Command::new("rustc").arg("-vV").current_dir(dir).output().context("cannot run rustc")?;
    let version = String::from_utf8_lossy(&version.stdout);
    let host = version.lines().find_map(|line| line.strip_prefix("host: ")).context("rustc -vV names no host")?;
    let strip = "profile.dev.strip=\"debuginfo\"";
    let built = cargo(&["test", "--no-run", "--target", host, "--config", strip, "--message-format", "json"])?;
    ensure!(built.status.success(), "`cargo test --no-run --target {host}` failed:\n{}", stderr_of(&built));
    let out = host_dir();
    std::fs::create_dir_all(&out)?;
    for (name, executable) in test_binaries(&String::from_utf8_lossy(&built.stdout))? {
        ensure!(
            binaries.iter().any(|(gpu, _)| *gpu == name),
            "`cargo test --no-run --target {host}` built the test binary {name}, which the GPU build did not"
        );
        std::fs::copy(&executable, out.join(format!("{}-{name}", real.name)))?;
    }
    let kept = dir.join("target/host-doctests");
    let _ = std::fs::remove_dir_all(&kept);
    let kept_text = kept.to_str().context("a folder for doc examples whose path is not UTF-8")?;
    let flags = format!(
        "target.{host}.rustdocflags=[\"-Zunstable-options\", \"--persist-doctests\", {kept_text:?}, \"--no-run\"]"
    );
    let built = cargo(&["test", "--doc", "--target", host, "--config", &flags])?;
    ensure!(built.status.success(), "building the doc examples for {host} failed:\n{}", stderr_of(&built));
    for doctest in doctests {
        let executable = kept.join(&doctest.folder).join("rust_out");
        std::fs::copy(&executable, out.join(format!("{}-doc-{}", real.name, doctest.folder)))
            .with_context(|| format!("rustdoc kept no {}", executable.display()))?;
    }
    Ok(())
}

/// The test binaries in `cargo test --no-run --message-format json`'s messages: each target's name and image.
fn test_binaries(messages: &str) -> Result<Vec<(String, PathBuf)>> {
    let mut binaries = Vec::new();
    for message in messages.lines().filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok()) {
        let Some(executable) = message["executable"].as_str() else { continue };
        let name = message["target"]["name"].as_str().context("an artifact without a target name")?;
        binaries.push((name.to_owned(), PathBuf::from(executable)));
    }
    if binaries.is_empty() {
        bail!("`cargo test --no-run` named no test binary");
    }
    Ok(binaries)
}

/// Copies `image` to the bundle's folder as `name`, with `expectation`.
fn copy_to(image: &Path, name: &str, expectation: &str) -> Result<BuiltImage> {
    let dir = out_dir();
    std::fs::create_dir_all(&dir)?;
    let copied = dir.join(format!("{name}.{}", NVPTX.image_extension));
    std::fs::copy(image, &copied)?;
    std::fs::write(dir.join(format!("{name}.expect.toml")), expectation)?;
    Ok(BuiltImage { program: name.to_owned(), target: &NVPTX, arch: String::new(), path: copied })
}

/// The sums of libtest's `test result:` lines in a report.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    passed: u32,
    failed: u32,
    ignored: u32,
}

impl Counts {
    fn of(report: &str) -> Self {
        let mut counts = Counts::default();
        for line in report.lines().filter_map(|line| line.strip_prefix("test result: ")) {
            for part in line.split(';') {
                let mut words = part.split_whitespace().rev();
                let (Some(what), Some(number)) = (words.next(), words.next()) else { continue };
                let Ok(number) = number.parse::<u32>() else { continue };
                match what {
                    "passed" => counts.passed += number,
                    "failed" => counts.failed += number,
                    "ignored" => counts.ignored += number,
                    _ => {}
                }
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_summed() {
        let report = "running 2 tests\ntest a ... ok\n\ntest result: ok. 10 passed; 0 failed; 1 ignored; 0 measured; 0 \
                      filtered out; finished in 0.00s\n\ntest result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; \
                      0 filtered out; finished in 1.50s\n";
        assert_eq!(Counts::of(report), Counts { passed: 13, failed: 2, ignored: 1 });
    }
}
