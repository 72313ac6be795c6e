//! Plain `#[test]`s under libtest, on the GPU: `cargo test` builds them into one std test binary, and the loader
//! plays libtest's parent, one run per test (`docs/testing-your-code.md`). Passing, failing, ignored, `should_panic`
//! with and without the expected message, a test returning `Result`, and a test's output.

/// Adds two numbers, as the tests check.
pub fn add(a: u64, b: u64) -> u64 {
    a + b
}

#[cfg(test)]
mod tests {
    use super::add;
    use std::collections::HashMap;

    #[test]
    fn adds() {
        assert_eq!(add(2, 2), 4);
    }

    #[test]
    fn counts_words_in_a_hash_map() {
        let mut counts = HashMap::new();
        for word in "a b a".split(' ') {
            *counts.entry(word).or_insert(0) += 1;
        }
        assert_eq!(counts["a"], 2);
    }

    #[test]
    fn fails() {
        println!("printed before failing");
        assert_eq!(add(2, 2), 5, "two and two");
    }

    #[test]
    #[should_panic(expected = "overflow")]
    fn panics_as_expected() {
        let _ = add(u64::MAX, 1);
        panic!("overflow");
    }

    #[test]
    #[should_panic(expected = "overflow")]
    fn panics_otherwise() {
        panic!("something else");
    }

    #[test]
    fn returns_ok() -> Result<(), String> {
        if add(1, 1) == 2 { Ok(()) } else { Err("one and one".into()) }
    }

    #[test]
    fn returns_err() -> Result<(), String> {
        Err("this test returns an error".into())
    }

    #[test]
    #[ignore = "shows that ignored tests are listed and skipped"]
    fn ignored() {
        panic!("ignored tests do not run");
    }
}
