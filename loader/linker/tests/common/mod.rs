//! Running `gpu-bitcode-linker` in the integration tests: under a watchdog, in a scratch folder, and checking how it
//! failed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const LINKER: &str = env!("CARGO_BIN_EXE_gpu-bitcode-linker");
/// A case that takes longer than this hangs.
pub const WATCHDOG: Duration = Duration::from_secs(20);

/// A fresh scratch directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gpu-bitcode-linker").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

pub fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write a test input");
    path
}

/// What one run of the linker did.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Runs `command` to the end, failing the test if it outlives the watchdog, panics or is killed by a signal.
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

/// A linker error: exit 1 and exactly one line, `gpu-bitcode-linker: ...`, holding every one of `words`.
#[track_caller]
pub fn refused(ran: &Ran, words: &[&str]) {
    assert_eq!(ran.code, Some(1), "exit code: {ran:#?}");
    assert!(ran.stderr.starts_with("gpu-bitcode-linker: "), "stderr: {ran:#?}");
    assert!(ran.stderr.ends_with('\n') && ran.stderr.lines().count() == 1, "not one line: {ran:#?}");
    for word in words {
        assert!(ran.stderr.contains(word), "stderr does not name the problem ({word:?}): {ran:#?}");
    }
}
