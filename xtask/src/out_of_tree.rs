//! The proof from outside: a crate made in a temporary folder outside the repository, the way
//! `docs/your-own-crate.md` tells a user to make one, with the program that page shows and the integration test that
//! `docs/testing-your-code.md` shows. The host tools come from `loader/install`, the crate is set up
//! with `cargo gpu-startup init` and built with plain `cargo build` and `cargo test --no-run` for both targets, and
//! its images are checked statically. `cargo test -- --list` must list what the testing page shows, without a GPU, and
//! `cargo nextest list` the same tests ([`crate::nextest`]). `cargo run -- a b` and `cargo test --test outcomes` run it
//! on this machine's GPU and must print what the pages say, or, without a GPU, reach `gpu-loader`, which says so.
//! Without the tools on `PATH` the build must fail naming the install command.
//!
//! The images go to `target/gpu/out-of-tree/<target>/`, with expectations, for the bundle's GPU suite: `hello-gpu`
//! (the program), `hello-gpu-tests` (its unit tests) and `hello-gpu-outcomes` (the integration test).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, bail, ensure};
use gpu_startup_setup::config::spec_path;
use gpu_startup_targets::{AMDGPU, ImageKind, NVPTX, Target};
use xshell::{Shell, cmd};

use crate::gpu_cargo::{Images, gpu_artifacts};
use crate::image::BuiltImage;

/// The script that installs the host tools, as the pages tell a user to run it.
const INSTALL_SCRIPT: &str = "loader/install";
/// The page the crate is made from.
pub const PAGE: &str = "docs/your-own-crate.md";
/// The page its integration test, and the list and the report of its tests, come from.
pub const TESTING_PAGE: &str = "docs/testing-your-code.md";
/// The crate's name, which is its images' name.
pub const NAME: &str = "hello-gpu";
/// The integration test's name: `outcomes.rs` in the crate's `tests` folder, run by `cargo test --test outcomes`.
const INTEGRATION_TEST: &str = "outcomes";

/// What the two pages say the crate holds and prints.
struct Pages {
    main_rs: String,
    run_stdout: String,
    integration_test: String,
    test_list: String,
    test_report: String,
}

impl Pages {
    fn read() -> Result<Self> {
        let root = crate::project_root();
        let read = |page: &str| std::fs::read_to_string(root.join(page)).with_context(|| format!("cannot read {page}"));
        let (page, testing) = (read(PAGE)?, read(TESTING_PAGE)?);
        Ok(Self {
            main_rs: marked_block(PAGE, &page, "src/main.rs")?,
            run_stdout: marked_block(PAGE, &page, "stdout of cargo run -- a b")?,
            integration_test: marked_block(TESTING_PAGE, &testing, &format!("tests/{INTEGRATION_TEST}.rs"))?,
            test_list: marked_block(TESTING_PAGE, &testing, "stdout of cargo test -- --list")?,
            test_report: marked_block(
                TESTING_PAGE,
                &testing,
                &format!("stdout of cargo test --test {INTEGRATION_TEST}"),
            )?,
        })
    }
}

/// Makes, sets up, builds, checks and (with a GPU) runs the crate and its tests; returns its images.
pub fn check(sh: &Shell, gpus: crate::gpus::Gpus) -> Result<Vec<BuiltImage>> {
    let pages = Pages::read()?;
    let tools = install_tools(sh)?;
    let dir = std::env::temp_dir().join(format!("{NAME}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = check_in(sh, &dir, &tools, &pages, gpus);
    let _ = std::fs::remove_dir_all(&dir);
    result.with_context(|| format!("the out-of-tree crate ({}, made from {PAGE}) failed", dir.display()))
}

fn check_in(sh: &Shell, dir: &Path, tools: &Path, pages: &Pages, gpus: crate::gpus::Gpus) -> Result<Vec<BuiltImage>> {
    let root = crate::project_root();
    let gpu_startup = root.join("startup-common/gpu-startup");
    let path_with_tools = prepend_path(tools)?;
    // Builds share one target folder across runs, so that `core` is not built anew each time.
    let cargo_target = root.join("target/out-of-tree/cargo");

    // What the pages tell a user to type and write.
    let _env = sh.push_env("CARGO_TARGET_DIR", &cargo_target);
    cmd!(sh, "cargo new --quiet --vcs none --bin --name {NAME} {dir}").run()?;
    let _dir = sh.push_dir(dir);
    cmd!(sh, "cargo add --quiet --path {gpu_startup}").run()?;
    std::fs::write(dir.join("src/main.rs"), &pages.main_rs)?;
    std::fs::create_dir_all(dir.join("tests"))?;
    std::fs::write(dir.join(format!("tests/{INTEGRATION_TEST}.rs")), &pages.integration_test)?;
    cmd!(sh, "cargo gpu-startup init").env("PATH", &path_with_tools).run()?;
    for file in [".cargo/config.toml", "rust-toolchain.toml", ".cargo/nvptx64-gpu-startup.json"] {
        ensure!(dir.join(file).is_file(), "`cargo gpu-startup init` wrote no {file}");
    }

    // Without the tools the nvptx build must say how to install them.
    let without_tools = path_without("gpu-bitcode-linker")?;
    let failed = plain_cargo(dir, &without_tools, &["build"])?;
    let stderr = String::from_utf8_lossy(&failed.stderr);
    let install = format!("`{}`", root.join(INSTALL_SCRIPT).canonicalize()?.display());
    ensure!(
        !failed.status.success()
            && stderr.contains("the nvptx linker `gpu-bitcode-linker` is not installed")
            && stderr.contains(&install),
        "without gpu-bitcode-linker on PATH, `cargo build` did not name `{install}`:\n{stderr}"
    );

    let cargo = |args: &[&str]| plain_cargo(dir, &path_with_tools, args);
    let mut images = Vec::new();
    for target in Target::ALL {
        let spec = spec_path(target);
        let output = cargo(&["build", "--target", &spec])?;
        ensure!(output.status.success(), "`cargo build --target {spec}` failed:\n{}", stderr_of(&output));
        let built =
            cargo_target.join(target.spec_name).join("debug").join(format!("{NAME}.{}", target.image_extension));
        crate::image::check_images(&[image(target, &built)?])?;
        let table = gpu_loader::ctors::ConstructorTable::of(&gpu_loader::image::Image::read(&built)?)?;
        // PTX has no sections: only its constructor table is the loader's to gather.
        if target.produces(ImageKind::Ptx) {
            ensure!(
                table.init.len() == 1 && table.fini.len() == 1,
                "the constructor table of {}: {table:?}",
                built.display()
            );
        }
        images.push(copy_out(target, &built, NAME, &program_expectations(&pages.run_stdout))?);
        images.extend(check_tests(&cargo, target, pages)?);
    }
    let archive = root.join("target/out-of-tree/nextest-archive.tar.zst");
    let archived = crate::nextest::check(
        &cargo,
        &listed(&cargo, &["--format", "terse"])?,
        &listed(&cargo, &["--ignored"])?,
        &archive,
    )?;
    crate::nextest::keep_for_the_bundle(dir, NAME, archived.then_some(archive.as_path()))?;

    // `cargo run` and `cargo test` run the images through the runner, `gpu-loader`: on this machine's GPU if it has
    // one.
    let run_target = if gpus.amd && !gpus.nvidia { &AMDGPU } else { &NVPTX };
    let spec = spec_path(run_target);
    let run = cargo(&["run", "--quiet", "--target", &spec, "--", "a", "b"])?;
    let test = cargo(&["test", "--quiet", "--target", &spec, "--test", INTEGRATION_TEST])?;
    if gpus.has(run_target) {
        let stdout = String::from_utf8_lossy(&run.stdout);
        ensure!(
            run.status.success() && stdout == pages.run_stdout,
            "`cargo run -- a b` printed\n{stdout}(status {}), not what {PAGE} shows:\n{}{}",
            run.status,
            pages.run_stdout,
            stderr_of(&run)
        );
        let report = String::from_utf8_lossy(&test.stdout);
        let differences = report_differences(&pages.test_report, &report)?;
        ensure!(
            test.status.code() == Some(101) && differences.is_empty(),
            "`cargo test --test {INTEGRATION_TEST}` printed\n{report}(status {}), not what {TESTING_PAGE} shows: \
             {differences:?}\n{}",
            test.status,
            stderr_of(&test)
        );
        println!(
            "xtask: out-of-tree crate built and tested for both targets, checked, and run on the GPU through `cargo \
             run` and `cargo test`"
        );
    } else {
        for (what, output) in [("cargo run -- a b", &run), ("cargo test", &test)] {
            let stderr = stderr_of(output);
            ensure!(
                output.status.code() != Some(0) && stderr.contains("gpu-loader: no GPU"),
                "`{what}` did not reach gpu-loader:\n{stderr}"
            );
        }
        println!(
            "xtask: out-of-tree crate built and tested for both targets and checked; `cargo run` and `cargo test` \
             reached gpu-loader, which found no GPU"
        );
    }
    Ok(images)
}

/// Builds the crate's test binaries for `target` (`cargo test --no-run`), checks them statically and copies them out
/// with their expectations, and checks that `cargo test -- --list` lists what the testing page shows.
fn check_tests(
    cargo: &dyn Fn(&[&str]) -> Result<Output>,
    target: &'static Target,
    pages: &Pages,
) -> Result<Vec<BuiltImage>> {
    let spec = spec_path(target);
    let output = cargo(&["test", "--no-run", "--target", &spec, "--message-format=json-render-diagnostics"])?;
    ensure!(output.status.success(), "`cargo test --no-run --target {spec}` failed:\n{}", stderr_of(&output));
    let artifacts = gpu_artifacts(&String::from_utf8_lossy(&output.stdout), Images::Tests)?;
    let unit = artifacts.iter().find(|artifact| artifact.integration_test.is_none());
    let integration = artifacts.iter().find(|artifact| artifact.integration_test.as_deref() == Some(INTEGRATION_TEST));
    let (Some(unit), Some(integration), 2) = (unit, integration, artifacts.len()) else {
        bail!("`cargo test --no-run --target {spec}` built {artifacts:?}, not the unit and the integration tests");
    };
    crate::image::check_images(&[image(target, &unit.image)?, image(target, &integration.image)?])?;
    let images = vec![
        copy_out(target, &unit.image, &format!("{NAME}-tests"), &unit_test_expectations())?,
        copy_out(
            target,
            &integration.image,
            &format!("{NAME}-{INTEGRATION_TEST}"),
            &integration_test_expectations(&pages.test_report)?,
        )?,
    ];
    let list = cargo(&["test", "--quiet", "--target", &spec, "--", "--list"])?;
    let stdout = String::from_utf8_lossy(&list.stdout);
    ensure!(
        list.status.success() && stdout == pages.test_list,
        "`cargo test --target {spec} -- --list` printed\n{stdout}(status {}), not what {TESTING_PAGE} shows:\n{}{}",
        list.status,
        pages.test_list,
        stderr_of(&list)
    );
    Ok(images)
}

/// The tests `cargo test -- --list ARGS` names, from every test binary of the crate.
fn listed(cargo: &dyn Fn(&[&str]) -> Result<Output>, args: &[&str]) -> Result<Vec<String>> {
    let mut command = vec!["test", "--quiet", "--", "--list"];
    command.extend(args);
    let output = cargo(&command)?;
    ensure!(output.status.success(), "`cargo test -- --list {}` failed:\n{}", args.join(" "), stderr_of(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line.strip_suffix(": test").map(str::to_owned).with_context(|| format!("a list line {line:?}")))
        .collect()
}

/// The host tools as a user installs them: `loader/install`, run from outside the repository (reusing this
/// workspace's release build).
pub(crate) fn install_tools(sh: &Shell) -> Result<PathBuf> {
    let root = crate::project_root();
    let install_root = root.join("target/out-of-tree/tools");
    let target_dir = root.join("target");
    let script = root.join(INSTALL_SCRIPT);
    let _dir = sh.push_dir(std::env::temp_dir());
    cmd!(sh, "{script} --quiet --root {install_root} --target-dir {target_dir}")
        .run()
        .with_context(|| format!("`{INSTALL_SCRIPT}` failed"))?;
    let bin = install_root.join("bin");
    for tool in ["gpu-loader", "gpu-bitcode-linker", "cargo-gpu-startup"] {
        ensure!(bin.join(tool).is_file(), "`{INSTALL_SCRIPT}` installed no {tool}");
    }
    Ok(bin)
}

/// `cargo ARGS` in `dir` with `path` as `PATH` and nothing of this workspace's environment: the crate's own
/// toolchain file and config apply, as for a user.
pub(crate) fn plain_cargo(dir: &Path, path: &OsString, args: &[&str]) -> Result<Output> {
    let mut cargo = Command::new("cargo");
    cargo.current_dir(dir).args(args).env("PATH", path);
    for variable in ["RUSTUP_TOOLCHAIN", "CARGO", "RUSTC", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_MANIFEST_DIR"]
    {
        cargo.env_remove(variable);
    }
    cargo.env("CARGO_TARGET_DIR", crate::project_root().join("target/out-of-tree/cargo"));
    cargo.output().context("cannot run cargo")
}

pub(crate) fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn prepend_path(dir: &Path) -> Result<OsString> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    Ok(std::env::join_paths(std::iter::once(dir.to_owned()).chain(std::env::split_paths(&path)))?)
}

/// `PATH` without the folders that hold `program`.
fn path_without(program: &str) -> Result<OsString> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    Ok(std::env::join_paths(std::env::split_paths(&path).filter(|dir| !dir.join(program).is_file()))?)
}

fn image(target: &'static Target, path: &Path) -> Result<BuiltImage> {
    ensure!(path.is_file(), "cargo built no {}", path.display());
    Ok(BuiltImage { program: NAME.to_owned(), target, arch: String::new(), path: path.to_owned() })
}

/// Expectation files, `(variant, text)`: `None` is `NAME.expect.toml`, `Some(v)` is `NAME.v.expect.toml`.
type Expectations = Vec<(Option<&'static str>, String)>;

/// The program's runs in the suite: the one the page shows, and a wider grid.
fn program_expectations(stdout: &str) -> Expectations {
    vec![
        (
            None,
            format!(
                "# The run {PAGE} shows: `cargo run -- a b`.\nargs = [\"a\", \"b\"]\nexit-code = 0\nstdout = {}\n",
                toml::Value::String(stdout.to_owned())
            ),
        ),
        (
            Some("wide"),
            "# 64 threads, and the greeting from the environment.\nthreads = 32\nblocks = 2\nargs = [\"a\", \"b\"]\n\
             env = { GREETING = \"hi\" }\nexit-code = 0\nstdout-lines = 68\n\
             stdout-contains = [\"argument b\\n\", \"hi from thread 63 of 64\\n\", \"threads that said hello: 64\\n\"]\n"
                .to_owned(),
        ),
    ]
}

/// The unit tests' run: the page's one test passes.
fn unit_test_expectations() -> Expectations {
    vec![(
        None,
        "# The unit tests of the program in docs/your-own-crate.md, as `cargo test --bin hello-gpu` runs them.\n\
         exit-code = 0\nstdout-matches = [\n    '(?m)^test tests::every_thread_has_a_greeting \\.\\.\\. ok$',\n    \
         '(?m)^test result: ok\\. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; ',\n]\nmax-seconds = 60\n"
            .to_owned(),
    )]
}

/// The integration test's run: the report the testing page shows, line by line.
fn integration_test_expectations(report: &str) -> Result<Expectations> {
    let mut table = toml::Table::new();
    table.insert("exit-code".into(), toml::Value::Integer(101));
    let patterns = report_patterns(report);
    let slowed = patterns.iter().map(|pattern| toml::Value::String(slowed_panic_pattern(pattern))).collect();
    table.insert("stdout-matches".into(), toml::Value::Array(patterns.into_iter().map(toml::Value::String).collect()));
    table.insert("stdout-lines".into(), toml::Value::Integer(report.lines().count() as i64));
    // A worker per GPU, replaced twice (after the timeout and the trap): a hang guard, not a benchmark.
    table.insert("max-seconds".into(), toml::Value::Float(60.0));
    // One of its tests traps: under compute-sanitizer's memcheck that fault is expected (docs/sanitizers.md).
    let mut sanitize = toml::Table::new();
    sanitize.insert("faults".into(), toml::Value::Boolean(true));
    sanitize.insert("stdout-matches".into(), toml::Value::Array(slowed));
    table.insert("sanitize".into(), toml::Value::Table(sanitize));
    let text = format!(
        "# `cargo test --test {INTEGRATION_TEST}` as {TESTING_PAGE} shows it: each line of its report.\n{}",
        toml::to_string_pretty(&table)?
    );
    Ok(vec![(None, text)])
}

/// `pattern`, or where it is the line that counts a test's panicked threads, that line as a tool that slows the other
/// threads past the loader's panic grace leaves it (`docs/sanitizers.md`).
fn slowed_panic_pattern(pattern: &str) -> String {
    match pattern.strip_prefix("(?m)^").and_then(|line| line.strip_suffix(" panicked$")) {
        Some(counted) => format!(
            "(?m)^(at least )?{counted} panicked(; threads still running 1s after the first panic were stopped)?$"
        ),
        None => pattern.to_owned(),
    }
}

/// The lines a run's report must have, as regular expressions, from the report a page shows: each line whole, but
/// for what differs from run to run: the time, and the driver's words for a fault.
pub fn report_patterns(report: &str) -> Vec<String> {
    const FAULT: &str = "device fault in kernel `_start`: ";
    report
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            let pattern = if line.starts_with(FAULT) {
                format!("{}\\S+ \\(.*\\)", regex::escape(FAULT))
            } else if let Some((before, _)) = line.split_once("finished in ") {
                format!("{}finished in \\d+(\\.\\d+)?s", regex::escape(before))
            } else {
                regex::escape(line)
            };
            format!("(?m)^{pattern}$")
        })
        .collect()
}

/// The report's lines that `actual` lacks, and a note when it has more or fewer lines.
pub(crate) fn report_differences(report: &str, actual: &str) -> Result<Vec<String>> {
    let mut differences = Vec::new();
    for pattern in report_patterns(report) {
        if !regex::Regex::new(&pattern)?.is_match(actual) {
            differences.push(pattern);
        }
    }
    if report.lines().count() != actual.lines().count() {
        differences.push(format!("{} lines, not {}", actual.lines().count(), report.lines().count()));
    }
    Ok(differences)
}

/// Copies an image to `target/gpu/out-of-tree/<target>/` as `name`, with its expectations for the suite.
pub(crate) fn copy_out(
    target: &'static Target,
    built: &Path,
    name: &str,
    expectations: &Expectations,
) -> Result<BuiltImage> {
    let dir = out_dir(target);
    std::fs::create_dir_all(&dir)?;
    let image = dir.join(format!("{name}.{}", target.image_extension));
    std::fs::copy(built, &image)?;
    for (variant, text) in expectations {
        let file = match variant {
            Some(variant) => format!("{name}.{variant}.expect.toml"),
            None => format!("{name}.expect.toml"),
        };
        std::fs::write(dir.join(file), text)?;
    }
    Ok(BuiltImage { program: name.to_owned(), target, arch: String::new(), path: image })
}

/// Where the crate's images and their expectations go.
pub fn out_dir(target: &'static Target) -> PathBuf {
    crate::project_root().join("target/gpu/out-of-tree").join(target.name)
}

/// The fenced block that follows `<!-- checked: NAME -->` in `text`, the text of `page`, without its fences.
pub fn marked_block(page: &str, text: &str, name: &str) -> Result<String> {
    let marker = format!("<!-- checked: {name} -->");
    let Some(start) = text.find(&marker) else { bail!("{page} has no `{marker}`") };
    let mut lines = text[start + marker.len()..].lines().skip_while(|line| line.trim().is_empty());
    ensure!(lines.next().is_some_and(|line| line.starts_with("```")), "`{marker}` is not followed by a fenced block");
    let mut block = String::new();
    for line in lines {
        if line.starts_with("```") {
            return Ok(block);
        }
        block.push_str(line);
        block.push('\n');
    }
    bail!("the block after `{marker}` in {page} is not closed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_blocks_come_out_whole() {
        let page =
            "text\n<!-- checked: a -->\n\n```rust\nfn main() {}\n\nlet x;\n```\nmore\n<!-- checked: b -->\n```\n```\n";
        assert_eq!(marked_block("p.md", page, "a").unwrap(), "fn main() {}\n\nlet x;\n");
        assert_eq!(marked_block("p.md", page, "b").unwrap(), "");
        let error = marked_block("p.md", page, "c").unwrap_err().to_string();
        assert!(error.contains("p.md has no `<!-- checked: c -->`"), "{error}");
        assert!(marked_block("p.md", "<!-- checked: a -->\ntext\n", "a").is_err());
        assert!(marked_block("p.md", "<!-- checked: a -->\n```\nopen\n", "a").is_err());
    }

    /// The README's first example is the real program that its first command runs.
    #[test]
    fn the_readme_shows_the_hello_program() {
        let root = crate::project_root();
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let hello = std::fs::read_to_string(root.join("tests/programs/hello/src/main.rs")).unwrap();
        let start = readme.find("```rust\n").expect("a Rust example in the README") + "```rust\n".len();
        let example = &readme[start..start + readme[start..].find("```").unwrap()];
        assert_eq!(example, hello);
    }

    #[test]
    fn the_pages_have_the_crate_its_tests_and_their_output() {
        let pages = Pages::read().unwrap();
        assert!(pages.main_rs.contains("#[gpu_startup::main]"), "{}", pages.main_rs);
        assert!(pages.main_rs.contains("#[gpu_startup::test"), "{}", pages.main_rs);
        assert!(pages.integration_test.contains("#![test_runner(gpu_startup::test_runner)]"));
        assert!(!pages.run_stdout.is_empty() && !pages.test_list.is_empty());
        assert!(pages.test_report.contains("test result: FAILED."), "{}", pages.test_report);
    }

    #[test]
    fn a_report_matches_but_for_its_time_and_the_drivers_words() {
        let page = "\nrunning 1 test\ntest a.b ... FAILED\ndevice fault in kernel `_start`: CUDA_ERROR_X (x)\n\
                    test result: FAILED. 0 passed; 1 failed; finished in 2.37s\n";
        let run = "\nrunning 1 test\ntest a.b ... FAILED\ndevice fault in kernel `_start`: CUDA_ERROR_Y (an error)\n\
                   test result: FAILED. 0 passed; 1 failed; finished in 0.50s\n";
        assert_eq!(report_differences(page, run).unwrap(), Vec::<String>::new());
        let other = run.replace("test a.b ... FAILED", "test aXb ... FAILED");
        assert_eq!(report_differences(page, &other).unwrap(), [r"(?m)^test a\.b \.\.\. FAILED$"]);
        let longer = format!("{run}extra\n");
        assert_eq!(report_differences(page, &longer).unwrap(), ["6 lines, not 5"]);
        let patterns = report_patterns(page);
        assert_eq!(patterns.len(), 4, "blank lines need no pattern");
    }

    #[test]
    fn the_integration_tests_expectations_parse_and_match_the_pages_report() {
        let pages = Pages::read().unwrap();
        let expectations = integration_test_expectations(&pages.test_report).unwrap();
        let expectation = gpu_suite::Expectation::parse(&expectations[0].1).unwrap();
        assert_eq!((expectation.exit_code, expectation.stdout_lines), (101, Some(pages.test_report.lines().count())));
        for pattern in &expectation.stdout_matches {
            assert!(regex::Regex::new(pattern).unwrap().is_match(&pages.test_report), "{pattern}");
        }
        for (_, text) in unit_test_expectations().iter().chain(&program_expectations(&pages.run_stdout)) {
            gpu_suite::Expectation::parse(text).unwrap();
        }
    }
}
