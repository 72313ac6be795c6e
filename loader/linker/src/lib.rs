//! The bitcode linker: what rustc runs to link every nvptx image and every AMD std program (linker flavor `llbc`),
//! standing in for rustup's `llvm-bitcode-linker` component, which cannot be installed for the pinned toolchain.
//! An nvptx image is PTX; an AMD one a code object (llc's object, linked by ld.lld).
//! `src/main.rs` is its command-line shell, the binary `gpu-bitcode-linker`; `cargo xtask` links the C programs with
//! it too.
//!
//! Over 500 lines: one pipeline from rustc's command line to PTX (arguments, inputs, `llvm-link`, the rewrites of
//! constructors and of std's thread-locals, `opt`, `llc`), with its tests.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use gpu_startup_targets::PtxArchError;

mod constructors;
mod entry;
mod thread_locals;

/// Globals that must survive internalization even when rustc does not export them: the loader reads or writes
/// them by name (see `docs/abi.md`): the constructor tables and a test binary's test table.
const LOADER_VISIBLE_PREFIXES: &[&str] = &["__init_array_", "__fini_array_", gpu_startup_protocol::test_table::PREFIX];
/// `main` among them: the loader tells a program's own `main` from the startup's weak default by its linkage.
const LOADER_VISIBLE_NAMES: [&str; 6] = {
    use gpu_startup_protocol::abi::{EARLY_LAUNCH_MARKER, Kernel, LIBTEST_MARKER, MAIN_SYMBOL};
    [Kernel::Begin.name(), Kernel::Start.name(), Kernel::End.name(), MAIN_SYMBOL, EARLY_LAUNCH_MARKER, LIBTEST_MARKER]
};

/// The largest input the linker reads: far above any object or archive rustc passes (`core`'s rlib, among the
/// largest, is about 40 MiB), and a bound on the memory a wrong input costs.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// A linker failure. Each message is one line naming the problem.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The command line is not what rustc passes.
    #[error("{0}")]
    Usage(String),
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    /// The output's directory is missing or no directory: the linker creates none, as other linkers.
    #[error("cannot write {output}: {problem}")]
    OutputDir { output: PathBuf, problem: String },
    #[error("{path}: {problem}")]
    BadInput { path: PathBuf, problem: String },
    #[error("{path}: is larger than the {} GiB a linker input may have", MAX_INPUT_BYTES >> 30)]
    TooLarge { path: PathBuf },
    #[error("no LLVM bitcode in the inputs")]
    NoBitcode,
    #[error(
        "cannot find llvm-link, opt and llc: install them with `rustup component add llvm-tools` \
         (or point GPU_LLVM_TOOLS_DIR at a directory holding them)"
    )]
    NoTools,
    #[error("cannot run {tool}: {source}")]
    CannotRun { tool: String, source: std::io::Error },
    #[error(transparent)]
    ToolFailed(#[from] ToolFailure),
    /// LLVM ignores a CPU it does not know, and succeeds: the image would not be for the CPU asked for.
    #[error(
        "unknown target CPU `{0}`: LLVM knows no such processor for the target (`llc -mtriple=TRIPLE -mcpu=help` \
         lists them, TRIPLE being nvptx64-nvidia-cuda or amdgcn-amd-amdhsa)"
    )]
    UnknownCpu(String),
    #[error(
        "unknown target feature `{0}`: LLVM knows no such feature for the target (`llc -mtriple=TRIPLE -mattr=help` \
         lists them)"
    )]
    UnknownFeature(String),
    #[error("the program's constructors cannot be called by the startup: {0}")]
    Constructors(String),
    #[error("the program's thread-locals cannot be reached through the runtime: {0}")]
    ThreadLocals(String),
    #[error("the program's `main` cannot be called by the startup: {0}")]
    Main(String),
    #[error(
        "this test binary's harness runs each test on a thread of its own (`test::test_main_static`), which the GPU \
         cannot spawn: build its tests with `panic = \"abort\"` (`-Zpanic-abort-tests`, or `panic-abort-tests = true` \
         under `[unstable]`, as `cargo gpu-startup init --std` writes)"
    )]
    SpawningTestHarness,
    #[error("runtime folder {}: {problem}", path.display())]
    Runtime { path: PathBuf, problem: String },
    #[error("not an NVIDIA arch: {0}")]
    NotNvidiaArch(String),
    #[error("{0} is too old: the startup needs sm_70 or later (independent thread scheduling)")]
    ArchTooOld(String),
}

pub type Result<T, E = LinkError> = std::result::Result<T, E>;

fn usage(message: String) -> LinkError {
    LinkError::Usage(message)
}

fn not_utf8(flag: &str, shown: &str) -> LinkError {
    usage(format!("the value of `{flag}` is not UTF-8: `{shown}`"))
}

/// The value of `flag` as a string, for a flag whose value is no path.
fn utf8(flag: &str, value: OsString) -> Result<String> {
    value.into_string().map_err(|value| not_utf8(flag, &value.to_string_lossy()))
}

/// An LLVM tool that failed, told in one line: the input it names, when it names one, and its first error line. The
/// tool's whole output is printed only with `--verbose`.
#[derive(Debug)]
pub struct ToolFailure {
    tool: String,
    /// The input as the user knows it (`lib.rlib(member.o)` for a module taken from an archive).
    input: Option<String>,
    status: ExitStatus,
    first_error: Option<String>,
    /// The tool's other lines, which the message leaves out.
    more_lines: usize,
}

impl ToolFailure {
    /// The failure of `tool` (run as `program`) from what it wrote on stderr; `modules` are the modules it was given.
    fn new(tool: &str, program: &Path, status: ExitStatus, stderr: &str, modules: &[Module]) -> Self {
        let program_prefix = format!("{}: ", program.display());
        let tool_prefix = format!("{tool}: ");
        let lines: Vec<&str> = stderr
            .lines()
            .map(|line| line.strip_prefix(&program_prefix).or_else(|| line.strip_prefix(&tool_prefix)).unwrap_or(line))
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect();
        let first =
            lines.iter().copied().find(|line| line.to_ascii_lowercase().contains("error")).or(lines.first().copied());
        // LLVM names a module as `PATH: error: ...` or `loading file 'PATH'`.
        let named_in = |line: &str| {
            modules.iter().find(|module| {
                let path = module.path.display();
                line.starts_with(&format!("{path}: ")) || line.contains(&format!("'{path}'"))
            })
        };
        let module = first.and_then(named_in).or_else(|| lines.iter().find_map(|line| named_in(line)));
        let first_error = first.map(|line| {
            let line =
                module.and_then(|module| line.strip_prefix(&format!("{}: ", module.path.display()))).unwrap_or(line);
            line.strip_prefix("error: ").unwrap_or(line).trim().to_owned()
        });
        Self {
            tool: tool.to_owned(),
            input: module.map(|module| module.origin.clone()),
            status,
            first_error,
            more_lines: lines.len().saturating_sub(1),
        }
    }
}

impl std::fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed", self.tool)?;
        if let Some(input) = &self.input {
            write!(f, " on {input}")?;
        }
        // An exit code says nothing the message does not; a signal says the tool crashed.
        if self.status.code().is_none() {
            write!(f, " ({})", self.status)?;
        }
        match &self.first_error {
            Some(line) => write!(f, ": {line}")?,
            None => write!(f, " without a message")?,
        }
        if self.more_lines > 0 {
            write!(f, " (--verbose prints all {} lines)", self.more_lines + 1)?;
        }
        Ok(())
    }
}

impl std::error::Error for ToolFailure {}

/// A bitcode module to link: its file, and the input it came from as messages name it.
#[derive(Debug)]
struct Module {
    path: PathBuf,
    /// The input's path, or `ARCHIVE(MEMBER)` for a module taken from an archive.
    origin: String,
}

/// One invocation, as rustc spells it for linker flavor `llbc`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LinkRequest {
    pub exports: Vec<String>,
    pub inputs: Vec<PathBuf>,
    pub search_dirs: Vec<PathBuf>,
    pub target: Option<String>,
    pub target_cpu: Option<String>,
    pub target_features: Option<String>,
    pub output: PathBuf,
    pub opt_level: char,
    /// `--runtime DIR`: folders whose every `.rlib` is an input too. A std program's spec names the startup's
    /// runtime this way (`gpu_startup_setup::std_sysroot`), as a C toolchain adds its C library.
    pub runtime_dirs: Vec<PathBuf>,
    /// `-v`, `--verbose`: print each LLVM tool's command line and all it says. rustc never passes it; a user may, as
    /// `-Clink-arg=--verbose`.
    pub verbose: bool,
}

impl LinkRequest {
    /// Parses rustc's arguments. Anything unexpected is an error rather than silently ignored: a changed rustc
    /// interface must be noticed. Paths may be any bytes; every other value must be UTF-8.
    pub fn parse(args: &[OsString]) -> Result<Self> {
        let mut request = LinkRequest { opt_level: '3', ..Default::default() };
        let mut output = None;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = |flag: &str| args.next().cloned().ok_or_else(|| usage(format!("`{flag}` needs a value")));
            let Some(arg) = arg.to_str() else {
                let shown = arg.to_string_lossy();
                if let Some(features) = shown.strip_prefix("--target-feature=") {
                    return Err(not_utf8("--target-feature", features));
                }
                if shown.starts_with('-') {
                    return Err(usage(format!("unknown option `{shown}`")));
                }
                request.inputs.push(arg.into());
                continue;
            };
            match arg {
                "--export-symbol" => request.exports.push(utf8(arg, value(arg)?)?),
                "-L" => request.search_dirs.push(value(arg)?.into()),
                "--runtime" => request.runtime_dirs.push(value(arg)?.into()),
                "--target" => request.target = Some(utf8(arg, value(arg)?)?),
                "--target-cpu" => request.target_cpu = Some(utf8(arg, value(arg)?)?),
                "-o" => output = Some(PathBuf::from(value(arg)?)),
                "--debug" => {}
                "-v" | "--verbose" => request.verbose = true,
                _ if arg.starts_with("--target-feature=") => {
                    request.target_features = Some(arg["--target-feature=".len()..].to_owned())
                }
                _ if arg.starts_with("-O") && arg.len() == 3 => {
                    let level = arg.as_bytes()[2] as char;
                    if !matches!(level, '0' | '1' | '2' | '3' | 's' | 'z') {
                        return Err(usage(format!("unknown optimization level `{arg}`")));
                    }
                    request.opt_level = level;
                }
                _ if arg.starts_with('-') => return Err(usage(format!("unknown option `{arg}`"))),
                _ => request.inputs.push(arg.into()),
            }
        }
        request.output = output.ok_or_else(|| usage("no output file given (`-o`)".to_owned()))?;
        if request.inputs.is_empty() {
            return Err(usage("no input files".to_owned()));
        }
        Ok(request)
    }

    /// Links the inputs into an image at `self.output`: PTX, or for AMD a code object.
    pub fn link(&self) -> Result<()> {
        let work = tempdir_for(&self.output)?;
        // A std program's runtime folder is in its sysroot's `rustlib` too: rustc passes no `-L` into it for AMD.
        let dirs: Vec<PathBuf> = self.search_dirs.iter().chain(&self.runtime_dirs).cloned().collect();
        let result = LlvmTools::locate(&dirs, self.verbose).and_then(|tools| self.link_in(&tools, &work));
        let _ = std::fs::remove_dir_all(&work);
        result
    }

    fn link_in(&self, tools: &LlvmTools, work: &Path) -> Result<()> {
        let mut inputs = self.inputs.clone();
        for dir in &self.runtime_dirs {
            inputs.extend(runtime_rlibs(dir)?);
        }
        let modules = extract_bitcode(&inputs, work)?;
        if modules.is_empty() {
            return Err(LinkError::NoBitcode);
        }
        let linked = work.join("linked.bc");
        let mut link = tools.command("llvm-link");
        link.arg("-o").arg(&linked);
        // Every module is linked whole; internalizing and `globaldce` then drop what nothing exported reaches, which
        // is what a linker's archive-member selection would have saved.
        link.args(modules.iter().map(|module| &module.path));
        tools.run(link, &modules)?;
        let amd = self.is_amd();
        // An AMD code object keeps C constructors in `.init_array` sections, which ld.lld bounds with
        // `__init_array_start`/`_end` as for the startup's own no_std programs; PTX has no sections.
        let linked = if amd { linked } else { wrap_constructors(tools, linked, work)? };
        let linked = adapt_std_program(tools, linked, self.target.as_deref(), work)?;

        let keep = self.symbols_to_keep(tools, &linked)?;
        let optimized = work.join("optimized.bc");
        let mut opt = tools.command("opt");
        opt.arg(format!("--internalize-public-api-list={}", keep.join(",")))
            .arg(format!("-passes=internalize,globaldce,default<O{}>,mergefunc,globaldce", self.opt_level))
            .arg(&linked)
            .arg("-o")
            .arg(&optimized);
        if let Some(triple) = &self.target {
            opt.arg(format!("-mtriple={triple}"));
        }
        tools.run(opt, &[])?;

        if amd {
            return self.write_amd_code_object(tools, &optimized, work);
        }
        let mut llc = tools.command("llc");
        // The output appears only once the link succeeded.
        let ptx = work.join("linked.ptx");
        llc.arg(&optimized).arg("-o").arg(&ptx).arg(format!("-O{}", llc_level(self.opt_level)));
        // C constructors (`llvm.global_ctors`) become `__init_array_object_*` globals, which the loader gathers; llc
        // would also add weak kernels `nvptx$device$init`/`fini` that call them with no arguments. The startup's
        // `_begin` runs them instead, with `main`'s arguments, so those kernels are left out.
        llc.arg("--nvptx-emit-init-fini-kernel=false");
        // The loop and block comments LLVM writes by default are a fifth of a program's PTX, and the driver reads
        // every byte of it on each fresh image.
        llc.arg("--asm-verbose=false");
        if let Some(cpu) = &self.target_cpu {
            llc.arg(format!("-mcpu={cpu}"));
        }
        if let Some(features) = &self.target_features {
            let features = effective_features(features, self.target_cpu.as_deref());
            if !features.is_empty() {
                llc.arg(format!("-mattr={features}"));
            }
        }
        tools.run(llc, &[])?;
        std::fs::rename(&ptx, &self.output).map_err(|source| LinkError::Write { path: self.output.clone(), source })
    }

    /// Whether the image is an AMD code object (target `amdgcn-amd-amdhsa`) rather than PTX.
    fn is_amd(&self) -> bool {
        self.target.as_deref().is_some_and(|triple| triple.starts_with("amdgcn"))
    }

    /// The optimized module as an AMD code object at `self.output`: llc writes an ELF object for the CPU, and
    /// ld.lld (the toolchain's `rust-lld`) links it into the shared object the HSA runtime loads, with the flags
    /// rustc's own AMD target links with.
    fn write_amd_code_object(&self, tools: &LlvmTools, optimized: &Path, work: &Path) -> Result<()> {
        let object = work.join("linked.o");
        let mut llc = tools.command("llc");
        llc.arg(optimized).arg("-o").arg(&object).arg("-filetype=obj");
        llc.arg(format!("-O{}", llc_level(self.opt_level)));
        if let Some(cpu) = &self.target_cpu {
            llc.arg(format!("-mcpu={cpu}"));
        }
        if let Some(features) = self.target_features.as_deref().filter(|features| !features.is_empty()) {
            llc.arg(format!("-mattr={features}"));
        }
        tools.run(llc, &[])?;
        let linked = work.join("linked.elf");
        let mut lld = tools.command("rust-lld");
        lld.args(["-flavor", "gnu", "-shared", "-Bsymbolic", "--no-undefined"]).arg(&object).arg("-o").arg(&linked);
        tools.run(lld, &[])?;
        std::fs::rename(&linked, &self.output).map_err(|source| LinkError::Write { path: self.output.clone(), source })
    }

    /// The exported symbols plus every defined global the loader finds by name.
    fn symbols_to_keep(&self, tools: &LlvmTools, linked: &Path) -> Result<Vec<String>> {
        let mut keep = self.exports.clone();
        keep.extend(LOADER_VISIBLE_NAMES.iter().map(|name| name.to_string()));
        let mut nm = tools.command("llvm-nm");
        nm.arg("--defined-only").arg("--format=just-symbols").arg(linked);
        let listing = tools.run(nm, &[])?;
        keep.extend(
            listing
                .lines()
                .map(str::trim)
                .filter(|name| LOADER_VISIBLE_PREFIXES.iter().any(|prefix| name.starts_with(prefix)))
                .map(str::to_owned),
        );
        keep.sort();
        keep.dedup();
        Ok(keep)
    }
}

/// The `.rlib` files in `dir`, in name order; an error when it has none.
fn runtime_rlibs(dir: &Path) -> Result<Vec<PathBuf>> {
    let problem = |problem: String| LinkError::Runtime { path: dir.to_owned(), problem };
    let entries = std::fs::read_dir(dir).map_err(|error| problem(error.to_string()))?;
    let mut rlibs: Vec<PathBuf> = entries
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "rlib"))
        .collect();
    if rlibs.is_empty() {
        return Err(problem("it holds no .rlib".to_owned()));
    }
    rlibs.sort();
    Ok(rlibs)
}

/// The linked module with its constructors wrapped ([`constructors`]), or as it is when it has none. The module is
/// disassembled only when its bitcode names a constructor list.
fn wrap_constructors(tools: &LlvmTools, linked: PathBuf, work: &Path) -> Result<PathBuf> {
    let bytes = std::fs::read(&linked).map_err(|source| LinkError::Read { path: linked.clone(), source })?;
    if !constructors::may_have_constructors(&bytes) {
        return Ok(linked);
    }
    let mut disassemble = tools.command("llvm-dis");
    disassemble.arg(&linked).arg("-o").arg("-");
    let Some(rewritten) = constructors::wrap_constructors(&tools.run(disassemble, &[])?)
        .map_err(|problem| LinkError::Constructors(format!("{problem:#}")))?
    else {
        return Ok(linked);
    };
    assemble(tools, &rewritten, &work.join("constructors"))
}

/// The LLVM assembly `ir` as bitcode, at `stem` with `.bc` (its text kept beside it with `.ll`).
fn assemble(tools: &LlvmTools, ir: &str, stem: &Path) -> Result<PathBuf> {
    let (source, assembled) = (stem.with_extension("ll"), stem.with_extension("bc"));
    std::fs::write(&source, ir).map_err(|error| LinkError::Write { path: source.clone(), source: error })?;
    let mut assemble = tools.command("llvm-as");
    assemble.arg(&source).arg("-o").arg(&assembled);
    tools.run(assemble, &[])?;
    Ok(assembled)
}

/// The linked module with its thread-locals reached through the runtime ([`thread_locals`]) and its `main` given the
/// startup's prototype ([`entry`]), or as it is when it has no thread-locals (no std).
fn adapt_std_program(tools: &LlvmTools, linked: PathBuf, target: Option<&str>, work: &Path) -> Result<PathBuf> {
    let bytes = std::fs::read(&linked).map_err(|source| LinkError::Read { path: linked.clone(), source })?;
    if !thread_locals::may_have_thread_locals(&bytes) {
        return Ok(linked);
    }
    // `lower-emutls` makes the control variables; the accesses are rewritten below.
    // As text at once (`-S`): on AMD, the pass writes each initial value's pointer in the global address space into
    // a control variable's generic pointer field, bitcode that llvm-dis refuses to read back; the text is corrected
    // below.
    let mut opt = tools.command("opt");
    opt.arg("-passes=lower-emutls").arg(&linked).arg("-S").arg("-o").arg("-");
    if let Some(triple) = target {
        opt.arg(format!("-mtriple={triple}"));
    }
    let ir = tools.run(opt, &[])?;
    let with_thread_locals =
        thread_locals::rewrite_thread_locals(&ir).map_err(|problem| LinkError::ThreadLocals(format!("{problem:#}")))?;
    let ir = with_thread_locals.as_deref().unwrap_or(&ir);
    if entry::calls_the_spawning_harness(ir) {
        return Err(LinkError::SpawningTestHarness);
    }
    let with_main = entry::wrap_main(ir).map_err(|problem| LinkError::Main(format!("{problem:#}")))?;
    let Some(rewritten) = with_main.or(with_thread_locals) else {
        return Ok(linked);
    };
    assemble(tools, &rewritten, &work.join("std-program"))
}

/// The lowest PTX ISA version (times ten) that supports `arch` (the table is the nvptx target's,
/// `gpu_startup_targets::min_ptx_version`).
pub fn min_ptx_version(arch: &str) -> Result<u32> {
    gpu_startup_targets::min_ptx_version(arch).map_err(|error| match error {
        PtxArchError::NotNvidia => LinkError::NotNvidiaArch(arch.to_owned()),
        PtxArchError::TooOld => LinkError::ArchTooOld(arch.to_owned()),
    })
}

/// rustc passes `+ptx70` (its default) whatever the CPU; a CPU newer than that ISA needs a newer one. Drops PTX
/// versions below the CPU's minimum, so llc picks the minimum itself; keeps every other feature.
fn effective_features(features: &str, cpu: Option<&str>) -> String {
    let minimum = cpu.and_then(|cpu| min_ptx_version(cpu).ok()).unwrap_or(0);
    features
        .split(',')
        .filter(|feature| match feature.strip_prefix("+ptx").and_then(|v| v.parse::<u32>().ok()) {
            Some(version) => version >= minimum,
            None => !feature.is_empty(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn llc_level(opt_level: char) -> char {
    match opt_level {
        's' | 'z' => '2',
        level => level,
    }
}

/// Where the LLVM tools live.
struct LlvmTools {
    dir: PathBuf,
    verbose: bool,
}

impl LlvmTools {
    fn locate(search_dirs: &[PathBuf], verbose: bool) -> Result<Self> {
        if let Some(dir) = std::env::var_os("GPU_LLVM_TOOLS_DIR") {
            return Ok(Self { dir: dir.into(), verbose });
        }
        // rustc passes `-L <sysroot>/lib/rustlib/<target>/lib/self-contained`; the tools are in
        // `<sysroot>/lib/rustlib/<host>/bin`.
        for dir in search_dirs {
            let Some(rustlib) = dir.ancestors().find(|a| a.file_name().is_some_and(|n| n == "rustlib")) else {
                continue;
            };
            let candidate = rustlib.join(host_triple()).join("bin");
            if candidate.join("llvm-link").exists() {
                return Ok(Self { dir: candidate, verbose });
            }
        }
        Err(LinkError::NoTools)
    }

    fn command(&self, tool: &str) -> Command {
        Command::new(self.dir.join(tool))
    }

    /// Runs one of the tools, which was given `modules`; returns its stdout. Its stderr is printed only when
    /// verbose, and a failure is one line.
    fn run(&self, mut command: Command, modules: &[Module]) -> Result<String> {
        let program = PathBuf::from(command.get_program());
        let tool = program.file_name().unwrap_or_default().to_string_lossy().into_owned();
        if self.verbose {
            eprintln!("gpu-bitcode-linker: running {command:?}");
        }
        let output =
            command.output().map_err(|source| LinkError::CannotRun { tool: program.display().to_string(), source })?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if self.verbose {
            eprint!("{stderr}");
        }
        if let Some(error) = unknown_target(&stderr) {
            return Err(error);
        }
        if !output.status.success() {
            return Err(ToolFailure::new(&tool, &program, output.status, &stderr, modules).into());
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// The first CPU or feature that a tool's stderr says LLVM does not know, as an error. LLVM only warns
/// (`'sm_999' is not a recognized processor for this target (ignoring processor)`) and goes on without it.
fn unknown_target(stderr: &str) -> Option<LinkError> {
    let named = |line: &str, complaint: &str| {
        let (name, _) = line.split_once(complaint)?;
        Some(name.trim().trim_matches('\'').to_owned())
    };
    stderr.lines().find_map(|line| {
        named(line, " is not a recognized processor")
            .map(LinkError::UnknownCpu)
            .or_else(|| named(line, " is not a recognized feature").map(LinkError::UnknownFeature))
    })
}

/// The triple this binary was built for, which is the host it runs on.
pub fn host_triple() -> &'static str {
    env!("GPU_BITCODE_LINKER_HOST_TRIPLE")
}

/// A directory for the intermediate files beside `output`, in the output's directory, which must exist.
fn tempdir_for(output: &Path) -> Result<PathBuf> {
    let parent = output.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let output_dir = |problem: String| LinkError::OutputDir { output: output.to_owned(), problem };
    match std::fs::metadata(parent) {
        Ok(metadata) if metadata.is_dir() => {}
        Ok(_) => return Err(output_dir(format!("{} is not a directory", parent.display()))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(output_dir(format!("directory {} does not exist", parent.display())));
        }
        Err(error) => return Err(output_dir(format!("cannot read directory {}: {error}", parent.display()))),
    }
    let name = output.file_name().unwrap_or_default().to_string_lossy();
    let dir = parent.join(format!(".{name}.link-{}", std::process::id()));
    // One left by a run of the same process id that was killed is reused.
    match std::fs::create_dir(&dir) {
        Err(error) if error.kind() != std::io::ErrorKind::AlreadyExists => {
            Err(LinkError::Write { path: dir, source: error })
        }
        _ => Ok(dir),
    }
}

/// LLVM bitcode starts with `BC 0xC0DE`, or with the wrapper magic `0x0B17C0DE`.
pub fn is_bitcode(data: &[u8]) -> bool {
    data.starts_with(b"BC\xC0\xDE") || data.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
}

/// The bytes of `input`, a regular file of at most [`MAX_INPUT_BYTES`].
fn read_input(input: &Path) -> Result<Vec<u8>> {
    let read_error = |source| LinkError::Read { path: input.to_owned(), source };
    let bad = |problem: &str| LinkError::BadInput { path: input.to_owned(), problem: problem.to_owned() };
    let metadata = std::fs::metadata(input).map_err(read_error)?;
    // Opening a FIFO blocks until a writer comes, and a device such as `/dev/zero` may never end.
    if metadata.is_dir() {
        return Err(bad("is a directory, not a linker input"));
    }
    if !metadata.is_file() {
        return Err(bad("is not a regular file (a device, FIFO or socket), not a linker input"));
    }
    if metadata.len() > MAX_INPUT_BYTES {
        return Err(LinkError::TooLarge { path: input.to_owned() });
    }
    let file = std::fs::File::open(input).map_err(read_error)?;
    read_bounded(file, metadata.len(), MAX_INPUT_BYTES)
        .map_err(read_error)?
        .ok_or_else(|| LinkError::TooLarge { path: input.to_owned() })
}

/// All of `reader`, which should hold `expected` bytes, or `None` when it holds more than `limit`: a file may grow
/// while it is read, and at most one byte past the limit is read.
fn read_bounded(reader: impl Read, expected: u64, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(expected.min(limit) as usize).map_err(|_| std::io::ErrorKind::OutOfMemory)?;
    reader.take(limit + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// Writes every bitcode module of the inputs' archives into `work`; returns all modules.
fn extract_bitcode(inputs: &[PathBuf], work: &Path) -> Result<Vec<Module>> {
    let mut modules = Vec::new();
    for (index, input) in inputs.iter().enumerate() {
        let data = read_input(input)?;
        if is_bitcode(&data) {
            modules.push(Module { path: input.clone(), origin: input.display().to_string() });
        } else if data.starts_with(b"!<arch>\n") {
            let bad_archive = |error: object::Error| LinkError::BadInput {
                path: input.clone(),
                problem: format!("is not a valid archive: {error}"),
            };
            let archive = object::read::archive::ArchiveFile::parse(&*data).map_err(bad_archive)?;
            for (member_index, member) in archive.members().enumerate() {
                let member = member.map_err(bad_archive)?;
                let bytes = member.data(&*data).map_err(bad_archive)?;
                if !is_bitcode(bytes) {
                    continue; // rlib metadata and the like
                }
                let path = work.join(format!("{index}-{member_index}.bc"));
                std::fs::write(&path, bytes).map_err(|source| LinkError::Write { path: path.clone(), source })?;
                let origin = format!("{}({})", input.display(), String::from_utf8_lossy(member.name()));
                modules.push(Module { path, origin });
            }
        } else {
            return Err(LinkError::BadInput {
                path: input.clone(),
                problem: "is neither LLVM bitcode nor an archive of it".to_owned(),
            });
        }
    }
    Ok(modules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &str) -> Vec<OsString> {
        args.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn parses_what_rustc_passes() {
        let request = LinkRequest::parse(&strings(
            "--export-symbol _begin --export-symbol main a.o libcore.rlib -L /x/raw-dylibs --target nvptx64-nvidia-cuda \
             --target-cpu sm_90 --target-feature=+ptx78 -L /s/lib/rustlib/nvptx64-nvidia-cuda/lib/self-contained \
             -o out.ptx -O3 --debug",
        ))
        .unwrap();
        assert_eq!(request.exports, ["_begin", "main"]);
        assert_eq!(request.inputs, [PathBuf::from("a.o"), PathBuf::from("libcore.rlib")]);
        assert_eq!(request.target_cpu.as_deref(), Some("sm_90"));
        assert_eq!(request.target_features.as_deref(), Some("+ptx78"));
        assert_eq!(request.output, PathBuf::from("out.ptx"));
        assert_eq!(request.opt_level, '3');
        assert_eq!(request.search_dirs.len(), 2);
        assert!(request.runtime_dirs.is_empty());
    }

    #[test]
    fn a_runtime_folder_gives_its_rlibs_in_order_and_one_without_any_is_an_error() {
        let request = LinkRequest::parse(&strings("a.o --runtime /r -o out.ptx")).unwrap();
        assert_eq!(request.runtime_dirs, [PathBuf::from("/r")]);
        let dir = std::env::temp_dir().join(format!("gpu-linker-runtime-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let error = runtime_rlibs(&dir).unwrap_err().to_string();
        assert_eq!(error, format!("runtime folder {}: it holds no .rlib", dir.display()));
        for name in ["libb.rlib", "liba.rlib", "notes.txt"] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        assert_eq!(runtime_rlibs(&dir).unwrap(), [dir.join("liba.rlib"), dir.join("libb.rlib")]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(runtime_rlibs(&dir).unwrap_err().to_string().starts_with("runtime folder "));
    }

    #[test]
    fn paths_keep_their_bytes_and_other_values_must_be_utf8() {
        use std::os::unix::ffi::OsStringExt;
        let odd = |bytes: &[u8]| OsString::from_vec(bytes.to_vec());
        let args = [odd(b"a-\xff.o"), "-L".into(), odd(b"/l-\xfe"), "-o".into(), odd(b"out-\xfd.ptx")];
        let request = LinkRequest::parse(&args).unwrap();
        assert_eq!(request.inputs, [PathBuf::from(odd(b"a-\xff.o"))]);
        assert_eq!(request.search_dirs, [PathBuf::from(odd(b"/l-\xfe"))]);
        assert_eq!(request.output, PathBuf::from(odd(b"out-\xfd.ptx")));
        let args = ["a.o".into(), "--target-cpu".into(), odd(b"sm_\xff"), "-o".into(), "x".into()];
        let error = LinkRequest::parse(&args).unwrap_err().to_string();
        assert_eq!(error, "the value of `--target-cpu` is not UTF-8: `sm_\u{fffd}`");
    }

    #[test]
    fn rejects_unknown_flags_and_missing_parts() {
        for (args, message) in [
            ("a.o -o x --frobnicate", "unknown option `--frobnicate`"),
            ("a.o", "no output file"),
            ("-o x", "no input files"),
            ("a.o -o", "`-o` needs a value"),
            ("a.o -o x -O9", "unknown optimization level"),
        ] {
            let error = LinkRequest::parse(&strings(args)).unwrap_err().to_string();
            assert!(error.contains(message), "{args}: {error}");
        }
    }

    #[test]
    fn ptx_versions_follow_the_isa_table() {
        assert_eq!(min_ptx_version("sm_70").unwrap(), 60);
        assert_eq!(min_ptx_version("sm_80").unwrap(), 70);
        assert_eq!(min_ptx_version("sm_90").unwrap(), 78);
        assert_eq!(min_ptx_version("sm_90a").unwrap(), 78);
        assert!(min_ptx_version("sm_60").unwrap_err().to_string().contains("too old"));
        assert!(min_ptx_version("gfx90a").is_err());
    }

    #[test]
    fn ptx_features_below_the_cpu_minimum_are_dropped() {
        assert_eq!(effective_features("+ptx70", Some("sm_90")), "");
        assert_eq!(effective_features("+ptx70,+foo", Some("sm_90")), "+foo");
        assert_eq!(effective_features("+ptx80", Some("sm_90")), "+ptx80");
        assert_eq!(effective_features("+ptx70", Some("sm_70")), "+ptx70");
    }

    #[test]
    fn recognizes_both_bitcode_magics() {
        assert!(is_bitcode(b"BC\xC0\xDE\x35\x14"));
        assert!(is_bitcode(&[0xDE, 0xC0, 0x17, 0x0B, 0, 0]));
        assert!(!is_bitcode(b"\x7fELF"));
        assert!(!is_bitcode(b"BC"));
    }

    #[test]
    fn a_tool_failure_is_its_first_error_line_naming_the_input() {
        use std::os::unix::process::ExitStatusExt;
        let modules = [
            Module { path: "/w/0-1.bc".into(), origin: "libx.rlib(x.o)".into() },
            Module { path: "a.bc".into(), origin: "a.bc".into() },
        ];
        let exit_1 = ExitStatus::from_raw(1 << 8);
        let stderr = "/t/llvm-link: /w/0-1.bc: error: Invalid bitcode signature\n\
                      /t/llvm-link: error:  loading file '/w/0-1.bc'\n";
        let failure = ToolFailure::new("llvm-link", Path::new("/t/llvm-link"), exit_1, stderr, &modules);
        assert_eq!(
            failure.to_string(),
            "llvm-link failed on libx.rlib(x.o): Invalid bitcode signature (--verbose prints all 2 lines)"
        );
        // `a.bc` is a module; `data.bc`, which holds its name, is none.
        let stderr = "llvm-link: data.bc: error: Invalid record\n";
        let failure = ToolFailure::new("llvm-link", Path::new("/t/llvm-link"), exit_1, stderr, &modules);
        assert_eq!(failure.to_string(), "llvm-link failed: data.bc: error: Invalid record");
        let stderr = "warning: ignored\nLLVM ERROR: Cannot select: t5\n  t5: i32 = ...\n";
        let failure = ToolFailure::new("llc", Path::new("/t/llc"), ExitStatus::from_raw(6), stderr, &[]);
        assert_eq!(
            failure.to_string(),
            "llc failed (signal: 6 (SIGABRT)): LLVM ERROR: Cannot select: t5 (--verbose prints all 3 lines)"
        );
        let failure = ToolFailure::new("opt", Path::new("/t/opt"), exit_1, "\n", &[]);
        assert_eq!(failure.to_string(), "opt failed without a message");
    }

    #[test]
    fn a_cpu_or_feature_llvm_ignores_is_an_error() {
        let stderr = "'sm_999' is not a recognized processor for this target (ignoring processor)\n\
                      '+bogus' is not a recognized feature for this target (ignoring feature)\n";
        let error = unknown_target(stderr).unwrap().to_string();
        assert!(error.starts_with("unknown target CPU `sm_999`: "), "{error}");
        let stderr = "'+bogus' is not a recognized feature for this target (ignoring feature)\n";
        let error = unknown_target(stderr).unwrap().to_string();
        assert!(error.starts_with("unknown target feature `+bogus`: "), "{error}");
        assert!(unknown_target("warning: something else\n").is_none());
    }

    #[test]
    fn verbose_is_optional_anywhere() {
        assert!(!LinkRequest::parse(&strings("a.o -o x")).unwrap().verbose);
        assert!(LinkRequest::parse(&strings("-v a.o -o x")).unwrap().verbose);
        assert!(LinkRequest::parse(&strings("a.o -o x -O3 --verbose")).unwrap().verbose);
    }

    #[test]
    fn reading_stops_one_byte_past_the_limit() {
        // `repeat` never ends, as `/dev/zero`, or a file that grows while it is read.
        assert_eq!(read_bounded(std::io::repeat(7), 0, 10).unwrap(), None);
        assert_eq!(read_bounded(std::io::repeat(7).take(10), 10, 10).unwrap(), Some(vec![7; 10]));
        assert_eq!(read_bounded(&b"abcd"[..], 3, 3).unwrap(), None);
        assert_eq!(read_bounded(&b""[..], 0, 3).unwrap(), Some(vec![]));
    }

    #[test]
    fn rejects_inputs_that_are_not_bitcode() {
        let dir = std::env::temp_dir().join(format!("linker-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("not-bitcode.o");
        std::fs::write(&input, b"\x7fELF garbage").unwrap();
        let error = extract_bitcode(&[input], &dir).unwrap_err().to_string();
        assert!(error.contains("neither LLVM bitcode nor an archive"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
