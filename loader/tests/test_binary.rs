//! `gpu-loader` on a test binary: libtest's command line after the image, the list from the image alone, the
//! filters, and the bad inputs of the test runner, each through the real binary under a watchdog. Without a GPU a run
//! of tests ends at `no GPU` (after a worker process tried to load the image); on a GPU machine the fixture's tests
//! run, and, as its kernels only return, fail without reporting an exit code.
//!
//! Fixture: `tests-min.ptx` (hand-written: the startup kernels, the weak default `main`, three tests).

mod common;

use std::ffi::OsStr;

use common::{Ran, fixture, loader, run, scratch, write};

fn tests_min() -> String {
    std::fs::read_to_string(fixture("tests-min.ptx")).expect("the test binary fixture")
}

/// `gpu-loader tests-min.ptx ARGS...`.
fn test_binary(args: &[&str]) -> Ran {
    let image = fixture("tests-min.ptx");
    run(loader(std::iter::once(image.as_os_str()).chain(args.iter().map(OsStr::new))))
}

#[test]
fn the_list_comes_from_the_image_alone() {
    for args in [&["--list"][..], &["--list", "--format", "terse"]] {
        let ran = test_binary(args);
        assert_eq!((ran.code, ran.stderr.as_str()), (Some(0), ""), "{ran:#?}");
        assert_eq!(ran.stdout, "adds: test\nnot_ready: test\nwarp::sums: test\n");
    }
    // nextest asks for the ignored tests apart; a filter applies to the list as to a run.
    assert_eq!(test_binary(&["--list", "--format", "terse", "--ignored"]).stdout, "not_ready: test\n");
    assert_eq!(test_binary(&["--list", "warp"]).stdout, "warp::sums: test\n");
    assert_eq!(test_binary(&["--list", "--exact", "warp"]).stdout, "");
    assert_eq!(test_binary(&["--list", "--skip", "s"]).stdout, "not_ready: test\n");
    // Several filters, as libtest takes them: a test that matches any of them.
    assert_eq!(test_binary(&["--list", "warp", "add"]).stdout, "adds: test\nwarp::sums: test\n");
    assert_eq!(
        test_binary(&["--list", "--exact", "warp", "adds", "not_ready"]).stdout,
        "adds: test\nnot_ready: test\n"
    );
    assert_eq!(test_binary(&["--list", "a", "s", "--skip", "sums"]).stdout, "adds: test\nnot_ready: test\n");
}

/// libtest's list in JSON, from the image alone: where each test is comes from the test table.
#[test]
fn the_json_list_is_libtests() {
    let line = |name: &str, ignore: bool, [line, start, end]: [u32; 3]| {
        format!(
            "{{ \"type\": \"test\", \"event\": \"discovered\", \"name\": \"{name}\", \"ignore\": {ignore}, \
             \"ignore_message\": \"\", \"source_path\": \"tests/min.rs\", \"start_line\": {line}, \"start_col\": \
             {start}, \"end_line\": {line}, \"end_col\": {end} }}\n"
        )
    };
    let list = |tests: &[String], ignored: usize| {
        format!(
            "{{ \"type\": \"suite\", \"event\": \"discovery\" }}\n{}{{ \"type\": \"suite\", \"event\": \
             \"completed\", \"tests\": {count}, \"benchmarks\": 0, \"total\": {count}, \"ignored\": {ignored} }}\n",
            tests.concat(),
            count = tests.len()
        )
    };
    let (adds, not_ready, sums) = ([4, 4, 8], [8, 4, 13], [13, 8, 12]);
    // With `-Z unstable-options`, as libtest asks for (IDEs give it), or without, as libtest-mimic takes it.
    for args in [&["-Z", "unstable-options", "--list", "--format", "json"][..], &["--format=json", "--list"]] {
        let ran = test_binary(args);
        assert_eq!((ran.code, ran.stderr.as_str()), (Some(0), ""), "{ran:#?}");
        let all = [line("adds", false, adds), line("not_ready", true, not_ready), line("warp::sums", false, sums)];
        assert_eq!(ran.stdout, list(&all, 1));
    }
    // The selection is libtest's: with `--ignored` only the ignored tests, none of them reported ignored.
    let ran = test_binary(&["--list", "--format", "json", "--ignored"]);
    assert_eq!(ran.stdout, list(&[line("not_ready", false, not_ready)], 0));
    let ran = test_binary(&["--list", "--format", "json", "--include-ignored", "a", "--skip", "warp"]);
    assert_eq!(ran.stdout, list(&[line("adds", false, adds), line("not_ready", false, not_ready)], 0));
    let ran = test_binary(&["--list", "--format", "json", "nothing"]);
    assert_eq!(ran.stdout, list(&[], 0));
}

/// `gpu-loader IMAGE --list | head -1`: the list goes to a pipe nobody reads, and the loader ends by SIGPIPE, as other
/// commands do, never with a panic.
#[test]
fn a_list_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut command = loader([fixture("tests-min.ptx")]);
    command.arg("--list").stdout(writer).stderr(std::process::Stdio::piped());
    let output = command.output().expect("gpu-loader runs");
    assert_eq!(output.status.signal(), Some(13), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

#[test]
fn a_filter_that_matches_nothing_is_reported_and_not_a_failure() {
    for args in [&["nothing"][..], &["--exact", "add"], &["--skip", "a", "--skip", "s"], &["nothing", "--exact", "add"]]
    {
        let ran = test_binary(args);
        assert_eq!(ran.code, Some(0), "{ran:#?}");
        assert!(ran.stdout.contains("running 0 tests"), "{ran:#?}");
        assert!(ran.stdout.contains("test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out"));
        assert!(ran.stderr.contains("gpu-loader: no test of ") && ran.stderr.contains("matches the filters (3 tests"));
    }
}

#[test]
fn only_ignored_tests_selected_need_no_gpu() {
    let ran = test_binary(&["not_ready"]);
    assert_eq!((ran.code, ran.stderr.as_str()), (Some(0), ""), "{ran:#?}");
    assert!(ran.stdout.contains("test not_ready ... ignored"), "{ran:#?}");
    assert!(ran.stdout.contains("0 passed; 0 failed; 1 ignored; 0 measured; 2 filtered out"), "{ran:#?}");
    // Tests that several filters leave out are counted as filtered out, as one filter's are.
    let ran = test_binary(&["not_ready", "nothing"]);
    assert_eq!((ran.code, ran.stderr.as_str()), (Some(0), ""), "{ran:#?}");
    assert!(ran.stdout.contains("0 passed; 0 failed; 1 ignored; 0 measured; 2 filtered out"), "{ran:#?}");
}

#[test]
fn libtests_options_are_accepted() {
    for args in [
        &["--nocapture", "none"][..],
        &["--no-capture", "none"],
        &["--show-output", "none"],
        &["--test-threads", "4", "none"],
        &["--test-threads=1", "none"],
        &["-q", "none"],
        &["--format", "json", "none"],
        &["--list", "--format", "terse", "--quiet"],
        &["--quiet", "--format=terse", "none"],
        &["--include-ignored", "none"],
        &["-Z", "unstable-options", "none"],
    ] {
        let ran = test_binary(args);
        assert_eq!(ran.code, Some(0), "{args:?}: {ran:#?}");
    }
}

#[test]
fn an_unknown_option_is_a_usage_error() {
    test_binary(&["--bogus"]).usage_error(&["unexpected argument '--bogus'"]);
    test_binary(&["--format", "xml"]).usage_error(&["'xml'"]);
}

#[test]
fn zero_test_threads_are_refused_as_libtest_refuses_them() {
    for args in [&["--test-threads", "0"][..], &["--list", "--test-threads=0"]] {
        let ran = test_binary(args);
        ran.usage_error(&[]);
        assert_eq!(
            (ran.stdout.as_str(), ran.stderr.as_str()),
            ("", "error: argument for --test-threads must not be 0\n")
        );
    }
}

#[test]
fn running_tests_reaches_a_gpu_worker() {
    let ran = test_binary(&["adds"]);
    if ran.stderr.contains("no GPU") {
        // The worker process failed to open a GPU: one line, the loader's error.
        ran.fails_with(&["gpu-loader: no GPU: "]);
        assert_eq!(ran.stdout, "", "nothing ran: {ran:#?}");
    } else {
        assert_eq!(ran.code, Some(101), "{ran:#?}");
        assert!(ran.stdout.contains("test adds ... FAILED") && ran.stdout.contains("without reporting an exit code"));
    }
}

#[test]
fn a_corrupt_test_table_is_refused_naming_the_global() {
    let dir = scratch("tests-corrupt-table");
    let cases = [
        (
            "{2, 0, 4, 0",
            "{9, 0, 4, 0",
            "`__gpu_test_meta_adds_3_1`: encoding version 9, but this loader reads version 2",
        ),
        ("[68] = {2, 0, 4", "[68] = {2, 8, 4", "`__gpu_test_meta_adds_3_1`: unknown flags 0x08"),
        ("__gpu_test_entry_sums_9_5 =", "other =", "`__gpu_test_meta_sums_9_5` has no entry global"),
        (
            "_meta_not_ready_5_1[73]",
            "_meta_not_ready_5_1[74]",
            "global `__gpu_test_meta_not_ready_5_1` is 74 bytes, but its initializer has 73",
        ),
        (
            "{2, 2, 10, 0, 4, 0, 12, 0, 32",
            "{2, 2, 10, 0, 4, 0, 12, 0, 0",
            "`__gpu_test_meta_sums_9_5`: threads [0, 1, 1] mix zero and non-zero",
        ),
        (
            "98, 111, 111, 109, 116",
            "98, 111, 111, 255, 116",
            "`__gpu_test_meta_sums_9_5`: its expected panic text is not UTF-8",
        ),
        ("46, 114, 115};", "46, 114, 255};", "`__gpu_test_meta_adds_3_1`: its source path is not UTF-8"),
        // `adds` as `a\ndd`: listed, it would read as two lines.
        (
            "97, 100, 100, 115, 116",
            "97, 10, 100, 100, 116",
            "`__gpu_test_meta_adds_3_1`: its name holds '\\n' at byte 1",
        ),
    ];
    for (i, (from, to, problem)) in cases.into_iter().enumerate() {
        let text = tests_min();
        assert!(text.contains(from), "{from}");
        let image = write(&dir, &format!("corrupt-{i}.ptx"), text.replacen(from, to, 1));
        // Listing needs the table too: a corrupt one is refused before anything else.
        for args in [&[][..], &["--list"]] {
            let mut command = loader([image.as_os_str()]);
            command.args(args);
            run(command).fails_with(&[&format!("corrupt-{i}.ptx: has a corrupt test table: {problem}")]);
        }
    }
}

#[test]
fn an_image_with_neither_main_nor_tests_is_a_test_binary_without_tests() {
    // What a test build of a crate without tests is: no `main` of its own, and no test table.
    let text = tests_min();
    let without_tests: String =
        text.lines().filter(|line| !line.contains("__gpu_test_")).map(|l| l.to_owned() + "\n").collect();
    let image = write(&scratch("tests-none"), "no-tests.ptx", without_tests);
    for args in [&[][..], &["--list", "--format", "terse"], &["adds"]] {
        let mut command = loader([&image]);
        command.args(args);
        let ran = run(command);
        assert_eq!((ran.code, ran.stderr.as_str()), (Some(0), ""), "{args:?}: {ran:#?}");
        if args.is_empty() {
            assert!(ran.stdout.contains("running 0 tests"), "{ran:#?}");
            assert!(ran.stdout.contains("test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out"));
        }
    }
}
