//! The sanitizer runner's tests: compute-sanitizer's reports are read back, and a case passes only with the
//! report it allows.

use super::*;
use crate::Dims;

/// memcheck on `fault-address`, as compute-sanitizer 2025.3 wrote it (host frames shortened).
const MEMCHECK_FAULT: &str = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at _start+0x7d0
=========     by thread (0,0,0) in block (0,0,0)
=========     Access to 0x10 is out of bounds
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cuGraphLaunch [0x3a269f] in libcuda.so.1
========= 
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to \"unspecified launch failure\" on CUDA API call to cuStreamQuery.
=========     Saved host backtrace up to driver entry point at error
========= 
========= Target application returned an error
========= ERROR SUMMARY: 2 errors
";

/// racecheck on `files` before its lane groups shared their lock through atomics only (two records of many).
const RACECHECK_HAZARDS: &str = "\
========= COMPUTE-SANITIZER
========= Warning: (Warp Level Programming) Potential RAW hazard detected at __shared__ 0x418 in block (0,0,0) :
=========     Write Thread (0,0,0) at send_chunk+0x9d0
=========     Read Thread (1,0,0) at send_chunk+0x9bf0
=========     Current Value : 1
========= 
========= Error: Potential WAW hazard detected at __shared__ 0x410 in block (0,0,0) :
=========     Write Thread (0,0,0) at request_with_paths+0xf050
=========     Write Thread (1,0,0) at request_with_paths+0xf050
=========     Current Value : 10, Incoming Value : 14
========= 
========= RACECHECK SUMMARY: 100 hazards displayed (6 errors, 553 warnings)
";

const CLEAN: &str = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
const RACECHECK_CLEAN: &str =
    "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n";

fn outcome(code: i32, stdout: &str, stderr: &str) -> Outcome {
    Outcome { exit_code: Some(code), stdout: stdout.into(), stderr: stderr.into(), elapsed: Duration::from_secs(90) }
}

#[test]
fn reports_give_their_records_and_counts() {
    let report = Report::parse(MEMCHECK_FAULT).unwrap();
    assert_eq!(report.errors, 2);
    assert_eq!(report.records.len(), 2);
    assert!(report.records[0].starts_with("Invalid __global__ write of size 4 bytes"));
    assert!(report.records[1].starts_with("Program hit CUDA_ERROR_LAUNCH_FAILED"));
    // Racecheck's warnings count: warp-level hazards are warnings.
    let report = Report::parse(RACECHECK_HAZARDS).unwrap();
    assert_eq!((report.errors, report.records.len()), (559, 2));
    assert_eq!(Report::parse(CLEAN).unwrap(), Report { records: vec![], errors: 0 });
    assert_eq!(Report::parse(RACECHECK_CLEAN).unwrap().errors, 0);
}

#[test]
fn a_report_without_its_summary_is_an_error() {
    let cut = "========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n";
    assert!(Report::parse(cut).unwrap_err().to_string().contains("no summary"));
    assert!(Report::parse("").is_err());
}

#[test]
fn a_clean_run_passes_and_any_report_fails_it() {
    let expectation = Expectation::parse("exit-code = 0\nstdout = \"hi\\n\"\nmax-seconds = 5").unwrap();
    // The case's own hang guard does not apply under a tool: the run took 90 s.
    assert_eq!(judge(Tool::Memcheck, &expectation, &outcome(0, "hi\n", ""), CLEAN), Vec::<String>::new());
    assert_eq!(judge(Tool::Racecheck, &expectation, &outcome(0, "hi\n", ""), RACECHECK_CLEAN), Vec::<String>::new());
    let problems = judge(Tool::Racecheck, &expectation, &outcome(0, "hi\n", ""), RACECHECK_HAZARDS);
    assert!(problems.len() == 1 && problems[0].starts_with("racecheck reported 559 error(s)"), "{problems:?}");
    // The program's own expectations still hold.
    let problems = judge(Tool::Memcheck, &expectation, &outcome(1, "hi\n", ""), CLEAN);
    assert_eq!(problems, ["exit code Some(1), expected 0"]);
    // A fault where none is expected fails, under memcheck too.
    assert_eq!(judge(Tool::Memcheck, &expectation, &outcome(0, "hi\n", ""), MEMCHECK_FAULT).len(), 1);
}

#[test]
fn a_case_that_faults_on_purpose_needs_its_fault_and_nothing_else_under_memcheck() {
    let expectation = Expectation::parse(
        r#"
        exit-code = 139
        stderr-matches = ['CUDA_ERROR_ILLEGAL_ADDRESS']
        [sanitize]
        faults = true
        stderr-matches = ['^gpu-loader: device fault in kernel `_start`: CUDA_ERROR_(ILLEGAL_ADDRESS|LAUNCH_FAILED) ']
        "#,
    )
    .unwrap();
    let stderr = "gpu-loader: device fault in kernel `_start`: CUDA_ERROR_LAUNCH_FAILED (unspecified launch failure)\n";
    assert_eq!(judge(Tool::Memcheck, &expectation, &outcome(139, "", stderr), MEMCHECK_FAULT), Vec::<String>::new());
    // Without the fault in the report.
    let problems = judge(Tool::Memcheck, &expectation, &outcome(139, "", stderr), CLEAN);
    assert_eq!(problems, ["memcheck reported no device fault, and the program faults on purpose"]);
    // With something else beside it.
    let more =
        MEMCHECK_FAULT.replace("========= Target", "========= Uninitialized __global__ memory read\n========= Target");
    let problems = judge(Tool::Memcheck, &expectation, &outcome(139, "", stderr), &more);
    assert!(problems.len() == 1 && problems[0].starts_with("memcheck reported more than the program's fault"));
    // The other tools report nothing for it; a report of theirs fails it.
    assert_eq!(judge(Tool::Racecheck, &expectation, &outcome(139, "", stderr), RACECHECK_CLEAN), Vec::<String>::new());
    assert_eq!(judge(Tool::Initcheck, &expectation, &outcome(139, "", stderr), MEMCHECK_FAULT).len(), 1);
}

/// memcheck's report of `empty.huge-stack` on an H100: the driver's refusal of the stack is the one record.
const MEMCHECK_REFUSED_STACK: &str = "\
========= COMPUTE-SANITIZER
========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to \"invalid argument\" on CUDA API call to cuCtxSetLimit.
========= 
========= Target application returned an error
========= ERROR SUMMARY: 1 error
";

#[test]
fn a_call_refused_on_purpose_is_all_memcheck_may_report() {
    let expectation = Expectation::parse(
        r#"
        exit-code = 1
        stderr-matches = ['cuCtxSetLimit failed']
        [sanitize]
        refused-call = "cuCtxSetLimit"
        "#,
    )
    .unwrap();
    let stderr = "gpu-loader: cannot reserve a stack: cuCtxSetLimit failed: CUDA_ERROR_INVALID_VALUE\n";
    let run = outcome(1, "", stderr);
    assert_eq!(judge(Tool::Memcheck, &expectation, &run, MEMCHECK_REFUSED_STACK), Vec::<String>::new());
    // The refusal must be there.
    let problems = judge(Tool::Memcheck, &expectation, &run, CLEAN);
    assert_eq!(problems, ["memcheck reported no failing call to cuCtxSetLimit, and the program makes one on purpose"]);
    // Another call's failure, or a device error, is not the refusal.
    let other = MEMCHECK_REFUSED_STACK.replace("cuCtxSetLimit.", "cuMemAlloc.");
    assert_eq!(judge(Tool::Memcheck, &expectation, &run, &other).len(), 2);
    let problems = judge(Tool::Memcheck, &expectation, &run, MEMCHECK_FAULT);
    assert!(problems.iter().any(|problem| problem.starts_with("memcheck reported more than the refused call")));
    // The other tools report no API errors: a record of theirs still fails the case.
    assert_eq!(judge(Tool::Initcheck, &expectation, &run, MEMCHECK_REFUSED_STACK).len(), 1);
}

#[test]
fn tools_are_named_in_lists_and_skips() {
    assert_eq!(Tool::parse_list("").unwrap(), Tool::ALL);
    assert_eq!(Tool::parse_list("racecheck,memcheck,racecheck").unwrap(), [Tool::Memcheck, Tool::Racecheck]);
    let error = Tool::parse_list("memcheck,leakcheck").unwrap_err().to_string();
    assert!(error.starts_with("`leakcheck` is not a compute-sanitizer tool"), "{error}");
    let expectation =
        Expectation::parse("[sanitize]\nskip = { initcheck = \"no fault under initcheck\", all = \"x\" }").unwrap();
    assert_eq!(skip_reason(&expectation, Tool::Initcheck), Some("no fault under initcheck"));
    assert_eq!(skip_reason(&expectation, Tool::Memcheck), Some("x"));
    assert!(check_skip_names(&expectation).is_ok());
    let typo = Expectation::parse("[sanitize]\nskip = { racechek = \"x\" }").unwrap();
    assert!(check_skip_names(&typo).unwrap_err().to_string().contains("`racechek`"));
}

#[test]
fn under_the_tools_a_case_runs_on_its_sanitize_grid_without_its_hang_guard() {
    let expectation =
        Expectation::parse("threads = 1024\nblocks = 128\nmax-seconds = 120\n[sanitize]\nblocks = 4").unwrap();
    let under_tools = expectation_under_tools(&expectation);
    assert_eq!((under_tools.threads, under_tools.blocks, under_tools.max_seconds), (Dims::X(1024), Dims::X(4), None));
    let plain = expectation_under_tools(&Expectation::parse("blocks = 128").unwrap());
    assert_eq!(plain.blocks, Dims::X(128), "without `[sanitize] blocks` the grid is the case's own");
}

/// `[sanitize] stdout-matches`, `stdout-lines`, `loader-args` and `args` replace the case's own under the tools; without
/// them the case's stand.
#[test]
fn under_the_tools_a_case_takes_its_sanitize_stdout_checks_and_loader_args() {
    let text = "loader-args = ['a']\nstdout-matches = ['plain']\nstdout-lines = 100\n[sanitize]\n\
                stdout-matches = ['slowed']\nstdout-lines = 10\nloader-args = ['--timeout', '300']\nargs = ['m0']";
    let under_tools = expectation_under_tools(&Expectation::parse(text).unwrap());
    assert_eq!(under_tools.stdout_matches, ["slowed"]);
    assert_eq!(under_tools.stdout_lines, Some(10));
    assert_eq!(under_tools.loader_args, ["--timeout", "300"]);
    assert_eq!(under_tools.args, ["m0"]);
    let plain = expectation_under_tools(
        &Expectation::parse("loader-args = ['a']\nstdout-matches = ['plain']\nstdout-lines = 100").unwrap(),
    );
    assert_eq!((plain.stdout_matches, plain.loader_args), (vec!["plain".to_string()], vec!["a".to_string()]));
    assert_eq!(plain.stdout_lines, Some(100));
}
