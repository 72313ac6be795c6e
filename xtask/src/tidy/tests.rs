//! The tidy test's own tests: each check finds what it should and nothing else.

use super::*;

fn found(files: &[(&str, &str)]) -> Vec<String> {
    let repo = Repo::new(files.iter().map(|(path, text)| (path.to_string(), Some(text.to_string()))));
    check(&repo).iter().map(ToString::to_string).collect()
}

const RPC_MD: (&str, &str) = ("docs/rpc.md", "# The RPC channel\n\n## Memory layout\n\n## Cost\n\n## Cost\n");

#[test]
fn a_markdown_link_to_a_missing_file_is_dead() {
    let problems = found(&[("README.md", "See [the layout](docs/layout.md) and [rpc](docs/rpc.md).\n"), RPC_MD]);
    assert_eq!(problems, ["README.md:1: `docs/layout.md` leads to no file of the repository"]);
}

#[test]
fn markdown_links_are_relative_to_their_file() {
    let readme = ("README.md", "Top.\n");
    assert!(found(&[readme, ("docs/a.md", "[up](../README.md) [here](rpc.md)\n"), RPC_MD]).is_empty());
    assert_eq!(
        found(&[readme, ("docs/a.md", "text\n\n[up](README.md)\n")]),
        ["docs/a.md:3: `README.md` leads to no file of the repository"]
    );
    // Out of the repository is nowhere in it.
    assert_eq!(found(&[("README.md", "[x](../README.md)\n")]).len(), 1);
}

#[test]
fn anchors_must_name_a_heading_of_their_target() {
    let readme = ("README.md", "[a](docs/rpc.md#memory-layout) [b](docs/rpc.md#cost-1) [c](docs/rpc.md#costs)\n");
    assert_eq!(found(&[readme, RPC_MD]), ["README.md:1: `docs/rpc.md#costs`: docs/rpc.md has no heading `#costs`"]);
    assert_eq!(found(&[("a.md", "# Top\n\n[self](#top) [gone](#bottom)\n")]).len(), 1);
}

#[test]
fn paths_in_comments_and_code_spans_are_checked() {
    let lib = (
        "loader/src/lib.rs",
        "//! See `docs/exit-codes.md`, `docs/rpc.md` and `src/main.rs`.\nfn f() {} // and `docs/gone.md`\n",
    );
    let problems = found(&[lib, ("loader/Cargo.toml", ""), ("loader/src/main.rs", "//! A module.\n"), RPC_MD]);
    assert_eq!(
        problems,
        [
            "loader/src/lib.rs:1: `docs/exit-codes.md` leads to no file of the repository",
            "loader/src/lib.rs:2: `docs/gone.md` leads to no file of the repository",
        ]
    );
}

#[test]
fn code_that_is_not_a_comment_and_text_that_is_not_a_path_are_left_alone() {
    let lib = (
        "a/src/lib.rs",
        "//! A module.\nconst S: &str = \"`docs/gone.md` // `docs/gone.md`\";\n\
         /// [`Port`](super::Port), [poll](Self::poll), `target/gpu/<arch>/x.ptx`, `target/bench.json`, `read/write`\n",
    );
    let md =
        ("a.md", "```sh\ncat docs/gone.md [x](gone.md)\n```\n`[x](gone.md)` and [web](https://example.org/x.md)\n");
    assert_eq!(found(&[lib, md]), Vec::<String>::new());
}

#[test]
fn a_forbidden_word_is_found_across_comment_lines() {
    let lib = ("a/src/lib.rs", "//! A module.\nfn f() {}\n/// Measured in the fifth\n/// session.\nfn g() {}\n");
    assert_eq!(
        found(&[lib]),
        ["a/src/lib.rs:3: \"fifth session\" names a work period: say what the project is and does; its history \
             is in git"]
    );
}

#[test]
fn forbidden_words_are_found_in_any_text_but_terms_of_the_trade_are_not() {
    let problems = found(&[
        (".gitignore", "/target\n/.device-bundle\n"),
        ("docs/a.md", "The seed corpus is committed. The Seed's barrier.\n"),
        ("b.rs", "//! A module.\nconst LABEL: &str = \"run through the device tool\";\n"),
    ]);
    let lines: Vec<&str> = problems.iter().map(|p| p.split(": ").next().unwrap()).collect();
    assert_eq!(lines, [".gitignore:2", "b.rs:2", "docs/a.md:1"]);
    assert!(problems[2].contains("\"The Seed\""), "{problems:?}");
}

#[test]
fn the_files_of_this_test_may_name_the_words() {
    for path in EXEMPT {
        assert!(found(&[(path, "//! The eighth session, the device tool.\n")]).is_empty());
    }
    assert_eq!(found(&[("xtask/src/other.rs", "//! The eighth session, the device tool.\n")]).len(), 2);
}

#[test]
fn repeated_headings_get_numbered_anchors() {
    assert_eq!(heading_slugs("# A `b`: c!\n## Cost\n## Cost\n```\n# not\n```\n"), ["a-b-c", "cost", "cost-1"]);
}

const CRATE: [(&str, &str); 2] =
    [("k/Cargo.toml", "[package]\n"), ("k/src/lib.rs", "//! A module.\nmod a;\nmod b;\nmod c;\n")];

fn crate_with(modules: &[(&str, &str)]) -> Vec<String> {
    found(&[&CRATE[..], modules].concat())
}

#[test]
fn modules_that_refer_to_each_other_are_a_cycle() {
    let problems = crate_with(&[
        ("k/src/a.rs", "//! A module.\nuse crate::b::B;\n"),
        ("k/src/b.rs", "//! A module.\npub struct B;\nfn f() { super::c::g() }\n"),
        ("k/src/c/mod.rs", "//! A module.\npub fn g() { let _ = crate::a::A; }\n"),
    ]);
    assert_eq!(
        problems,
        ["k/src/a.rs:1: modules a, b, c of `k/src` refer to each other (a -> b (`crate::b::B` at a.rs:2), b -> c \
             (`super::c::g` at b.rs:3), c -> a (`crate::a::A` at c/mod.rs:2)): move what they share into a module of \
             its own"]
    );
}

#[test]
fn comments_tests_the_root_and_one_way_references_are_no_cycle() {
    let problems = crate_with(&[
        // `a` refers to `b` in code, `b` to `a` only in comments, a test module and the root's re-export.
        ("k/src/a.rs", "//! A module.\nuse crate::b::B;\n"),
        (
            "k/src/b.rs",
            "//! A module.\n/// Unlike [`crate::a`].\npub struct B; // crate::a::A\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
        ),
        ("k/src/b/tests.rs", "//! A module.\nuse crate::a::A;\n"),
        ("k/src/c.rs", "//! A module.\nuse crate::A;\nuse self::inner::X;\n"),
    ]);
    assert_eq!(problems, Vec::<String>::new());
}

#[test]
fn a_child_that_refers_to_its_parent_which_refers_back_is_a_cycle() {
    let problems = crate_with(&[
        ("k/src/a/mod.rs", "//! A module.\nmod inner;\nfn f() { self::inner::g() }\n"),
        ("k/src/a/inner.rs", "//! A module.\npub fn g() { super::h() }\n"),
    ]);
    assert_eq!(
        problems,
        ["k/src/a/mod.rs:1: modules a, a::inner of `k/src` refer to each other (a -> a::inner (`self::inner::g` at \
             a/mod.rs:3), a::inner -> a (`super::h` at a/inner.rs:2)): move what they share into a module of its own"]
    );
}

#[test]
fn a_file_and_a_folder_whose_modules_refer_to_each_other_are_a_cycle() {
    // `a` names `b`'s parent and `b::inner` names `a`: no two modules name each other, but the file `a.rs` and the
    // folder `b/` do.
    let problems = crate_with(&[
        ("k/src/a.rs", "//! A module.\npub struct A;\nfn f() { crate::b::reset() }\n"),
        ("k/src/b/mod.rs", "//! A module.\nmod inner;\npub fn reset() {}\n"),
        ("k/src/b/inner.rs", "//! A module.\n// Runs on [`crate::c`].\nuse crate::a::A;\n"),
        ("k/src/c.rs", "//! A module.\nuse crate::b::reset;\n"),
    ]);
    assert_eq!(
        problems,
        ["k/src/a.rs:1: modules a, b of `k/src` refer to each other (a -> b (`crate::b::reset` at a.rs:3), b -> a \
             (`crate::a::A` at b/inner.rs:3)): move what they share into a module of its own"]
    );
    // Folders side by side deeper in the crate are held to the same.
    let problems = crate_with(&[
        ("k/src/a/mod.rs", "//! A module.\nmod x;\nmod y;\n"),
        ("k/src/a/x.rs", "//! A module.\nuse super::y::deep::D;\npub struct X;\n"),
        ("k/src/a/y/mod.rs", "//! A module.\nmod deep;\n"),
        ("k/src/a/y/deep.rs", "//! A module.\npub struct D;\nfn f(_: super::super::x::X) {}\n"),
    ]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("k/src/a/x.rs:1: modules a::x, a::y of `k/src`"), "{problems:?}");
}

#[test]
fn paths_in_use_groups_are_references() {
    let problems = crate_with(&[
        ("k/src/a.rs", "//! A module.\nuse crate::{\n    c::C,\n    b::{self, B},\n};\n"),
        ("k/src/b.rs", "//! A module.\npub struct B;\nuse super::{a::*};\n"),
        ("k/src/c.rs", "//! A module.\npub struct C;\n"),
    ]);
    assert_eq!(
        problems,
        ["k/src/a.rs:1: modules a, b of `k/src` refer to each other (a -> b (`crate::{c::C,b::{self,B},}` at \
             a.rs:2), b -> a (`super::{a::*}` at b.rs:3)): move what they share into a module of its own"]
    );
}

#[test]
fn a_rust_file_without_a_header_is_found() {
    assert_eq!(
        found(&[("a/src/lib.rs", "#![no_std]\n//! Too late.\n"), ("a/build.rs", "fn main() {}\n")]),
        [
            "a/build.rs:1: has no `//!` header: its first lines say what the file is",
            "a/src/lib.rs:1: has no `//!` header: its first lines say what the file is",
        ]
    );
    let generated = "/* automatically generated by rust-bindgen 0.72.1 */\n\npub type hsa_status_t = u32;\n";
    assert!(found(&[("a/src/sys.rs", generated), ("a/src/lib.rs", "//! A crate.\n"), ("notes.txt", "x\n")]).is_empty());
}

#[test]
fn a_long_file_needs_a_reason_in_its_header() {
    let body = |lines: usize| "fn f() {}\n".repeat(lines);
    let too_long = format!("//! A crate.\n{}", body(sources::LONG_FILE));
    let empty_reason = format!("//! A crate.\n//! Over 500 lines: \n{}", body(sources::LONG_FILE));
    let reason_below = format!("//! A crate.\n{}//! Over 500 lines: one table.\n", body(sources::LONG_FILE));
    let problems = found(&[("a/a.rs", &too_long), ("a/b.rs", &empty_reason), ("a/c.rs", &reason_below)]);
    assert_eq!(
        problems,
        [
            "a/a.rs:1: has 501 lines: split it along a seam, or say in its header why it is one file (`//! Over 500 \
             lines: ...`)",
            "a/b.rs:1: has 502 lines: split it along a seam, or say in its header why it is one file (`//! Over 500 \
             lines: ...`)",
            "a/c.rs:1: has 502 lines: split it along a seam, or say in its header why it is one file (`//! Over 500 \
             lines: ...`)",
        ]
    );
    let at_the_limit = format!("//! A crate.\n{}", body(sources::LONG_FILE - 1));
    let with_reason = format!(
        "//! A crate.\n//! Over 500 lines: one table, whose rows belong together.\n{}",
        body(sources::LONG_FILE)
    );
    assert!(found(&[("a/a.rs", &at_the_limit), ("a/b.rs", &with_reason)]).is_empty());
}
