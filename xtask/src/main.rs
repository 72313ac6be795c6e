//! `cargo xtask`: build, run, test, bundle, bench and bindgen, end to end. See `cargo xtask --help`.

use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::sync::LazyLock;

use gpu_startup_targets::Target;
use xshell::Shell;

use xtask::build::BuildOptions;
use xtask::suite::TestOptions;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Build, run and test GPU programs with the GPU startup")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the startup and every GPU program in tests/programs into target/gpu/<target>/<arch>/.
    Build(BuildArgs),
    /// Build everything, run the host tests and static image checks, then the GPU suite on every GPU found.
    Test(TestArgs),
    /// Build one GPU program (from tests/programs, or any crate's folder) and run it with gpu-loader on this machine's
    /// GPU.
    Run(RunArgs),
    /// Make a crate outside the repository from docs/your-own-crate.md, set it up, build and check it (part of `test`).
    OutOfTree,
    /// Build Rust's std for the NVIDIA target and the programs of tests/programs-std against it, check their images,
    /// and make the std crate of docs/std.md outside the repository with `cargo gpu-startup init --std` (part of
    /// `test`).
    Std,
    /// Make a self-contained folder that runs the GPU suite on an x86-64 Linux GPU machine without Rust (a machine
    /// with one kind of GPU needs one kind of image: `--target`).
    Bundle {
        /// Where to put it.
        #[arg(long, default_value = "target/bundle")]
        out: std::path::PathBuf,
        #[command(flatten)]
        gpu: TargetArgs,
        /// Fail if the bundle comes out larger than this: bytes, or with a binary unit (512K, 64M, 64MiB, 1G).
        #[arg(long, value_parser = xtask::bundle::parse_size)]
        max_size: Option<u64>,
    },
    /// Measure the startup and the RPC channel against bare baselines on this machine's NVIDIA GPU.
    Bench {
        #[command(flatten)]
        arch: ArchArg,
        /// Write the run's results, with the commit and the date, into docs/performance.md's "Latest results"
        /// (every benchmark runs: not with --only).
        #[arg(long)]
        write_docs: bool,
        /// Options for gpu-bench (--repeat N, --only NAME).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        bench_args: Vec<String>,
    },
    /// Regenerate the HSA bindings (loader/src/hsa/sys.rs) from the installed ROCm headers.
    Bindgen {
        /// Fail if the committed bindings differ from what the headers generate, instead of writing them.
        #[arg(long)]
        check: bool,
    },
}

/// The GPU targets a command builds for: one target, by its name, or all (`None`). Its values come from the
/// targets' descriptors, so a new target is a choice without a change here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TargetChoice(Option<&'static Target>);

impl TargetChoice {
    const ALL: TargetChoice = TargetChoice(None);

    fn targets(self) -> Vec<&'static Target> {
        match self.0 {
            Some(target) => vec![target],
            None => Target::ALL.to_vec(),
        }
    }
}

impl ValueEnum for TargetChoice {
    fn value_variants<'a>() -> &'a [Self] {
        static VARIANTS: LazyLock<Vec<TargetChoice>> = LazyLock::new(|| {
            Target::ALL.into_iter().map(|target| TargetChoice(Some(target))).chain([TargetChoice::ALL]).collect()
        });
        &VARIANTS
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.map_or("all", |target| target.name)))
    }
}

/// The architecture to build for, as every command that builds takes it.
#[derive(Args)]
struct ArchArg {
    /// GPU architecture to build for (sm_90, gfx90a, ...); it applies to its vendor's images. Default: this machine's
    /// GPU's, else sm_90 for NVIDIA and gfx90a for AMD.
    #[arg(long)]
    gpu_arch: Option<String>,
}

/// The targets and the architecture to build for.
#[derive(Args)]
struct TargetArgs {
    /// The GPU targets to build for.
    #[arg(long, value_enum, default_value_t = TargetChoice::ALL)]
    target: TargetChoice,
    #[command(flatten)]
    arch: ArchArg,
}

#[derive(Args)]
struct BuildArgs {
    #[command(flatten)]
    gpu: TargetArgs,
    /// Build optimized images.
    #[arg(long)]
    release: bool,
}

#[derive(Args)]
struct TestArgs {
    /// Fail when no GPU is found instead of skipping the GPU suite.
    #[arg(long)]
    require_gpu: bool,
    #[command(flatten)]
    gpu: TargetArgs,
    /// Only build and run the GPU suite (skip the host tests and checks).
    #[arg(long)]
    gpu_only: bool,
    /// Run the GPU suite (the programs as built, the device test binaries among them) under compute-sanitizer's
    /// tools instead, comma-separated (memcheck, racecheck, synccheck, initcheck); all four without a list. NVIDIA
    /// only; implies --gpu-only and --require-gpu.
    #[arg(long, value_name = "TOOLS", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    sanitize: Option<String>,
    /// A name filter and other options for the GPU suite (libtest's: --exact, --list, ...).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    suite_args: Vec<String>,
}

#[derive(Args)]
struct RunArgs {
    /// The program: a folder of tests/programs (e.g. hello), or the path of a crate.
    program: String,
    #[command(flatten)]
    arch: ArchArg,
    /// gpu-loader options (--threads 32 --blocks 4 ...), then `--` and the program's arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    loader_args: Vec<String>,
}

impl BuildArgs {
    fn options(self) -> BuildOptions {
        let targets = self.gpu.target.targets();
        BuildOptions { targets, gpu_arch: self.gpu.arch.gpu_arch, release: self.release, programs: Vec::new() }
    }
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let sh = Shell::new()?;
    // Every command works in the project root, wherever it was started (as rust-analyzer's xtask does).
    sh.change_dir(xtask::project_root());
    match cli.command {
        Command::Build(args) => {
            let images = xtask::build::build(&sh, &args.options())?;
            for image in images {
                println!("{}", image.path.display());
            }
            Ok(())
        }
        Command::Bindgen { check } => xtask::bindgen::run(&sh, check),
        Command::Test(args) => xtask::suite::test(
            &sh,
            &TestOptions {
                require_gpu: args.require_gpu,
                targets: args.gpu.target.targets(),
                gpu_arch: args.gpu.arch.gpu_arch,
                suite_args: args.suite_args,
                gpu_only: args.gpu_only,
                sanitize: args.sanitize,
            },
        ),
        Command::Run(args) => {
            let code = xtask::suite::run(&sh, &args.program, args.arch.gpu_arch, &args.loader_args)?;
            std::process::exit(code)
        }
        Command::Bundle { out, gpu, max_size } => {
            xtask::bundle::bundle(&sh, &out, &gpu.target.targets(), gpu.arch.gpu_arch, max_size)
        }
        Command::OutOfTree => {
            xtask::suite::build_host_binaries(&sh)?;
            xtask::out_of_tree::check(&sh, xtask::gpus::Gpus::detect()).map(drop)
        }
        Command::Std => {
            xtask::std_programs::check(&sh, &gpu_startup_targets::Target::ALL)?;
            let gpus = xtask::gpus::Gpus::detect();
            xtask::out_of_tree_std::check(&sh, gpus)?;
            xtask::real_crates::check(&sh, gpus).map(drop)
        }
        Command::Bench { arch, write_docs, bench_args } => {
            xtask::suite::bench(&sh, arch.gpu_arch, write_docs, &bench_args)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_startup_targets::{AMDGPU, NVPTX};

    #[test]
    fn run_keeps_loader_options_and_program_arguments_apart() {
        let cli = Cli::try_parse_from(["cargo xtask", "run", "hello", "--threads", "4", "--", "a", "--b"]).unwrap();
        let Command::Run(args) = cli.command else { panic!("not run") };
        assert_eq!(args.program, "hello");
        assert_eq!(args.loader_args, ["--threads", "4", "--", "a", "--b"]);
    }

    #[test]
    fn test_passes_a_filter_to_the_suite() {
        let cli = Cli::try_parse_from(["cargo xtask", "test", "--target", "nvptx", "rpc", "--exact"]).unwrap();
        let Command::Test(args) = cli.command else { panic!("not test") };
        assert_eq!(args.suite_args, ["rpc", "--exact"]);
        assert_eq!(args.gpu.target.targets(), [&NVPTX]);
    }

    #[test]
    fn sanitize_takes_an_optional_list_of_tools() {
        let parse = |args: &[&str]| {
            let cli = Cli::try_parse_from(["cargo xtask", "test"].iter().chain(args)).unwrap();
            let Command::Test(args) = cli.command else { panic!("not test") };
            (args.sanitize, args.suite_args)
        };
        assert_eq!(parse(&[]), (None, vec![]));
        assert_eq!(parse(&["--sanitize"]), (Some(String::new()), vec![]));
        // A filter after a bare --sanitize stays a filter.
        assert_eq!(parse(&["--sanitize", "files"]), (Some(String::new()), vec!["files".to_owned()]));
        assert_eq!(parse(&["--sanitize=memcheck,racecheck"]), (Some("memcheck,racecheck".to_owned()), vec![]));
    }

    #[test]
    fn bundle_takes_an_optional_size_limit() {
        let cli = Cli::try_parse_from(["cargo xtask", "bundle", "--max-size", "64MiB", "--target", "nvptx"]).unwrap();
        let Command::Bundle { max_size, gpu, .. } = cli.command else { panic!("not bundle") };
        assert_eq!(max_size, Some(64 << 20));
        assert_eq!(gpu.target.targets(), [&NVPTX]);
        let Command::Bundle { max_size, .. } = Cli::try_parse_from(["cargo xtask", "bundle"]).unwrap().command else {
            panic!("not bundle")
        };
        assert_eq!(max_size, None);
        assert!(Cli::try_parse_from(["cargo xtask", "bundle", "--max-size", "64 apples"]).is_err());
    }

    /// `--target` takes the targets' names or `all` (the default), and nothing else; `--gpu-arch` is the same option
    /// for every command that builds.
    #[test]
    fn targets_and_architectures_are_the_same_options_everywhere() {
        let targets = |args: &[&str]| {
            let cli = Cli::try_parse_from([&["cargo xtask", "build"], args].concat())?;
            let Command::Build(build) = cli.command else { panic!("not build") };
            Ok::<_, clap::Error>(build.gpu.target.targets())
        };
        assert_eq!(targets(&[]).unwrap(), Target::ALL);
        assert_eq!(targets(&["--target", "amdgpu"]).unwrap(), [&AMDGPU]);
        assert_eq!(targets(&["--target", "all"]).unwrap(), Target::ALL);
        let error = targets(&["--target", "cuda"]).unwrap_err().to_string();
        assert!(error.contains("invalid value 'cuda'") && error.contains("nvptx, amdgpu, all"), "{error}");
        for command in ["build", "test", "bundle", "bench", "run hello"] {
            let args: Vec<&str> =
                ["cargo xtask"].into_iter().chain(command.split(' ')).chain(["--gpu-arch", "sm_80"]).collect();
            let cli = Cli::try_parse_from(&args).unwrap_or_else(|error| panic!("{command}: {error}"));
            let arch = match cli.command {
                Command::Build(args) => args.gpu.arch,
                Command::Test(args) => args.gpu.arch,
                Command::Bundle { gpu, .. } => gpu.arch,
                Command::Bench { arch, .. } => arch,
                Command::Run(args) => args.arch,
                _ => unreachable!(),
            };
            assert_eq!(arch.gpu_arch.as_deref(), Some("sm_80"), "{command}");
        }
    }
}
