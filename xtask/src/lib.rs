//! The project's automation, as a library so that its pieces are tested with `cargo test -p xtask`.
//! `src/main.rs` is the `cargo xtask` command line. Every function that takes a [`xshell::Shell`] expects it in the
//! project root ([`project_root`]): `cargo xtask` changes there once, at start.

pub mod bindgen;
pub mod build;
pub mod bundle;
pub mod c_programs;
pub mod clang;
pub mod doctests;
pub mod fuzz;
pub mod gpu_cargo;
pub mod gpus;
pub mod image;
pub mod nextest;
pub mod out_of_tree;
pub mod out_of_tree_std;
#[cfg(test)]
mod packages;
pub mod real_crates;
pub mod std_programs;
pub mod suite;
#[cfg(test)]
mod tidy;
pub mod toolchain;
pub mod varargs;

/// The workspace root (the parent of this crate's directory).
pub fn project_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace root").to_owned()
}
