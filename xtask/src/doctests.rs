//! A std crate's doc examples, built for the GPU and kept: rustdoc builds each into a program of its own (the
//! crate's config, written by `cargo gpu-startup init --std`, has it not merge them), keeps it with
//! `--persist-doctests` and does not run it (`--no-run`: `cargo test --doc --no-run` is refused by cargo, rustdoc's
//! own is not). Each kept program is checked and copied out with its expectation, for the bundle's GPU suite.

use std::path::{Path, PathBuf};
use std::process::Output;

use anyhow::{Context, Result, ensure};
use gpu_startup_targets::NVPTX;

use crate::image::BuiltImage;
use crate::out_of_tree::{copy_out, stderr_of};

/// One kept doc example.
#[derive(Debug)]
pub struct Doctest {
    /// rustdoc's folder for it: the file's path with `/` and `.` made `_`, the line of its opening fence, its number
    /// on that line (`src_lib_rs_6_0`).
    pub folder: String,
    /// Its program.
    pub image: PathBuf,
    /// Whether the example is `should_panic`: it passes when its program ends with a panic.
    pub should_panic: bool,
}

impl Doctest {
    /// The suite's expectation for its program, what rustdoc asks of it: exit 0 (an example may print on stderr:
    /// one of semver's prints a parse error it shows), or Rust's panic code for a `should_panic` example. `what`
    /// names the crate in the comment.
    pub fn expectation(&self, what: &str) -> String {
        let folder = &self.folder;
        if self.should_panic {
            format!("# The `should_panic` doc example {folder} of {what}: it panics.\nexit-code = 101\n")
        } else {
            format!("# The doc example {folder} of {what}: it passes.\nexit-code = 0\n")
        }
    }
}

/// Builds the doc examples of the crate in `crate_dir` with `cargo` (which runs `cargo ARGS` there), keeping them in
/// `kept`; returns those that rustdoc runs (`no_run` ones are left out), checked statically.
pub fn build(cargo: &dyn Fn(&[&str]) -> Result<Output>, crate_dir: &Path, kept: &Path) -> Result<Vec<Doctest>> {
    let _ = std::fs::remove_dir_all(kept);
    let kept_text = kept.to_str().context("a folder for doc examples whose path is not UTF-8")?;
    let key = gpu_startup_setup::std_sysroot::std_spec_name(&NVPTX);
    let flags = format!("target.{key}.rustdocflags=[\"--persist-doctests\", {kept_text:?}, \"--no-run\"]");
    let output = cargo(&["test", "--doc", "--config", &flags])?;
    ensure!(
        output.status.success(),
        "building the doc examples of {} failed:\n{}{}",
        crate_dir.display(),
        String::from_utf8_lossy(&output.stdout),
        stderr_of(&output)
    );
    let sources = fence_lines(crate_dir)?;
    let mut doctests = Vec::new();
    let folders = match std::fs::read_dir(kept) {
        Ok(entries) => entries.collect::<std::io::Result<Vec<_>>>()?,
        // A crate without doc examples leaves no folder.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", kept.display())),
    };
    for entry in folders {
        let folder = entry.file_name().to_string_lossy().into_owned();
        let info = sources
            .iter()
            .find_map(|(prefix, fences)| {
                let (line, _number) = folder.strip_prefix(prefix.as_str())?.strip_prefix('_')?.split_once('_')?;
                fences.iter().find(|(at, _)| at.to_string() == line).map(|(_, info)| info.as_str())
            })
            .with_context(|| {
                format!("no doc example of {} is where rustdoc's folder {folder} says", crate_dir.display())
            })?;
        let attributes: Vec<&str> = info.split(',').map(str::trim).collect();
        if attributes.contains(&"no_run") {
            continue;
        }
        let image = entry.path().join(format!("rust_out.{}", NVPTX.image_extension));
        ensure!(image.is_file(), "rustdoc kept no {}", image.display());
        let built = BuiltImage { program: folder.clone(), target: &NVPTX, arch: String::new(), path: image.clone() };
        crate::image::check_images(std::slice::from_ref(&built))?;
        doctests.push(Doctest { folder, image, should_panic: attributes.contains(&"should_panic") });
    }
    doctests.sort_by(|a, b| a.folder.cmp(&b.folder));
    Ok(doctests)
}

/// Copies `doctests` out as `NAME-doc-FOLDER` with their [expectations](Doctest::expectation), `what` naming the
/// crate in their comments.
pub fn copy_out_all(doctests: &[Doctest], name: &str, what: &str) -> Result<Vec<BuiltImage>> {
    // The examples of an earlier build go: one that moved or went would otherwise stay in the bundle.
    let dir = crate::out_of_tree::out_dir(&NVPTX);
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries {
            let path = entry?.path();
            if path.file_name().is_some_and(|file| file.to_string_lossy().starts_with(&format!("{name}-doc-"))) {
                std::fs::remove_file(&path)?;
            }
        }
    }
    doctests
        .iter()
        .map(|doctest| {
            let expectation = doctest.expectation(what);
            copy_out(&NVPTX, &doctest.image, &format!("{name}-doc-{}", doctest.folder), &vec![(None, expectation)])
        })
        .collect()
}

/// A file's opening code fences: each one's line (from 1) and info string.
type Fences = Vec<(usize, String)>;

/// For each Rust or Markdown file of the crate (outside `target`), the prefix of rustdoc's folders for its examples
/// and the lines of its opening code fences in doc comments or Markdown, with their info strings.
fn fence_lines(crate_dir: &Path) -> Result<Vec<(String, Fences)>> {
    let mut files = Vec::new();
    let mut pending = vec![crate_dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name != "target" && !name.to_string_lossy().starts_with('.')) {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|extension| extension == "rs" || extension == "md") {
                files.push(path);
            }
        }
    }
    let mut sources = Vec::new();
    for path in files {
        let relative = path.strip_prefix(crate_dir).unwrap_or(&path).to_string_lossy().into_owned();
        // rustdoc's folder name: the file's path as it was given, with separators and dots made `_`.
        let prefix: String = relative.chars().map(|c| if matches!(c, '/' | '\\' | '.') { '_' } else { c }).collect();
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        sources.push((prefix, opening_fences(&text)));
    }
    // A longer prefix first: `src_lib_rs` must not take `src_lib_rs_x_rs`'s folders.
    sources.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
    Ok(sources)
}

/// The opening code fences of `text`: each one's line (from 1) and info string. Fences are found in doc comments
/// (`///`, `//!`) and at the start of Markdown lines.
fn opening_fences(text: &str) -> Fences {
    let mut fences = Vec::new();
    let mut inside = false;
    for (index, line) in text.lines().enumerate() {
        let line = line.trim_start();
        let content = line.strip_prefix("///").or_else(|| line.strip_prefix("//!")).unwrap_or(line);
        let Some(info) = content.trim().strip_prefix("```") else { continue };
        if !inside {
            fences.push((index + 1, info.trim().to_owned()));
        }
        inside = !inside;
    }
    fences
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_fences_are_found_with_their_info_strings() {
        let text = "//! Top.\n//! ```\n//! x();\n//! ```\n/// ```should_panic\n/// y();\n/// ```\n/// ```text\n/// \
                    no\n/// ```\nfn f() {}\n";
        assert_eq!(opening_fences(text), [(2, String::new()), (5, "should_panic".to_owned()), (8, "text".to_owned())]);
    }
}
