//! Cubins made by the real ptxas and nvlink (CUDA 13.0): what the loader reads from each kind, and what it refuses.
//!
//! Fixtures in `tests/fixtures/cubins/`, made with CUDA 13.0's ptxas and nvlink (V13.0.88) from the release PTX
//! (`cargo xtask build --release`, sm_90) of two test programs: `init-fini` (constructors and destructors of three
//! priorities) and `empty`:
//! - `init-fini.rel.cubin`: `ptxas -c -arch=sm_90 --maxrregcount 64 init-fini.ptx` (relocatable, what the build
//!   makes);
//! - `empty.nvlink.cubin`: `nvlink -arch=sm_90` of `ptxas -c` of `empty.ptx` (linked);
//! - `empty.full.cubin`: `ptxas -arch=sm_90 empty.ptx` (whole-program).

use std::path::{Path, PathBuf};

use gpu_loader::ctors::ConstructorTable;
use gpu_loader::image::{Image, ImageKind};

const SHT_PROGBITS: u32 = 1;
const SHT_NOBITS: u32 = 8;
/// `SHT_CUDA_GLOBAL`: `.nv.global` in a relocatable cubin.
const SHT_CUDA_GLOBAL: u32 = 0x7000_0007;

/// The fixture of one kind: `rel`, `nvlink` or `full`.
fn fixture(kind: &str) -> (PathBuf, Vec<u8>) {
    let name = match kind {
        "rel" => "init-fini.rel.cubin",
        "nvlink" => "empty.nvlink.cubin",
        _ => "empty.full.cubin",
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cubins").join(name);
    let bytes = std::fs::read(&path).expect("a cubin fixture");
    (path, bytes)
}

fn image(kind: &str) -> Image {
    let (path, bytes) = fixture(kind);
    Image::from_bytes(&path, bytes).expect("the fixture is an image")
}

fn refusal(bytes: Vec<u8>) -> String {
    let image = Image::from_bytes(Path::new("edited.cubin"), bytes);
    let error = image.and_then(|image| image.check_startup_abi()).expect_err("refused").to_string();
    assert!(!error.contains('\n'), "{error}");
    error
}

/// The parameter sizes of the three startup kernels, in the ABI's order.
fn startup_kernels(image: &Image) -> Vec<(String, Vec<u64>)> {
    let mut kernels: Vec<_> = image.kernel_signatures().unwrap().into_iter().map(|k| (k.name, k.param_sizes)).collect();
    kernels.sort();
    kernels
}

fn abi_kernels() -> Vec<(String, Vec<u64>)> {
    vec![("_begin".into(), vec![56]), ("_end".into(), vec![8]), ("_start".into(), vec![40])]
}

/// One section header of an ELF64 file, read and written in place.
struct SectionHeader {
    at: usize,
}

impl SectionHeader {
    fn find(bytes: &[u8], name: &str) -> Self {
        let word = |at: usize, len: usize| {
            bytes[at..at + len].iter().rev().fold(0u64, |value, &byte| value << 8 | u64::from(byte)) as usize
        };
        let (shoff, shentsize, shnum, shstrndx) = (word(0x28, 8), word(0x3a, 2), word(0x3c, 2), word(0x3e, 2));
        let names = word(shoff + shstrndx * shentsize + 0x18, 8);
        (0..shnum)
            .map(|index| Self { at: shoff + index * shentsize })
            .find(|header| {
                let start = names + word(header.at, 4);
                bytes[start..].split(|&b| b == 0).next() == Some(name.as_bytes())
            })
            .unwrap_or_else(|| panic!("no section `{name}`"))
    }

    fn section_type(&self, bytes: &[u8]) -> u32 {
        u32::from_le_bytes(bytes[self.at + 4..self.at + 8].try_into().unwrap())
    }

    fn set_type(&self, bytes: &mut [u8], section_type: u32) {
        bytes[self.at + 4..self.at + 8].copy_from_slice(&section_type.to_le_bytes());
    }

    fn extent(&self, bytes: &[u8]) -> (u64, u64) {
        let field = |at: usize| u64::from_le_bytes(bytes[self.at + at..self.at + at + 8].try_into().unwrap());
        (field(0x18), field(0x20))
    }

    fn set_offset(&self, bytes: &mut [u8], offset: u64) {
        bytes[self.at + 0x18..self.at + 0x20].copy_from_slice(&offset.to_le_bytes());
    }
}

#[test]
fn a_relocatable_cubin_from_ptxas_loads_with_its_constructors() {
    let (_, bytes) = fixture("rel");
    // `.nv.global` is NVIDIA's no-bits type: where it lies does not matter (`a_real_section_past_the_end_is_still_refused`
    // moves it past the end of the file, as ptxas puts a large one).
    let global = SectionHeader::find(&bytes, ".nv.global");
    assert_eq!(global.section_type(&bytes), SHT_CUDA_GLOBAL);

    let image = image("rel");
    assert_eq!(image.kind, ImageKind::Cubin);
    assert!(image.is_relocatable().unwrap());
    assert!(!image.lacks_own_main().unwrap(), "the program's `main` is a global function of the cubin");
    assert_eq!(startup_kernels(&image), abi_kernels());
    image.check_startup_abi().unwrap();
    // Its variables are `STT_CUDA_OBJECT` symbols: the constructor table must still find them.
    let table = ConstructorTable::of(&image).unwrap();
    let init = [
        "__init_array_object___gpu_startup_init_init_fini_first_2_101",
        "__init_array_object___gpu_startup_init_init_fini_second_1_200",
        "__init_array_object___gpu_startup_init_init_fini_last_0_65535",
    ];
    assert_eq!(table.init, init);
    let fini = [
        "__fini_array_object___gpu_startup_fini_init_fini_destructor_low_3_101",
        "__fini_array_object___gpu_startup_fini_init_fini_destructor_high_4_300",
    ];
    assert_eq!(table.fini, fini);
    let globals = image.global_symbols();
    for name in ["__init_array_start", "__init_array_end", "__fini_array_start", "__fini_array_end", "_start"] {
        assert!(globals.iter().any(|global| global == name), "{name} is not among {globals:?}");
    }
}

#[test]
fn a_cubin_linked_by_nvlink_loads() {
    let image = image("nvlink");
    assert_eq!(image.kind, ImageKind::Cubin);
    assert!(!image.is_relocatable().unwrap());
    // nvlink dropped `main`, which ptxas inlined into `_start`: a linked cubin is never refused for lacking one.
    assert!(!image.global_symbols().iter().any(|name| name == "main"));
    assert!(!image.lacks_own_main().unwrap());
    assert_eq!(startup_kernels(&image), abi_kernels());
    image.check_startup_abi().unwrap();
    assert!(ConstructorTable::of(&image).unwrap().is_empty());
    let globals = image.global_symbols();
    for name in ["__init_array_start", "__fini_array_end", "_begin", "_start", "_end"] {
        assert!(globals.iter().any(|global| global == name), "{name} is not among {globals:?}");
    }
}

#[test]
fn a_whole_program_cubin_is_refused_with_the_reason_and_the_remedy() {
    let image = image("full");
    assert!(!image.is_relocatable().unwrap());
    // Its parameters are read right: the refusal is for what ptxas did to its functions.
    assert_eq!(startup_kernels(&image), abi_kernels());
    let error = image.check_startup_abi().unwrap_err().to_string();
    assert!(error.contains("empty.full.cubin: is a cubin compiled whole-program"), "{error}");
    assert!(error.contains("compile it with `ptxas -c`") && !error.contains('\n'), "{error}");
}

#[test]
fn a_real_section_past_the_end_is_still_refused() {
    let (_, bytes) = fixture("rel");
    let past_end = bytes.len() as u64 + 0x1000;
    for name in [".nv.info", ".nv.constant0._start", ".text._start", ".nv.global.init"] {
        let mut moved = bytes.clone();
        SectionHeader::find(&moved, name).set_offset(&mut moved, past_end);
        let error = refusal(moved);
        assert!(
            error.contains(&format!("is a truncated or corrupt ELF file: section `{name}` lies past its end")),
            "{error}"
        );
    }
    // `.nv.global` may lie anywhere while it holds no bytes, and not once its type says it does.
    let mut moved = bytes.clone();
    let global = SectionHeader::find(&moved, ".nv.global");
    global.set_offset(&mut moved, past_end << 8);
    Image::from_bytes(Path::new("moved.cubin"), moved.clone()).unwrap().check_startup_abi().unwrap();
    global.set_type(&mut moved, SHT_NOBITS);
    Image::from_bytes(Path::new("nobits.cubin"), moved.clone()).unwrap().check_startup_abi().unwrap();
    global.set_type(&mut moved, SHT_PROGBITS);
    assert!(refusal(moved).contains("section `.nv.global` lies past its end"));
}

#[test]
fn a_truncated_cubin_is_refused() {
    for kind in ["rel", "nvlink", "full"] {
        let (_, bytes) = fixture(kind);
        let len = bytes.len();
        for cut in [5, 19, 40, 64, 0x200, len / 2, len - 64, len - 1] {
            let error = refusal(bytes[..cut].to_vec());
            let expected = if cut < 20 { "is a truncated ELF file" } else { "is a truncated or corrupt ELF file" };
            assert!(error.contains(expected), "{kind} cut at {cut}: {error}");
        }
    }
}

#[test]
fn a_corrupt_parameter_entry_is_named() {
    for kind in ["rel", "nvlink"] {
        let (_, bytes) = fixture(kind);
        let info = SectionHeader::find(&bytes, ".nv.info._start");
        let (offset, size) = info.extent(&bytes);
        let section = offset as usize..(offset + size) as usize;
        // Its `EIATTR_KPARAM_INFO` (`04 17 0c 00`): its length made 13, and larger than the section.
        let at = bytes[section.clone()].windows(4).position(|w| w == [0x04, 0x17, 0x0c, 0x00]).expect("a KPARAM_INFO");
        let mut corrupt = bytes.clone();
        corrupt[section.start + at + 2] = 13;
        let error = refusal(corrupt);
        assert!(
            error.contains("has a corrupt `.nv.info._start`: a parameter entry of 13 bytes, not 12 bytes"),
            "{error}"
        );
        let mut corrupt = bytes.clone();
        corrupt[section.start + at + 2..][..2].copy_from_slice(&(size as u16).to_le_bytes());
        let error = refusal(corrupt);
        let expected = format!("has a corrupt `.nv.info._start`: attribute 0x17 has {size} bytes, past the end");
        assert!(error.contains(&expected), "{kind}: {error}");
        // Its size made larger than the parameter bank.
        let mut corrupt = bytes.clone();
        corrupt[section.start + at + 4 + 11] = 0xff;
        let error = refusal(corrupt);
        assert!(error.contains("ends past the bank's 40 bytes"), "{kind}: {error}");
    }
}
