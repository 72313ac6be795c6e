//! An ELF image (a cubin or an AMD code object), parsed once when the image is read: the file is checked whole
//! (every section's and segment's bytes inside it; an AMD code object linked), and what the loader asks of it later
//! is taken out then: its symbols, with where a defined global's bytes lie, its kernels and, for a cubin, whether
//! ptxas compiled it whole-program.

use std::ops::Range;
use std::path::Path;

use object::read::elf::{ElfFile, FileHeader, SectionHeader};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

use super::{ImageKind, KernelSignature, bad, cubin};
use crate::error::Result;

/// What the loader reads of an ELF image.
#[derive(Debug)]
pub(super) struct ElfImage {
    /// A relocatable object (`ET_REL`) rather than a linked one.
    pub relocatable: bool,
    /// Every symbol with a name, in the file's order.
    pub symbols: Vec<Symbol>,
    /// The names of the defined globals (kernels and variables), in the file's order.
    pub globals: Vec<String>,
    /// The kernels with their parameter sizes where the format records them (a cubin), or why they cannot be read.
    pub kernels: std::result::Result<Vec<KernelSignature>, String>,
    /// A cubin compiled whole-program ([`cubin::compiled_whole_program`]).
    pub whole_program: bool,
}

/// One symbol of an ELF image.
#[derive(Debug)]
pub(super) struct Symbol {
    pub name: String,
    pub definition: bool,
    pub weak: bool,
    /// A global variable or function the image defines (for a cubin, its own kinds of symbol too).
    pub defined_global: bool,
    /// Where a defined global's initialized bytes lie in the file; `None` when it has none there.
    pub bytes: Option<Range<usize>>,
}

impl ElfImage {
    /// Parses `bytes`, an ELF file of `kind` (from its header); `path` names it in messages.
    pub(super) fn parse(path: &Path, bytes: &[u8], kind: ImageKind) -> Result<Self> {
        let file = object::File::parse(bytes)
            .map_err(|error| bad(path, &format!("is a truncated or corrupt ELF file: {error}")))?;
        match &file {
            object::File::Elf32(elf) => check_extents(path, elf, kind)?,
            object::File::Elf64(elf) => check_extents(path, elf, kind)?,
            _ => return Err(bad(path, "is a truncated or corrupt ELF file")),
        }
        if kind == ImageKind::AmdCodeObject && file.kind() != object::ObjectKind::Dynamic {
            return Err(bad(path, "is an AMDGPU relocatable object, not a linked code object (ET_DYN)"));
        }
        let base = bytes.as_ptr() as usize;
        let mut symbols = Vec::new();
        for symbol in file.symbols() {
            let Ok(name) = symbol.name() else { continue };
            let defined_global = match kind {
                ImageKind::Cubin => cubin::is_defined_global(&symbol),
                _ => symbol.is_definition() && symbol.is_global(),
            };
            let data = || {
                let section = file.section_by_index(symbol.section_index()?).ok()?;
                section.data_range(symbol.address(), symbol.size()).ok().flatten()
            };
            let bytes = defined_global.then(data).flatten().map(|data| {
                let start = data.as_ptr() as usize - base;
                start..start + data.len()
            });
            symbols.push(Symbol {
                name: name.to_owned(),
                definition: symbol.is_definition(),
                weak: symbol.is_weak(),
                defined_global,
                bytes,
            });
        }
        let globals = symbols.iter().filter(|symbol| symbol.defined_global).map(|symbol| symbol.name.clone()).collect();
        let kernels = match kind {
            ImageKind::Cubin => cubin::kernels(&file),
            // An AMD kernel is known by its descriptor, `NAME.kd`; its arguments are in the metadata note.
            _ => Ok(symbols
                .iter()
                .filter_map(|symbol| symbol.name.strip_suffix(".kd"))
                .map(|name| KernelSignature { name: name.to_owned(), param_sizes: Vec::new() })
                .collect()),
        };
        Ok(Self {
            relocatable: file.kind() == object::ObjectKind::Relocatable,
            whole_program: kind == ImageKind::Cubin && cubin::compiled_whole_program(&file),
            symbols,
            globals,
            kernels,
        })
    }
}

/// Every section's and segment's bytes must lie inside the file: `object` parses them lazily, so a file cut off
/// after its headers would otherwise pass for whole until the driver reads past its end. Sections that occupy no
/// bytes in the file (`SHT_NOBITS`, and NVIDIA's own such types in a cubin) may lie anywhere.
fn check_extents<Elf: FileHeader<Endian = object::Endianness>>(
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
