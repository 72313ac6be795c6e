//! The suite commands' tests: size arguments, the benchmark's results in the performance page, and the bundle's
//! script run against stand-in tools.

use super::*;
use crate::bundle::{RUN_TESTS, make_executable, parse_size};

#[test]
fn sizes_take_binary_units() {
    assert_eq!(parse_size("4096"), Ok(4096));
    assert_eq!(parse_size("512K"), Ok(512 << 10));
    assert_eq!(parse_size("64M"), Ok(64 << 20));
    assert_eq!(parse_size("64MiB"), Ok(64 << 20));
    assert_eq!(parse_size("1GiB"), Ok(1 << 30));
    assert_eq!(parse_size("0"), Ok(0));
}

#[test]
fn bad_sizes_are_refused_with_a_reason() {
    assert!(parse_size("").unwrap_err().contains("number"));
    assert!(parse_size("MiB").unwrap_err().contains("number"));
    assert!(parse_size("64 MiB").unwrap_err().contains("not a size"));
    assert!(parse_size("64mb").unwrap_err().contains("not a size"));
    assert!(parse_size("-1").unwrap_err().contains("not a size"));
    assert!(parse_size("20000000000G").unwrap_err().contains("2^64"));
    assert!(parse_size("99999999999999999999").unwrap_err().contains("number"));
}

/// A bundle with stand-ins for gpu-suite (it records its arguments) and for CUDA's tools (each writes its command
/// line into its output; ptxas fails on `bad.ptx`), and `run-tests` run in it.
fn run_bundle_script(test: &str, programs: &[&str]) -> (std::process::Output, PathBuf) {
    let dir = std::env::temp_dir().join(format!("xtask-run-tests-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (bin, images, tools) = (dir.join("bin"), dir.join("images/nvptx"), dir.join("tools"));
    for folder in [&bin, &images, &tools] {
        std::fs::create_dir_all(folder).unwrap();
    }
    let script = |path: PathBuf, text: &str| {
        std::fs::write(&path, format!("#!/bin/sh\n{text}\n")).unwrap();
        make_executable(&path).unwrap();
    };
    script(bin.join("gpu-suite"), r#"echo "$@" >> "$(dirname "$0")/../suite-args""#);
    script(bin.join("gpu-loader"), "exit 1");
    script(dir.join("run-tests"), RUN_TESTS.trim_start_matches("#!/bin/sh\n"));
    script(tools.join("nvidia-smi"), "echo 9.0");
    let output_of = r#"while [ "$1" != -o ]; do shift; done; out=$2"#;
    script(
        tools.join("ptxas"),
        &format!(
            r#"all="$*"; case "$all" in *bad.ptx*) echo "bad.ptx: syntax error" >&2; exit 2;; esac; {output_of}; echo "ptxas $all" > "$out""#
        ),
    );
    script(tools.join("nvlink"), &format!(r#"all="$*"; {output_of}; echo "nvlink $all" > "$out""#));
    for program in programs {
        std::fs::write(images.join(format!("{program}.ptx")), "").unwrap();
    }
    std::fs::write(images.join("stale.cubin"), "").unwrap();
    let path = format!("{}:/usr/bin:/bin", tools.display());
    let output = std::process::Command::new(dir.join("run-tests"))
        .args(["--exact", "hello"])
        .env("PATH", path)
        .output()
        .unwrap();
    (output, dir)
}

#[test]
fn run_tests_makes_both_kinds_of_cubin_for_the_machines_gpu() {
    let (output, dir) = run_bundle_script("cubins", &["hello", "init-fini"]);
    assert!(output.status.success(), "{output:?}");
    let images = dir.join("images/nvptx");
    let read = |name: &str| std::fs::read_to_string(images.join(name)).unwrap_or_default();
    for program in ["hello", "init-fini"] {
        let ptx = images.join(format!("{program}.ptx"));
        let cubin = images.join(format!("{program}.cubin"));
        let expected = format!("ptxas -c -arch=sm_90 --maxrregcount 64 {} -o {}\n", ptx.display(), cubin.display());
        assert_eq!(read(&format!("{program}.cubin")), expected);
        let linked = images.join(format!("{program}.linked.cubin"));
        assert_eq!(
            read(&format!("{program}.linked.cubin")),
            format!("nvlink -arch=sm_90 {} -o {}\n", cubin.display(), linked.display())
        );
    }
    assert!(!images.join("stale.cubin").exists(), "cubins from elsewhere are made again");
    // (On a machine with an AMD GPU a second line runs the AMD images.)
    let suite_args = std::fs::read_to_string(dir.join("suite-args")).unwrap();
    let expected =
        format!("--loader {0}/bin/gpu-loader --images {0}/images/nvptx --target nvptx --exact hello", dir.display());
    assert_eq!(suite_args.lines().next(), Some(expected.as_str()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn run_tests_fails_when_a_cubin_cannot_be_made_and_still_runs_the_suite() {
    let (output, dir) = run_bundle_script("bad-cubin", &["hello", "bad"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ptxas failed on ") && stderr.contains("bad.ptx: syntax error"), "{stderr}");
    assert!(dir.join("images/nvptx/hello.linked.cubin").is_file());
    assert!(dir.join("suite-args").is_file(), "the suite ran");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_latest_results_replace_the_sections_body_and_nothing_else() {
    let page = "# Performance\n\n## Method\n\nText.\n\n## Latest results\n\nOld run.\n\n| a |\n\n### Part of the old run\n\n## Where\n\nMore.\n";
    assert_eq!(
        with_latest_results(page, "New run.\n\n| b |\n").unwrap(),
        "# Performance\n\n## Method\n\nText.\n\n## Latest results\n\nNew run.\n\n| b |\n\n## Where\n\nMore.\n"
    );
    assert_eq!(with_latest_results("## Latest results\n\nOld.\n", "New.\n").unwrap(), "## Latest results\n\nNew.\n");
    assert!(with_latest_results("# Performance\n", "New.\n").is_err());
}
