//! The sizes of the images a user's edit–test loop builds and the driver compiles at a first run: the empty
//! program, hello, the device test binary and the std hello, as PTX.

use std::path::Path;

use anyhow::{Context, Result};

use crate::report::{Row, Stats, row};

/// The images whose size is reported, with what each is.
const IMAGES: &[(&str, &str)] = &[
    ("empty.ptx", "an empty no_std main"),
    ("hello.ptx", "no_std hello"),
    ("device-tests.ptx", "the device test binary"),
    ("hello-std.ptx", "std hello (HashMap, env, thread_local!, Mutex, println!)"),
];

/// One row per image of [`IMAGES`], its size in KB (1,000 bytes); no baseline.
pub fn image_sizes(images: &Path) -> Result<Vec<Row>> {
    IMAGES
        .iter()
        .map(|(file, what)| {
            let path = images.join(file);
            let bytes = std::fs::metadata(&path).with_context(|| format!("cannot read {}", path.display()))?.len();
            Ok(row(
                "image-size",
                &format!("{file}: {what}"),
                "KB",
                Stats::of(vec![bytes as f64 / 1e3]),
                None,
                "reported",
            ))
        })
        .collect()
}
