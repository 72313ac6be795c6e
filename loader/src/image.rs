//! GPU images: which architecture an image is for, the symbols the loader needs from it, and the static check that
//! its kernels match the ABI (`docs/abi.md`).

mod cubin;
mod ptx;

use std::io::Read;
use std::path::{Path, PathBuf};

use object::read::elf::{ElfFile, FileHeader, SectionHeader};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};
use startup_common::abi;

use crate::error::{LoaderError, Result};

const EM_CUDA: u16 = 190;
const EM_AMDGPU: u16 = 224;

/// The largest image the loader reads: far above any program's (the suite's largest is about 1 MiB), and small enough
/// that reading a file that is no image, or a corrupt one, costs little time and memory.
pub const MAX_IMAGE_BYTES: u64 = 256 << 20;

/// How much of a file decides its kind: the ELF header's first 20 bytes, or PTX's first directives after the
/// comments that precede them. A file refused on these bytes is never read whole.
const HEAD_BYTES: usize = 64 * 1024;

/// What an image holds, decided from its bytes, never its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// PTX assembly text (NVIDIA; the driver compiles it for the GPU at load time).
    Ptx,
    /// An ELF `EM_CUDA` cubin (NVIDIA).
    Cubin,
    /// An ELF `EM_AMDGPU` code object (AMD).
    AmdCodeObject,
}

/// The GPU vendor an image needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    Cuda,
    Hsa,
}

impl ImageKind {
    pub fn platform(self) -> Platform {
        match self {
            ImageKind::Ptx | ImageKind::Cubin => Platform::Cuda,
            ImageKind::AmdCodeObject => Platform::Hsa,
        }
    }
}

/// A kernel entry point and the byte size of each of its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSignature {
    pub name: String,
    pub param_sizes: Vec<u64>,
}

/// An image read into memory.
#[derive(Clone, Debug)]
pub struct Image {
    pub path: PathBuf,
    pub kind: ImageKind,
    /// The whole file; for PTX, without the NUL bytes that may pad its end (as NVRTC's output ends with one).
    pub bytes: Vec<u8>,
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

    /// Classifies image bytes; `path` only names the image in messages.
    pub fn from_bytes(path: &Path, mut bytes: Vec<u8>) -> Result<Self> {
        let kind = classify(path, &bytes)?;
        if kind == ImageKind::Ptx {
            bytes.truncate(ptx_len(path, &bytes)?);
        }
        Ok(Self { path: path.to_owned(), kind, bytes })
    }

    /// The names of the image's defined global symbols (kernels and variables).
    pub fn global_symbols(&self) -> Result<Vec<String>> {
        match self.kind {
            ImageKind::Ptx => Ok(ptx::globals(self.ptx_text()?)),
            ImageKind::Cubin | ImageKind::AmdCodeObject => {
                let file = self.elf()?;
                let defined_global = |symbol: &object::Symbol<'_, '_>| match self.kind {
                    ImageKind::Cubin => cubin::is_defined_global(symbol),
                    _ => symbol.is_definition() && symbol.is_global(),
                };
                Ok(file
                    .symbols()
                    .filter(defined_global)
                    .filter_map(|symbol| symbol.name().ok().map(str::to_owned))
                    .collect())
            }
        }
    }

    /// The image's kernels with their parameter sizes, where the format records them (PTX and cubin).
    pub fn kernel_signatures(&self) -> Result<Vec<KernelSignature>> {
        match self.kind {
            ImageKind::Ptx => ptx::kernels(self.ptx_text()?).map_err(|problem| bad(&self.path, &problem)),
            ImageKind::Cubin => cubin::kernels(&self.elf()?).map_err(|problem| bad(&self.path, &problem)),
            ImageKind::AmdCodeObject => {
                let file = self.elf()?;
                Ok(file
                    .symbols()
                    .filter_map(|symbol| symbol.name().ok()?.strip_suffix(".kd").map(str::to_owned))
                    .map(|name| KernelSignature { name, param_sizes: Vec::new() })
                    .collect())
            }
        }
    }

    /// Checks that the image has the three startup kernels, each taking the one argument `docs/abi.md` gives. For
    /// AMD code objects, the kernels' explicit arguments in the metadata note must lie exactly where the structs'
    /// fields do. A cubin must keep each function in one place for all kernels (see
    /// [`cubin::compiled_whole_program`]).
    pub fn check_startup_abi(&self) -> Result<()> {
        if self.kind == ImageKind::AmdCodeObject {
            let metadata =
                crate::hsa::metadata::CodeObjectMetadata::read(&self.bytes).map_err(|p| bad(&self.path, &p))?;
            check_argument_extents(&metadata).map_err(|p| bad(&self.path, &p))?;
            return metadata.startup_kernels().map(drop).map_err(|p| bad(&self.path, &p));
        }
        let kernels = self.kernel_signatures()?;
        let expected = [
            (abi::BEGIN_KERNEL, size_of::<abi::BeginArgs>()),
            (abi::START_KERNEL, size_of::<abi::StartArgs>()),
            (abi::END_KERNEL, size_of::<abi::EndArgs>()),
        ];
        for (name, size) in expected {
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
        }
        if self.kind == ImageKind::Cubin && cubin::compiled_whole_program(&self.elf()?) {
            return Err(bad(
                &self.path,
                "is a cubin compiled whole-program (`ptxas` without `-c`): each kernel has its own copy of every \
                 function, so the destructors and atexit handlers registered in one kernel cannot run in another; \
                 compile it with `ptxas -c` (and link that with `nvlink` for a linked cubin)",
            ));
        }
        Ok(())
    }

    /// PTX: every constructor global must name a function of the startup's constructor prototype (main's arguments:
    /// 4, 8 and 8 bytes), and every destructor global one that takes nothing. PTX calls through a function pointer
    /// only with the callee's exact prototype: any other would fail on the GPU, at the first constructor.
    fn check_callback_prototypes(&self) -> Result<()> {
        let prefixes = [abi::INIT_OBJECT_PREFIX, abi::FINI_OBJECT_PREFIX];
        let targets =
            ptx::callback_targets(self.ptx_text()?, &prefixes).map_err(|problem| bad(&self.path, &problem))?;
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
        Ok(self.elf()?.kind() == object::ObjectKind::Relocatable)
    }

    pub fn ptx_text(&self) -> Result<&str> {
        std::str::from_utf8(&self.bytes).map_err(|_| bad(&self.path, "PTX is not valid UTF-8"))
    }

    fn elf(&self) -> Result<object::File<'_>> {
        object::File::parse(&*self.bytes)
            .map_err(|error| bad(&self.path, &format!("is a truncated or corrupt ELF file: {error}")))
    }
}

/// A kernarg segment is at most a few KiB (the AQL packet's size field is a `u32`): arguments past 4 GiB are
/// corrupt metadata, refused before the ABI check adds offsets and sizes.
fn check_argument_extents(metadata: &crate::hsa::metadata::CodeObjectMetadata) -> std::result::Result<(), String> {
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
        return match machine {
            EM_CUDA => Ok(ImageKind::Cubin),
            EM_AMDGPU => Ok(ImageKind::AmdCodeObject),
            other => Err(bad(
                path,
                &format!("is an ELF file for machine {other} ({}), not a GPU image", machine_name(other)),
            )),
        };
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

fn classify(path: &Path, bytes: &[u8]) -> Result<ImageKind> {
    let kind = classify_head(path, bytes)?;
    if kind == ImageKind::Ptx {
        let text = &bytes[..ptx_len(path, bytes)?];
        if let Err(error) = std::str::from_utf8(text) {
            return Err(bad(path, &format!("is not valid UTF-8 PTX (at byte {})", error.valid_up_to())));
        }
        return Ok(kind);
    }
    let file = object::File::parse(bytes)
        .map_err(|error| bad(path, &format!("is a truncated or corrupt ELF file: {error}")))?;
    match &file {
        object::File::Elf32(elf) => check_elf_extents(path, elf, kind)?,
        object::File::Elf64(elf) => check_elf_extents(path, elf, kind)?,
        _ => return Err(bad(path, "is a truncated or corrupt ELF file")),
    }
    if kind == ImageKind::AmdCodeObject && file.kind() != object::ObjectKind::Dynamic {
        return Err(bad(path, "is an AMDGPU relocatable object, not a linked code object (ET_DYN)"));
    }
    Ok(kind)
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

/// Every section's and segment's bytes must lie inside the file: `object` parses them lazily, so a file cut off
/// after its headers would otherwise pass for whole until the driver reads past its end. Sections that occupy no
/// bytes in the file (`SHT_NOBITS`, and NVIDIA's own such types in a cubin) may lie anywhere.
fn check_elf_extents<Elf: FileHeader<Endian = object::Endianness>>(
    path: &Path,
    file: &ElfFile<'_, Elf>,
    kind: ImageKind,
) -> Result<()> {
    for section in file.sections() {
        let section_type = section.elf_section_header().sh_type(file.endian());
        if kind == ImageKind::Cubin && cubin::occupies_no_file_bytes(section_type) {
            continue;
        }
        // `SHT_NOBITS` sections have no bytes in the file: their `data` is empty, never an error.
        if section.data().is_err() {
            let name = section.name().unwrap_or("?");
            return Err(bad(path, &format!("is a truncated or corrupt ELF file: section `{name}` lies past its end")));
        }
    }
    for segment in file.segments() {
        if segment.data().is_err() {
            return Err(bad(
                path,
                &format!("is a truncated or corrupt ELF file: a segment at {:#x} lies past its end", segment.address()),
            ));
        }
    }
    Ok(())
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
mod tests {
    use super::*;

    const PTX: &str = r#"
//
// Generated by LLVM NVPTX Back-End
//
.version 7.8
.target sm_90
.address_size 64
.func f(.param .b32 f_param_0, .param .b64 f_param_1, .param .b64 f_param_2);
.visible .global .align 8 .u64 __init_array_object_ctor_101 = f;
.visible .global .align 8 .u64 __init_array_start;
.global .align 4 .b8 hidden[4];
.visible .global .align 8 .b8 table[16];
/* .visible .global .u64 commented_out; */
.visible .entry _begin(
	.param .align 8 .b8 _begin_param_0[56]
)
{ ret; }
.visible .entry _start(
	.param .align 8 .b8 _start_param_0[32]
)
{ ret; }
.visible .entry _end(.param .u64 _end_param_0)
{ ret; }
"#;

    fn image(bytes: &[u8]) -> Result<Image> {
        Image::from_bytes(Path::new("test-image"), bytes.to_vec())
    }

    #[test]
    fn ptx_is_recognized_after_comments() {
        assert_eq!(image(PTX.as_bytes()).unwrap().kind, ImageKind::Ptx);
    }

    #[test]
    fn ptx_globals_are_the_visible_ones() {
        let names = image(PTX.as_bytes()).unwrap().global_symbols().unwrap();
        assert_eq!(names, ["__init_array_object_ctor_101", "__init_array_start", "table", "_begin", "_start", "_end"]);
    }

    #[test]
    fn ptx_kernels_have_their_parameter_sizes() {
        let kernels = image(PTX.as_bytes()).unwrap().kernel_signatures().unwrap();
        let sizes: Vec<_> = kernels.iter().map(|k| (k.name.as_str(), k.param_sizes.clone())).collect();
        assert_eq!(sizes, [("_begin", vec![56]), ("_start", vec![32]), ("_end", vec![8])]);
        image(PTX.as_bytes()).unwrap().check_startup_abi().unwrap();
    }

    #[test]
    fn constructors_and_destructors_must_have_the_startups_prototypes() {
        let destructor = PTX.replace(
            ".visible .global .align 8 .u64 __init_array_start;",
            ".func (.param .b32 func_retval0) d()\n{ ret; }\n.visible .global .align 8 .u64 __fini_array_object_d_1 = d;",
        );
        image(destructor.as_bytes()).unwrap().check_startup_abi().unwrap();
        for (from, to, problem) in [
            (
                ".func f(.param .b32 f_param_0, .param .b64 f_param_1, .param .b64 f_param_2);",
                ".func f\n;",
                "constructor global `__init_array_object_ctor_101` names `f`, which takes parameters of [] bytes, but \
                 the startup calls a constructor with main's arguments",
            ),
            ("= f;", "= g;", "constructor global `__init_array_object_ctor_101` names `g`, which is no function"),
            (
                "__init_array_object_ctor_101 = f;",
                "__fini_array_object_ctor_101 = f;",
                "destructor global `__fini_array_object_ctor_101` names `f`, which takes parameters of [4, 8, 8] bytes",
            ),
            (
                ".param .b64 f_param_2);",
                ".param .b64 f_param_2[);",
                "cannot read parameter `.param .b64 f_param_2[` of `f`",
            ),
        ] {
            let wrong = PTX.replace(from, to);
            let error = image(wrong.as_bytes()).unwrap().check_startup_abi().unwrap_err().to_string();
            assert!(error.contains(problem), "{error}");
        }
    }

    #[test]
    fn a_kernel_with_the_wrong_parameters_fails_the_check() {
        let wrong = PTX.replace("_start_param_0[32]", "_start_param_0[24]");
        let error = image(wrong.as_bytes()).unwrap().check_startup_abi().unwrap_err().to_string();
        assert!(error.contains("kernel `_start` takes parameters of [24] bytes"), "{error}");
    }

    #[test]
    fn a_missing_kernel_fails_the_check() {
        let without_end = PTX.replace(".entry _end", ".func other");
        let error = image(without_end.as_bytes()).unwrap().check_startup_abi().unwrap_err().to_string();
        assert!(error.contains("has no `_end` kernel"), "{error}");
    }

    #[test]
    fn bad_images_get_one_line_errors() {
        let cases: [(&[u8], &str); 5] = [
            (b"", "is empty"),
            (b"\x00\x01garbage bytes\xff", "is not a GPU image"),
            (b"\x7fELF\x02\x01", "truncated ELF"),
            (b"// just a comment\n.target sm_90\n", "is not a GPU image"),
            (&host_elf_header(), "machine 62 (x86-64), not a GPU image"),
        ];
        for (bytes, message) in cases {
            let error = image(bytes).unwrap_err().to_string();
            assert!(error.contains(message), "{error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn a_truncated_gpu_elf_is_reported_as_such() {
        let mut header = host_elf_header();
        header[18..20].copy_from_slice(&EM_CUDA.to_le_bytes());
        let error = image(&header[..40]).unwrap_err().to_string();
        assert!(error.contains("truncated or corrupt ELF"), "{error}");
    }

    #[test]
    fn a_directory_and_a_missing_file_are_named() {
        let error = Image::read(Path::new("/")).unwrap_err().to_string();
        assert!(error.contains("is a directory"), "{error}");
        let error = Image::read(Path::new("/nonexistent/prog.ptx")).unwrap_err().to_string();
        assert!(error.starts_with("cannot read /nonexistent/prog.ptx"), "{error}");
    }

    #[test]
    fn amd_arguments_past_4_gib_are_refused_before_any_arithmetic() {
        use crate::hsa::metadata::{CodeObjectMetadata, KernelArg, KernelMetadata};
        let arg = |offset, size| KernelArg { offset, size, value_kind: "by_value".into() };
        let metadata = |args, kernarg_segment_size| CodeObjectMetadata {
            target: None,
            kernels: vec![KernelMetadata { name: "_start".into(), args, kernarg_segment_size, ..Default::default() }],
        };
        check_argument_extents(&metadata(vec![arg(0, 32), arg(32, 8)], 256)).unwrap();
        let error = check_argument_extents(&metadata(vec![arg(0, u64::MAX), arg(u64::MAX, 2)], 256)).unwrap_err();
        assert!(error.contains("kernel `_start` has an argument of 18446744073709551615 bytes at offset 0"), "{error}");
        let error = check_argument_extents(&metadata(vec![arg(1 << 40, 8)], 256)).unwrap_err();
        assert!(error.contains("at offset 1099511627776"), "{error}");
        let error = check_argument_extents(&metadata(vec![], u64::MAX)).unwrap_err();
        assert!(error.contains("kernarg segment of 18446744073709551615 bytes"), "{error}");
    }

    #[test]
    fn ptx_parameter_sizes_do_not_overflow() {
        let huge = PTX.replace(".b8 _start_param_0[32]", ".b64 _start_param_0[3000000000000000000]");
        let error = image(huge.as_bytes()).unwrap().check_startup_abi().unwrap_err().to_string();
        assert!(error.contains("cannot read parameter"), "{error}");
    }

    #[test]
    fn many_entries_before_one_parameter_list_parse_in_linear_time() {
        let mut ptx = String::from(".version 7.8\n.target sm_90\n");
        // Each list runs to the one `)` at the end and reads as one `.u64` parameter.
        ptx.push_str(&".entry a(.param .u64 x ".repeat(100_000));
        ptx.push(')');
        let started = std::time::Instant::now();
        let _ = image(ptx.as_bytes()).unwrap().kernel_signatures();
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }

    /// A sparse file: `head`, then NULs up to `len` bytes (which cost no disk).
    fn sparse_file(name: &str, head: &[u8], len: u64) -> PathBuf {
        let path = std::env::temp_dir().join(format!("gpu-loader-image-{}-{name}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        std::io::Write::write_all(&mut &file, head).unwrap();
        file.set_len(len).unwrap();
        path
    }

    #[test]
    fn a_file_over_the_limit_is_refused_by_its_size() {
        let path = sparse_file("huge.ptx", b".version 7.8\n.target sm_90\n", 2 << 30);
        let error = Image::read(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(error.ends_with("huge.ptx: is 2147483648 bytes, over the 256 MiB a GPU image may have"), "{error}");
    }

    #[test]
    fn the_head_decides_before_the_rest_is_read() {
        let at_limit = MAX_IMAGE_BYTES;
        for (name, head, problem) in [
            ("random.bin", &b"\x00\x01garbage"[..], "is not a GPU image"),
            ("host.elf", &host_elf_header()[..], "is an ELF file for machine 62"),
            ("nul.ptx", &b".version 7.8\n.target sm_90\n\0\0.entry"[..], "has a NUL byte at 27 inside its PTX text"),
        ] {
            let path = sparse_file(name, head, at_limit);
            assert_eq!(
                classify_head(&path, head).unwrap_err().to_string(),
                Image::read(&path).unwrap_err().to_string()
            );
            let error = Image::read(&path).unwrap_err().to_string();
            std::fs::remove_file(&path).unwrap();
            assert!(error.contains(problem), "{error}");
        }
    }

    #[test]
    fn ptx_may_end_in_nuls_but_not_hold_one() {
        let padded = [PTX.as_bytes(), b"\0\0\0"].concat();
        let padded = image(&padded).unwrap();
        assert_eq!(padded.bytes, PTX.as_bytes());
        padded.check_startup_abi().unwrap();
        let inside = PTX.replacen(".address_size", "\0.address_size", 1);
        let error = image(inside.as_bytes()).unwrap_err().to_string();
        assert!(error.contains("has a NUL byte at") && error.contains("inside its PTX text"), "{error}");
    }

    #[test]
    fn ptx_must_be_utf8_throughout() {
        let mut bytes = PTX.as_bytes().to_vec();
        bytes.extend(b"// \xff\n");
        let error = image(&bytes).unwrap_err().to_string();
        assert!(error.contains(&format!("is not valid UTF-8 PTX (at byte {})", PTX.len() + 3)), "{error}");
        // A character cut by the end of the head is no error.
        let mut long = b".version 7.8\n.target sm_90\n//".to_vec();
        long.resize(HEAD_BYTES - 1, b'x');
        long.extend("é\n".as_bytes());
        assert_eq!(classify_head(Path::new("x"), &long).unwrap(), ImageKind::Ptx);
    }

    #[test]
    fn a_ptx_file_near_the_limit_is_read_once_and_parsed_in_bounded_time() {
        // PTX padded with NULs to the limit: read once, checked and parsed, within seconds.
        let path = sparse_file("padded.ptx", PTX.as_bytes(), MAX_IMAGE_BYTES);
        let started = std::time::Instant::now();
        let image = Image::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(image.bytes.len(), PTX.len());
        image.check_startup_abi().unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
    }

    /// A 64-byte ELF64 header for x86-64.
    fn host_elf_header() -> Vec<u8> {
        let mut header = vec![0u8; 64];
        header[..4].copy_from_slice(b"\x7fELF");
        header[4] = 2;
        header[5] = 1;
        header[6] = 1;
        header[16] = 2;
        header[18..20].copy_from_slice(&62u16.to_le_bytes());
        header
    }
}
