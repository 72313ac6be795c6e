//! Whether a test passed, from how its run ended, how many threads panicked and the first panic's message; and the
//! message libtest's report shows for a failure.

use std::time::Duration;

use super::protocol::{Ending, RunResult};
use crate::run::PANIC_GRACE;
use crate::test_list::TestCase;

/// `Ok` if `test` passed; otherwise why not, in one or a few lines. `threads` is the size of the test's grid,
/// `timeout` its time limit.
pub fn verdict(test: &TestCase, threads: u64, timeout: Duration, result: &RunResult) -> Result<(), String> {
    outcome(test, threads, timeout, result)?;
    match result.messages_given_up {
        0 => Ok(()),
        count => Err(format!(
            "the loader gave up {count} RPC message{} of the test in the middle: its output is incomplete",
            if count == 1 { "" } else { "s" }
        )),
    }
}

/// The verdict from the run's ending and its panics alone.
fn outcome(test: &TestCase, threads: u64, timeout: Duration, result: &RunResult) -> Result<(), String> {
    if !result.constructors_ran {
        // A constructor's panic is not the test's: a `should_panic` test fails too.
        let cause = match &result.ending {
            _ if result.panicked_threads > 0 => "a constructor panicked".to_owned(),
            Ending::Exited(code) => format!("a constructor called exit({code})"),
            Ending::Aborted => "a constructor called abort()".into(),
            Ending::TimedOut => format!("the constructors ran past the test's {timeout:?} timeout"),
            Ending::Fault(message) | Ending::Error(message) => message.clone(),
        };
        return Err(format!("the test did not run: {cause}"));
    }
    if test.should_panic {
        if result.panicked_threads == 0 {
            return Err(match &result.ending {
                Ending::Exited(0) => "test did not panic as expected".into(),
                ending => describe(ending, timeout),
            });
        }
        // libtest compares the panic's message, never the test's output, which could hold the text anyway.
        return match (&test.expected, &result.panic_message) {
            (None, _) => Ok(()),
            (Some(expected), Some(message)) if message.contains(expected.as_str()) => Ok(()),
            (Some(expected), Some(message)) => Err(format!(
                "panic did not contain expected string\n      panic message: {message:?}\n expected substring: \
                 {expected:?}"
            )),
            (Some(expected), None) => Err(format!(
                "expected panic with a message,\n found none: the panicking thread reported no message to the \
                 runner\n     expected substring: {expected:?}"
            )),
        };
    }
    if result.panicked_threads > 0 {
        return Err(panics(result, threads));
    }
    match &result.ending {
        Ending::Exited(0) => Ok(()),
        ending => Err(describe(ending, timeout)),
    }
}

/// How many of the grid's threads panicked.
fn panics(result: &RunResult, threads: u64) -> String {
    let count = result.panicked_threads;
    let counted = match (count, threads) {
        (1, 1) => "the test's thread panicked".to_owned(),
        (count, threads) if u64::from(count) == threads => format!("all {count} threads panicked"),
        (1, threads) => format!("1 of {threads} threads panicked"),
        (count, threads) => format!("{count} of {threads} threads panicked"),
    };
    if result.finished {
        counted
    } else {
        format!("at least {counted}; threads still running {PANIC_GRACE:?} after the first panic were stopped")
    }
}

/// Why a run that did not end with 0 failed.
fn describe(ending: &Ending, timeout: Duration) -> String {
    match ending {
        Ending::Exited(code) => format!("the test ended with exit code {code}"),
        Ending::Aborted => "the test called abort()".into(),
        Ending::TimedOut => format!("the test ran past its {timeout:?} timeout and was stopped"),
        Ending::Fault(message) | Ending::Error(message) => message.clone(),
    }
}

/// The failure text for libtest's report: the test's output, then why it failed.
pub fn failure_message(output: &str, reason: &str) -> String {
    match output {
        "" => reason.to_owned(),
        output if output.ends_with('\n') => format!("{output}{reason}"),
        output => format!("{output}\n{reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(should_panic: bool, expected: Option<&str>) -> TestCase {
        TestCase {
            name: "t".into(),
            ignore: false,
            should_panic,
            expected: expected.map(str::to_owned),
            threads: None,
            blocks: None,
            timeout: None,
            entry_symbol: "__gpu_test_entry_t".into(),
            source: Default::default(),
        }
    }

    fn ended(ending: Ending, panicked_threads: u32, finished: bool) -> RunResult {
        RunResult {
            ending,
            panicked_threads,
            finished,
            worker_ends: !finished,
            constructors_ran: true,
            messages_given_up: 0,
            panic_message: None,
        }
    }

    /// A run in which one thread panicked and reported `message`.
    fn panicked_with(message: &str) -> RunResult {
        RunResult { panic_message: Some(message.into()), ..ended(Ending::Exited(101), 1, true) }
    }

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[test]
    fn a_plain_test_passes_only_when_it_ends_with_0_and_nothing_panicked() {
        let plain = test(false, None);
        let check = |result, threads| verdict(&plain, threads, TIMEOUT, &result);
        assert_eq!(check(ended(Ending::Exited(0), 0, true), 1), Ok(()));
        let failures = [
            (ended(Ending::Exited(101), 1, true), 1, "the test's thread panicked"),
            (ended(Ending::Exited(101), 16, true), 32, "16 of 32 threads panicked"),
            (ended(Ending::Exited(101), 32, true), 32, "all 32 threads panicked"),
            (ended(Ending::Exited(101), 1, false), 64, "at least 1 of 64 threads panicked; threads still running 1s"),
            (ended(Ending::Exited(1), 0, true), 1, "the test ended with exit code 1"),
            (ended(Ending::Aborted, 0, true), 1, "the test called abort()"),
            (ended(Ending::TimedOut, 0, false), 1, "the test ran past its 5s timeout and was stopped"),
            (
                ended(Ending::Fault("device fault in kernel `_start`: trap".into()), 0, false),
                1,
                "device fault in kernel",
            ),
            (ended(Ending::Error("RPC: no handler".into()), 0, false), 1, "RPC: no handler"),
        ];
        for (result, threads, message) in failures {
            let error = check(result, threads).unwrap_err();
            assert!(error.starts_with(message), "{error:?} does not start with {message:?}");
        }
    }

    #[test]
    fn a_should_panic_test_passes_only_when_a_thread_panicked_with_the_expected_text() {
        let panicked = panicked_with("sum was 17");
        assert_eq!(verdict(&test(true, None), 1, TIMEOUT, &panicked), Ok(()));
        assert_eq!(verdict(&test(true, Some("sum was 17")), 1, TIMEOUT, &panicked), Ok(()));
        assert_eq!(verdict(&test(true, Some("was")), 1, TIMEOUT, &panicked), Ok(()));
        let error = verdict(&test(true, Some("sum was 18")), 1, TIMEOUT, &panicked).unwrap_err();
        assert_eq!(
            error,
            "panic did not contain expected string\n      panic message: \"sum was 17\"\n expected substring: \"sum was 18\""
        );
        let calm = ended(Ending::Exited(0), 0, true);
        assert_eq!(verdict(&test(true, None), 1, TIMEOUT, &calm), Err("test did not panic as expected".into()));
        let faulted = ended(Ending::Fault("device fault".into()), 0, false);
        assert_eq!(verdict(&test(true, None), 1, TIMEOUT, &faulted), Err("device fault".into()));
    }

    #[test]
    fn the_expected_text_is_looked_for_in_the_panics_message_alone() {
        // The location and the thread are the line's, not the message's: libtest compares the payload only.
        let error = verdict(&test(true, Some("t.rs:3")), 1, TIMEOUT, &panicked_with("sum was 17")).unwrap_err();
        assert!(error.starts_with("panic did not contain expected string\n"), "{error}");
        // A multi-line message is one message; the expected text may span its lines.
        let message = "assertion `left == right` failed: two and two\n  left: 4\n right: 5";
        assert_eq!(verdict(&test(true, Some("4\n right")), 1, TIMEOUT, &panicked_with(message)), Ok(()));
        // A panic whose message did not reach the runner cannot show the text.
        let unreported = ended(Ending::Exited(101), 1, true);
        assert_eq!(verdict(&test(true, None), 1, TIMEOUT, &unreported), Ok(()));
        assert_eq!(
            verdict(&test(true, Some("sum")), 1, TIMEOUT, &unreported),
            Err("expected panic with a message,\n found none: the panicking thread reported no message to the \
                 runner\n     expected substring: \"sum\""
                .into())
        );
        // A test that expects no panic fails on any panic, its message whatever it is.
        assert_eq!(
            verdict(&test(false, None), 1, TIMEOUT, &panicked_with("")),
            Err("the test's thread panicked".into())
        );
    }

    #[test]
    fn a_test_whose_constructors_failed_did_not_run_and_fails() {
        let before =
            |ending, panicked_threads| RunResult { constructors_ran: false, ..ended(ending, panicked_threads, true) };
        for (test, result, message) in [
            (test(true, None), before(Ending::Exited(101), 1), "the test did not run: a constructor panicked"),
            (test(false, None), before(Ending::Exited(3), 0), "the test did not run: a constructor called exit(3)"),
            (
                test(false, None),
                before(Ending::Error("bad launch parameters: 2048 threads".into()), 0),
                "the test did not run: bad launch parameters: 2048 threads",
            ),
        ] {
            assert_eq!(verdict(&test, 1, TIMEOUT, &result), Err(message.into()));
        }
    }

    #[test]
    fn a_test_that_lost_a_message_fails_even_when_it_passed_otherwise() {
        let lost =
            |count| RunResult { messages_given_up: count, worker_ends: true, ..ended(Ending::Exited(0), 0, true) };
        let error = verdict(&test(false, None), 1, TIMEOUT, &lost(1)).unwrap_err();
        assert_eq!(error, "the loader gave up 1 RPC message of the test in the middle: its output is incomplete");
        let panicked = RunResult { messages_given_up: 2, ..ended(Ending::Exited(101), 1, true) };
        let error = verdict(&test(true, None), 1, TIMEOUT, &panicked).unwrap_err();
        assert!(error.starts_with("the loader gave up 2 RPC messages"), "{error}");
        // A test that failed anyway keeps its own reason.
        let failed = RunResult { messages_given_up: 1, ..ended(Ending::Exited(3), 0, true) };
        assert_eq!(verdict(&test(false, None), 1, TIMEOUT, &failed), Err("the test ended with exit code 3".into()));
    }

    #[test]
    fn the_failure_shows_the_output_then_the_reason() {
        assert_eq!(failure_message("", "why"), "why");
        assert_eq!(failure_message("out\n", "why"), "out\nwhy");
        assert_eq!(failure_message("out", "why"), "out\nwhy");
    }
}
