//! The argument block on arbitrary byte strings: packed, relocated to an arbitrary base, and read back the way the
//! device reads it; every argument and environment entry must come back byte for byte. The input: 8 bytes of base
//! address, then entries split at `\n`; an entry starting with `=` goes to the environment, the others to argv.
//! Entries with a NUL byte must be refused.

#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use gpu_loader::args::ArgBlock;
use libfuzzer_sys::fuzz_target;

/// Reads a NULL-terminated pointer table at `table` of a block placed at `base`.
fn read_back(block: &[u8], base: u64, table: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for slot in 0.. {
        let at = table + slot * 8;
        let pointer = u64::from_le_bytes(block[at..at + 8].try_into().expect("8 bytes"));
        if pointer == 0 {
            break;
        }
        let start = usize::try_from(pointer.wrapping_sub(base)).expect("in the block");
        let end = start + block[start..].iter().position(|&b| b == 0).expect("NUL-terminated");
        out.push(block[start..end].to_vec());
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    // Device addresses are never near the top of the address space; the block must still not panic there.
    let base = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    let (mut args, mut env) = (Vec::new(), Vec::new());
    for entry in data[8..].split(|&b| b == b'\n') {
        match entry.strip_prefix(b"=") {
            Some(rest) => env.push(rest.to_vec()),
            None => args.push(entry.to_vec()),
        }
    }
    let os = |items: &[Vec<u8>]| items.iter().cloned().map(OsString::from_vec).collect::<Vec<_>>();
    let has_nul = args.iter().chain(&env).any(|entry| entry.contains(&0));
    match ArgBlock::new(&os(&args), &os(&env)) {
        Err(error) => assert!(has_nul, "refused entries without a NUL: {error}"),
        Ok(block) => {
            assert!(!has_nul, "accepted an entry with a NUL");
            assert_eq!(block.argc() as usize, args.len());
            let bytes = block.at_address(base);
            assert_eq!(bytes.len(), block.len());
            // A relocated pointer is 0 only if base + offset wraps to 0: then the table would end early.
            if base.checked_add(bytes.len() as u64).is_some() {
                assert_eq!(read_back(&bytes, base, 0), args);
                assert_eq!(read_back(&bytes, base, block.envp_offset()), env);
            }
        }
    }
});
