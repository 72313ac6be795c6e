//! `gpu-loader` on bad inputs: every one must end fast with a non-zero exit and one line on stderr that names the
//! problem, never a panic or a hang. Each case runs the real binary under a watchdog.
//!
//! Over 500 lines: one short test per bad input, so the file's length follows that list.
//!
//! Most cases fail before the loader opens a GPU, so they give the same answer on every machine. The ones that get
//! past every static check (a valid image, non-UTF-8 arguments, a huge environment, a PTX syntax error that only the
//! JIT sees) end at `no GPU` on a machine without one; on a GPU machine the tiny fixture runs and ends without
//! reporting an exit code, and the tests accept that too. The JIT's message for a syntax error and the device limit
//! messages are checked by the GPU suite.
//!
//! Fixtures: `startup-min.ptx` (hand-written: the three startup kernels with the ABI's parameter sizes and nothing
//! else), the AMD code objects `startup-abi.gfx90a.elf` and `rust-fields.gfx90a.elf` (sources beside them), and the
//! cubins of `cubins/` (`tests/cubins.rs` says how they were made).

mod common;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{LOADER, fixture, loader, run, scratch, write};

fn min_ptx() -> String {
    std::fs::read_to_string(fixture("startup-min.ptx")).expect("the PTX fixture")
}

/// Deterministic bytes (xorshift64*), so a failure reproduces.
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

// --- files that are not images ---

#[test]
fn a_missing_file() {
    run(loader(["/nonexistent/dir/prog.ptx"]))
        .fails_with(&["cannot read /nonexistent/dir/prog.ptx", "No such file or directory"]);
}

#[test]
fn a_missing_file_whose_name_is_not_utf8_or_has_a_newline() {
    let dir = scratch("missing-odd-names");
    let ran = run(loader([dir.join(OsStr::from_bytes(b"prog-\xff\xfe.ptx"))]));
    ran.fails_with(&["cannot read ", "prog-\u{fffd}\u{fffd}.ptx", "No such file"]);
    // The message stays one line: the newline is escaped.
    run(loader([dir.join("two\nlines.ptx")])).fails_with(&["two\\nlines.ptx", "No such file"]);
}

#[test]
fn a_directory() {
    let dir = scratch("directory");
    run(loader([&dir])).fails_with(&["is a directory, not a GPU image"]);
}

#[test]
fn a_device_or_a_fifo_is_refused_without_reading_it() {
    // `/dev/zero` never ends and a FIFO without a writer never opens: either would hang the loader.
    run(loader(["/dev/zero"])).fails_with(&["/dev/zero: is not a regular file"]);
    let fifo = scratch("fifo").join("image.ptx");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
    run(loader([&fifo])).fails_with(&["image.ptx: is not a regular file"]);
}

#[test]
fn an_empty_file() {
    let image = write(&scratch("empty"), "empty.ptx", b"");
    run(loader([&image])).fails_with(&["empty.ptx: is empty"]);
}

#[test]
fn random_bytes_are_not_an_image() {
    let dir = scratch("random");
    for (seed, len) in [(1, 1), (2, 17), (3, 4096), (4, 1 << 20)] {
        let image = write(&dir, &format!("random-{seed}.bin"), random_bytes(seed, len));
        run(loader([&image]))
            .fails_with(&["is not a GPU image (expected PTX text, an NVIDIA cubin or an AMD code object)"]);
    }
    // Random bytes behind an ELF identification for each GPU machine, and behind a PTX header.
    for (machine, name) in [(190u16, "cuda"), (224, "amdgpu")] {
        let mut bytes = random_bytes(u64::from(machine), 4096);
        bytes[..4].copy_from_slice(b"\x7fELF");
        bytes[4] = 2;
        bytes[5] = 1;
        bytes[18..20].copy_from_slice(&machine.to_le_bytes());
        let image = write(&dir, &format!("random-{name}.elf"), bytes);
        run(loader([&image])).fails_with(&["is a truncated or corrupt ELF file"]);
    }
    let mut ptx = b".version 7.8\n.target sm_90\n".to_vec();
    ptx.extend(random_bytes(5, 4096).iter().map(|b| b' ' + b % 95));
    let image = write(&dir, "random.ptx", ptx);
    run(loader([&image])).fails_with(&["random.ptx: has no `_begin` kernel"]);
}

/// A sparse file: `head`, then NULs up to `len` bytes, which cost no disk.
fn sparse(dir: &Path, name: &str, head: &[u8], len: u64) -> PathBuf {
    let path = write(dir, name, head);
    std::fs::OpenOptions::new().write(true).open(&path).and_then(|file| file.set_len(len)).expect("extend the file");
    path
}

/// The first bytes of an ELF64 file for `machine`.
fn elf_head(machine: u16) -> Vec<u8> {
    let mut header = vec![0u8; 64];
    header[..4].copy_from_slice(b"\x7fELF");
    header[4] = 2;
    header[5] = 1;
    header[6] = 1;
    header[18..20].copy_from_slice(&machine.to_le_bytes());
    header
}

#[test]
fn a_huge_file_is_refused_by_its_size_at_once() {
    // 2 GiB after a PTX header, a cubin's ELF header and no header at all: each used to be read whole (9 to 19 s and
    // up to 4 GB of memory) before it was refused.
    let dir = scratch("huge");
    for (name, head) in
        [("huge.ptx", b".version 7.8\n.target sm_90\n".to_vec()), ("huge.cubin", elf_head(190)), ("huge.bin", vec![7])]
    {
        let ran = run(loader([sparse(&dir, name, &head, 2 << 30)]));
        ran.fails_with(&[&format!("{name}: is 2147483648 bytes, over the 256 MiB a GPU image may have")]);
        assert!(ran.elapsed < Duration::from_secs(2), "took {:?}", ran.elapsed);
    }
}

#[test]
fn a_file_that_is_no_image_is_refused_from_its_first_bytes_in_little_memory() {
    // Just under the size limit, each is refused from its first 64 KiB: under a 64 MiB address space, reading the
    // whole file would fail.
    let dir = scratch("no-image-head");
    let near_limit = gpu_loader::image::MAX_IMAGE_BYTES;
    for (name, head, problem) in [
        ("random.bin", random_bytes(9, 4096), "is not a GPU image"),
        ("host.elf", elf_head(62), "is an ELF file for machine 62 (x86-64)"),
        (
            "nul.ptx",
            [&b".version 7.8\n.target sm_90\n\0"[..], &min_ptx().into_bytes()].concat(),
            "has a NUL byte at 27",
        ),
    ] {
        let image = sparse(&dir, name, &head, near_limit);
        let mut limited = Command::new("prlimit");
        limited.arg(format!("--as={}", 64 << 20)).arg(LOADER).arg(&image);
        run(limited).fails_with(&[&format!("{name}: {problem}")]);
    }
}

#[test]
fn ptx_padded_with_nuls_is_read_up_to_them() {
    // NVRTC's PTX ends with a NUL; the driver reads PTX as a C string.
    let dir = scratch("ptx-nuls");
    let mut ptx = min_ptx().into_bytes();
    ptx.push(0);
    run(loader([write(&dir, "one-nul.ptx", &ptx)])).reached_the_gpu();
    let len = ptx.len() as u64 + (64 << 20);
    run(loader([sparse(&dir, "padded.ptx", &ptx, len)])).reached_the_gpu();
    // More than the memory the loader may have: one line, no abort.
    let mut limited = Command::new("prlimit");
    limited.arg(format!("--as={}", 48 << 20)).arg(LOADER).arg(sparse(&dir, "large.ptx", &ptx, 200 << 20));
    run(limited).fails_with(&["cannot read ", "large.ptx: out of memory"]);
}

#[test]
fn an_elf_for_another_machine() {
    let mut header = vec![0u8; 64];
    header[..4].copy_from_slice(b"\x7fELF");
    header[4] = 2;
    header[5] = 1;
    header[6] = 1;
    header[16] = 2;
    header[18..20].copy_from_slice(&62u16.to_le_bytes());
    let image = write(&scratch("host-elf"), "host.elf", header);
    run(loader([&image])).fails_with(&["host.elf: is an ELF file for machine 62 (x86-64), not a GPU image"]);
    // A real host executable.
    let host = std::env::current_exe().expect("this test's executable");
    let machine = if cfg!(target_arch = "x86_64") { "(x86-64)" } else { "not a GPU image" };
    run(loader([&host])).fails_with(&["is an ELF file for machine", machine, "not a GPU image"]);
}

#[test]
fn truncated_amd_code_objects() {
    let dir = scratch("truncated-elf");
    for name in ["startup-abi.gfx90a.elf", "rust-fields.gfx90a.elf"] {
        let bytes = std::fs::read(fixture(name)).expect("AMD fixture");
        // Inside the identification, inside the header, inside the program headers, the notes, the code, and one
        // byte short of the end (the section headers lie at the end).
        let len = bytes.len();
        for cut in [5, 19, 40, 64, 100, 0x200, 0x400, 0x900, len / 2, len - 64, len - 1] {
            let image = write(&dir, &format!("{name}.{cut}"), &bytes[..cut]);
            let words: &[&str] =
                if cut < 20 { &["is a truncated ELF file"] } else { &["is a truncated or corrupt ELF file"] };
            run(loader([&image])).fails_with(words);
        }
    }
}

#[test]
fn an_elf_whose_sections_lie_past_its_end() {
    // The section headers kept, a section's offset moved past the end of the file: only the extent check sees it.
    let mut bytes = std::fs::read(fixture("startup-abi.gfx90a.elf")).expect("AMD fixture");
    let shoff = u64::from_le_bytes(bytes[0x28..0x30].try_into().unwrap()) as usize;
    let text = shoff + 7 * 64; // section 7 is `.text`
    let past_end = (bytes.len() as u64 + 0x1000).to_le_bytes();
    bytes[text + 0x18..text + 0x20].copy_from_slice(&past_end);
    let image = write(&scratch("section-past-end"), "moved.elf", bytes);
    run(loader([&image])).fails_with(&["is a truncated or corrupt ELF file: section `.text` lies past its end"]);
}

#[test]
fn a_whole_program_cubin_is_refused_and_a_linked_one_is_run() {
    // `ptxas` without `-c` (tests/cubins.rs has the reason); `nvlink` of `ptxas -c` of the same empty program.
    run(loader([fixture("cubins/empty.full.cubin")])).fails_with(&[
        "empty.full.cubin: is a cubin compiled whole-program (`ptxas` without `-c`)",
        "compile it with `ptxas -c`",
    ]);
    let ran = run(loader([fixture("cubins/empty.nvlink.cubin")]));
    if ran.stderr.contains("no GPU") {
        ran.fails_with(&["gpu-loader: no GPU: "]);
    } else {
        assert_eq!((ran.code, ran.stderr.as_str()), (Some(0), ""), "{ran:#?}");
    }
}

// --- images without the startup ---

#[test]
fn ptx_without_begin() {
    let ptx = min_ptx().replace(".entry _begin", ".func _not_begin");
    let image = write(&scratch("no-begin"), "no-begin.ptx", ptx);
    run(loader([&image])).fails_with(&["no-begin.ptx: has no `_begin` kernel", "linked with the GPU startup"]);
}

#[test]
fn ptx_without_end_or_start() {
    let dir = scratch("no-start-end");
    for kernel in ["_start", "_end"] {
        let ptx = min_ptx().replace(&format!(".entry {kernel}("), ".func other(");
        let image = write(&dir, &format!("no{kernel}.ptx"), ptx);
        run(loader([&image])).fails_with(&[&format!("has no `{kernel}` kernel")]);
    }
}

#[test]
fn an_amd_code_object_whose_kernels_take_a_pointer() {
    // rustc's lowering of a struct argument on AMDGPU: refused with the reason.
    run(loader([fixture("rust-struct-arguments.gfx90a.elf")]))
        .fails_with(&["kernel `_begin` takes explicit arguments of [8 bytes at 0]", "by reference"]);
}

#[test]
fn kernels_with_the_wrong_parameters() {
    let dir = scratch("wrong-params");
    let cases = [
        ("_start_param_0[40]", "_start_param_0[24]", "kernel `_start` takes parameters of [24] bytes", "40 bytes"),
        (".b8 _begin_param_0[56]", ".u64 _begin_param_0", "kernel `_begin` takes parameters of [8] bytes", "56 bytes"),
        (
            "_end_param_0[8]\n",
            "_end_param_0[8],\n\t.param .u32 extra\n",
            "kernel `_end` takes parameters of [8, 4]",
            "8 bytes",
        ),
        ("\t.param .align 8 .b8 _end_param_0[8]\n", "", "kernel `_end` takes parameters of [] bytes", "8 bytes"),
    ];
    for (i, (from, to, words, expected)) in cases.into_iter().enumerate() {
        let ptx = min_ptx();
        assert!(ptx.contains(from), "{from}");
        let image = write(&dir, &format!("wrong-{i}.ptx"), ptx.replace(from, to));
        run(loader([&image])).fails_with(&[words, &format!("the startup ABI passes one of {expected}")]);
    }
    // A parameter list the loader cannot read.
    let ptx = min_ptx().replace("_start_param_0[40]", "_start_param_0[x]");
    let image = write(&dir, "unreadable.ptx", ptx);
    run(loader([&image])).fails_with(&["cannot read parameter", "of `_start`"]);
    let ptx = min_ptx().replace("_end_param_0[8]\n)", "_end_param_0[8]\n");
    let image = write(&dir, "unterminated.ptx", ptx.split_at(ptx.rfind("_end_param_0").unwrap()).0);
    run(loader([&image])).fails_with(&["unterminated parameter list of `_end`"]);
}

#[test]
fn truncated_ptx() {
    let dir = scratch("truncated-ptx");
    let ptx = min_ptx();
    for cut in [20, ptx.find(".entry _start").unwrap(), ptx.find("_end_param_0").unwrap(), ptx.len() - 3] {
        let image = write(&dir, &format!("cut-{cut}.ptx"), &ptx[..cut]);
        let ran = run(loader([&image]));
        if cut == ptx.len() - 3 {
            // Cut inside `_end`'s body: only the JIT sees that.
            ran.reached_the_gpu();
        } else {
            ran.fails_with(&[&format!("cut-{cut}.ptx: ")]);
            assert!(!ran.stderr.contains("no GPU"), "{ran:#?}");
        }
    }
}

#[test]
fn constructor_symbols_with_bad_priorities() {
    let dir = scratch("bad-priority");
    for (symbol, problem) in [
        ("__init_array_object_f_x", "the priority suffix is not a decimal number"),
        ("__fini_array_object_f_65536", "the priority is above 65535"),
        ("__init_array_object_noprio", "expected `<name>_<priority>` after the prefix"),
        ("__init_array_object__7", "the function name is empty"),
    ] {
        let ptx = min_ptx()
            .replace(".visible .entry _begin", &format!(".visible .global .u64 {symbol};\n.visible .entry _begin"));
        let image = write(&dir, &format!("{symbol}.ptx"), ptx);
        run(loader([&image])).fails_with(&[&format!("bad constructor symbol `{symbol}`: {problem}")]);
    }
}

#[test]
fn ptx_with_a_syntax_error_is_only_found_by_the_jit() {
    // The loader does not parse instructions: the driver's JIT does, so without a GPU this ends at `no GPU`. On a
    // GPU machine the JIT's message names the error (checked by the GPU suite).
    let ptx = min_ptx().replacen("ret;", "rett %r1, ;", 1);
    let image = write(&scratch("syntax-error"), "syntax.ptx", ptx);
    let ran = run(loader([&image]));
    if ran.stderr.contains("no GPU") {
        ran.fails_with(&["gpu-loader: no GPU: "]);
    } else {
        ran.fails_with(&["syntax.ptx: the driver cannot load it"]);
    }
}

#[test]
fn a_valid_image_gets_past_every_static_check() {
    run(loader([fixture("startup-min.ptx")])).reached_the_gpu();
}

// --- launch dimensions ---

#[test]
fn zero_threads_or_blocks_are_named_by_axis() {
    let image = fixture("startup-min.ptx");
    for (flag, words) in [
        ("--threads", "threads in x is 0"),
        ("--threads-y", "threads in y is 0"),
        ("--threads-z", "threads in z is 0"),
        ("--blocks", "blocks in x is 0"),
        ("--blocks-y", "blocks in y is 0"),
        ("--blocks-z", "blocks in z is 0"),
    ] {
        let ran = run(loader([OsStr::new(flag), OsStr::new("0"), image.as_os_str()]));
        ran.fails_with(&["gpu-loader: bad launch parameters: ", words, "each count must be at least 1"]);
    }
}

#[test]
fn absurd_counts() {
    let image = fixture("startup-min.ptx");
    let max = u32::MAX.to_string();
    let all = |flags: [&str; 3]| -> Vec<OsString> {
        let mut args: Vec<OsString> = flags.iter().flat_map(|flag| [flag.into(), max.clone().into()]).collect();
        args.push(image.clone().into());
        args
    };
    run(loader(all(["--threads", "--threads-y", "--threads-z"])))
        .fails_with(&["bad launch parameters: 4294967295x4294967295x4294967295 threads per block is absurd"]);
    run(loader(all(["--blocks", "--blocks-y", "--blocks-z"])))
        .fails_with(&["bad launch parameters: ", "more than 2^64 threads"]);
    // u32::MAX threads in one axis only: within u32, so only a device's limits (1024 per block) refuse it.
    let ran = run(loader([OsStr::new("--threads"), OsStr::new(&max), image.as_os_str()]));
    if !ran.stderr.contains("no GPU") {
        ran.fails_with(&["4294967295 threads per block exceeds the device's limit"]);
    }
    ran.fails_with(&[]);
}

#[test]
fn counts_over_the_device_limits() {
    // Without a GPU there is no limit to compare with: `no GPU`. With one, the limit is named.
    let image = fixture("startup-min.ptx");
    for (args, limit) in [
        (["--threads", "2048"], "2048 threads per block exceeds the device's limit"),
        (["--threads-z", "128"], "128 threads in z exceeds the device's limit"),
        (["--blocks-y", "70000"], "70000 blocks in y exceeds the device's limit"),
        (["--device", "99"], "there is no GPU 99"),
    ] {
        let ran = run(loader([OsStr::new(args[0]), OsStr::new(args[1]), image.as_os_str()]));
        if ran.stderr.contains("no GPU:") {
            ran.fails_with(&["gpu-loader: no GPU: "]);
        } else {
            ran.fails_with(&[limit]);
        }
    }
}

#[test]
fn counts_that_are_not_numbers() {
    let image = fixture("startup-min.ptx");
    for (flag, value) in [
        ("--threads", "abc"),
        ("--blocks", "1.5"),
        ("--threads", "4294967296"),
        ("--blocks-z", "0x10"),
        ("--threads-y", ""),
        ("--device", "-3"),
    ] {
        let arg = format!("{flag}={value}");
        run(loader([OsStr::new(&arg), image.as_os_str()])).usage_error(&[&format!("'{value}'"), flag]);
    }
}

#[test]
fn negative_counts() {
    let image = fixture("startup-min.ptx");
    // `--threads=-1` is a value clap cannot parse; `--threads -1` looks like a flag to clap and is refused as one.
    run(loader([OsStr::new("--threads=-1"), image.as_os_str()])).usage_error(&["'-1'", "--threads"]);
    run(loader([OsStr::new("--blocks"), OsStr::new("-1"), image.as_os_str()])).usage_error(&["-1"]);
}

// --- flags ---

#[test]
fn an_unknown_flag() {
    run(loader(["--bogus-flag", "x.ptx"])).usage_error(&["unexpected argument '--bogus-flag'"]);
}

#[test]
fn no_image_at_all() {
    run(loader::<&str>([])).usage_error(&["the following required arguments were not provided", "<IMAGE>"]);
}

#[test]
fn rpc_port_counts_out_of_range() {
    let image = fixture("startup-min.ptx");
    for value in ["0", "4097", "abc", "-2"] {
        let arg = format!("--rpc-ports={value}");
        run(loader([OsStr::new(&arg), image.as_os_str()])).usage_error(&["--rpc-ports", &format!("'{value}'")]);
    }
    run(loader([OsStr::new("--rpc-ports=4096"), image.as_os_str()])).reached_the_gpu();
}

#[test]
fn bad_timeouts() {
    let image = fixture("startup-min.ptx");
    for (value, problem) in [
        ("0", "is not a positive number of seconds"),
        ("-1", "is not a positive number of seconds"),
        ("-0.5", "is not a positive number of seconds"),
        ("abc", "is not a number of seconds"),
        ("nan", "is not a positive number of seconds"),
        ("inf", "is not a positive number of seconds"),
        ("1e99", "is not a positive number of seconds"),
    ] {
        let arg = format!("--timeout={value}");
        run(loader([OsStr::new(&arg), image.as_os_str()])).usage_error(&["--timeout", &format!("`{value}` {problem}")]);
    }
    // As two words, `-1` looks like a flag.
    run(loader([OsStr::new("--timeout"), OsStr::new("-1"), image.as_os_str()])).usage_error(&["-1"]);
    run(loader([OsStr::new("--timeout"), OsStr::new("0"), image.as_os_str()])).usage_error(&["`0` is not a positive"]);
    // A good timeout is accepted.
    run(loader([OsStr::new("--timeout"), OsStr::new("2.5"), image.as_os_str()])).reached_the_gpu();
}

#[test]
fn bad_heap_sizes() {
    let image = fixture("startup-min.ptx");
    for (value, problem) in [
        ("abc", "is not a number of bytes (digits, then optionally K, M or G)"),
        ("", "is not a number of bytes"),
        ("-1", "is not a number of bytes"),
        ("+5", "is not a number of bytes"),
        ("1.5G", "is not a number of bytes"),
        ("2T", "is not a number of bytes"),
        ("G", "is not a number of bytes"),
        ("99999999999G", "is more bytes than 2^64"),
    ] {
        let arg = format!("--heap-size={value}");
        run(loader([OsStr::new(&arg), image.as_os_str()]))
            .usage_error(&["--heap-size", &format!("`{value}` {problem}")]);
    }
    // Sizes the loader takes: none at all, bytes, and the binary suffixes in either case.
    for value in ["0", "1048576", "64k", "512M", "1g"] {
        run(loader([OsStr::new("--heap-size"), OsStr::new(value), image.as_os_str()])).reached_the_gpu();
    }
}

// --- arguments and environment ---

#[test]
fn arguments_that_are_not_utf8_pass_through() {
    let image = fixture("startup-min.ptx");
    let args: Vec<OsString> = vec![
        image.into(),
        OsString::from_vec(b"\xff\xfe".to_vec()),
        OsString::from_vec(b"caf\xe9 latin-1".to_vec()),
        OsString::from_vec(b"--not-a-loader-flag=\xc0".to_vec()),
        "".into(),
        "-x".into(),
    ];
    run(loader(&args)).reached_the_gpu();
    // The same bytes in the environment.
    let mut command = loader([fixture("startup-min.ptx")]);
    command.env(OsStr::from_bytes(b"NOT_UTF8_\xff"), OsStr::from_bytes(b"\xfe\xfd"));
    run(command).reached_the_gpu();
}

#[test]
fn a_huge_environment_gets_through_quickly() {
    // Linux caps a process's arguments and environment at a quarter of the stack limit (2 MiB by default) and each
    // string at 128 KiB: about 1.5 MiB here, with one string at the cap. `huge_environment_packs` below packs 50 MB.
    let mut command = loader([fixture("startup-min.ptx")]);
    command.env_clear();
    for i in 0..12_000 {
        command.env(format!("GPU_LOADER_TEST_VAR_{i}"), "v".repeat(100));
    }
    command.env("GPU_LOADER_TEST_LONG", "x".repeat(128 * 1024 - 64));
    let ran = run(command);
    ran.reached_the_gpu();
    assert!(ran.elapsed < Duration::from_secs(10), "took {:?}", ran.elapsed);
}

#[test]
fn huge_environment_packs() {
    // 50 MB of environment through the loader's whole path before the GPU, in process (exec cannot carry it).
    let env: Vec<OsString> = (0..500_000).map(|i| format!("VAR_{i:06}={}", "y".repeat(90)).into()).collect();
    let total: usize = env.iter().map(|entry| entry.len()).sum();
    assert!(total >= 50_000_000, "{total}");
    let started = Instant::now();
    let mut options = gpu_loader::RunOptions::new(fixture("startup-min.ptx"));
    options.env = env;
    options.args = vec![OsString::from_vec(b"\xff".to_vec())];
    match gpu_loader::run(&options) {
        Err(gpu_loader::LoaderError::NoGpu(_) | gpu_loader::LoaderError::NoExitReported) => {}
        other => panic!("expected no GPU (or, with one, no exit reported): {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
}
