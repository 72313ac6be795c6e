//! Image parsing on arbitrary bytes: classification, symbols, kernel signatures, the startup ABI check, the
//! constructor table of the symbols, the test table, whether `main` is defined, and the AMDGPU metadata parser on
//! the bytes as a code object and as msgpack.
//! None of them may panic, whatever the bytes.

#![no_main]

use std::path::Path;

use gpu_loader::ctors::ConstructorTable;
use gpu_loader::image::Image;
use gpu_loader::image::amd_metadata::CodeObjectMetadata;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(image) = Image::from_bytes(Path::new("fuzz-input"), data.to_vec()) {
        let _ = image.global_symbols();
        let _ = image.kernel_signatures();
        let _ = image.check_startup_abi();
        let _ = image.is_relocatable();
        let _ = ConstructorTable::of(&image);
        let _ = gpu_loader::test_list::read(&image);
        let _ = image.lacks_own_main();
    }
    if let Ok(metadata) = CodeObjectMetadata::read(data) {
        check(&metadata);
    }
    if let Ok(metadata) = CodeObjectMetadata::parse(data) {
        check(&metadata);
    }
});

fn check(metadata: &CodeObjectMetadata) {
    // `startup_kernels` adds argument offsets and sizes unchecked (image/amd_metadata.rs; reported in
    // docs/failures.md): `Image::check_startup_abi` refuses arguments past 4 GiB before calling it, and so does this
    // target.
    let sane = |value: u64| value <= u64::from(u32::MAX);
    if metadata
        .kernels
        .iter()
        .all(|k| sane(k.kernarg_segment_size) && k.args.iter().all(|a| sane(a.offset) && sane(a.size)))
    {
        let _ = metadata.startup_kernels();
    }
    for name in ["_begin", "_start", "_end"] {
        let _ = metadata.kernel(name);
    }
}
