//! NVIDIA cubins (ELF `EM_CUDA`) as ptxas and nvlink write them: NVIDIA's own section and symbol types, the kernels'
//! parameter sizes in their `.nv.info.<kernel>` attributes, and whether ptxas compiled the module whole-program.

use std::collections::{HashMap, HashSet};

use object::elf::{SHT_LOPROC, STT_FUNC};
use object::{Object, ObjectSection, ObjectSymbol, SymbolFlags};

use super::KernelSignature;

/// NVIDIA's section types that, like `SHT_NOBITS`, occupy no bytes in the file, so their offset and size may lie
/// past its end: `.nv.global` (globals without an initializer), `.nv.local.*`, `.nv.shared.*` and
/// `.nv.shared.reserved.*`, as relocatable cubins type them. nvlink skips the same four in its extent check.
const NO_FILE_BYTES: [u32; 4] = [SHT_LOPROC + 0x7, SHT_LOPROC + 0x9, SHT_LOPROC + 0xa, SHT_LOPROC + 0x15];

/// `STT_CUDA_OBJECT`: the symbol type of a global variable in a relocatable cubin (ELF's `STT_OBJECT` elsewhere).
const STT_CUDA_OBJECT: u8 = 13;
/// `STO_CUDA_ENTRY`: the `st_other` bit of a kernel.
const STO_CUDA_ENTRY: u8 = 0x10;

/// `.nv.info` attribute formats: no value, a byte, a half-word (each in a 16-bit field), or a 16-bit length and that
/// many bytes.
const EIFMT_NVAL: u8 = 0x01;
const EIFMT_BVAL: u8 = 0x02;
const EIFMT_HVAL: u8 = 0x03;
const EIFMT_SVAL: u8 = 0x04;
/// The parameters' constant bank: a symbol index, then 16-bit offset and size (relocatable and linked cubins).
const EIATTR_PARAM_CBANK: u8 = 0x0a;
/// One parameter: index (32 bits), ordinal and offset (16 bits each), then flags whose top 14 bits are its size.
const EIATTR_KPARAM_INFO: u8 = 0x17;
/// The parameters' total size (a half-word).
const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;

/// Whether a section of type `section_type` has no bytes in a cubin.
pub(super) fn occupies_no_file_bytes(section_type: u32) -> bool {
    NO_FILE_BYTES.contains(&section_type)
}

fn elf_flags(symbol: &object::Symbol<'_, '_>) -> (u8, u8) {
    match symbol.flags() {
        SymbolFlags::Elf { st_info, st_other } => (st_info, st_other),
        _ => (0, 0),
    }
}

fn is_kernel(symbol: &object::Symbol<'_, '_>) -> bool {
    let (st_info, st_other) = elf_flags(symbol);
    st_info & 0xf == STT_FUNC && st_other & STO_CUDA_ENTRY != 0
}

/// Whether a symbol is a global variable or function defined in the cubin: ELF's definitions, and the
/// `STT_CUDA_OBJECT` variables of a relocatable cubin (the constructor globals among them).
pub(super) fn is_defined_global(symbol: &object::Symbol<'_, '_>) -> bool {
    let cuda_object = elf_flags(symbol).0 & 0xf == STT_CUDA_OBJECT && symbol.section_index().is_some();
    symbol.is_global() && (symbol.is_definition() || cuda_object)
}

/// The kernels (symbols marked `STO_CUDA_ENTRY`) with the parameter sizes their `.nv.info.<kernel>` attributes give.
pub(super) fn kernels(file: &object::File<'_>) -> Result<Vec<KernelSignature>, String> {
    let mut infos = HashMap::new();
    for section in file.sections() {
        if let Some(kernel) = section.name().ok().and_then(|name| name.strip_prefix(".nv.info.")) {
            infos.insert(kernel, section.data().unwrap_or_default());
        }
    }
    let mut kernels = Vec::new();
    for symbol in file.symbols().filter(is_kernel) {
        let Ok(name) = symbol.name() else { continue };
        let param_sizes = match infos.get(name) {
            Some(info) => param_sizes(info).map_err(|problem| format!("has a corrupt `.nv.info.{name}`: {problem}"))?,
            None => Vec::new(),
        };
        kernels.push(KernelSignature { name: name.to_owned(), param_sizes });
    }
    Ok(kernels)
}

/// Whether ptxas compiled the module whole-program (without `-c`): then each kernel's section holds its own copy of
/// every function it uses (`$_end$f` in `_end`'s code), and a function's address means something only in the kernel
/// that took it. Relocatable and nvlink-linked cubins keep each function in a section of its own.
pub(super) fn compiled_whole_program(file: &object::File<'_>) -> bool {
    let kernel_sections: HashSet<_> = file.symbols().filter(is_kernel).filter_map(|k| k.section_index()).collect();
    file.symbols().any(|symbol| {
        elf_flags(&symbol).0 & 0xf == STT_FUNC
            && !is_kernel(&symbol)
            && symbol.section_index().is_some_and(|section| kernel_sections.contains(&section))
    })
}

/// One `.nv.info` attribute.
#[derive(Debug, PartialEq, Eq)]
enum Value<'a> {
    /// `EIFMT_NVAL`, `EIFMT_BVAL` and `EIFMT_HVAL`: the 16-bit field.
    Half(u16),
    /// `EIFMT_SVAL`.
    Bytes(&'a [u8]),
}

impl Value<'_> {
    /// What the value is, for a message: `a 16-bit value` or `N bytes`.
    fn form(&self) -> String {
        match self {
            Value::Half(_) => "a 16-bit value".into(),
            Value::Bytes(bytes) => format!("{} bytes", bytes.len()),
        }
    }
}

/// The attributes of an `.nv.info` section: `(attribute, value)`, or an error at the first that does not fit.
fn attributes(mut data: &[u8]) -> impl Iterator<Item = Result<(u8, Value<'_>), String>> {
    std::iter::from_fn(move || {
        let [format, attribute, low, high, rest @ ..] = data else {
            return (!data.is_empty()).then(|| {
                let left = std::mem::take(&mut data).len();
                Err(format!("{left} bytes after the last attribute"))
            });
        };
        let (format, attribute, field) = (*format, *attribute, u16::from_le_bytes([*low, *high]));
        let value = match format {
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => {
                data = rest;
                Value::Half(field)
            }
            EIFMT_SVAL if usize::from(field) <= rest.len() => {
                let (bytes, after) = rest.split_at(usize::from(field));
                data = after;
                Value::Bytes(bytes)
            }
            _ => {
                data = &[];
                return Some(Err(if format == EIFMT_SVAL {
                    format!("attribute {attribute:#x} has {field} bytes, past the end of the section")
                } else {
                    format!("attribute {attribute:#x} has an unknown format {format:#x}")
                }));
            }
        };
        Some(Ok((attribute, value)))
    })
}

/// The parameter sizes of one kernel, in order, from its `.nv.info.<kernel>` section: each `EIATTR_KPARAM_INFO`
/// where there are any (ptxas 13 writes them in both kinds of cubin), else one parameter of the total size that
/// `EIATTR_CBANK_PARAM_SIZE` or `EIATTR_PARAM_CBANK` gives.
fn param_sizes(info: &[u8]) -> Result<Vec<u64>, String> {
    let mut params = Vec::new();
    let mut totals = Vec::new();
    for attribute in attributes(info) {
        match attribute? {
            (EIATTR_KPARAM_INFO, Value::Bytes(&[_, _, _, _, o0, o1, f0, f1, s0, s1, s2, s3])) => {
                let flags = u32::from_le_bytes([s0, s1, s2, s3]);
                params.push((u16::from_le_bytes([o0, o1]), u16::from_le_bytes([f0, f1]), u64::from(flags >> 18)));
            }
            (EIATTR_KPARAM_INFO, value) => return Err(format!("a parameter entry of {}, not 12 bytes", value.form())),
            (EIATTR_CBANK_PARAM_SIZE, Value::Half(size)) => totals.push(u64::from(size)),
            (EIATTR_PARAM_CBANK, Value::Bytes(&[_, _, _, _, _, _, s0, s1])) => {
                totals.push(u64::from(u16::from_le_bytes([s0, s1])));
            }
            (EIATTR_CBANK_PARAM_SIZE, value) => {
                return Err(format!("a parameter size of {}, not a 16-bit value", value.form()));
            }
            (EIATTR_PARAM_CBANK, value) => return Err(format!("a parameter bank of {}, not 8 bytes", value.form())),
            _ => {}
        }
    }
    let total = totals.first().copied();
    if totals.iter().any(|&size| Some(size) != total) {
        return Err(format!("the parameter bank has sizes {totals:?}"));
    }
    if params.is_empty() {
        return Ok(total.filter(|&size| size > 0).into_iter().collect());
    }
    params.sort_unstable_by_key(|&(ordinal, ..)| ordinal);
    for (index, &(ordinal, offset, size)) in params.iter().enumerate() {
        if usize::from(ordinal) != index {
            return Err(format!("parameter ordinals {:?} are not 0 to {}", ordinals(&params), params.len() - 1));
        }
        if let Some(total) = total.filter(|&total| u64::from(offset) + size > total) {
            return Err(format!("parameter {ordinal} ({size} bytes at {offset}) ends past the bank's {total} bytes"));
        }
    }
    Ok(params.into_iter().map(|(.., size)| size).collect())
}

fn ordinals(params: &[(u16, u16, u64)]) -> Vec<u16> {
    params.iter().map(|&(ordinal, ..)| ordinal).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `EIFMT_SVAL` attribute.
    fn sval(attribute: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![EIFMT_SVAL, attribute];
        out.extend((bytes.len() as u16).to_le_bytes());
        out.extend(bytes);
        out
    }

    fn kparam(ordinal: u16, offset: u16, size: u32) -> Vec<u8> {
        let mut bytes = vec![0; 4];
        bytes.extend(ordinal.to_le_bytes());
        bytes.extend(offset.to_le_bytes());
        bytes.extend(((size << 18) | 0x1f000).to_le_bytes());
        sval(EIATTR_KPARAM_INFO, &bytes)
    }

    fn bank(size: u16) -> Vec<u8> {
        let mut bytes = vec![EIFMT_HVAL, EIATTR_CBANK_PARAM_SIZE];
        bytes.extend(size.to_le_bytes());
        bytes.extend(sval(EIATTR_PARAM_CBANK, &[0x74, 0, 0, 0, 0x10, 0x02, size as u8, (size >> 8) as u8]));
        bytes
    }

    #[test]
    fn every_format_is_four_bytes_but_sval() {
        let mut info = vec![EIFMT_NVAL, 0x2a, 0, 0, EIFMT_BVAL, 0x4c, 1, 0, EIFMT_HVAL, 0x1b, 0x40, 0];
        info.extend(sval(0x37, &[0x82, 0, 0, 0]));
        let attributes: Vec<_> = attributes(&info).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            attributes,
            [
                (0x2a, Value::Half(0)),
                (0x4c, Value::Half(1)),
                (0x1b, Value::Half(0x40)),
                (0x37, Value::Bytes(&[0x82, 0, 0, 0]))
            ]
        );
    }

    #[test]
    fn parameters_come_in_ordinal_order() {
        let info = [bank(24), kparam(1, 8, 16), vec![EIFMT_BVAL, 0x4c, 1, 0], kparam(0, 0, 8)].concat();
        assert_eq!(param_sizes(&info).unwrap(), [8, 16]);
    }

    #[test]
    fn without_parameter_entries_the_bank_is_one_parameter() {
        assert_eq!(param_sizes(&bank(40)).unwrap(), [40]);
        assert_eq!(param_sizes(&bank(0)).unwrap(), Vec::<u64>::new());
        assert_eq!(param_sizes(&[]).unwrap(), Vec::<u64>::new());
    }

    #[test]
    fn corrupt_attributes_are_named() {
        let cases: [(Vec<u8>, &str); 10] = [
            (vec![EIFMT_HVAL, 0x19, 0x20], "3 bytes after the last attribute"),
            (vec![EIFMT_SVAL, 0x17, 12, 0, 1, 2], "attribute 0x17 has 12 bytes, past the end"),
            (vec![0x07, 0x17, 0, 0], "unknown format 0x7"),
            (sval(EIATTR_KPARAM_INFO, &[0; 8]), "a parameter entry of 8 bytes, not 12 bytes"),
            (vec![EIFMT_HVAL, EIATTR_KPARAM_INFO, 0, 0], "a parameter entry of a 16-bit value, not 12 bytes"),
            (sval(EIATTR_CBANK_PARAM_SIZE, &[0; 2]), "a parameter size of 2 bytes, not a 16-bit value"),
            (vec![EIFMT_HVAL, EIATTR_PARAM_CBANK, 0, 0], "a parameter bank of a 16-bit value, not 8 bytes"),
            ([bank(32), kparam(0, 0, 32), kparam(0, 0, 32)].concat(), "parameter ordinals [0, 0] are not 0 to 1"),
            ([bank(32), kparam(0, 16, 32)].concat(), "parameter 0 (32 bytes at 16) ends past the bank's 32 bytes"),
            ([bank(32), vec![EIFMT_HVAL, EIATTR_CBANK_PARAM_SIZE, 8, 0]].concat(), "the parameter bank has sizes"),
        ];
        for (info, problem) in cases {
            let error = param_sizes(&info).unwrap_err();
            assert!(error.contains(problem), "{error} (expected {problem})");
        }
    }

    #[test]
    fn no_bits_section_types_are_nvidias_four() {
        assert!(occupies_no_file_bytes(0x7000_0007) && occupies_no_file_bytes(0x7000_0015));
        assert!(!occupies_no_file_bytes(0x7000_0008) && !occupies_no_file_bytes(0x7000_0000));
    }
}
