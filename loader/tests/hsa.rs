//! `gpu-loader` on an AMD code object on a machine without an AMD GPU: it must say, in one line, that the ROCm
//! runtime is missing or that it found no AMD GPU agent, and exit non-zero, without panicking.
//!
//! The code object is `tests/fixtures/startup-abi.gfx90a.elf` (source and build command beside it). Which message is
//! right depends on whether `libhsa-runtime64.so.1` is installed here; `GPU_LOADER_TEST_HSA_RUNTIME=installed` (or
//! `missing`) makes the test insist on one, so that CI, which installs Debian's `libhsa-runtime64-1`, checks the path
//! through `hsa_init` rather than the missing-library one.

use std::path::Path;
use std::process::Command;

use gpu_loader::status::LOADER_ERROR_EXIT_CODE;
use gpu_loader::{LoaderError, RunOptions};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/startup-abi.gfx90a.elf");
const NOT_INSTALLED: &str = "no GPU: the ROCm HSA runtime (libhsa-runtime64.so.1) is not installed";
const NO_AGENT: &str = "no GPU: the HSA runtime found no AMD GPU agent";

fn runtime_installed() -> bool {
    // SAFETY: opening the ROCm runtime runs only its own initialisers; the handle is dropped at once.
    let installed = unsafe { libloading::Library::new("libhsa-runtime64.so.1") }.is_ok();
    match std::env::var("GPU_LOADER_TEST_HSA_RUNTIME").as_deref() {
        Ok("installed") => {
            assert!(installed, "GPU_LOADER_TEST_HSA_RUNTIME=installed, but libhsa-runtime64.so.1 does not open")
        }
        Ok("missing") => assert!(!installed, "GPU_LOADER_TEST_HSA_RUNTIME=missing, but libhsa-runtime64.so.1 opens"),
        _ => {}
    }
    installed
}

/// The message expected here, or `None` on a machine with the AMD GPU driver, where the tests do not apply.
fn expected_message() -> Option<&'static str> {
    if Path::new("/dev/kfd").exists() {
        eprintln!("skipped: this machine has an AMD GPU driver (/dev/kfd)");
        return None;
    }
    Some(if runtime_installed() { NO_AGENT } else { NOT_INSTALLED })
}

#[test]
fn the_binary_reports_the_missing_gpu_in_one_line() {
    let Some(expected) = expected_message() else { return };
    let output = Command::new(env!("CARGO_BIN_EXE_gpu-loader")).arg(FIXTURE).arg("an-argument").output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(LOADER_ERROR_EXIT_CODE), "{stderr}");
    assert!(output.stdout.is_empty(), "{:?}", String::from_utf8_lossy(&output.stdout));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with(&format!("gpu-loader: {expected}")), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn the_library_returns_no_gpu() {
    let Some(expected) = expected_message() else { return };
    let error = gpu_loader::run(&RunOptions::new(FIXTURE)).unwrap_err();
    assert!(matches!(error, LoaderError::NoGpu(_)), "{error:?}");
    assert!(error.to_string().starts_with(expected), "{error}");
    // Twice in one process: the runtime is opened once and `hsa_init` fails the same way again.
    let again = gpu_loader::run(&RunOptions::new(FIXTURE)).unwrap_err();
    assert_eq!(again.to_string(), error.to_string());
}
