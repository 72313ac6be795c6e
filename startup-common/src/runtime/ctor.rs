//! Constructors and destructors with priorities, spelled once for both targets.
//!
//! - AMD: an entry in section `.init_array.N` / `.fini_array.N`; the linker sorts the sections by `N` and provides
//!   `__init_array_start`/`__init_array_end` (and the fini bounds) around them.
//! - NVIDIA: PTX has no sections and `nvlink` no such bounds, so an entry is an exported global named
//!   `__init_array_object_<name>_<N>` / `__fini_array_object_<name>_<N>`, LLVM's NVPTX scheme, which clang uses for
//!   C's `__attribute__((constructor(N)))`. The loader finds them, sorts them by `N`, builds the arrays in device
//!   memory and sets the bounds before `_begin` runs.
//!
//! Either way the arrays end up in ascending priority order: constructors run lowest `N` first, destructors highest
//! `N` first. A priority is an integer literal from 0 to 65535; leaving it out means 65535, after every explicit one.

/// Registers a constructor: `constructor!(PRIORITY, function)` or `constructor!(function)`.
///
/// The function must be an `extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_char)`: it receives `main`'s
/// arguments. PTX only calls through function pointers of the exact prototype, so there is one signature.
#[macro_export]
macro_rules! constructor {
    ($function:ident) => {
        $crate::constructor!(65535, $function);
    };
    ($priority:literal, $function:ident) => {
        const _: () = {
            const _: () = assert!($priority >= 0 && $priority <= 65535, "priorities run from 0 to 65535");
            #[cfg(target_arch = "nvptx64")]
            #[used]
            #[unsafe(export_name = concat!("__init_array_object_", stringify!($function), "_", stringify!($priority)))]
            static ENTRY: $crate::InitCallback = $function;
            #[cfg(target_arch = "amdgpu")]
            #[used]
            #[unsafe(link_section = concat!(".init_array.", stringify!($priority)))]
            static ENTRY: $crate::InitCallback = $function;
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            const _: $crate::InitCallback = $function;
        };
    };
}

/// Registers a destructor: `destructor!(PRIORITY, function)` or `destructor!(function)`. The function is an
/// `extern "C" fn()`. Destructors run at exit, after every `atexit` handler, highest priority first.
#[macro_export]
macro_rules! destructor {
    ($function:ident) => {
        $crate::destructor!(65535, $function);
    };
    ($priority:literal, $function:ident) => {
        const _: () = {
            const _: () = assert!($priority >= 0 && $priority <= 65535, "priorities run from 0 to 65535");
            #[cfg(target_arch = "nvptx64")]
            #[used]
            #[unsafe(export_name = concat!("__fini_array_object_", stringify!($function), "_", stringify!($priority)))]
            static ENTRY: $crate::FiniCallback = $function;
            #[cfg(target_arch = "amdgpu")]
            #[used]
            #[unsafe(link_section = concat!(".fini_array.", stringify!($priority)))]
            static ENTRY: $crate::FiniCallback = $function;
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            const _: $crate::FiniCallback = $function;
        };
    };
}

#[cfg(test)]
mod tests {
    use core::ffi::{c_char, c_int};

    extern "C" fn init(_: c_int, _: *mut *mut c_char, _: *mut *mut c_char) {}
    extern "C" fn fini() {}

    // On the host the macros only check the callback's type; these must compile.
    crate::constructor!(101, init);
    crate::constructor!(init);
    crate::destructor!(0, fini);
    crate::destructor!(fini);
}
