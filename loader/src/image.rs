//! GPU images: which architecture an image is for, the symbols the loader needs from it, and the static check that
//! its kernels match the ABI (`docs/abi.md`).

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};
use startup_common::abi;

use crate::error::{LoaderError, Result};

const EM_CUDA: u16 = 190;
const EM_AMDGPU: u16 = 224;

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
    pub bytes: Vec<u8>,
}

impl Image {
    /// Reads and classifies `path`.
    pub fn read(path: &Path) -> Result<Self> {
        let metadata = std::fs::metadata(path).map_err(|source| LoaderError::Read { path: path.to_owned(), source })?;
        if metadata.is_dir() {
            return Err(bad(path, "is a directory, not a GPU image"));
        }
        // Reading a FIFO blocks until a writer comes, and `/dev/zero` never ends: only regular files are images.
        if !metadata.is_file() {
            return Err(bad(path, "is not a regular file (a device, FIFO or socket), not a GPU image"));
        }
        let bytes = std::fs::read(path).map_err(|source| LoaderError::Read { path: path.to_owned(), source })?;
        Self::from_bytes(path, bytes)
    }

    /// Classifies image bytes; `path` only names the image in messages.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Self> {
        let kind = classify(path, &bytes)?;
        Ok(Self { path: path.to_owned(), kind, bytes })
    }

    /// The names of the image's defined global symbols (kernels and variables).
    pub fn global_symbols(&self) -> Result<Vec<String>> {
        match self.kind {
            ImageKind::Ptx => Ok(ptx_globals(self.ptx_text()?)),
            ImageKind::Cubin | ImageKind::AmdCodeObject => {
                let file = self.elf()?;
                Ok(file
                    .symbols()
                    .filter(|symbol| symbol.is_definition() && symbol.is_global())
                    .filter_map(|symbol| symbol.name().ok().map(str::to_owned))
                    .collect())
            }
        }
    }

    /// The image's kernels with their parameter sizes, where the format records them (PTX and cubin).
    pub fn kernel_signatures(&self) -> Result<Vec<KernelSignature>> {
        match self.kind {
            ImageKind::Ptx => ptx_kernels(self.ptx_text()?).map_err(|problem| bad(&self.path, &problem)),
            ImageKind::Cubin => cubin_kernels(&self.elf()?),
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
    /// fields do.
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

fn classify(path: &Path, bytes: &[u8]) -> Result<ImageKind> {
    if bytes.is_empty() {
        return Err(bad(path, "is empty"));
    }
    if bytes.starts_with(b"\x7fELF") {
        // e_machine sits at offset 18 in both ELF classes; read it before a full parse so a truncated file for a
        // known machine is reported as truncated, and any other machine by name.
        let machine = match (bytes.get(5), bytes.get(18..20)) {
            (Some(1), Some(m)) => u16::from_le_bytes([m[0], m[1]]),
            (Some(2), Some(m)) => u16::from_be_bytes([m[0], m[1]]),
            _ => return Err(bad(path, "is a truncated ELF file")),
        };
        let kind = match machine {
            EM_CUDA => ImageKind::Cubin,
            EM_AMDGPU => ImageKind::AmdCodeObject,
            other => {
                return Err(bad(
                    path,
                    &format!("is an ELF file for machine {other} ({}), not a GPU image", machine_name(other)),
                ));
            }
        };
        let file = object::File::parse(bytes)
            .map_err(|error| bad(path, &format!("is a truncated or corrupt ELF file: {error}")))?;
        check_elf_extents(path, &file)?;
        if kind == ImageKind::AmdCodeObject && file.kind() != object::ObjectKind::Dynamic {
            return Err(bad(path, "is an AMDGPU relocatable object, not a linked code object (ET_DYN)"));
        }
        return Ok(kind);
    }
    if looks_like_ptx(bytes) {
        return Ok(ImageKind::Ptx);
    }
    Err(bad(path, "is not a GPU image (expected PTX text, an NVIDIA cubin or an AMD code object)"))
}

/// Every section's and segment's bytes must lie inside the file: `object` parses them lazily, so a file cut off
/// after its headers would otherwise pass for whole until the driver reads past its end.
fn check_elf_extents(path: &Path, file: &object::File<'_>) -> Result<()> {
    for section in file.sections() {
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

/// PTX starts, after comments and blank lines, with `.version`; `.target` follows.
fn looks_like_ptx(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(&bytes[..bytes.len().min(64 * 1024)]) else {
        return false;
    };
    let text = strip_ptx_comments(text);
    let mut directives = text.lines().map(str::trim).filter(|line| !line.is_empty());
    directives.next().is_some_and(|line| line.starts_with(".version"))
        && directives.any(|line| line.starts_with(".target"))
}

/// PTX with `//` and `/* */` comments blanked out.
fn strip_ptx_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else {
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The names of the `.visible` (exported) globals and entries in PTX.
fn ptx_globals(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in strip_ptx_comments(text).lines() {
        let mut words = line.split_whitespace().peekable();
        if words.next() != Some(".visible") {
            continue;
        }
        let Some(kind) = words.next() else { continue };
        match kind {
            ".entry" | ".func" => {
                if let Some(word) = words.next() {
                    names.push(word.split('(').next().unwrap_or(word).to_owned());
                }
            }
            ".global" | ".const" => {
                // `.visible .global .align 8 .u64 NAME = ...;` or `... .b8 NAME[16];`: the name is the first word
                // that is not a directive or a number.
                let name = words
                    .find(|w| !w.starts_with('.') && !w.chars().all(|c| c.is_ascii_digit()))
                    .map(|w| w.trim_end_matches(';').split(['[', '=']).next().unwrap_or(w).to_owned());
                names.extend(name);
            }
            _ => {}
        }
    }
    names
}

/// Every `.entry` in PTX with its parameters' sizes.
fn ptx_kernels(text: &str) -> std::result::Result<Vec<KernelSignature>, String> {
    let text = strip_ptx_comments(text);
    let mut kernels = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(".entry") {
        rest = &rest[at + ".entry".len()..];
        let trimmed = rest.trim_start();
        let name: String = trimmed.chars().take_while(|c| !c.is_whitespace() && *c != '(' && *c != '{').collect();
        let after_name = &trimmed[name.len()..];
        let mut param_sizes = Vec::new();
        if let Some(open) = after_name.trim_start().strip_prefix('(') {
            let close = open.find(')').ok_or_else(|| format!("unterminated parameter list of `{name}`"))?;
            for param in open[..close].split(',').map(str::trim).filter(|p| !p.is_empty()) {
                param_sizes.push(ptx_param_size(param).ok_or_else(|| {
                    // A declaration may span lines; the message is one.
                    let param = param.split_whitespace().collect::<Vec<_>>().join(" ");
                    format!("cannot read parameter `{param}` of `{name}`")
                })?);
            }
            // Go on after the list: no `.entry` lies inside one, and rescanning it for each could take quadratic time.
            rest = &open[close..];
        }
        kernels.push(KernelSignature { name, param_sizes });
    }
    Ok(kernels)
}

/// The size in bytes of one PTX parameter declaration: `.param .u64 x`, `.param .align 8 .b8 x[48]`.
fn ptx_param_size(param: &str) -> Option<u64> {
    let words: Vec<&str> = param.split_whitespace().collect();
    let name = words.last()?;
    let ty = words.iter().rev().skip(1).find(|w| w.starts_with('.') && *w != &".param" && *w != &".align")?;
    let bits: u64 = ty.trim_start_matches(".").trim_start_matches(|c: char| c.is_ascii_alphabetic()).parse().ok()?;
    let count = match name.split_once('[') {
        Some((_, rest)) => rest.strip_suffix(']')?.parse().ok()?,
        None => 1,
    };
    (bits / 8).checked_mul(count)
}

/// Kernels of a cubin: `STT_FUNC` symbols with a `.nv.info.NAME` section, whose `EIATTR_PARAM_CBANK` attribute
/// gives the parameters' total size.
fn cubin_kernels(file: &object::File<'_>) -> Result<Vec<KernelSignature>> {
    const EIATTR_PARAM_CBANK: u8 = 0x0a;
    let mut kernels = Vec::new();
    for section in file.sections() {
        let Some(name) = section.name().ok().and_then(|n| n.strip_prefix(".nv.info.")) else { continue };
        let data = section.data().unwrap_or_default();
        let mut param_sizes = Vec::new();
        let mut at = 0;
        // Each attribute: format byte, attribute byte, then (format 0x04) a u16 length and that many bytes.
        while at + 2 <= data.len() {
            let (format, attribute) = (data[at], data[at + 1]);
            let (payload, next) = match format {
                0x04 if at + 4 <= data.len() => {
                    let len = u16::from_le_bytes([data[at + 2], data[at + 3]]) as usize;
                    (data.get(at + 4..at + 4 + len).unwrap_or_default(), at + 4 + len)
                }
                0x03 => (data.get(at + 2..at + 4).unwrap_or_default(), at + 4),
                0x02 => (data.get(at + 2..at + 3).unwrap_or_default(), at + 3),
                _ => (&[][..], at + 2),
            };
            if attribute == EIATTR_PARAM_CBANK && payload.len() >= 8 {
                param_sizes = vec![u64::from(u16::from_le_bytes([payload[6], payload[7]]))];
            }
            at = next;
        }
        kernels.push(KernelSignature { name: name.to_owned(), param_sizes });
    }
    Ok(kernels)
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
.visible .global .align 8 .u64 __init_array_object_ctor_101 = f;
.visible .global .align 8 .u64 __init_array_start;
.global .align 4 .b8 hidden[4];
.visible .global .align 8 .b8 table[16];
/* .visible .global .u64 commented_out; */
.visible .entry _begin(
	.param .align 8 .b8 _begin_param_0[40]
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
        assert_eq!(sizes, [("_begin", vec![40]), ("_start", vec![32]), ("_end", vec![8])]);
        image(PTX.as_bytes()).unwrap().check_startup_abi().unwrap();
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
        assert_eq!(ptx_param_size(".param .b64 x[3000000000000000000]"), None);
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

    #[test]
    fn param_sizes_of_scalars_and_arrays() {
        assert_eq!(ptx_param_size(".param .u64 x"), Some(8));
        assert_eq!(ptx_param_size(".param .b32 x"), Some(4));
        assert_eq!(ptx_param_size(".param .align 8 .b8 x[48]"), Some(48));
        assert_eq!(ptx_param_size("garbage"), None);
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
