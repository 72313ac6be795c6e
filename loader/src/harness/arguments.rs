//! libtest's command line, as both test runners take it after the image: parsed here once, and the selection of
//! tests (filters, `--exact`, `--skip`) resolved here once, with libtest's meaning.
//!
//! libtest-mimic parses libtest's options and prints libtest's report, but takes one filter where libtest takes any
//! number (`IMAGE foo bar` runs the tests whose names contain `foo` or `bar`). So the positional filter is parsed as
//! many values, and [`LibtestArguments::select`] hands libtest-mimic the selection it cannot express as exact skips.

use std::ffi::OsString;
use std::path::Path;

use clap::{ArgAction, CommandFactory, FromArgMatches};
use libtest_mimic::{Arguments, FormatSetting};

/// libtest's options for a test binary.
#[derive(Clone, Debug)]
pub struct LibtestArguments {
    /// libtest-mimic's options, without a filter: the filters are [`filters`](Self::filters).
    pub arguments: Arguments,
    /// The positional filters, in order: a test runs when its name contains one of them (`--exact`: equals one).
    pub filters: Vec<String>,
}

/// libtest's error for `--test-threads 0`.
pub const ZERO_TEST_THREADS: &str = "argument for --test-threads must not be 0";

/// Parses libtest's options as the test binary's command line (`args` after the image); clap's error on bad ones.
/// `--no-capture`, libtest's newer spelling, means `--nocapture`; `-q` (`--quiet`) with `--format` means the format,
/// as libtest takes it (`cargo test -q` passes `--quiet` on), where libtest-mimic refuses the two together.
/// `--test-threads 0` is refused with libtest's message.
pub fn parse_arguments(image: &Path, args: &[OsString]) -> Result<LibtestArguments, clap::Error> {
    let has_format = args.iter().any(|arg| arg == "--format" || arg.as_encoded_bytes().starts_with(b"--format="));
    let args = args
        .iter()
        .filter(|arg| !(has_format && (*arg == "-q" || *arg == "--quiet")))
        .map(|arg| if arg == "--no-capture" { OsString::from("--nocapture") } else { arg.clone() });
    // libtest-mimic's own command, but with a filter that takes any number of values, anywhere among the options.
    let command = Arguments::command().mut_arg("filter", |filter| filter.action(ArgAction::Append).num_args(1..));
    let matches = command.try_get_matches_from(std::iter::once(image.as_os_str().to_owned()).chain(args))?;
    let filters: Vec<String> = matches.get_many::<String>("filter").into_iter().flatten().cloned().collect();
    let mut arguments = Arguments::from_arg_matches(&matches)?;
    arguments.filter = None;
    if arguments.test_threads == Some(0) {
        return Err(clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{ZERO_TEST_THREADS}\n")));
    }
    Ok(LibtestArguments { arguments, filters })
}

impl LibtestArguments {
    /// Whether the command asks for the list in libtest's JSON (`--list --format json`).
    pub fn lists_json(&self) -> bool {
        self.arguments.list && self.arguments.format == Some(FormatSetting::Json)
    }

    /// Whether the test `name` is selected by the filters and `--skip`, as libtest selects: it contains a filter (or
    /// equals one, with `--exact`), or there is none; and it contains no `--skip` pattern (equals none, with
    /// `--exact`). `--ignored` is not a part of it.
    pub fn selects(&self, name: &str) -> bool {
        let exact = self.arguments.exact;
        let matches = |pattern: &String| if exact { name == pattern } else { name.contains(pattern.as_str()) };
        (self.filters.is_empty() || self.filters.iter().any(matches)) && !self.arguments.skip.iter().any(matches)
    }

    /// The options that select tests, as libtest takes them: for libtest itself to select the same tests.
    pub fn selection_args(&self) -> Vec<String> {
        let arguments = &self.arguments;
        let mut args = Vec::new();
        for (given, flag) in [
            (arguments.exact, "--exact"),
            (arguments.ignored, "--ignored"),
            (arguments.include_ignored, "--include-ignored"),
        ] {
            if given {
                args.push(flag.to_owned());
            }
        }
        for skip in &arguments.skip {
            args.extend(["--skip".to_owned(), skip.clone()]);
        }
        args.extend(self.filters.iter().cloned());
        args
    }

    /// libtest-mimic's arguments for a binary whose tests are `names`, with the selection resolved. With several
    /// filters, every test that none of them selects, or that a `--skip` drops, becomes an exact skip (and the
    /// filters go), so that libtest-mimic runs exactly the selected tests and counts the others as filtered out. One
    /// filter, or none, libtest-mimic applies itself, with the same meaning: it compares every test with every skip,
    /// so a few tests picked from 50,000 by exact skips take it 15 s.
    pub fn select<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Arguments {
        let mut arguments = self.arguments.clone();
        match self.filters.as_slice() {
            [] => {}
            [filter] => arguments.filter = Some(filter.clone()),
            _ => {
                arguments.skip = names.into_iter().filter(|name| !self.selects(name)).map(str::to_owned).collect();
                arguments.exact = true;
            }
        }
        arguments
    }
}

#[cfg(test)]
mod tests {
    use libtest_mimic::Trial;

    use super::*;

    fn parse(args: &[&str]) -> Result<LibtestArguments, clap::Error> {
        parse_arguments(Path::new("tests.ptx"), &args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    const NAMES: [&str; 6] = ["adds", "adds_more", "subtracts", "warp::adds", "warp::sums", "not_ready"];

    /// The tests libtest-mimic keeps with the selection resolved: `--list`'s lines, without the kind.
    fn selected(args: &[&str]) -> Vec<&'static str> {
        let parsed = parse(args).unwrap();
        let arguments = parsed.select(NAMES);
        let trials: Vec<Trial> = NAMES.iter().map(|name| Trial::test(*name, || Ok(()))).collect();
        let kept: Vec<&str> = NAMES
            .into_iter()
            .zip(&trials)
            .filter(|(_, trial)| !arguments.is_filtered_out(trial))
            .map(|(n, _)| n)
            .collect();
        // Both ways of asking agree: the runner's count and libtest-mimic's.
        let counted: Vec<&str> = NAMES.into_iter().filter(|name| parsed.selects(name)).collect();
        assert_eq!(kept, counted, "{args:?}");
        kept
    }

    #[test]
    fn filters_select_as_libtests_do() {
        assert_eq!(selected(&[]), NAMES);
        assert_eq!(selected(&["adds"]), ["adds", "adds_more", "warp::adds"]);
        assert_eq!(selected(&["adds", "sums"]), ["adds", "adds_more", "warp::adds", "warp::sums"]);
        assert_eq!(selected(&["sub", "--nocapture", "ready"]), ["subtracts", "not_ready"]);
        assert_eq!(selected(&["--exact", "adds"]), ["adds"]);
        assert_eq!(selected(&["--exact", "adds", "warp::sums", "warp"]), ["adds", "warp::sums"]);
        assert_eq!(selected(&["adds", "sums", "--skip", "warp"]), ["adds", "adds_more"]);
        assert_eq!(selected(&["--skip", "adds", "--skip", "sub"]), ["warp::sums", "not_ready"]);
        assert_eq!(
            selected(&["--exact", "--skip", "adds"]),
            ["adds_more", "subtracts", "warp::adds", "warp::sums", "not_ready"]
        );
        assert_eq!(selected(&["--exact", "adds", "adds_more", "--skip", "adds"]), ["adds_more"]);
        assert_eq!(selected(&["nothing", "else"]), Vec::<&str>::new());
    }

    #[test]
    fn several_filters_become_exact_skips_of_the_others() {
        let parsed = parse(&["warp", "sub", "--skip", "sums"]).unwrap();
        assert_eq!(parsed.filters, ["warp", "sub"]);
        let arguments = parsed.select(NAMES);
        assert_eq!((arguments.filter.as_deref(), arguments.exact), (None, true));
        assert_eq!(arguments.skip, ["adds", "adds_more", "warp::sums", "not_ready"]);
        // One filter stays libtest-mimic's.
        let arguments = parse(&["warp", "--skip", "sums"]).unwrap().select(NAMES);
        assert_eq!(
            (arguments.filter.as_deref(), arguments.exact, &arguments.skip[..]),
            (Some("warp"), false, &["sums".to_owned()][..])
        );
    }

    #[test]
    fn the_selection_is_handed_on_as_libtest_takes_it() {
        let parsed = parse(&["warp", "--exact", "--nocapture", "--skip", "a", "sub", "--include-ignored"]).unwrap();
        assert_eq!(parsed.selection_args(), ["--exact", "--include-ignored", "--skip", "a", "warp", "sub"]);
        assert_eq!(parse(&["--ignored", "--list"]).unwrap().selection_args(), ["--ignored"]);
        assert!(parse(&["--test-threads", "2"]).unwrap().selection_args().is_empty());
    }

    #[test]
    fn libtests_spellings_are_taken() {
        let parsed = parse(&["--no-capture", "-q", "--format", "json", "--list"]).unwrap();
        assert!(parsed.arguments.nocapture && !parsed.arguments.quiet && parsed.lists_json());
        assert!(!parse(&["--list", "--format=terse"]).unwrap().lists_json());
        assert_eq!(parse(&["--test-threads", "3"]).unwrap().arguments.test_threads, Some(3));
    }

    #[test]
    fn zero_test_threads_are_refused_as_libtest_refuses_them() {
        for args in [&["--test-threads", "0"][..], &["--test-threads=0", "adds"]] {
            let error = parse(args).unwrap_err();
            assert!(error.use_stderr());
            assert_eq!(error.to_string(), "error: argument for --test-threads must not be 0\n", "{args:?}");
        }
    }
}
