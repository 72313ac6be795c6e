//! What the integration tests of the `gpu-loader` binary share: running it under a watchdog and checking how it
//! failed. Each test crate uses a part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpu_loader::status::{LOADER_ERROR_EXIT_CODE, USAGE_EXIT_CODE};

pub const LOADER: &str = env!("CARGO_BIN_EXE_gpu-loader");
/// A case that takes longer than this hangs.
pub const WATCHDOG: Duration = Duration::from_secs(20);

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// A fresh scratch directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gpu-loader").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

pub fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write a test image");
    path
}

/// What one run of the loader did.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

pub fn loader<I: AsRef<OsStr>>(args: impl IntoIterator<Item = I>) -> Command {
    let mut command = Command::new(LOADER);
    command.args(args);
    command
}

/// Runs `command` to the end, failing the test if it outlives the watchdog.
pub fn run(mut command: Command) -> Ran {
    let program = Path::new(command.get_program()).file_name().unwrap_or_default().to_string_lossy().into_owned();
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {program}: {error}"));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = reader(Box::new(child.stdout.take().expect("piped")));
    let stderr = reader(Box::new(child.stderr.take().expect("piped")));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if started.elapsed() > WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{program} hung: still running after {WATCHDOG:?} ({command:?})");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let ran = Ran {
        code: status.code(),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
        elapsed: started.elapsed(),
    };
    assert!(!ran.stderr.contains("panicked") && !ran.stdout.contains("panicked"), "{program} panicked: {ran:#?}");
    assert!(ran.code.is_some(), "{program} was killed by a signal: {ran:#?}");
    ran
}

impl Ran {
    /// A loader error: exit 1 and exactly one line, `gpu-loader: ...`, holding every one of `words`.
    #[track_caller]
    pub fn fails_with(&self, words: &[&str]) -> &Self {
        self.fails_as("gpu-loader", words)
    }

    /// An error of `program`: exit 1 and exactly one line, `PROGRAM: ...`, holding every one of `words`.
    #[track_caller]
    pub fn fails_as(&self, program: &str, words: &[&str]) -> &Self {
        assert_eq!(self.code, Some(LOADER_ERROR_EXIT_CODE), "exit code: {self:#?}");
        self.one_line_of(program);
        for word in words {
            assert!(self.stderr.contains(word), "stderr does not name the problem ({word:?}): {self:#?}");
        }
        self
    }

    #[track_caller]
    pub fn one_line(&self) {
        self.one_line_of("gpu-loader");
    }

    #[track_caller]
    pub fn one_line_of(&self, program: &str) {
        assert!(self.stderr.starts_with(&format!("{program}: ")), "stderr: {self:#?}");
        assert!(self.stderr.ends_with('\n') && self.stderr.lines().count() == 1, "not one line: {self:#?}");
    }

    /// A clap usage error (exit 2) that mentions each of `words`.
    #[track_caller]
    pub fn usage_error(&self, words: &[&str]) {
        assert_eq!(self.code, Some(USAGE_EXIT_CODE), "exit code: {self:#?}");
        assert!(self.stderr.starts_with("error: "), "clap's error line: {self:#?}");
        for word in words {
            assert!(self.stderr.contains(word), "the error does not name the problem ({word:?}): {self:#?}");
        }
    }

    /// Got past every check the loader makes without a GPU: `no GPU` here, or on a GPU machine the tiny fixture
    /// ran (its kernels only return, so it never reports an exit code).
    #[track_caller]
    pub fn reached_the_gpu(&self) {
        if self.stderr.contains("no GPU") {
            self.fails_with(&["gpu-loader: no GPU: "]);
        } else {
            self.fails_with(&["ended without reporting an exit code"]);
        }
    }
}
