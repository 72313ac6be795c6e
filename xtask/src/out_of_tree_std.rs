//! The std crate from outside: a crate made in a temporary folder outside the repository, as `docs/std.md` ("Your own
//! crate with std") tells a user to make one, set up with `cargo gpu-startup init --std` from the installed tools
//! and built with plain `cargo build`. Its image must hold the startup's kernels and leave no function undefined, and
//! `cargo run -- a b a` must print what the page shows on this machine's GPU, or, without one, reach `gpu-loader`,
//! which says so; `cargo test --no-run` must build the crate's tests into a libtest binary. The image goes to
//! `target/gpu/out-of-tree/nvptx/` as `hello-std-crate`, with the page's run as its expectation, for the bundle's GPU
//! suite.

use std::path::Path;

use anyhow::{Context, Result, ensure};
use gpu_startup_targets::NVPTX;
use xshell::{Shell, cmd};

use crate::image::BuiltImage;
use crate::out_of_tree::{copy_out, install_tools, marked_block, plain_cargo, prepend_path, stderr_of};

/// The page the crate is made from.
const PAGE: &str = "docs/std.md";
/// The crate's name, which is its image's name.
const NAME: &str = "hello-std-crate";
/// The arguments of the page's run.
const ARGS: [&str; 3] = ["a", "b", "a"];

/// Makes, sets up, builds, checks and (with an NVIDIA GPU) runs the crate; returns its image.
pub fn check(sh: &Shell, gpus: crate::gpus::Gpus) -> Result<BuiltImage> {
    let root = crate::project_root();
    let page = std::fs::read_to_string(root.join(PAGE)).with_context(|| format!("cannot read {PAGE}"))?;
    let main_rs = marked_block(PAGE, &page, "std src/main.rs")?;
    let stdout = marked_block(PAGE, &page, "stdout of cargo run -- a b a with std")?;
    let tools = install_tools(sh)?;
    let dir = std::env::temp_dir().join(format!("{NAME}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = check_in(sh, &dir, &tools, &main_rs, &stdout, gpus);
    let _ = std::fs::remove_dir_all(&dir);
    result.with_context(|| format!("the out-of-tree std crate ({}, made from {PAGE}) failed", dir.display()))
}

fn check_in(
    sh: &Shell,
    dir: &Path,
    tools: &Path,
    main_rs: &str,
    stdout: &str,
    gpus: crate::gpus::Gpus,
) -> Result<BuiltImage> {
    let path_with_tools = prepend_path(tools)?;
    // What the page tells a user to type and write; std itself comes from the cache `cargo xtask std` fills.
    cmd!(sh, "cargo new --quiet --vcs none --bin --name {NAME} {dir}").run()?;
    std::fs::write(dir.join("src/main.rs"), main_rs)?;
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
    let image = copy_out(&NVPTX, &built, NAME, &vec![(None, expectation)])?;

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
        println!("xtask: out-of-tree std crate set up with `init --std`, built, checked and run on the GPU");
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
    Ok(image)
}
