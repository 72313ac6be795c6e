//! Rust's printing macros on the GPU: `print!`, `println!`, `eprint!`, `eprintln!` (which `gpu-startup` re-exports),
//! and the function they expand to, which reaches the program's runtime through the hook `target_runtime!` defines.

use core::fmt;

use crate::libc::io::Stream;

/// The target of the `print!` macros; on a GPU it calls the program's runtime through the hook `target_runtime!`
/// defines. On the host it writes to the process's own streams.
#[doc(hidden)]
pub fn _print(stream: Stream, args: fmt::Arguments<'_>) {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    {
        unsafe extern "Rust" {
            fn __gpu_startup_print(stream: Stream, args: fmt::Arguments<'_>);
        }
        // SAFETY: `target_runtime!`, which every program expands once through its target crate, defines the hook
        // with exactly this signature.
        unsafe { __gpu_startup_print(stream, args) }
    }
    #[cfg(all(not(any(target_arch = "nvptx64", target_arch = "amdgpu")), any(test, feature = "host")))]
    {
        use std::io::Write;
        let _ = match stream {
            Stream::Stdout => std::io::stdout().write_fmt(args),
            Stream::Stderr => std::io::stderr().write_fmt(args),
        };
    }
    #[cfg(all(not(any(target_arch = "nvptx64", target_arch = "amdgpu")), not(any(test, feature = "host"))))]
    {
        let _ = (stream, args);
    }
}

/// Prints to the GPU program's stdout, like `std::print!`.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::rust::print::_print($crate::libc::io::Stream::Stdout, ::core::format_args!($($arg)*))
    };
}

/// Prints a line to the GPU program's stdout, like `std::println!`; the line is written whole.
#[macro_export]
macro_rules! println {
    () => {
        $crate::rust::print::_print($crate::libc::io::Stream::Stdout, ::core::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::rust::print::_print($crate::libc::io::Stream::Stdout, ::core::format_args!("{}\n", ::core::format_args!($($arg)*)))
    };
}

/// Prints to the GPU program's stderr, like `std::eprint!`.
#[macro_export]
macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::rust::print::_print($crate::libc::io::Stream::Stderr, ::core::format_args!($($arg)*))
    };
}

/// Prints a line to the GPU program's stderr, like `std::eprintln!`.
#[macro_export]
macro_rules! eprintln {
    () => {
        $crate::rust::print::_print($crate::libc::io::Stream::Stderr, ::core::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::rust::print::_print($crate::libc::io::Stream::Stderr, ::core::format_args!("{}\n", ::core::format_args!($($arg)*)))
    };
}
