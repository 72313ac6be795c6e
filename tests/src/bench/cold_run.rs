//! The first run of a fresh image, as a user's edit–test loop meets it: `gpu-loader IMAGE` with the loader's cache of
//! linked cubins and the driver's JIT cache both empty, against a warm run of the same image and against a bare
//! cudarc program's first and warm loads of it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::report::{Row, Stats, row, seconds};
use crate::runs::time_process;

/// An image whose first run is measured: its file, the arguments of the run, and what it is.
struct Fresh {
    file: &'static str,
    args: &'static [&'static str],
    what: &'static str,
    /// Samples at most: a std image's first run compiles megabytes of PTX.
    samples: usize,
    /// Whether a bare program's first and warm loads are measured too: the std images leave them out, each a
    /// compilation of megabytes of PTX more that shows only the driver's JIT again.
    bare: bool,
}

/// The no_std images of `cold-run`.
const NO_STD: &[Fresh] = &[
    Fresh { file: "empty.ptx", args: &[], what: "an empty no_std main", samples: 5, bare: true },
    Fresh { file: "hello.ptx", args: &[], what: "no_std hello", samples: 5, bare: true },
];

/// The std images of `cold-run-std`: a program and a libtest binary running one test (listing it takes two runs of
/// the binary, the test a third, in a process of its own, all sharing the caches).
const STD: &[Fresh] = &[
    Fresh { file: "hello-std.ptx", args: &[], what: "std hello", samples: 2, bare: false },
    Fresh {
        file: "libtest-std.ptx",
        args: &["--exact", "tests::adds"],
        what: "a libtest binary, one test",
        samples: 1,
        bare: false,
    },
];

/// `cold-run` (the no_std images) or, with `std`, `cold-run-std`: per image, a row of its first runs against its
/// warm runs (goal ≤ 1.5×) and, for the no_std images, one against a bare program's first loads, the bare program's
/// warm loads in the note.
pub fn cold_run(images: &Path, loader: &Path, repeat: usize, std: bool) -> Result<Vec<Row>> {
    let scratch = std::env::temp_dir().join(format!("gpu-bench-cold-{}", std::process::id()));
    let (name, fresh) = if std { ("cold-run-std", STD) } else { ("cold-run", NO_STD) };
    let measured = measure_all(images, loader, repeat, name, fresh, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    measured
}

fn measure_all(
    images: &Path,
    loader: &Path,
    repeat: usize,
    name: &str,
    fresh: &[Fresh],
    scratch: &Path,
) -> Result<Vec<Row>> {
    let me = std::env::current_exe()?;
    let mut rows = Vec::new();
    for image in fresh {
        let path = images.join(image.file);
        std::fs::metadata(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let ours = |caches: &Path| {
            let mut command = Command::new(loader);
            command.arg(&path).args(image.args);
            with_caches(&mut command, caches).map(|()| command)
        };
        let bare = |caches: &Path| {
            let mut command = Command::new(&me);
            command.arg("bare-run").arg(&path);
            with_caches(&mut command, caches).map(|()| command)
        };
        let mut samples = Samples::default();
        for sample in 0..repeat.min(image.samples) {
            // Each first run fills its caches for the warm run right after it: one compilation per sample, and cold
            // and warm take turns, so that both see the same state of the machine.
            let caches = scratch.join(format!("{}-{sample}", image.file));
            samples.ours_cold.push(time_process(&mut ours(&caches.join("ours"))?)?);
            samples.ours_warm.push(time_process(&mut ours(&caches.join("ours"))?)?);
            if image.bare {
                samples.bare_cold.push(time_process(&mut bare(&caches.join("bare"))?)?);
                samples.bare_warm.push(time_process(&mut bare(&caches.join("bare"))?)?);
            }
            std::fs::remove_dir_all(&caches)?;
        }
        rows.extend(samples.rows(name, image, &path));
    }
    Ok(rows)
}

/// The loader's cache and the driver's JIT cache of `command` in `caches`: empty when the folder is new. Both are
/// made first, so that neither cache is off for want of its folder.
fn with_caches(command: &mut Command, caches: &Path) -> Result<()> {
    let (loader, driver) = (caches.join("loader"), caches.join("driver"));
    for folder in [&loader, &driver] {
        std::fs::create_dir_all(folder).with_context(|| format!("cannot make {}", folder.display()))?;
    }
    command.env("GPU_LOADER_CACHE_DIR", loader).env("CUDA_CACHE_PATH", driver);
    command.env_remove("GPU_LOADER_CACHE_DISABLE").env_remove("CUDA_CACHE_DISABLE");
    Ok(())
}

#[derive(Default)]
struct Samples {
    ours_cold: Vec<Duration>,
    ours_warm: Vec<Duration>,
    bare_cold: Vec<Duration>,
    bare_warm: Vec<Duration>,
}

impl Samples {
    fn rows(self, name: &str, image: &Fresh, path: &Path) -> Vec<Row> {
        let kb = std::fs::metadata(path).map_or(0.0, |metadata| metadata.len() as f64 / 1e3);
        let args = image.args.iter().map(|arg| format!(" {arg}")).collect::<String>();
        let what =
            format!("gpu-loader {}{args}: {}, {kb:.0} KB of PTX, first run, caches empty", image.file, image.what);
        let cold = Stats::of(seconds(self.ours_cold));
        let against_warm = row(
            name,
            &what,
            "ms",
            cold.clone(),
            Some((Stats::of(seconds(self.ours_warm)), "a warm run of the same image (both caches filled)")),
            "≤ 1.5×",
        );
        if self.bare_cold.is_empty() {
            return vec![against_warm];
        }
        let bare_warm = Stats::of(seconds(self.bare_warm));
        let against_warm = Row {
            note: format!("a bare cudarc program's warm load of it: {:.2} ms", bare_warm.median * 1e3),
            ..against_warm
        };
        let against_bare = row(
            &format!("{name}-bare"),
            &what,
            "ms",
            cold,
            Some((
                Stats::of(seconds(self.bare_cold)),
                "a cudarc program's first run: context, the driver compiles and loads the image, one empty launch",
            )),
            "reported",
        );
        vec![against_warm, against_bare]
    }
}
