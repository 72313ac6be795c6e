//! The AMDGPU code object's metadata: the `NT_AMDGPU_METADATA` note (owner `AMDGPU`), a msgpack map that LLVM
//! writes for code object v3 and later. It records each kernel's arguments (offset, size, kind), its kernarg segment
//! size, wavefront size and register counts.
//!
//! The loader reads it for three things: to check that `_begin`, `_start` and `_end` take exactly the startup ABI's
//! structs as their explicit arguments (explicit arguments come first; hidden ones have a `value_kind` starting with
//! `hidden_`), to fill the hidden arguments it knows (see `hsa::dispatch::kernarg_segment`), and for the wavefront
//! size and resource counts. [`Image::amd_metadata`](super::Image::amd_metadata) parses it once per image.

use gpu_startup_protocol::abi;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use rmpv::Value;

/// The note type of the msgpack metadata (`NT_AMDGPU_METADATA` in LLVM's `ELF.h`).
pub const NT_AMDGPU_METADATA: u32 = 32;
/// The note owner.
pub const NOTE_OWNER: &[u8] = b"AMDGPU";

/// One kernel argument as the metadata records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelArg {
    pub offset: u64,
    pub size: u64,
    /// `by_value`, `global_buffer`, ..., or for arguments the compiler adds, `hidden_block_count_x` and so on.
    pub value_kind: String,
}

impl KernelArg {
    /// Whether the compiler added this argument (an implicit argument) rather than the source declaring it.
    pub fn is_hidden(&self) -> bool {
        self.value_kind.starts_with("hidden_")
    }
}

/// One entry of `amdhsa.kernels`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelMetadata {
    /// `.name`: the source name (`_start`).
    pub name: String,
    /// `.symbol`: the kernel descriptor's symbol (`_start.kd`).
    pub symbol: String,
    pub kernarg_segment_size: u64,
    pub args: Vec<KernelArg>,
    pub wavefront_size: Option<u32>,
    pub sgpr_count: Option<u32>,
    pub vgpr_count: Option<u32>,
    pub max_flat_workgroup_size: Option<u32>,
    pub group_segment_fixed_size: u64,
    pub private_segment_fixed_size: u64,
    pub uses_dynamic_stack: bool,
}

/// What the note says about the whole code object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodeObjectMetadata {
    /// `amdhsa.target`, such as `amdgcn-amd-amdhsa--gfx90a:xnack-`.
    pub target: Option<String>,
    pub kernels: Vec<KernelMetadata>,
}

impl CodeObjectMetadata {
    /// Reads the metadata note of an AMDGPU code object.
    pub fn read(elf: &[u8]) -> Result<Self, String> {
        let note = metadata_note(elf)?;
        Self::parse(note)
    }

    /// Parses the msgpack body of the note.
    pub fn parse(mut msgpack: &[u8]) -> Result<Self, String> {
        let root = rmpv::decode::read_value(&mut msgpack)
            .map_err(|error| format!("its AMDGPU metadata note is not valid msgpack: {error}"))?;
        let root = as_map(&root).ok_or("its AMDGPU metadata note is not a msgpack map")?;
        let target = lookup(root, "amdhsa.target").and_then(Value::as_str).map(str::to_owned);
        let kernels = lookup(root, "amdhsa.kernels")
            .and_then(Value::as_array)
            .ok_or("its AMDGPU metadata has no `amdhsa.kernels` list")?
            .iter()
            .map(kernel)
            .collect::<Result<_, _>>()?;
        Ok(Self { target, kernels })
    }

    /// The kernel whose source name is `name`.
    pub fn kernel(&self, name: &str) -> Option<&KernelMetadata> {
        self.kernels.iter().find(|kernel| kernel.name == name)
    }

    /// The metadata of `_begin`, `_start` and `_end`, each checked against the startup ABI's struct, and their common
    /// wavefront size.
    pub fn startup_kernels(&self) -> Result<([&KernelMetadata; 3], Option<u32>), String> {
        let mut found = Vec::with_capacity(3);
        for (name, size) in abi::Kernel::ALL.map(|kernel| (kernel.name(), kernel.arg_size())) {
            let kernel = self.kernel(name).ok_or_else(|| {
                format!("has no `{name}` kernel in its AMDGPU metadata: was it linked with the GPU startup?")
            })?;
            check_explicit_args(kernel, size as u64)?;
            found.push(kernel);
        }
        let kernels: [&KernelMetadata; 3] = found.try_into().expect("three kernels");
        let wavefront_size = kernels[1].wavefront_size;
        if let Some(other) = kernels.iter().find(|kernel| kernel.wavefront_size != wavefront_size) {
            return Err(format!(
                "its kernels disagree on the wavefront size (`{}`: {:?}, `{}`: {:?})",
                kernels[1].name, wavefront_size, other.name, other.wavefront_size
            ));
        }
        Ok((kernels, wavefront_size))
    }
}

/// Checks that `kernel`'s explicit arguments are exactly one padding-free struct of `size` bytes at offset 0: one
/// argument of that size, or (where the compiler split the struct) fields that tile `0..size` without a gap. The hidden
/// arguments must come after it and everything must fit the kernarg segment.
pub fn check_explicit_args(kernel: &KernelMetadata, size: u64) -> Result<(), String> {
    let name = &kernel.name;
    let mut explicit: Vec<&KernelArg> = kernel.args.iter().filter(|arg| !arg.is_hidden()).collect();
    explicit.sort_by_key(|arg| arg.offset);
    let describe = || {
        let list: Vec<String> = explicit.iter().map(|arg| format!("{} bytes at {}", arg.size, arg.offset)).collect();
        format!("[{}]", list.join(", "))
    };
    let mut end = 0;
    for arg in &explicit {
        if arg.offset != end {
            return Err(format!(
                "kernel `{name}` takes explicit arguments of {}, but the startup ABI passes one struct of {size} bytes",
                describe()
            ));
        }
        end = arg.offset.checked_add(arg.size).ok_or_else(|| {
            format!(
                "kernel `{name}` has an argument of {} bytes at offset {} in its AMDGPU metadata",
                arg.size, arg.offset
            )
        })?;
    }
    if end != size {
        // rustc passes a struct argument of an `extern "gpu-kernel"` fn by reference on AMDGPU: one pointer.
        let hint = if explicit.len() == 1 && explicit[0].size == 8 && size > 8 {
            " (a pointer: rustc passes a kernel's struct argument by reference on AMDGPU; take the struct's fields as \
             separate kernel arguments)"
        } else {
            ""
        };
        return Err(format!(
            "kernel `{name}` takes explicit arguments of {}, but the startup ABI passes one struct of {size} bytes{hint}",
            describe()
        ));
    }
    if let Some(hidden) = kernel.args.iter().find(|arg| arg.is_hidden() && arg.offset < size) {
        return Err(format!(
            "kernel `{name}` has its hidden argument `{}` at offset {}, inside its explicit arguments",
            hidden.value_kind, hidden.offset
        ));
    }
    let needed = kernel.args.iter().map(|arg| arg.offset + arg.size).max().unwrap_or(0);
    if needed > kernel.kernarg_segment_size {
        return Err(format!(
            "kernel `{name}` has arguments up to byte {needed} but a kernarg segment of {} bytes",
            kernel.kernarg_segment_size
        ));
    }
    Ok(())
}

/// The body of the code object's `NT_AMDGPU_METADATA` note, from its section or, without section headers, its
/// `PT_NOTE` segment.
fn metadata_note(elf: &[u8]) -> Result<&[u8], String> {
    let header = object::elf::FileHeader64::<object::Endianness>::parse(elf)
        .map_err(|error| format!("is not a 64-bit ELF file: {error}"))?;
    let endian = header.endian().map_err(|error| format!("has a bad ELF header: {error}"))?;
    let corrupt = |error: object::read::Error| format!("has a corrupt note: {error}");
    let sections = header.sections(endian, elf).map_err(corrupt)?;
    for section in sections.iter() {
        if let Some(mut notes) = section.notes(endian, elf).map_err(corrupt)? {
            while let Some(note) = notes.next().map_err(corrupt)? {
                if note.name() == NOTE_OWNER && note.n_type(endian) == NT_AMDGPU_METADATA {
                    return Ok(note.desc());
                }
            }
        }
    }
    for segment in header.program_headers(endian, elf).map_err(corrupt)? {
        if let Some(mut notes) = segment.notes(endian, elf).map_err(corrupt)? {
            while let Some(note) = notes.next().map_err(corrupt)? {
                if note.name() == NOTE_OWNER && note.n_type(endian) == NT_AMDGPU_METADATA {
                    return Ok(note.desc());
                }
            }
        }
    }
    Err("has no AMDGPU metadata note (NT_AMDGPU_METADATA): is it a code object v3 or later?".into())
}

fn kernel(value: &Value) -> Result<KernelMetadata, String> {
    let map = as_map(value).ok_or("an `amdhsa.kernels` entry is not a map")?;
    let name = lookup(map, ".name").and_then(Value::as_str).ok_or("a kernel in the AMDGPU metadata has no `.name`")?;
    let field = |key: &str| lookup(map, key).and_then(Value::as_u64);
    let small = |key: &str| field(key).and_then(|value| u32::try_from(value).ok());
    let args = match lookup(map, ".args") {
        None => Vec::new(),
        Some(args) => args
            .as_array()
            .ok_or_else(|| format!("kernel `{name}`: `.args` is not a list"))?
            .iter()
            .map(|arg| argument(name, arg))
            .collect::<Result<_, _>>()?,
    };
    Ok(KernelMetadata {
        name: name.to_owned(),
        symbol: lookup(map, ".symbol").and_then(Value::as_str).unwrap_or_default().to_owned(),
        kernarg_segment_size: field(".kernarg_segment_size")
            .ok_or_else(|| format!("kernel `{name}` has no `.kernarg_segment_size` in its metadata"))?,
        args,
        wavefront_size: small(".wavefront_size"),
        sgpr_count: small(".sgpr_count"),
        vgpr_count: small(".vgpr_count"),
        max_flat_workgroup_size: small(".max_flat_workgroup_size"),
        group_segment_fixed_size: field(".group_segment_fixed_size").unwrap_or(0),
        private_segment_fixed_size: field(".private_segment_fixed_size").unwrap_or(0),
        uses_dynamic_stack: lookup(map, ".uses_dynamic_stack").and_then(Value::as_bool).unwrap_or(false),
    })
}

fn argument(kernel: &str, value: &Value) -> Result<KernelArg, String> {
    let map = as_map(value).ok_or_else(|| format!("kernel `{kernel}`: an argument is not a map"))?;
    let number = |key: &str| {
        lookup(map, key).and_then(Value::as_u64).ok_or_else(|| format!("kernel `{kernel}`: an argument has no `{key}`"))
    };
    Ok(KernelArg {
        offset: number(".offset")?,
        size: number(".size")?,
        value_kind: lookup(map, ".value_kind")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("kernel `{kernel}`: an argument has no `.value_kind`"))?
            .to_owned(),
    })
}

fn as_map(value: &Value) -> Option<&[(Value, Value)]> {
    match value {
        Value::Map(entries) => Some(entries),
        _ => None,
    }
}

fn lookup<'a>(map: &'a [(Value, Value)], key: &str) -> Option<&'a Value> {
    map.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built from `loader/tests/fixtures/startup-abi.c`; the command is in that file.
    const FIXTURE: &[u8] = include_bytes!("../../tests/fixtures/startup-abi.gfx90a.elf");

    fn arg(offset: u64, size: u64, value_kind: &str) -> KernelArg {
        KernelArg { offset, size, value_kind: value_kind.into() }
    }

    fn kernel(name: &str, args: Vec<KernelArg>, kernarg_segment_size: u64) -> KernelMetadata {
        KernelMetadata {
            name: name.into(),
            symbol: format!("{name}.kd"),
            kernarg_segment_size,
            args,
            ..Default::default()
        }
    }

    #[test]
    fn the_fixture_note_is_read() {
        let metadata = CodeObjectMetadata::read(FIXTURE).unwrap();
        assert_eq!(metadata.target.as_deref(), Some("amdgcn-amd-amdhsa--gfx90a"));
        let start = metadata.kernel("_start").unwrap();
        assert_eq!(start.symbol, "_start.kd");
        assert_eq!(start.wavefront_size, Some(64));
        assert_eq!(start.args, [arg(0, 40, "by_value")]);
        assert!(start.vgpr_count.is_some() && start.sgpr_count.is_some());
    }

    #[test]
    fn the_fixture_kernels_take_the_shared_structs() {
        let metadata = CodeObjectMetadata::read(FIXTURE).unwrap();
        let (kernels, wavefront_size) = metadata.startup_kernels().unwrap();
        assert_eq!(wavefront_size, Some(64));
        let sizes = [size_of::<abi::BeginArgs>(), size_of::<abi::StartArgs>(), size_of::<abi::EndArgs>()];
        for (kernel, size) in kernels.iter().zip(sizes) {
            let explicit: u64 = kernel.args.iter().filter(|a| !a.is_hidden()).map(|a| a.size).sum();
            assert_eq!(explicit, size as u64, "{}", kernel.name);
            assert!(kernel.kernarg_segment_size >= size as u64, "{}", kernel.name);
        }
    }

    /// rustc's lowering, from `tests/fixtures/rust-kernels`: the fields as separate arguments tile the struct.
    #[test]
    fn rust_kernels_taking_the_fields_pass() {
        let fixture = include_bytes!("../../tests/fixtures/rust-fields.gfx90a.elf");
        let metadata = CodeObjectMetadata::read(fixture).unwrap();
        let (kernels, wavefront_size) = metadata.startup_kernels().unwrap();
        assert_eq!(wavefront_size, Some(64));
        let begin_offsets: Vec<u64> = kernels[0].args.iter().map(|arg| arg.offset).collect();
        assert_eq!(begin_offsets, [0, 4, 8, 16, 24, 32, 40, 48]);
        assert_eq!(kernels[0].kernarg_segment_size, size_of::<abi::BeginArgs>() as u64);
    }

    /// rustc passes a struct argument by reference on AMDGPU: such kernels must be refused, with the reason.
    #[test]
    fn rust_kernels_taking_the_structs_are_refused() {
        let fixture = include_bytes!("../../tests/fixtures/rust-struct-arguments.gfx90a.elf");
        let error = CodeObjectMetadata::read(fixture).unwrap().startup_kernels().unwrap_err();
        assert!(error.starts_with("kernel `_begin` takes explicit arguments of [8 bytes at 0]"), "{error}");
        assert!(error.contains("by reference"), "{error}");
    }

    #[test]
    fn a_split_struct_with_hidden_arguments_after_it_passes() {
        let start = kernel(
            "_start",
            vec![
                arg(0, 4, "by_value"),
                arg(4, 4, "by_value"),
                arg(8, 8, "global_buffer"),
                arg(16, 8, "global_buffer"),
                arg(24, 8, "global_buffer"),
                arg(32, 4, "hidden_block_count_x"),
                arg(88, 2, "hidden_grid_dims"),
            ],
            288,
        );
        check_explicit_args(&start, 32).unwrap();
    }

    #[test]
    fn wrong_explicit_arguments_are_named() {
        let cases = [
            (vec![arg(0, 24, "by_value")], "explicit arguments of [24 bytes at 0]"),
            (vec![arg(0, 8, "by_value"), arg(16, 16, "by_value")], "[8 bytes at 0, 16 bytes at 16]"),
            (vec![arg(0, 32, "by_value"), arg(32, 8, "by_value")], "[32 bytes at 0, 8 bytes at 32]"),
            (vec![], "explicit arguments of []"),
            (vec![arg(0, 32, "by_value"), arg(16, 8, "hidden_group_size_x")], "inside its explicit arguments"),
        ];
        for (args, message) in cases {
            let error = check_explicit_args(&kernel("_start", args, 256), 32).unwrap_err();
            assert!(error.contains(message), "{error}");
            assert!(error.contains("`_start`"), "{error}");
        }
        let error = check_explicit_args(&kernel("_end", vec![arg(0, 8, "global_buffer")], 4), 8).unwrap_err();
        assert!(error.contains("kernarg segment of 4 bytes"), "{error}");
    }

    #[test]
    fn a_missing_kernel_and_a_missing_note_are_reported() {
        let mut metadata = CodeObjectMetadata::read(FIXTURE).unwrap();
        metadata.kernels.retain(|kernel| kernel.name != "_end");
        let error = metadata.startup_kernels().unwrap_err();
        assert!(error.contains("has no `_end` kernel"), "{error}");

        let error = CodeObjectMetadata::read(&[0u8; 16]).unwrap_err();
        assert!(error.contains("not a 64-bit ELF"), "{error}");
        let error = CodeObjectMetadata::parse(&[0xc1]).unwrap_err();
        assert!(error.contains("not valid msgpack") || error.contains("not a msgpack map"), "{error}");
    }

    #[test]
    fn msgpack_metadata_is_parsed_field_by_field() {
        let entry = |key: &str, value: Value| (Value::from(key), value);
        let kernel = Value::Map(vec![
            entry(".name", "_end".into()),
            entry(".symbol", "_end.kd".into()),
            entry(".kernarg_segment_size", 264.into()),
            entry(".wavefront_size", 32.into()),
            entry(".uses_dynamic_stack", true.into()),
            entry(
                ".args",
                Value::Array(vec![
                    Value::Map(vec![
                        entry(".offset", 0.into()),
                        entry(".size", 8.into()),
                        entry(".value_kind", "by_value".into()),
                    ]),
                    Value::Map(vec![
                        entry(".offset", 8.into()),
                        entry(".size", 4.into()),
                        entry(".value_kind", "hidden_block_count_x".into()),
                    ]),
                ]),
            ),
        ]);
        let root = Value::Map(vec![entry("amdhsa.kernels", Value::Array(vec![kernel]))]);
        let mut bytes = Vec::new();
        rmpv::encode::write_value(&mut bytes, &root).unwrap();
        let metadata = CodeObjectMetadata::parse(&bytes).unwrap();
        let end = metadata.kernel("_end").unwrap();
        assert_eq!(end.kernarg_segment_size, 264);
        assert_eq!(end.wavefront_size, Some(32));
        assert!(end.uses_dynamic_stack);
        assert_eq!(end.args[1], arg(8, 4, "hidden_block_count_x"));
        assert!(end.args[1].is_hidden() && !end.args[0].is_hidden());
        check_explicit_args(end, 8).unwrap();
    }
}
