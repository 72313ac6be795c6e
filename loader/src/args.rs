//! `argv` and `envp` for the device: one block holding both pointer arrays (NULL-terminated) and the strings,
//! built on the host and copied to device memory once. Arguments are bytes, not text: what is not UTF-8 passes
//! through unchanged.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

use crate::error::{LoaderError, Result};

const POINTER: usize = size_of::<u64>();

/// The packed arguments and environment, relocatable to any device address.
#[derive(Clone, Debug)]
pub struct ArgBlock {
    bytes: Vec<u8>,
    argc: usize,
    envc: usize,
}

impl ArgBlock {
    /// Packs `args` (argv[0] first) and `env` (`KEY=VALUE` entries).
    pub fn new(args: &[OsString], env: &[OsString]) -> Result<Self> {
        let argc = args.len();
        if argc > i32::MAX as usize {
            return Err(LoaderError::BadArguments(format!("{argc} arguments do not fit in `int argc`")));
        }
        let envc = env.len();
        let table_bytes = (argc + 1 + envc + 1) * POINTER;
        let string_bytes: usize = args.iter().chain(env).map(|s| s.len() + 1).sum();
        let mut bytes = vec![0u8; table_bytes + string_bytes];
        let mut next_string = table_bytes;
        for (slot, string) in (0..argc).chain(argc + 1..argc + 1 + envc).zip(args.iter().chain(env)) {
            let string = string.as_bytes();
            if string.contains(&0) {
                return Err(LoaderError::BadArguments("an argument or environment entry contains a NUL byte".into()));
            }
            // Pointers are stored relative to the block and relocated in `at_address`.
            bytes[slot * POINTER..][..POINTER].copy_from_slice(&(next_string as u64).to_le_bytes());
            bytes[next_string..][..string.len()].copy_from_slice(string);
            next_string += string.len() + 1;
        }
        Ok(Self { bytes, argc, envc })
    }

    pub fn argc(&self) -> i32 {
        self.argc as i32
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Offset of `envp` in the block.
    pub fn envp_offset(&self) -> usize {
        (self.argc + 1) * POINTER
    }

    /// The block as it must lie at device address `base`: every non-NULL pointer relocated.
    pub fn at_address(&self, base: u64) -> Vec<u8> {
        let mut bytes = self.bytes.clone();
        let slots = (0..self.argc).chain(self.argc + 1..self.argc + 1 + self.envc);
        for slot in slots {
            let entry = &mut bytes[slot * POINTER..][..POINTER];
            let offset = u64::from_le_bytes(entry.try_into().expect("8 bytes"));
            // Wrapping: a device address is never within the block's length of 2^64, and a bad `base` must not
            // panic (found by the `args` fuzz target).
            entry.copy_from_slice(&base.wrapping_add(offset).to_le_bytes());
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn strings(items: &[&[u8]]) -> Vec<OsString> {
        items.iter().map(|s| OsString::from_vec(s.to_vec())).collect()
    }

    /// Reads the block back the way the device would, from address `base`.
    fn read_back(block: &[u8], base: u64, table_offset: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for slot in 0.. {
            let at = table_offset + slot * POINTER;
            let pointer = u64::from_le_bytes(block[at..at + POINTER].try_into().unwrap());
            if pointer == 0 {
                break;
            }
            let start = (pointer - base) as usize;
            let end = start + block[start..].iter().position(|&b| b == 0).unwrap();
            out.push(block[start..end].to_vec());
        }
        out
    }

    #[test]
    fn round_trips_arguments_and_environment_at_any_address() {
        let args = strings(&[b"prog.ptx", b"1", b"", b"\xff\xfe not utf-8"]);
        let env = strings(&[b"FRANCE=Paris", b"GERMANY=Berlin"]);
        let block = ArgBlock::new(&args, &env).unwrap();
        assert_eq!(block.argc(), 4);
        let base = 0x7f00_0000_1000;
        let bytes = block.at_address(base);
        assert_eq!(read_back(&bytes, base, 0), [&b"prog.ptx"[..], b"1", b"", b"\xff\xfe not utf-8"]);
        assert_eq!(read_back(&bytes, base, block.envp_offset()), [&b"FRANCE=Paris"[..], b"GERMANY=Berlin"]);
    }

    #[test]
    fn empty_environment_is_a_lone_null() {
        let block = ArgBlock::new(&strings(&[b"p"]), &[]).unwrap();
        let bytes = block.at_address(0x1000);
        assert_eq!(read_back(&bytes, 0x1000, block.envp_offset()), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn a_huge_environment_packs() {
        let env: Vec<OsString> = (0..20_000).map(|i| OsString::from(format!("VAR_{i}={}", "x".repeat(100)))).collect();
        let block = ArgBlock::new(&strings(&[b"p"]), &env).unwrap();
        let bytes = block.at_address(0x10_0000);
        let read = read_back(&bytes, 0x10_0000, block.envp_offset());
        assert_eq!(read.len(), 20_000);
        assert_eq!(read[19_999], format!("VAR_19999={}", "x".repeat(100)).into_bytes());
    }
}
