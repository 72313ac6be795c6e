//! `cargo xtask`: build, run, test, bundle, bench and bindgen, end to end. See `cargo xtask --help`.

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use xshell::Shell;

use xtask::build::{BuildOptions, GpuTarget};

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
    /// Regenerate the HSA bindings (loader/src/hsa/sys.rs) from the installed ROCm headers.
    Bindgen {
        /// Fail if the committed bindings differ from what the headers generate, instead of writing them.
        #[arg(long)]
        check: bool,
    },
}

#[derive(Args)]
struct BuildArgs {
    /// nvptx, amdgpu or all.
    #[arg(long, default_value = "all")]
    target: String,
    /// GPU architecture (sm_90, gfx90a, ...); default: the machine's GPU, else sm_90 / gfx90a.
    #[arg(long)]
    gpu_arch: Option<String>,
    /// Build optimized images.
    #[arg(long)]
    release: bool,
}

impl BuildArgs {
    fn options(&self) -> Result<BuildOptions> {
        let targets = match self.target.as_str() {
            "all" => GpuTarget::ALL.to_vec(),
            one => vec![one.parse().map_err(anyhow::Error::msg)?],
        };
        Ok(BuildOptions { targets, gpu_arch: self.gpu_arch.clone(), release: self.release })
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
    match cli.command {
        Command::Build(args) => {
            let images = xtask::build::build(&sh, &args.options()?)?;
            for image in images {
                println!("{}", image.path.display());
            }
            Ok(())
        }
        Command::Bindgen { check } => xtask::bindgen::run(&sh, check),
    }
}
