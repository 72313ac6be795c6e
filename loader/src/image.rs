//! GPU images: which architecture an image is for, the symbols the loader needs from it, an AMD code object's
//! metadata ([`amd_metadata`], parsed once per image), and the static check that its kernels match the ABI
//! (`docs/abi.md`). An image is parsed once, when it is read: PTX tokenized ([`ptx`]), an ELF file parsed
//! ([`elf`]); everything asked of it later reads that parse.

pub mod amd_metadata;
mod cubin;
mod elf;
mod ptx;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gpu_startup_protocol::abi;

use crate::error::{LoaderError, Result};
use amd_metadata::CodeObjectMetadata;
/// What an image holds, decided from its bytes, never its name; each kind names the target whose backend runs it.
pub use gpu_startup_targets::ImageKind;

/// The largest image the loader reads: far above any program's (the suite's largest is about 1 MiB), and small enough
/// that reading a file that is no image, or a corrupt one, costs little time and memory.
pub const MAX_IMAGE_BYTES: u64 = 256 << 20;

/// How much of a file decides its kind: the ELF header's first 20 bytes, or PTX's first directives after the
/// comments that precede them. A file refused on these bytes is never read whole.
const HEAD_BYTES: usize = 64 * 1024;

/// A global's initialized bytes, or what keeps the loader from reading them.
pub type GlobalBytes = std::result::Result<Vec<u8>, String>;

/// A kernel entry point and the byte size of each of its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSignature {
    pub name: String,
    pub param_sizes: Vec<u64>,
}

/// An image read into memory and parsed. It is not `Clone`: one parse serves the whole run, lent to everything
/// that reads the image (the checks, the constructor table, the test list, the backend).
#[derive(Debug)]
pub struct Image {
    pub path: PathBuf,
    pub kind: ImageKind,
    /// The whole file; for PTX, without the NUL bytes that may pad its end (as NVRTC's output ends with one). Private:
    /// the parse describes these bytes ([`Image::bytes`]).
    bytes: Vec<u8>,
    parsed: Parsed,
    /// An AMD code object's metadata note, parsed when first asked for ([`Image::amd_metadata`]), or why it cannot be.
    amd_metadata: OnceLock<std::result::Result<CodeObjectMetadata, String>>,
}

/// An image's parse, of its kind.
#[derive(Debug)]
enum Parsed {
    Ptx(ptx::Parsed),
    Elf(elf::ElfImage),
}

impl Image {
    /// Reads and classifies `path`. Its size and its first bytes are checked before the rest is read, so a file that
    /// is too large or no image at all costs no more than those checks.
    pub fn read(path: &Path) -> Result<Self> {
        let read_error = |source| LoaderError::Read { path: path.to_owned(), source };
        let metadata = std::fs::metadata(path).map_err(read_error)?;
        if metadata.is_dir() {
            return Err(bad(path, "is a directory, not a GPU image"));
        }
        // Reading a FIFO blocks until a writer comes, and `/dev/zero` never ends: only regular files are images.
        if !metadata.is_file() {
            return Err(bad(path, "is not a regular file (a device, FIFO or socket), not a GPU image"));
        }
        check_size(path, metadata.len())?;
        // The file may grow after the size check: at most one byte more than the limit is read.
        let mut file = std::fs::File::open(path).map_err(read_error)?.take(MAX_IMAGE_BYTES + 1);
        let mut bytes = Vec::with_capacity(HEAD_BYTES);
        (&mut file).take(HEAD_BYTES as u64).read_to_end(&mut bytes).map_err(read_error)?;
        classify_head(path, &bytes)?;
        bytes
            .try_reserve_exact((metadata.len() as usize).saturating_sub(bytes.len()))
            .map_err(|_| read_error(std::io::ErrorKind::OutOfMemory.into()))?;
        file.read_to_end(&mut bytes).map_err(read_error)?;
        check_size(path, bytes.len() as u64)?;
        Self::from_bytes(path, bytes)
    }

    /// Classifies and parses image bytes; `path` only names the image in messages.
    pub fn from_bytes(path: &Path, mut bytes: Vec<u8>) -> Result<Self> {
        let kind = classify_head(path, &bytes)?;
        let parsed = if kind == ImageKind::Ptx {
            bytes.truncate(ptx_len(path, &bytes)?);
            let text = std::str::from_utf8(&bytes)
                .map_err(|error| bad(path, &format!("is not valid UTF-8 PTX (at byte {})", error.valid_up_to())))?;
            Parsed::Ptx(ptx::Parsed::new(text))
        } else {
            Parsed::Elf(elf::ElfImage::parse(path, &bytes, kind)?)
        };
        Ok(Self { path: path.to_owned(), kind, bytes, parsed, amd_metadata: OnceLock::new() })
    }

    /// The image's bytes: the whole file; for PTX, without the NUL bytes that may pad its end.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// PTX with its tokens, for a PTX image.
    fn ptx(&self) -> Result<Option<ptx::Ptx<'_>>> {
        match &self.parsed {
            Parsed::Ptx(parsed) => Ok(Some(parsed.of(self.ptx_text()?))),
            Parsed::Elf(_) => Ok(None),
        }
    }

    /// The ELF parse, for an ELF image.
    fn elf(&self) -> Option<&elf::ElfImage> {
        match &self.parsed {
            Parsed::Elf(elf) => Some(elf),
            Parsed::Ptx(_) => None,
        }
    }

    /// An AMD code object's metadata note (`NT_AMDGPU_METADATA`), parsed the first time it is asked for: the image
    /// check and the HSA backend read the same parse.
    pub fn amd_metadata(&self) -> Result<&CodeObjectMetadata> {
        if self.kind != ImageKind::AmdCodeObject {
            return Err(bad(&self.path, "is not an AMD code object: it has no AMDGPU metadata"));
        }
        self.amd_metadata
            .get_or_init(|| CodeObjectMetadata::read(&self.bytes))
            .as_ref()
            .map_err(|problem| bad(&self.path, problem))
    }

    /// The names of the image's defined global symbols (kernels and variables), in the image's order.
    pub fn global_symbols(&self) -> &[String] {
        match &self.parsed {
            Parsed::Ptx(parsed) => &parsed.globals,
            Parsed::Elf(elf) => &elf.globals,
        }
    }

    /// The initialized bytes of every exported global whose name starts with `prefix`, in the image's order: for PTX
    /// the initializer of `.visible .global .b8 NAME[N] = {...}`, for ELF the symbol's bytes in its section. A
    /// global without bytes to read (no initializer, a section without file data, a size past its section) comes
    /// with the problem instead.
    pub fn initialized_globals(&self, prefix: &str) -> Result<Vec<(String, GlobalBytes)>> {
        if let Some(ptx) = self.ptx()? {
            return Ok(ptx::initialized_globals(ptx, prefix));
        }
        let elf = self.elf().expect("an image is PTX or ELF");
        Ok(elf
            .symbols
            .iter()
            .filter(|symbol| symbol.defined_global && symbol.name.starts_with(prefix))
            .map(|symbol| {
                let bytes = symbol
                    .bytes
                    .clone()
                    .map(|range| self.bytes[range].to_vec())
                    .ok_or_else(|| format!("global `{}` has no initialized bytes in the file", symbol.name));
                (symbol.name.clone(), bytes)
            })
            .collect())
    }

    /// Whether the image shows that it has no `main` of its own: no definition of `main` that is not weak (the
    /// startup's weak default, for test binaries, does not count). A linked cubin cannot show it: nvlink drops the
    /// functions that ptxas inlined everywhere, `main` among them.
    pub fn lacks_own_main(&self) -> Result<bool> {
        if let Some(ptx) = self.ptx()? {
            return Ok(!ptx::defines_strong_function(ptx, abi::MAIN_SYMBOL));
        }
        let elf = self.elf().expect("an image is PTX or ELF");
        if self.kind == ImageKind::Cubin && !elf.relocatable {
            return Ok(false);
        }
        Ok(!elf.symbols.iter().any(|symbol| symbol.definition && !symbol.weak && symbol.name == abi::MAIN_SYMBOL))
    }

    /// The image's kernels with their parameter sizes, where the format records them (PTX and cubin).
    pub fn kernel_signatures(&self) -> Result<Vec<KernelSignature>> {
        let kernels = match self.ptx()? {
            Some(ptx) => ptx::kernels(ptx),
            None => self.elf().expect("an image is PTX or ELF").kernels.clone(),
        };
        kernels.map_err(|problem| bad(&self.path, &problem))
    }

    /// Checks that the image has the three startup kernels, each taking the one argument `docs/abi.md` gives. For
    /// AMD code objects, the kernels' explicit arguments in the metadata note must lie exactly where the structs'
    /// fields do. A cubin must keep each function in one place for all kernels (see
    /// [`cubin::compiled_whole_program`]).
    pub fn check_startup_abi(&self) -> Result<()> {
        if self.kind == ImageKind::AmdCodeObject {
            let metadata = self.amd_metadata()?;
            check_argument_extents(metadata).map_err(|p| bad(&self.path, &p))?;
            return metadata.startup_kernels().map(drop).map_err(|p| bad(&self.path, &p));
        }
        let kernels = self.kernel_signatures()?;
        for (name, size) in abi::Kernel::ALL.map(|kernel| (kernel.name(), kernel.arg_size())) {
            let Some(kernel) = kernels.iter().find(|k| k.name == name) else {
                return Err(bad(&self.path, &format!("has no `{name}` kernel: was it linked with the GPU startup?")));
            };
            if kernel.param_sizes != [size as u64] {
                return Err(bad(
                    &self.path,
                    &format!(
                        "kernel `{name}` takes parameters of {:?} bytes, but the startup ABI passes one of {size} bytes",
                        kernel.param_sizes
                    ),
                ));
            }
        }
        if self.kind == ImageKind::Ptx {
            self.check_callback_prototypes()?;
            self.check_early_launch()?;
        }
        if self.elf().is_some_and(|elf| elf.whole_program) {
            return Err(bad(
                &self.path,
                "is a cubin compiled whole-program (`ptxas` without `-c`): each kernel has its own copy of every \
                 function, so the destructors and atexit handlers registered in one kernel cannot run in another; \
                 compile it with `ptxas -c` (and link that with `nvlink` for a linked cubin)",
            ));
        }
        Ok(())
    }

    /// Whether the image defines [`abi::EARLY_LAUNCH_MARKER`]: its startup lets the loader launch each kernel while
    /// the one before still runs.
    /// Whether the image is a std test binary, whose tests libtest runs ([`abi::LIBTEST_MARKER`]).
    pub fn links_libtest(&self) -> bool {
        self.global_symbols().iter().any(|name| name == abi::LIBTEST_MARKER)
    }

    pub fn defines_early_launch_marker(&self) -> bool {
        self.global_symbols().iter().any(|name| name == abi::EARLY_LAUNCH_MARKER)
    }

    /// PTX: an image that lets the loader launch each kernel before the one before it ended
    /// ([`abi::EARLY_LAUNCH_MARKER`]) must wait for that kernel in `_start` and `_end`: without the wait they would
    /// read the runtime's state before `_begin` set it up, or `main`'s results before `_start` wrote them.
    fn check_early_launch(&self) -> Result<()> {
        let Some(ptx) = self.ptx()? else { return Ok(()) };
        if !self.defines_early_launch_marker() {
            return Ok(());
        }
        for kernel in [abi::Kernel::Start, abi::Kernel::End] {
            if !ptx::entry_has_instruction(ptx, kernel.name(), "griddepcontrol.wait") {
                return Err(bad(
                    &self.path,
                    &format!(
                        "defines `{}`, so the loader would launch `{}` before the kernel before it ended, but `{}` \
                         does not wait for that kernel (`griddepcontrol.wait`)",
                        abi::EARLY_LAUNCH_MARKER,
                        kernel.name(),
                        kernel.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// PTX: every constructor global must name a function of the startup's constructor prototype (main's arguments:
    /// 4, 8 and 8 bytes), and every destructor global one that takes nothing. PTX calls through a function pointer
    /// only with the callee's exact prototype: any other would fail on the GPU, at the first constructor.
    fn check_callback_prototypes(&self) -> Result<()> {
        let Some(ptx) = self.ptx()? else { return Ok(()) };
        let prefixes = [abi::INIT_OBJECT_PREFIX, abi::FINI_OBJECT_PREFIX];
        let targets = ptx::callback_targets(ptx, &prefixes).map_err(|problem| bad(&self.path, &problem))?;
        for target in targets {
            let (kind, expected, takes): (_, &[u64], _) = if target.global.starts_with(abi::INIT_OBJECT_PREFIX) {
                ("constructor", &[4, 8, 8], "main's arguments (parameters of 4, 8 and 8 bytes)")
            } else {
                ("destructor", &[], "no arguments")
            };
            let problem = match &target.param_sizes {
                None => format!("names `{}`, which is no function of the image", target.function),
                Some(sizes) if sizes.as_slice() != expected => format!(
                    "names `{}`, which takes parameters of {sizes:?} bytes, but the startup calls a {kind} with {takes}: \
                     link the image with gpu-bitcode-linker, which gives every constructor a wrapper with main's \
                     arguments",
                    target.function
                ),
                Some(_) => continue,
            };
            return Err(bad(&self.path, &format!("{kind} global `{}` {problem}", target.global)));
        }
        Ok(())
    }

    /// Whether an ELF image is a relocatable object (`ET_REL`) rather than a linked one.
    pub fn is_relocatable(&self) -> Result<bool> {
        match self.elf() {
            Some(elf) => Ok(elf.relocatable),
            None => Err(bad(&self.path, "is PTX, not an ELF file")),
        }
    }

    pub fn ptx_text(&self) -> Result<&str> {
        std::str::from_utf8(&self.bytes).map_err(|_| bad(&self.path, "PTX is not valid UTF-8"))
    }
}

/// A kernarg segment is at most a few KiB (the AQL packet's size field is a `u32`): arguments past 4 GiB are
/// corrupt metadata, refused before the ABI check adds offsets and sizes.
fn check_argument_extents(metadata: &CodeObjectMetadata) -> std::result::Result<(), String> {
    for kernel in &metadata.kernels {
        let too_far = |value: u64| value > u64::from(u32::MAX);
        if too_far(kernel.kernarg_segment_size) {
            return Err(format!(
                "kernel `{}` has a kernarg segment of {} bytes in its AMDGPU metadata",
                kernel.name, kernel.kernarg_segment_size
            ));
        }
        if let Some(arg) = kernel.args.iter().find(|arg| too_far(arg.offset) || too_far(arg.size)) {
            return Err(format!(
                "kernel `{}` has an argument of {} bytes at offset {} in its AMDGPU metadata",
                kernel.name, arg.size, arg.offset
            ));
        }
    }
    Ok(())
}

fn bad(path: &Path, problem: &str) -> LoaderError {
    LoaderError::BadImage { path: path.to_owned(), problem: problem.to_owned() }
}

fn check_size(path: &Path, len: u64) -> Result<()> {
    if len > MAX_IMAGE_BYTES {
        return Err(bad(path, &format!("is {len} bytes, over the {} MiB a GPU image may have", MAX_IMAGE_BYTES >> 20)));
    }
    Ok(())
}

/// The kind of an image from its first bytes (up to [`HEAD_BYTES`]; all of them for a smaller file), or why those
/// bytes are no image.
fn classify_head(path: &Path, bytes: &[u8]) -> Result<ImageKind> {
    let head = &bytes[..bytes.len().min(HEAD_BYTES)];
    if head.is_empty() {
        return Err(bad(path, "is empty"));
    }
    if head.starts_with(b"\x7fELF") {
        // e_machine sits at offset 18 in both ELF classes; read it before a full parse so a truncated file for a
        // known machine is reported as truncated, and any other machine by name.
        let machine = match (head.get(5), head.get(18..20)) {
            (Some(1), Some(m)) => u16::from_le_bytes([m[0], m[1]]),
            (Some(2), Some(m)) => u16::from_be_bytes([m[0], m[1]]),
            _ => return Err(bad(path, "is a truncated ELF file")),
        };
        return ImageKind::of_elf_machine(machine).ok_or_else(|| {
            bad(path, &format!("is an ELF file for machine {machine} ({}), not a GPU image", machine_name(machine)))
        });
    }
    // The text before the first byte that is not UTF-8 (the head may end inside a character; a bad byte further on
    // is named once the whole file is read).
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        Err(error) => std::str::from_utf8(&head[..error.valid_up_to()]).unwrap_or_default(),
    };
    if ptx::looks_like_ptx(text.split('\0').next().unwrap_or("")) {
        ptx_len(path, head)?;
        return Ok(ImageKind::Ptx);
    }
    Err(bad(path, "is not a GPU image (expected PTX text, an NVIDIA cubin or an AMD code object)"))
}

/// The length of PTX text: up to its first NUL byte, after which only NULs may follow (the driver reads PTX as a C
/// string, and NVRTC's output ends with a NUL).
fn ptx_len(path: &Path, bytes: &[u8]) -> Result<usize> {
    let Some(end) = bytes.iter().position(|&b| b == 0) else { return Ok(bytes.len()) };
    if let Some(after) = bytes[end..].iter().position(|&b| b != 0) {
        return Err(bad(
            path,
            &format!("has a NUL byte at {end} inside its PTX text (text follows at {})", end + after),
        ));
    }
    Ok(end)
}

fn machine_name(machine: u16) -> &'static str {
    match machine {
        3 => "x86",
        62 => "x86-64",
        40 => "ARM",
        183 => "AArch64",
        243 => "RISC-V",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests;
