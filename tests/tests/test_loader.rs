//! `gpu-test-loader` is `gpu-loader`'s command line with the test operations registered: the same options, the same
//! errors.

use std::process::Command;

const TEST_LOADER: &str = env!("CARGO_BIN_EXE_gpu-test-loader");

#[test]
fn it_takes_gpu_loaders_options_and_gives_its_errors() {
    let help = Command::new(TEST_LOADER).arg("--help").output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--rpc-ports") && help.contains("--timeout"), "{help}");

    let missing = Command::new(TEST_LOADER).args(["--threads", "4", "no-such-image.ptx"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.starts_with("gpu-loader: cannot read no-such-image.ptx: "), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
