//! The numbers `gpu_startup.h` gives C programs are the startup's: every `#define` of an error number, a seek origin
//! or a limit against the Rust constant behind it.

use startup_common::libc::{errno, files};

/// Every `#define NAME VALUE` of the header whose value is a number.
fn defines() -> Vec<(String, i64)> {
    let header = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/gpu_startup.h")).unwrap();
    header
        .lines()
        .filter_map(|line| {
            let mut words = line.strip_prefix("#define ")?.split_whitespace();
            let name = words.next()?;
            let value = words.next()?.trim_start_matches('(').trim_end_matches(')').parse().ok()?;
            Some((name.to_owned(), value))
        })
        .collect()
}

#[test]
fn error_numbers_are_the_startups() {
    let errors: Vec<_> = defines().into_iter().filter(|(name, _)| name.starts_with('E') && name != "EOF").collect();
    assert!(errors.len() >= 25, "only {} error numbers", errors.len());
    for (name, value) in errors {
        let number = i32::try_from(value).unwrap();
        assert_eq!(errno::name(number), Some(name.as_str()), "{name} is {value} in the header");
        assert!(errno::message(number).is_some());
    }
}

#[test]
fn seek_origins_and_limits_are_the_startups() {
    let defines = defines();
    let value = |name: &str| defines.iter().find(|(defined, _)| defined == name).unwrap_or_else(|| panic!("{name}")).1;
    assert_eq!(value("EOF"), i64::from(startup_common::libc::stdio::functions::EOF));
    assert_eq!(value("SEEK_SET"), files::Whence::Start as i64);
    assert_eq!(value("SEEK_CUR"), files::Whence::Current as i64);
    assert_eq!(value("SEEK_END"), files::Whence::End as i64);
    assert_eq!(value("FOPEN_MAX"), files::MAX_OPEN_FILES as i64);
    assert_eq!(value("FILENAME_MAX"), files::MAX_PATH as i64);
}
