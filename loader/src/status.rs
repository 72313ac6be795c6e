//! How a run ends, and the exit code the loader gives each ending: the one place where exit codes are decided (the
//! table in `docs/failures.md`).

use std::fmt;

use gpu_startup_protocol::abi::Kernel;

use crate::error::LoaderError;

/// Exit code for `abort()` on the device, as for a host process killed by SIGABRT.
pub const ABORT_EXIT_CODE: i32 = 134;
/// Exit code for a device fault (trap, illegal address, ...), as for a host process killed by SIGSEGV.
pub const DEVICE_FAULT_EXIT_CODE: i32 = 139;
/// Exit code when `--timeout` expires, as `timeout(1)` uses.
pub const TIMEOUT_EXIT_CODE: i32 = 124;
/// Exit code for a loader error before or around the program (bad image, no GPU, driver failure, a message the
/// loader cannot serve), and for a run that lost a message its program would otherwise have ended with 0.
pub const LOADER_ERROR_EXIT_CODE: i32 = 1;
/// Exit code for a command line clap rejects.
pub const USAGE_EXIT_CODE: i32 = 2;
/// Exit code for a non-zero status that a process's 8-bit exit code cannot hold: one whose low 8 bits are all 0
/// (256, -256, 2^32, or results of `main` that OR to 256).
pub const WIDE_STATUS_EXIT_CODE: i32 = 255;

/// How the program ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunStatus {
    /// `exit(status)` on the device, or `main` returned (the OR of every thread's result). The status word as it
    /// came: a `c_int`, or any 64-bit value when the device wrote over the message.
    Exited(i64),
    /// `abort()` on the device.
    Aborted,
    /// `--timeout` expired while the program ran.
    TimedOut,
    /// The loader received this signal (SIGINT, SIGTERM) and stopped the program.
    Interrupted(i32),
    /// The device reported a fault (a trap, an illegal address or instruction; on AMD a GPU memory fault or a queue
    /// error) while `kernel` ran, as the startup's progress markers tell; `message` is the platform's report.
    Faulted { kernel: Kernel, message: String },
}

/// The process exit code (0 to 255) for a device status: its low 8 bits, as a host process's `exit` keeps them (-1
/// gives 255, 257 gives 1), except that a non-zero status whose low 8 bits are all 0 gives
/// [`WIDE_STATUS_EXIT_CODE`]: a program that did not succeed never exits with 0.
pub fn status_exit_code(status: i64) -> i32 {
    match (status & 0xff) as i32 {
        0 if status != 0 => WIDE_STATUS_EXIT_CODE,
        code => code,
    }
}

impl RunStatus {
    /// The loader's process exit code for this ending.
    pub fn exit_code(&self) -> i32 {
        match *self {
            RunStatus::Exited(status) => status_exit_code(status),
            RunStatus::Aborted => ABORT_EXIT_CODE,
            RunStatus::TimedOut => TIMEOUT_EXIT_CODE,
            RunStatus::Interrupted(signal) => 128 + signal,
            RunStatus::Faulted { .. } => DEVICE_FAULT_EXIT_CODE,
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunStatus::Exited(status) => write!(f, "exited with {status}"),
            RunStatus::Aborted => f.write_str("aborted"),
            RunStatus::TimedOut => f.write_str("timed out"),
            RunStatus::Interrupted(signal) => write!(f, "interrupted by signal {signal}"),
            RunStatus::Faulted { kernel, message } => {
                write!(f, "device fault in kernel `{}`: {message}", kernel.name())
            }
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunReport {
    pub status: RunStatus,
    /// Whether every kernel finished; if not (timeout, a signal, `exit` while other threads still ran, threads
    /// still running after a panic), kernels may still be running and the backend was leaked rather than torn down
    /// under them: end the process soon.
    pub finished: bool,
    /// RPC messages the loader gave up in the middle (each reported on stderr): their output is incomplete.
    pub messages_given_up: usize,
    /// How many threads panicked: exact when `finished`, else a lower bound.
    pub panicked_threads: u32,
    /// Whether `_begin` ran every constructor: if not, `main` (or the test) never ran.
    pub constructors_ran: bool,
    /// The message of the first panic, as the startup's panic handler reported it (`PANIC_MESSAGE`), without the
    /// location and thread of its line on stderr; `None` when no thread reported one (a std program's panics are
    /// std's to print). At most [`MAX_PANIC_MESSAGE`](crate::server::MAX_PANIC_MESSAGE) bytes.
    pub panic_message: Option<String>,
}

impl RunReport {
    /// The loader's process exit code: the status's, but never 0 for a run that lost a message.
    pub fn exit_code(&self) -> i32 {
        match self.status.exit_code() {
            0 if self.messages_given_up > 0 => LOADER_ERROR_EXIT_CODE,
            code => code,
        }
    }
}

/// The loader's process exit code for a run that ended with `error` rather than a [`RunStatus`]: the program did not
/// end in any of the ways it can, so the loader failed.
pub fn error_exit_code(_error: &LoaderError) -> i32 {
    LOADER_ERROR_EXIT_CODE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_table() {
        assert_eq!(RunStatus::Exited(3).exit_code(), 3);
        assert_eq!(RunStatus::Aborted.exit_code(), 134);
        assert_eq!(RunStatus::TimedOut.exit_code(), 124);
        assert_eq!(RunStatus::Interrupted(2).exit_code(), 130);
        assert_eq!(RunStatus::Interrupted(15).exit_code(), 143);
        let fault = RunStatus::Faulted { kernel: Kernel::Start, message: "trap".into() };
        assert_eq!(fault.exit_code(), 139);
        assert_eq!(fault.to_string(), "device fault in kernel `_start`: trap");
        assert_eq!(error_exit_code(&LoaderError::NoExitReported), 1);
    }

    /// A status keeps its low 8 bits where they say something, as a host process's would; no non-zero status becomes
    /// 0, whatever its width.
    #[test]
    fn no_failing_status_exits_with_zero() {
        for (status, code) in [
            (0, 0),
            (1, 1),
            (255, 255),
            (257, 1),
            (-1, 255),
            (-2, 254),
            (i64::from(i32::MIN) + 1, 1),
            (256, 255),
            (512, 255),
            (-256, 255),
            (1 << 32, 255),
            (0x100 | 0x200, 255),
            (i64::from(i32::MIN), 255),
            (i64::MIN, 255),
            (i64::MAX, 255),
        ] {
            assert_eq!(status_exit_code(status), code, "status {status}");
        }
        for status in (-70_000..70_000).chain([i64::MIN, i64::MAX, 1 << 40, -(1 << 40)]) {
            let code = status_exit_code(status);
            assert!((0..=255).contains(&code), "status {status} gave {code}");
            assert_eq!(code == 0, status == 0, "status {status} gave {code}");
        }
    }

    /// A run in which the loader gave up a message never exits with 0; a failing program keeps its own code.
    #[test]
    fn a_lost_message_makes_a_zero_exit_a_failure() {
        let report = |status, messages_given_up| RunReport {
            status,
            finished: true,
            messages_given_up,
            panicked_threads: 0,
            constructors_ran: true,
            panic_message: None,
        };
        assert_eq!(report(RunStatus::Exited(0), 0).exit_code(), 0);
        assert_eq!(report(RunStatus::Exited(0), 1).exit_code(), 1);
        assert_eq!(report(RunStatus::Exited(256), 2).exit_code(), 255);
        assert_eq!(report(RunStatus::Exited(7), 1).exit_code(), 7);
        assert_eq!(report(RunStatus::Aborted, 1).exit_code(), 134);
    }
}
