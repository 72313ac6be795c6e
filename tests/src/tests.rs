//! The suite's tests: `expect.toml` parses and each of its checks can fail, and a case runs as its expectations
//! say.

use super::*;

fn outcome(code: i32, stdout: &str, stderr: &str) -> Outcome {
    Outcome { exit_code: Some(code), stdout: stdout.into(), stderr: stderr.into(), elapsed: Duration::from_millis(5) }
}

#[test]
fn parses_the_full_format() {
    let expectation = Expectation::parse(
        r#"
        threads = [4, 4, 4]
        blocks = 2
        args = ["1", "2"]
        env = { FRANCE = "Paris" }
        timeout = 5
        exit-code = 3
        stdin = "line\n"
        stdout-contains = ["x"]
        stderr-matches = ['^a\d$']
        targets = ["nvptx"]
        needs-gpu = false
        "#,
    )
    .unwrap();
    assert!(!expectation.needs_gpu);
    assert!(Expectation::parse("").unwrap().needs_gpu, "a case needs a GPU unless it says otherwise");
    assert_eq!(expectation.threads.xyz(), [4, 4, 4]);
    assert_eq!(expectation.blocks.xyz(), [2, 1, 1]);
    assert_eq!(expectation.stdin.as_deref(), Some("line\n"));
    assert!(expectation.runs_on("nvptx") && !expectation.runs_on("amdgpu"));
    let args = expectation.loader_arguments(Path::new("p.ptx"));
    let args: Vec<_> = args.iter().map(|a| a.to_str().unwrap()).collect();
    assert_eq!(args[..2], ["--threads-x", "4"]);
    assert_eq!(args[args.len() - 5..], ["--timeout", "5", "p.ptx", "1", "2"]);
}

/// A program that uses the test operations runs with gpu-test-loader, found next to gpu-loader unless given; the
/// others with gpu-loader.
#[test]
fn the_test_operations_pick_the_test_loader() {
    let testing = Expectation::parse("test-operations = true").unwrap();
    let plain = Expectation::parse("exit-code = 0").unwrap();
    assert!(testing.test_operations && !plain.test_operations);
    let loaders = Loaders::new(PathBuf::from("bin/gpu-loader"), None);
    assert_eq!(loaders.for_case(&testing), Path::new("bin/gpu-test-loader"));
    assert_eq!(loaders.for_case(&plain), Path::new("bin/gpu-loader"));
    let loaders = Loaders::new(PathBuf::from("bin/gpu-loader"), Some(PathBuf::from("elsewhere/mine")));
    assert_eq!(loaders.for_case(&testing), Path::new("elsewhere/mine"));
}

#[test]
fn rejects_unknown_keys_and_bad_patterns() {
    assert!(Expectation::parse("exit_code = 1").is_err());
    assert!(Expectation::parse("stdout-matches = ['(']").is_err());
}

#[test]
fn each_check_can_fail() {
    let expectation = Expectation::parse(
        "exit-code = 0\nstdout = \"a\\nb\\n\"\nstderr-contains = [\"warn\"]\nstdout-lines = 2\nstdout-matches = ['^a']",
    )
    .unwrap();
    assert!(expectation.check(&outcome(0, "a\nb\n", "a warning")).is_empty());
    let problems = expectation.check(&outcome(1, "b\na\nc\n", ""));
    assert_eq!(problems.len(), 5, "{problems:#?}");
}

#[test]
fn unordered_output_compares_as_a_multiset() {
    let expectation = Expectation::parse("stdout-unordered = \"x\\ny\\ny\\n\"").unwrap();
    assert!(expectation.check(&outcome(0, "y\nx\ny\n", "")).is_empty());
    assert_eq!(expectation.check(&outcome(0, "y\nx\nx\n", "")).len(), 1);
    assert_eq!(expectation.check(&outcome(0, "y\nx\n", "")).len(), 1);
}

#[test]
fn each_kind_of_image_is_a_case_of_its_own() {
    let dir = std::env::temp_dir().join(format!("gpu-suite-discover-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["hello.ptx", "hello.cubin", "hello.linked.cubin", "idle.ptx", "only-amd.elf", "stray.cubin"] {
        std::fs::write(dir.join(file), b"").unwrap();
    }
    std::fs::write(dir.join("hello.expect.toml"), "exit-code = 0").unwrap();
    std::fs::write(dir.join("hello.twice.expect.toml"), "exit-code = 1").unwrap();
    std::fs::write(dir.join("idle.expect.toml"), "").unwrap();
    std::fs::write(dir.join("only-amd.expect.toml"), "targets = [\"amdgpu\"]").unwrap();
    let cases = discover(&dir, "nvptx").unwrap();
    let names: Vec<_> = cases.iter().map(|case| case.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "hello",
            "hello.twice",
            "hello.twice[cubin]",
            "hello.twice[linked-cubin]",
            "hello[cubin]",
            "hello[linked-cubin]",
            "idle"
        ]
    );
    let image = |name: &str| cases.iter().find(|case| case.name == name).unwrap().image.clone();
    assert_eq!(image("hello.twice[linked-cubin]"), dir.join("hello.linked.cubin"));
    assert_eq!(image("hello[cubin]"), dir.join("hello.cubin"));
    assert_eq!(image("hello"), dir.join("hello.ptx"));
    assert_eq!(cases.iter().find(|case| case.name == "hello.twice").unwrap().expectation.exit_code, 1);
    std::fs::write(dir.join("lost.expect.toml"), "").unwrap();
    assert!(discover(&dir, "nvptx").unwrap_err().to_string().contains("lost.expect.toml has no image"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A case runs in an empty working directory of its own, removed afterwards, and reads its `stdin`.
#[test]
fn a_case_runs_in_a_fresh_folder_with_its_stdin() {
    use std::os::unix::fs::PermissionsExt;
    // In the build's folder, which the test names relative to its working directory (the package's): the paths
    // of the image and the loader must not depend on that directory.
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/gpu-suite-run-case-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // A stand-in for the loader: the image it was given, its folder and what is in it, then its stdin.
    let loader = dir.join("loader.sh");
    std::fs::write(&loader, "#!/bin/sh\nfor last; do :; done\necho \"$last\"\npwd\nls -A\ntouch left-behind\ncat\n")
        .unwrap();
    std::fs::set_permissions(&loader, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("prog.ptx"), "").unwrap();
    let relative = Path::new(&format!("../target/gpu-suite-run-case-{}", std::process::id())).to_owned();
    assert_eq!(std::env::current_dir().unwrap(), Path::new(env!("CARGO_MANIFEST_DIR")));
    let case = |stdin: Option<&str>| Case {
        name: "prog.variant[cubin]".into(),
        target: "nvptx".into(),
        image: relative.join("prog.ptx"),
        kind: "[cubin]",
        expectation: Expectation { stdin: stdin.map(str::to_owned), ..Expectation::parse("").unwrap() },
    };
    let outcome = run_case(&Loaders::new(relative.join("loader.sh"), None), &case(Some("typed\ninput\n"))).unwrap();
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(Path::new(lines[0]).canonicalize().unwrap(), dir.join("prog.ptx").canonicalize().unwrap());
    assert!(Path::new(lines[0]).is_absolute(), "the image's path is absolute");
    assert!(lines[1].contains("gpu-suite-") && lines[1].ends_with("prog_variant_cubin_"), "{}", lines[1]);
    assert_eq!(lines[2..], ["typed", "input"], "an empty folder, then stdin");
    assert!(!Path::new(lines[1]).exists(), "the folder is removed");
    let outcome = run_case(&Loaders::new(loader, None), &case(None)).unwrap();
    assert_eq!(outcome.stdout.lines().count(), 2, "no stdin: empty");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_program_in_the_repository_has_valid_expectations() {
    let mut count = 0;
    for folder in ["programs", "programs-c", "programs-cpp"] {
        let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
        for entry in std::fs::read_dir(programs).unwrap() {
            let dir = entry.unwrap().path();
            if !dir.is_dir() {
                continue;
            }
            for file in std::fs::read_dir(&dir).unwrap() {
                let path = file.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if name.starts_with("expect") && name.ends_with(".toml") {
                    Expectation::load(&path).unwrap();
                    count += 1;
                }
            }
        }
    }
    assert!(count >= 25, "only {count} expectation files");
}

/// A wrapped loader (compute-sanitizer's place) runs in a process group of its own: at the case's limit every process
/// in it is killed, those the wrapper started in the background included, and the case fails saying so.
#[test]
fn the_limit_kills_a_wrapped_case_whole() {
    let dir = std::env::temp_dir().join(format!("gpu-suite-limit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("prog.ptx"), "").unwrap();
    let pid_file = dir.join("pid");
    // The wrapper starts a process of its own and waits, as compute-sanitizer waits for the loader it started.
    let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
    let wrapper = Wrapper { command: ["sh", "-c", &script, "wrapper"].map(Into::into).to_vec() };
    let case = Case {
        name: "prog".into(),
        target: "nvptx".into(),
        image: dir.join("prog.ptx"),
        kind: "",
        expectation: Expectation::parse("").unwrap(),
    };
    let started = Instant::now();
    let error = run_case_with(&Loaders::new("true".into(), None), &case, &wrapper, Duration::from_millis(500))
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("sh did not finish within 500ms and was killed"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_owned();
    // Killed: gone, or a zombie that nobody reaped yet (its parent, the wrapper, died with it). A SIGKILL takes effect
    // a moment after it is sent, so the process gets a few seconds to be seen gone.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
    };
    let killed_at = Instant::now();
    while alive() && killed_at.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(), "the wrapper's own process {pid} outlived the limit");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every expectation file of the suite's programs parses and its patterns compile, on the host: a bad one would
/// otherwise stop the whole GPU suite on the GPU machine.
#[test]
fn every_programs_expectations_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for folder in ["programs", "programs-c", "programs-cpp", "programs-std"] {
        for program in std::fs::read_dir(root.join(folder)).unwrap() {
            let program = program.unwrap().path();
            let Ok(entries) = std::fs::read_dir(&program) else { continue };
            for entry in entries {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if name.starts_with("expect") && name.ends_with(".toml") {
                    Expectation::load(&path).unwrap_or_else(|error| panic!("{error:#}"));
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} expectation files found under {}", root.display());
}
