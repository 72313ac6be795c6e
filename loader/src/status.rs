//! How a run ends, and the exit code the loader gives each ending (the table in `docs/failures.md`).

use std::fmt;

/// Exit code for `abort()` on the device, as for a host process killed by SIGABRT.
pub const ABORT_EXIT_CODE: i32 = 134;
/// Exit code for a device fault (trap, illegal address, ...), as for a host process killed by SIGSEGV.
pub const DEVICE_FAULT_EXIT_CODE: i32 = 139;
/// Exit code when `--timeout` expires, as `timeout(1)` uses.
pub const TIMEOUT_EXIT_CODE: i32 = 124;
/// Exit code for a loader error before or around the program (bad image, no GPU, driver failure).
pub const LOADER_ERROR_EXIT_CODE: i32 = 1;
/// Exit code for a command line clap rejects.
pub const USAGE_EXIT_CODE: i32 = 2;

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    /// `exit(code)` on the device, or `main` returned (the OR of every thread's result).
    Exited(i32),
    /// `abort()` on the device.
    Aborted,
    /// `--timeout` expired while the program ran.
    TimedOut,
    /// The loader received this signal (SIGINT, SIGTERM) and stopped the program.
    Interrupted(i32),
}

impl RunStatus {
    /// The loader's process exit code for this ending.
    pub fn exit_code(self) -> i32 {
        match self {
            RunStatus::Exited(code) => code,
            RunStatus::Aborted => ABORT_EXIT_CODE,
            RunStatus::TimedOut => TIMEOUT_EXIT_CODE,
            RunStatus::Interrupted(signal) => 128 + signal,
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunStatus::Exited(code) => write!(f, "exited with {code}"),
            RunStatus::Aborted => f.write_str("aborted"),
            RunStatus::TimedOut => f.write_str("timed out"),
            RunStatus::Interrupted(signal) => write!(f, "interrupted by signal {signal}"),
        }
    }
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
    }
}
