//! The proof from outside: a crate made in a temporary folder outside the repository, the way
//! `docs/your-own-crate.md` tells a user to make one, with the program that page shows. The host tools come from
//! `cargo install --path loader`, the crate is set up with `cargo gpu-startup init` and built with plain
//! `cargo build` for both targets, and its images are checked statically. `cargo run -- a b` runs it on this
//! machine's GPU and must print what the page says, or, without a GPU, reach `gpu-loader`, which says so. Without
//! the tools on `PATH` the build must fail naming the install command.
//!
//! The images go to `target/gpu/out-of-tree/<target>/`, with expectations, for the bundle's GPU suite.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, bail, ensure};
use gpu_loader::setup::config::spec_path;
use gpu_loader::target::GpuTarget;
use xshell::{Shell, cmd};

use crate::build::BuiltImage;

/// The page the crate is made from.
pub const PAGE: &str = "docs/your-own-crate.md";
/// The crate's name, which is its images' name.
pub const NAME: &str = "hello-gpu";

/// Makes, sets up, builds, checks and (with a GPU) runs the crate; returns its images.
pub fn check(sh: &Shell, gpus: crate::suite::Gpus) -> Result<Vec<BuiltImage>> {
    let root = crate::project_root();
    let page = std::fs::read_to_string(root.join(PAGE)).with_context(|| format!("cannot read {PAGE}"))?;
    let main_rs = marked_block(&page, "src/main.rs")?;
    let expected_stdout = marked_block(&page, "stdout of cargo run -- a b")?;

    let tools = install_tools(sh)?;
    let dir = std::env::temp_dir().join(format!("{NAME}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = check_in(sh, &dir, &tools, &main_rs, &expected_stdout, gpus);
    let _ = std::fs::remove_dir_all(&dir);
    result.with_context(|| format!("the out-of-tree crate ({}, made from {PAGE}) failed", dir.display()))
}

fn check_in(
    sh: &Shell,
    dir: &Path,
    tools: &Path,
    main_rs: &str,
    expected_stdout: &str,
    gpus: crate::suite::Gpus,
) -> Result<Vec<BuiltImage>> {
    let root = crate::project_root();
    let gpu_startup = root.join("startup-common/gpu-startup");
    let path_with_tools = prepend_path(tools)?;
    // Builds share one target folder across runs, so that `core` is not built anew each time.
    let cargo_target = root.join("target/out-of-tree/cargo");

    // What the page tells a user to type.
    let _env = sh.push_env("CARGO_TARGET_DIR", &cargo_target);
    cmd!(sh, "cargo new --quiet --vcs none --bin --name {NAME} {dir}").run()?;
    let _dir = sh.push_dir(dir);
    cmd!(sh, "cargo add --quiet --path {gpu_startup}").run()?;
    std::fs::write(dir.join("src/main.rs"), main_rs)?;
    cmd!(sh, "cargo gpu-startup init").env("PATH", &path_with_tools).run()?;
    for file in [".cargo/config.toml", "rust-toolchain.toml", ".cargo/nvptx64-gpu-startup.json"] {
        ensure!(dir.join(file).is_file(), "`cargo gpu-startup init` wrote no {file}");
    }

    // Without the tools the nvptx build must say how to install them.
    let without_tools = path_without("gpu-bitcode-linker")?;
    let failed = plain_cargo(dir, &without_tools, &["build"])?;
    let stderr = String::from_utf8_lossy(&failed.stderr);
    let install = format!("cargo install --locked --path {}", root.join("loader").display());
    ensure!(
        !failed.status.success()
            && stderr.contains("the nvptx linker `gpu-bitcode-linker` is not installed")
            && stderr.contains(&install),
        "without gpu-bitcode-linker on PATH, `cargo build` did not name `{install}`:\n{stderr}"
    );

    let mut images = Vec::new();
    for target in GpuTarget::ALL {
        let spec = spec_path(target);
        let output = plain_cargo(dir, &path_with_tools, &["build", "--target", &spec])?;
        ensure!(output.status.success(), "`cargo build --target {spec}` failed:\n{}", stderr_of(&output));
        let built =
            cargo_target.join(target.spec_name()).join("debug").join(format!("{NAME}.{}", target.image_extension()));
        crate::suite::check_images(&[image(target, &built)?])?;
        let table = gpu_loader::ctors::ConstructorTable::of(&gpu_loader::image::Image::read(&built)?)?;
        if target == GpuTarget::Nvptx {
            ensure!(
                table.init.len() == 1 && table.fini.len() == 1,
                "the constructor table of {}: {table:?}",
                built.display()
            );
        }
        images.push(copy_out(target, &built, expected_stdout)?);
    }

    // `cargo run` runs the image through the runner, `gpu-loader`: on this machine's GPU if it has one.
    let run_target = if gpus.amd && !gpus.nvidia { GpuTarget::Amdgpu } else { GpuTarget::Nvptx };
    let spec = spec_path(run_target);
    let output = plain_cargo(dir, &path_with_tools, &["run", "--quiet", "--target", &spec, "--", "a", "b"])?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if gpus.has(run_target) {
        ensure!(
            output.status.success() && stdout == expected_stdout,
            "`cargo run -- a b` printed\n{stdout}(status {}), not what {PAGE} shows:\n{expected_stdout}{}",
            output.status,
            stderr_of(&output)
        );
        println!("xtask: out-of-tree crate built for both targets, checked, and run on the GPU through `cargo run`");
    } else {
        let stderr = stderr_of(&output);
        ensure!(
            output.status.code() == Some(1) && stderr.contains("gpu-loader: no GPU"),
            "`cargo run -- a b` did not reach gpu-loader:\n{stderr}"
        );
        println!(
            "xtask: out-of-tree crate built for both targets and checked; `cargo run` reached gpu-loader, which found \
             no GPU"
        );
    }
    Ok(images)
}

/// The host tools as a user installs them: `cargo install --path loader` (reusing this workspace's release build).
fn install_tools(sh: &Shell) -> Result<PathBuf> {
    let root = crate::project_root();
    let _dir = sh.push_dir(&root);
    let install_root = root.join("target/out-of-tree/tools");
    let target_dir = root.join("target");
    cmd!(sh, "cargo install --quiet --locked --path loader --root {install_root} --target-dir {target_dir}")
        .run()
        .context("`cargo install --path loader` failed")?;
    let bin = install_root.join("bin");
    for tool in ["gpu-loader", "gpu-bitcode-linker", "cargo-gpu-startup"] {
        ensure!(bin.join(tool).is_file(), "`cargo install --path loader` installed no {tool}");
    }
    Ok(bin)
}

/// `cargo ARGS` in `dir` with `path` as `PATH` and nothing of this workspace's environment: the crate's own
/// toolchain file and config apply, as for a user.
fn plain_cargo(dir: &Path, path: &OsString, args: &[&str]) -> Result<Output> {
    let mut cargo = Command::new("cargo");
    cargo.current_dir(dir).args(args).env("PATH", path);
    for variable in ["RUSTUP_TOOLCHAIN", "CARGO", "RUSTC", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_MANIFEST_DIR"]
    {
        cargo.env_remove(variable);
    }
    cargo.env("CARGO_TARGET_DIR", crate::project_root().join("target/out-of-tree/cargo"));
    cargo.output().context("cannot run cargo")
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn prepend_path(dir: &Path) -> Result<OsString> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    Ok(std::env::join_paths(std::iter::once(dir.to_owned()).chain(std::env::split_paths(&path)))?)
}

/// `PATH` without the folders that hold `program`.
fn path_without(program: &str) -> Result<OsString> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    Ok(std::env::join_paths(std::env::split_paths(&path).filter(|dir| !dir.join(program).is_file()))?)
}

fn image(target: GpuTarget, path: &Path) -> Result<BuiltImage> {
    ensure!(path.is_file(), "cargo built no {}", path.display());
    Ok(BuiltImage { program: NAME.to_owned(), target, arch: String::new(), path: path.to_owned() })
}

/// Copies an image to `target/gpu/out-of-tree/<target>/`, with the suite's expectations for it: the run the page
/// shows, and a wider grid.
fn copy_out(target: GpuTarget, built: &Path, stdout: &str) -> Result<BuiltImage> {
    let dir = out_dir(target);
    std::fs::create_dir_all(&dir)?;
    let image = dir.join(format!("{NAME}.{}", target.image_extension()));
    std::fs::copy(built, &image)?;
    std::fs::write(
        dir.join(format!("{NAME}.expect.toml")),
        format!(
            "# The run {PAGE} shows: `cargo run -- a b`.\nargs = [\"a\", \"b\"]\nexit-code = 0\nstdout = {}\n",
            toml::Value::String(stdout.to_owned())
        ),
    )?;
    std::fs::write(
        dir.join(format!("{NAME}.wide.expect.toml")),
        "# 64 threads, and the greeting from the environment.\nthreads = 32\nblocks = 2\nargs = [\"a\", \"b\"]\n\
         env = { GREETING = \"hi\" }\nexit-code = 0\nstdout-lines = 68\n\
         stdout-contains = [\"argument b\\n\", \"hi from thread 63 of 64\\n\", \"threads that said hello: 64\\n\"]\n",
    )?;
    Ok(BuiltImage { program: NAME.to_owned(), target, arch: String::new(), path: image })
}

/// Where the crate's images and their expectations go.
pub fn out_dir(target: GpuTarget) -> PathBuf {
    crate::project_root().join("target/gpu/out-of-tree").join(target.name())
}

/// The fenced block that follows `<!-- checked: NAME -->` in a page, without its fences.
pub fn marked_block(page: &str, name: &str) -> Result<String> {
    let marker = format!("<!-- checked: {name} -->");
    let Some(start) = page.find(&marker) else { bail!("{PAGE} has no `{marker}`") };
    let mut lines = page[start + marker.len()..].lines().skip_while(|line| line.trim().is_empty());
    ensure!(lines.next().is_some_and(|line| line.starts_with("```")), "`{marker}` is not followed by a fenced block");
    let mut block = String::new();
    for line in lines {
        if line.starts_with("```") {
            return Ok(block);
        }
        block.push_str(line);
        block.push('\n');
    }
    bail!("the block after `{marker}` in {PAGE} is not closed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_blocks_come_out_whole() {
        let page =
            "text\n<!-- checked: a -->\n\n```rust\nfn main() {}\n\nlet x;\n```\nmore\n<!-- checked: b -->\n```\n```\n";
        assert_eq!(marked_block(page, "a").unwrap(), "fn main() {}\n\nlet x;\n");
        assert_eq!(marked_block(page, "b").unwrap(), "");
        assert!(marked_block(page, "c").unwrap_err().to_string().contains("has no `<!-- checked: c -->`"));
        assert!(marked_block("<!-- checked: a -->\ntext\n", "a").is_err());
        assert!(marked_block("<!-- checked: a -->\n```\nopen\n", "a").is_err());
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
    fn the_page_has_the_crate_and_its_output() {
        let page = std::fs::read_to_string(crate::project_root().join(PAGE)).unwrap();
        let main_rs = marked_block(&page, "src/main.rs").unwrap();
        assert!(main_rs.contains("#[gpu_startup::main]"), "{main_rs}");
        assert!(!marked_block(&page, "stdout of cargo run -- a b").unwrap().is_empty());
    }
}
