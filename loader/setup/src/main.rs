//! `cargo gpu-startup init [PATH]`: sets a crate up so that `cargo build` builds it for the GPU and `cargo run` runs
//! it there (`gpu_startup_setup`). Cargo runs it as `cargo-gpu-startup gpu-startup init ...`; run directly, the
//! `gpu-startup` word may be left out.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gpu_startup_setup::{self as setup, FileChange, InitOptions};
use gpu_startup_targets::Target;

#[derive(Parser)]
#[command(name = "cargo gpu-startup", bin_name = "cargo gpu-startup", version)]
#[command(about = "Set a crate up to build and run on the GPU with cargo")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write rust-toolchain.toml, .cargo/config.toml and the GPU target specs into a crate (again: updates them).
    Init {
        /// What `cargo build` builds for: nvptx or amdgpu (default: what the config says, else this machine's GPU).
        #[arg(long, value_parser = parse_target)]
        target: Option<&'static Target>,
        /// GPU architecture: sm_90, gfx90a, ... (default: what the config says, else this machine's GPU's, else
        /// sm_90 / gfx90a).
        #[arg(long, value_name = "ARCH")]
        gpu_arch: Option<String>,
        /// Set the crate up for Rust's std: builds std for the GPU once (about a minute), then plain `fn main()`
        /// programs written against std build, and run on NVIDIA GPUs (AMD's build is checked offline only so far;
        /// docs/std.md).
        #[arg(long)]
        std: bool,
        /// The crate's folder.
        #[arg(default_value = ".")]
        path: PathBuf,
    },
}

fn parse_target(text: &str) -> Result<&'static Target, String> {
    Target::parse(text)
}

fn main() -> ExitCode {
    let mut args: Vec<_> = std::env::args_os().collect();
    if args.get(1).is_some_and(|arg| arg == "gpu-startup") {
        args.remove(1);
    }
    let Command::Init { target, gpu_arch, std, path } = Cli::parse_from(args).command;
    match setup::init(&InitOptions { dir: path.clone(), target, gpu_arch, std }) {
        Ok(done) => {
            report(&path, &done);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("cargo-gpu-startup: {}", format!("{error:#}").replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}

fn report(dir: &Path, done: &setup::Setup) {
    let plan = &done.plan;
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let arch = |target: &'static Target| &plan.archs[Target::ALL.iter().position(|&t| t == target).expect("a target")];
    match &done.std {
        Some(std) => println!(
            "cargo-gpu-startup: {} builds for {} ({}) with std, {} ({})",
            dir.display(),
            plan.default_target,
            arch(plan.default_target),
            if std.built { "built now" } else { "built before" },
            std.sysroot.display()
        ),
        None => {
            let other = Target::ALL.into_iter().find(|&t| t != plan.default_target).expect("two targets");
            println!(
                "cargo-gpu-startup: {} builds for {} ({}); for {} ({}) add `--target {}`",
                dir.display(),
                plan.default_target,
                arch(plan.default_target),
                other,
                arch(other),
                setup::config::spec_path(other)
            );
        }
    }
    for (file, change) in &done.files {
        let change = match change {
            FileChange::Created => "created",
            FileChange::Updated => "updated",
            FileChange::Unchanged => "unchanged",
        };
        println!("  {change:9} {}", file.display());
    }
    if !done.has_dependency && done.std.is_none() {
        match setup::gpu_startup_source() {
            Some(source) => println!("next: add the dependency: cargo add gpu-startup --path {}", source.display()),
            None => println!("next: add the dependency gpu-startup to Cargo.toml"),
        }
    }
    if !done.missing_tools.is_empty() {
        let install = match setup::install_script() {
            Some(script) => format!("`{}`", script.display()),
            None => "`loader/install` in the gpu-startup repository".to_owned(),
        };
        println!("note: {} not on PATH: install the host tools with {install}", done.missing_tools.join(" and "));
    }
    println!("then: cargo build, and on a GPU machine cargo run -- ARGS");
}
