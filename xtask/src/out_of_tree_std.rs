//! The std crate from outside: a crate made in a temporary folder outside the repository, as `docs/std.md` ("Your own
//! crate with std") tells a user to make one, set up with `cargo gpu-startup init --std` from the installed tools
//! and built with plain `cargo build`. Its image must hold the startup's kernels and leave no function undefined, and
//! `cargo run -- a b a` must print what the page shows on this machine's GPU, or, without one, reach `gpu-loader`,
//! which says so; `cargo test --no-run` must build the crate's tests into a libtest binary. The crate's library holds
//! the doc examples of `docs/testing-your-code.md` ("Doctests"): rustdoc must build each into a std program of its
//! own, and on a GPU `cargo test --doc` must print the report that page shows. The images go to
//! `target/gpu/out-of-tree/nvptx/`, `hello-std-crate` with the page's run as its expectation and
//! `hello-std-crate-doc-src_lib_rs_LINE_0` for each example ([`crate::doctests`]), for the bundle's GPU suite.

use std::path::Path;

use anyhow::{Context, Result, ensure};
use gpu_startup_targets::{AMDGPU, NVPTX};
use xshell::{Shell, cmd};

use crate::image::BuiltImage;
use crate::out_of_tree::{
    TESTING_PAGE, copy_out, install_tools, marked_block, plain_cargo, prepend_path, report_differences, stderr_of,
};

/// The page the crate is made from.
const PAGE: &str = "docs/std.md";
/// The crate's name, which is its image's name.
const NAME: &str = "hello-std-crate";
/// The arguments of the page's run.
const ARGS: [&str; 3] = ["a", "b", "a"];

/// What the pages say the crate holds and prints.
struct Pages {
    main_rs: String,
    run_stdout: String,
    lib_rs: String,
    doctest_report: String,
}

/// Makes, sets up, builds, checks and (with an NVIDIA GPU) runs the crate; returns its images.
pub fn check(sh: &Shell, gpus: crate::gpus::Gpus) -> Result<Vec<BuiltImage>> {
    let root = crate::project_root();
    let read = |page: &str| std::fs::read_to_string(root.join(page)).with_context(|| format!("cannot read {page}"));
    let (page, testing) = (read(PAGE)?, read(TESTING_PAGE)?);
    let pages = Pages {
        main_rs: marked_block(PAGE, &page, "std src/main.rs")?,
        run_stdout: marked_block(PAGE, &page, "stdout of cargo run -- a b a with std")?,
        lib_rs: marked_block(TESTING_PAGE, &testing, "std src/lib.rs")?,
        doctest_report: marked_block(TESTING_PAGE, &testing, "stdout of cargo test --doc")?,
    };
    let tools = install_tools(sh)?;
    let dir = std::env::temp_dir().join(format!("{NAME}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = check_in(sh, &dir, &tools, &pages, gpus);
    let _ = std::fs::remove_dir_all(&dir);
    result.with_context(|| format!("the out-of-tree std crate ({}, made from {PAGE}) failed", dir.display()))
}

fn check_in(sh: &Shell, dir: &Path, tools: &Path, pages: &Pages, gpus: crate::gpus::Gpus) -> Result<Vec<BuiltImage>> {
    let (main_rs, stdout) = (pages.main_rs.as_str(), pages.run_stdout.as_str());
    let path_with_tools = prepend_path(tools)?;
    // What the page tells a user to type and write; std itself comes from the cache `cargo xtask std` fills.
    cmd!(sh, "cargo new --quiet --vcs none --bin --name {NAME} {dir}").run()?;
    std::fs::write(dir.join("src/main.rs"), main_rs)?;
    std::fs::write(dir.join("src/lib.rs"), &pages.lib_rs)?;
    let _dir = sh.push_dir(dir);
    cmd!(sh, "cargo gpu-startup init --std")
        .env("PATH", &path_with_tools)
        .env("GPU_STARTUP_CACHE_DIR", crate::std_programs::cache_dir())
        .run()?;
    for file in [".cargo/config.toml", "rust-toolchain.toml", ".cargo/nvptx64-gpu-startup-std.json"] {
        ensure!(dir.join(file).is_file(), "`cargo gpu-startup init --std` wrote no {file}");
    }
    let cargo = |args: &[&str]| plain_cargo(dir, &path_with_tools, args);
    let output = cargo(&["build"])?;
    ensure!(output.status.success(), "`cargo build` failed:\n{}", stderr_of(&output));
    let built = crate::project_root()
        .join("target/out-of-tree/cargo/nvptx64-gpu-startup-std/debug")
        .join(format!("{NAME}.{}", NVPTX.image_extension));
    let ptx = std::fs::read_to_string(&built).with_context(|| format!("cargo built no {}", built.display()))?;
    let undefined = crate::std_programs::undefined_functions(&ptx);
    ensure!(undefined.is_empty(), "{} leaves functions undefined: {}", built.display(), undefined.join(", "));
    let image = BuiltImage { program: NAME.to_owned(), target: &NVPTX, arch: String::new(), path: built.clone() };
    crate::image::check_images(&[image])?;
    let expectation = format!(
        "# The run {PAGE} shows: `cargo run -- a b a` in the crate `cargo gpu-startup init --std` set up.\nargs = {}\n\
         exit-code = 0\nstdout = {}\nstderr = \"\"\n",
        toml::Value::Array(ARGS.iter().map(|&arg| arg.into()).collect()),
        toml::Value::String(stdout.to_owned())
    );
    let mut images = vec![copy_out(&NVPTX, &built, NAME, &vec![(None, expectation)])?];

    // `cargo test` builds the crate's tests with std's libtest, into a binary the loader runs as libtest's parent.
    let tests = cargo(&["test", "--no-run", "--message-format", "json"])?;
    ensure!(tests.status.success(), "`cargo test --no-run` failed:\n{}", stderr_of(&tests));
    let binary = crate::std_programs::test_executable(&String::from_utf8_lossy(&tests.stdout))
        .context("`cargo test --no-run` named no test binary")?;
    let ptx = std::fs::read_to_string(&binary).with_context(|| format!("cannot read {}", binary.display()))?;
    ensure!(
        ptx.contains(gpu_startup_protocol::abi::LIBTEST_MARKER),
        "{} is not marked as a libtest binary",
        binary.display()
    );
    let doctests = crate::doctests::build(&cargo, dir, &dir.join("doctests"))?;
    ensure!(doctests.len() == 3, "rustdoc built {doctests:?}, not the three examples of {TESTING_PAGE}");
    images.extend(crate::doctests::copy_out_all(&doctests, NAME, TESTING_PAGE)?);

    let mut run_args = vec!["run", "--quiet", "--"];
    run_args.extend(ARGS);
    let run = cargo(&run_args)?;
    if gpus.nvidia {
        let printed = String::from_utf8_lossy(&run.stdout);
        ensure!(
            run.status.success() && printed == stdout,
            "`cargo run -- a b a` printed\n{printed}(status {}), not what {PAGE} shows:\n{stdout}{}",
            run.status,
            stderr_of(&run)
        );
        let doctests = cargo(&["test", "--doc"])?;
        let report = String::from_utf8_lossy(&doctests.stdout);
        let differences = report_differences(&pages.doctest_report, &report)?;
        ensure!(
            doctests.status.success() && differences.is_empty(),
            "`cargo test --doc` printed\n{report}(status {}), not what {TESTING_PAGE} shows: {differences:?}\n{}",
            doctests.status,
            stderr_of(&doctests)
        );
        println!(
            "xtask: out-of-tree std crate set up with `init --std`, built, checked and run on the GPU, its doc \
             examples too"
        );
    } else {
        let stderr = stderr_of(&run);
        ensure!(
            run.status.code() != Some(0) && stderr.contains("gpu-loader: no GPU"),
            "`cargo run -- a b a` did not reach gpu-loader:\n{stderr}"
        );
        println!(
            "xtask: out-of-tree std crate set up with `init --std`, built and checked; `cargo run` reached gpu-loader, \
             which found no GPU"
        );
    }
    check_amd(sh, dir, &path_with_tools, &cargo)?;
    Ok(images)
}

/// The same crate set up for AMD (`init --std --target amdgpu`, which builds std for AMD on first use) and built
/// with plain `cargo build`: its code object must pass the static checks. (No AMD GPU runs it here.)
fn check_amd(
    sh: &Shell,
    dir: &Path,
    path_with_tools: &std::ffi::OsStr,
    cargo: &dyn Fn(&[&str]) -> Result<std::process::Output>,
) -> Result<()> {
    cmd!(sh, "cargo gpu-startup init --std --target amdgpu")
        .env("PATH", path_with_tools)
        .env("GPU_STARTUP_CACHE_DIR", crate::std_programs::cache_dir())
        .run()?;
    ensure!(dir.join(".cargo/amdgcn-gpu-startup-std.json").is_file(), "`init --std --target amdgpu` wrote no spec");
    let output = cargo(&["build"])?;
    ensure!(output.status.success(), "`cargo build` for AMD failed:\n{}", stderr_of(&output));
    let built = crate::project_root()
        .join("target/out-of-tree/cargo/amdgcn-gpu-startup-std/debug")
        .join(format!("{NAME}.{}", AMDGPU.image_extension));
    ensure!(built.is_file(), "cargo built no {}", built.display());
    crate::image::check_images(&[BuiltImage {
        program: NAME.to_owned(),
        target: &AMDGPU,
        arch: String::new(),
        path: built,
    }])?;
    println!("xtask: the out-of-tree std crate set up with `init --std --target amdgpu` and built for AMD, checked");
    Ok(())
}
