//! The constructor-table builder on arbitrary symbol lists. The input is split at `\n` into symbols; a symbol's
//! first byte picks its prefix (`i`: `__init_array_object_`, `f`: `__fini_array_object_`, anything else: the
//! symbol as it is), so the fuzzer reaches the priority parser at once. Checked against a model:
//! - an error names a prefixed symbol of the input whose suffix the model refuses;
//! - on success every prefixed symbol is accepted by the model, each array holds exactly the input's symbols of
//!   its prefix, sorted by priority (a stable sort: equal priorities keep the input's order), and each accepted
//!   symbol's priority round-trips through its decimal suffix.

#![no_main]

use gpu_loader::LoaderError;
use gpu_loader::ctors::ConstructorTable;
use libfuzzer_sys::fuzz_target;

const INIT: &str = "__init_array_object_";
const FINI: &str = "__fini_array_object_";

/// The model: `<name>_<priority>`, a non-empty name and a decimal priority from 0 to 65535.
fn priority(rest: &str) -> Option<u16> {
    let (name, digits) = rest.rsplit_once('_')?;
    if name.is_empty() || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    if significant.len() > 5 {
        return None;
    }
    let value: u32 = if significant.is_empty() { 0 } else { significant.parse().ok()? };
    u16::try_from(value).ok()
}

fuzz_target!(|data: &[u8]| {
    let symbols: Vec<String> = data
        .split(|&b| b == b'\n')
        .map(|piece| {
            let text = String::from_utf8_lossy(piece.get(1..).unwrap_or_default());
            match piece.first() {
                Some(b'i') => format!("{INIT}{text}"),
                Some(b'f') => format!("{FINI}{text}"),
                _ => String::from_utf8_lossy(piece).into_owned(),
            }
        })
        .collect();
    let expected = |prefix: &str| -> Vec<(u16, &str)> {
        let mut list: Vec<(u16, &str)> = symbols
            .iter()
            .filter_map(|s| s.strip_prefix(prefix).map(|rest| (priority(rest).unwrap_or(u16::MAX), s.as_str())))
            .collect();
        list.sort_by_key(|(priority, _)| *priority);
        list
    };
    let model_refuses = |symbol: &str| {
        [INIT, FINI].iter().any(|prefix| symbol.strip_prefix(prefix).is_some_and(|rest| priority(rest).is_none()))
    };
    match ConstructorTable::from_symbols(symbols.iter().map(String::as_str)) {
        Ok(table) => {
            assert!(!symbols.iter().any(|s| model_refuses(s)), "accepted a bad symbol: {symbols:?}");
            for (prefix, got) in [(INIT, &table.init), (FINI, &table.fini)] {
                let want = expected(prefix);
                let want_names: Vec<&str> = want.iter().map(|(_, name)| *name).collect();
                assert_eq!(got, &want_names, "{prefix} order");
                for (name, (want_priority, _)) in got.iter().zip(&want) {
                    let (_, digits) = name.rsplit_once('_').expect("accepted names have a suffix");
                    assert_eq!(digits.parse::<u16>().ok(), Some(*want_priority), "{name} round-trip");
                }
                assert!(got.windows(2).all(|w| priority(&w[0][prefix.len()..]) <= priority(&w[1][prefix.len()..])));
            }
        }
        Err(LoaderError::BadConstructor { symbol, problem }) => {
            assert!(symbols.contains(&symbol), "the error names a symbol not in the input: {symbol:?}");
            assert!(model_refuses(&symbol), "refused a good symbol {symbol:?}: {problem}");
            assert!(!problem.is_empty());
        }
        Err(other) => panic!("unexpected error kind: {other}"),
    }
});
