//! The checked-call layer over the bindgen bindings ([`sys`](super::sys)), as cudarc's `result` is over its `sys`:
//! the runtime opened once per process ([`runtime`]), and each `hsa_*` call the backend makes as a method of
//! [`Runtime`] that returns `Result<_, HsaError>`, its status decoded once, where it failed. Out-parameters become
//! return values; callers never see an `hsa_status_t`.
//!
//! Over 500 lines: one short method per runtime function the loader calls, each with its safety contract, so the
//! file's length follows that list.

use std::ffi::{CStr, c_void};
use std::sync::OnceLock;

use super::sys;

/// The ROCm runtime's soname.
pub const LIBRARY: &str = "libhsa-runtime64.so.1";

/// Why the HSA runtime cannot be used at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("the ROCm HSA runtime ({library}) is not installed")]
    NotInstalled { library: String },
    #[error("the ROCm HSA runtime ({library}) cannot be loaded: {reason}")]
    CannotLoad { library: String, reason: String },
    #[error("{library} lacks HSA functions the loader needs: {reason}")]
    MissingFunctions { library: String, reason: String },
}

/// A runtime call that failed: `hsa_queue_create failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES: ...`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {description}")]
pub struct HsaError {
    /// The function that failed.
    pub call: &'static str,
    pub status: sys::hsa_status_t,
    /// `HSA_STATUS_...: description`, as the runtime words the status.
    pub description: String,
}

impl HsaError {
    /// The `HSA_STATUS_...` name alone, for messages that go on to say more.
    pub fn status_name(&self) -> &str {
        self.description.split(':').next().unwrap_or(&self.description)
    }
}

pub type Result<T, E = HsaError> = std::result::Result<T, E>;

/// The opened runtime: every function the loader calls, looked up once.
pub struct Runtime {
    api: sys::Hsa,
}

/// Opens the HSA runtime once per process.
pub fn runtime() -> Result<&'static Runtime, OpenError> {
    static RUNTIME: OnceLock<Result<Runtime, OpenError>> = OnceLock::new();
    RUNTIME.get_or_init(|| open_runtime(LIBRARY)).as_ref().map_err(Clone::clone)
}

/// Opens the HSA runtime `library` and looks up every function the loader calls.
pub fn open_runtime(library: &str) -> Result<Runtime, OpenError> {
    // SAFETY: opening runs the library's initialisers, which need nothing from us; a missing library is an error.
    let opened = unsafe { libloading::Library::new(library) }.map_err(|error| {
        let error = error.to_string();
        if error.contains("No such file") || error.contains("cannot open shared object") {
            OpenError::NotInstalled { library: library.into() }
        } else {
            OpenError::CannotLoad { library: library.into(), reason: one_line(&error) }
        }
    })?;
    // SAFETY: each symbol is looked up with the signature bindgen generated from the runtime's own headers.
    let api = unsafe { sys::Hsa::from_library(opened) }.map_err(|error| OpenError::MissingFunctions {
        library: library.into(),
        reason: one_line(&error.to_string()),
    })?;
    Ok(Runtime { api })
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Collects what an `hsa_*_iterate_*` call reports into the `Vec<T>` behind `data`.
unsafe extern "C" fn collect<T>(item: T, data: *mut c_void) -> sys::hsa_status_t {
    // SAFETY: `data` is the `&mut Vec<T>` that `Runtime::agents` or `Runtime::memory_pools` passed, alive for the call.
    unsafe { (*data.cast::<Vec<T>>()).push(item) };
    sys::HSA_STATUS_SUCCESS
}

impl Runtime {
    /// `HSA_STATUS_...: description`, from the runtime.
    pub fn describe(&self, status: sys::hsa_status_t) -> String {
        let mut text: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: the runtime stores a pointer to a static string in `text`.
        if unsafe { self.api.hsa_status_string(status, &mut text) } == sys::HSA_STATUS_SUCCESS && !text.is_null() {
            // SAFETY: the runtime's status strings are static and NUL-terminated.
            return one_line(&unsafe { CStr::from_ptr(text) }.to_string_lossy());
        }
        format!("HSA status {status:#x}")
    }

    /// The call's status as a `Result`: `HSA_STATUS_INFO_BREAK` (an iteration its callback stopped) counts as success.
    fn check(&self, call: &'static str, status: sys::hsa_status_t) -> Result<()> {
        if status == sys::HSA_STATUS_SUCCESS || status == sys::HSA_STATUS_INFO_BREAK {
            Ok(())
        } else {
            Err(HsaError { call, status, description: self.describe(status) })
        }
    }

    /// One attribute of a `*_get_info` call: `get` passes the runtime a pointer to a `T` that starts as `initial`.
    ///
    /// # Safety
    /// `T` must be the type the runtime writes through the pointer `get` passes on.
    unsafe fn info<T: Copy>(
        &self,
        call: &'static str,
        initial: T,
        get: impl FnOnce(*mut c_void) -> sys::hsa_status_t,
    ) -> Result<T> {
        let mut value = initial;
        self.check(call, get((&raw mut value).cast()))?;
        Ok(value)
    }

    /// `hsa_init`: reference counted, undone by [`Runtime::shut_down`].
    pub fn init(&self) -> Result<()> {
        // SAFETY: no preconditions.
        self.check("hsa_init", unsafe { self.api.hsa_init() })
    }

    /// `hsa_shut_down`.
    ///
    /// # Safety
    /// Once for each successful [`Runtime::init`], after every handle made since is released and unused.
    pub unsafe fn shut_down(&self) -> Result<()> {
        // SAFETY: the caller's contract.
        self.check("hsa_shut_down", unsafe { self.api.hsa_shut_down() })
    }

    /// Makes `handler` receive the runtime's system events (GPU memory faults among them).
    ///
    /// # Safety
    /// `handler` must be sound to call from the runtime's threads with any event and a null `data`, for the rest of
    /// the process.
    pub unsafe fn register_system_event_handler(&self, handler: sys::hsa_amd_system_event_callback_t) -> Result<()> {
        // SAFETY: the caller's contract.
        let status = unsafe { self.api.hsa_amd_register_system_event_handler(handler, std::ptr::null_mut()) };
        self.check("hsa_amd_register_system_event_handler", status)
    }

    /// Every agent, in the runtime's order.
    pub fn agents(&self) -> Result<Vec<sys::hsa_agent_t>> {
        let mut agents: Vec<sys::hsa_agent_t> = Vec::new();
        // SAFETY: the callback pushes into `agents`, which outlives the call.
        let status = unsafe { self.api.hsa_iterate_agents(Some(collect), (&raw mut agents).cast()) };
        self.check("hsa_iterate_agents", status)?;
        Ok(agents)
    }

    /// One `hsa_agent_get_info` attribute.
    ///
    /// # Safety
    /// `T` must be the type the runtime writes for `attribute` (`initial` only gives it a value first).
    pub unsafe fn agent_info<T: Copy>(
        &self,
        agent: sys::hsa_agent_t,
        attribute: sys::hsa_agent_info_t,
        initial: T,
    ) -> Result<T> {
        // SAFETY: the pointer is to a `T`, the attribute's type (caller's contract).
        unsafe {
            self.info("hsa_agent_get_info", initial, |value| self.api.hsa_agent_get_info(agent, attribute, value))
        }
    }

    /// The memory pools of `agent`.
    pub fn memory_pools(&self, agent: sys::hsa_agent_t) -> Result<Vec<sys::hsa_amd_memory_pool_t>> {
        let mut pools: Vec<sys::hsa_amd_memory_pool_t> = Vec::new();
        // SAFETY: the callback pushes into `pools`, which outlives the call.
        let status =
            unsafe { self.api.hsa_amd_agent_iterate_memory_pools(agent, Some(collect), (&raw mut pools).cast()) };
        self.check("hsa_amd_agent_iterate_memory_pools", status)?;
        Ok(pools)
    }

    /// One `hsa_amd_memory_pool_get_info` attribute.
    ///
    /// # Safety
    /// `T` must be the type the runtime writes for `attribute` (`initial` only gives it a value first).
    pub unsafe fn memory_pool_info<T: Copy>(
        &self,
        pool: sys::hsa_amd_memory_pool_t,
        attribute: sys::hsa_amd_memory_pool_info_t,
        initial: T,
    ) -> Result<T> {
        // SAFETY: the pointer is to a `T`, the attribute's type (caller's contract).
        unsafe {
            self.info("hsa_amd_memory_pool_get_info", initial, |value| {
                self.api.hsa_amd_memory_pool_get_info(pool, attribute, value)
            })
        }
    }

    /// One `hsa_system_get_info` attribute.
    ///
    /// # Safety
    /// `T` must be the type the runtime writes for `attribute` (`initial` only gives it a value first).
    pub unsafe fn system_info<T: Copy>(&self, attribute: sys::hsa_system_info_t, initial: T) -> Result<T> {
        // SAFETY: the pointer is to a `T`, the attribute's type (caller's contract).
        unsafe { self.info("hsa_system_get_info", initial, |value| self.api.hsa_system_get_info(attribute, value)) }
    }

    /// A code object reader over `bytes`.
    ///
    /// # Safety
    /// `bytes` must outlive the reader ([`Runtime::code_object_reader_destroy`]).
    pub unsafe fn code_object_reader(&self, bytes: &[u8]) -> Result<sys::hsa_code_object_reader_t> {
        let mut reader = sys::hsa_code_object_reader_t { handle: 0 };
        // SAFETY: the reader reads `bytes`, which outlive it (caller's contract).
        let status = unsafe {
            self.api.hsa_code_object_reader_create_from_memory(bytes.as_ptr().cast(), bytes.len(), &mut reader)
        };
        self.check("hsa_code_object_reader_create_from_memory", status)?;
        Ok(reader)
    }

    /// # Safety
    /// `reader` came from [`Runtime::code_object_reader`] and is not used again.
    pub unsafe fn code_object_reader_destroy(&self, reader: sys::hsa_code_object_reader_t) -> Result<()> {
        // SAFETY: the caller's contract.
        self.check("hsa_code_object_reader_destroy", unsafe { self.api.hsa_code_object_reader_destroy(reader) })
    }

    /// An empty executable of the full profile with the default rounding mode.
    pub fn executable_create(&self) -> Result<sys::hsa_executable_t> {
        let mut executable = sys::hsa_executable_t { handle: 0 };
        // SAFETY: an empty options string; `executable` receives the handle.
        let status = unsafe {
            self.api.hsa_executable_create_alt(
                sys::HSA_PROFILE_FULL,
                sys::HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                c"".as_ptr(),
                &mut executable,
            )
        };
        self.check("hsa_executable_create_alt", status)?;
        Ok(executable)
    }

    /// Loads the reader's code object into `executable` for `agent`.
    ///
    /// # Safety
    /// The executable is not frozen; all three handles are alive.
    pub unsafe fn executable_load_agent_code_object(
        &self,
        executable: sys::hsa_executable_t,
        agent: sys::hsa_agent_t,
        reader: sys::hsa_code_object_reader_t,
    ) -> Result<()> {
        // SAFETY: the caller's contract; no options; the loaded-object handle is not needed.
        let status = unsafe {
            self.api.hsa_executable_load_agent_code_object(
                executable,
                agent,
                reader,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        self.check("hsa_executable_load_agent_code_object", status)
    }

    /// # Safety
    /// `executable` is alive; nothing is loaded into it afterwards.
    pub unsafe fn executable_freeze(&self, executable: sys::hsa_executable_t) -> Result<()> {
        // SAFETY: the caller's contract; no options.
        self.check("hsa_executable_freeze", unsafe { self.api.hsa_executable_freeze(executable, std::ptr::null()) })
    }

    /// # Safety
    /// `executable` is not used again, and nothing it loaded runs on a GPU any more.
    pub unsafe fn executable_destroy(&self, executable: sys::hsa_executable_t) -> Result<()> {
        // SAFETY: the caller's contract.
        self.check("hsa_executable_destroy", unsafe { self.api.hsa_executable_destroy(executable) })
    }

    /// The symbol `name` of a frozen executable: of `agent`'s code, or with `None`, a program-scope one.
    ///
    /// # Safety
    /// `executable` is alive and frozen.
    pub unsafe fn executable_symbol(
        &self,
        executable: sys::hsa_executable_t,
        name: &CStr,
        agent: Option<&sys::hsa_agent_t>,
    ) -> Result<sys::hsa_executable_symbol_t> {
        let mut symbol = sys::hsa_executable_symbol_t { handle: 0 };
        let agent = agent.map_or(std::ptr::null(), std::ptr::from_ref);
        // SAFETY: the caller's contract; the name is a C string; `symbol` receives the handle.
        let status =
            unsafe { self.api.hsa_executable_get_symbol_by_name(executable, name.as_ptr(), agent, &mut symbol) };
        self.check("hsa_executable_get_symbol_by_name", status)?;
        Ok(symbol)
    }

    /// One `hsa_executable_symbol_get_info` attribute.
    ///
    /// # Safety
    /// `T` must be the type the runtime writes for `attribute` (`initial` only gives it a value first).
    pub unsafe fn symbol_info<T: Copy>(
        &self,
        symbol: sys::hsa_executable_symbol_t,
        attribute: sys::hsa_executable_symbol_info_t,
        initial: T,
    ) -> Result<T> {
        // SAFETY: the pointer is to a `T`, the attribute's type (caller's contract).
        unsafe {
            self.info("hsa_executable_symbol_get_info", initial, |value| {
                self.api.hsa_executable_symbol_get_info(symbol, attribute, value)
            })
        }
    }

    /// A multi-producer queue of `size` packets on `agent`, whose errors go to `on_error` with `data`; the runtime
    /// chooses the segment sizes.
    ///
    /// # Safety
    /// `on_error` must be sound to call from the runtime's threads with `data` for as long as the queue lives.
    pub unsafe fn queue_create(
        &self,
        agent: sys::hsa_agent_t,
        size: u32,
        on_error: unsafe extern "C" fn(sys::hsa_status_t, *mut sys::hsa_queue_t, *mut c_void),
        data: *mut c_void,
    ) -> Result<*mut sys::hsa_queue_t> {
        let mut queue = std::ptr::null_mut();
        // SAFETY: the caller's contract for the callback; `queue` receives the queue. `u32::MAX` segment sizes let
        // the runtime choose.
        let status = unsafe {
            self.api.hsa_queue_create(
                agent,
                size,
                sys::HSA_QUEUE_TYPE_MULTI,
                Some(on_error),
                data,
                u32::MAX,
                u32::MAX,
                &mut queue,
            )
        };
        self.check("hsa_queue_create", status)?;
        Ok(queue)
    }

    /// # Safety
    /// `queue` is alive, not used again, and nothing runs on it any more.
    pub unsafe fn queue_destroy(&self, queue: *mut sys::hsa_queue_t) -> Result<()> {
        // SAFETY: the caller's contract.
        self.check("hsa_queue_destroy", unsafe { self.api.hsa_queue_destroy(queue) })
    }

    /// Makes the packet processor record each dispatch's start and end on `queue`.
    ///
    /// # Safety
    /// `queue` is alive.
    pub unsafe fn enable_profiling(&self, queue: *mut sys::hsa_queue_t) -> Result<()> {
        // SAFETY: the caller's contract.
        let status = unsafe { self.api.hsa_amd_profiling_set_profiler_enabled(queue, 1) };
        self.check("hsa_amd_profiling_set_profiler_enabled", status)
    }

    /// Reserves `count` packet slots of `queue`; returns the first slot's index.
    ///
    /// # Safety
    /// `queue` is alive; the caller fills each reserved slot.
    pub unsafe fn queue_reserve(&self, queue: *mut sys::hsa_queue_t, count: u64) -> u64 {
        // SAFETY: the caller's contract.
        unsafe { self.api.hsa_queue_add_write_index_relaxed(queue, count) }
    }

    /// The index of the next packet the packet processor will read.
    ///
    /// # Safety
    /// `queue` is alive.
    pub unsafe fn queue_read_index(&self, queue: *mut sys::hsa_queue_t) -> u64 {
        // SAFETY: the caller's contract.
        unsafe { self.api.hsa_queue_load_read_index_scacquire(queue) }
    }

    /// `len` bytes (at least one) of `pool`.
    pub fn memory_pool_allocate(&self, pool: sys::hsa_amd_memory_pool_t, len: usize) -> Result<*mut c_void> {
        let mut pointer = std::ptr::null_mut();
        // SAFETY: a plain allocation; `pointer` receives it.
        let status = unsafe { self.api.hsa_amd_memory_pool_allocate(pool, len.max(1), 0, &mut pointer) };
        self.check("hsa_amd_memory_pool_allocate", status)?;
        Ok(pointer)
    }

    /// # Safety
    /// `pointer` came from [`Runtime::memory_pool_allocate`] and is not used again, by the host or a GPU.
    pub unsafe fn memory_pool_free(&self, pointer: *mut c_void) -> Result<()> {
        // SAFETY: the caller's contract.
        self.check("hsa_amd_memory_pool_free", unsafe { self.api.hsa_amd_memory_pool_free(pointer) })
    }

    /// Lets `agent` access the pool allocation at `pointer`.
    ///
    /// # Safety
    /// `pointer` is a live allocation of [`Runtime::memory_pool_allocate`].
    pub unsafe fn allow_access(&self, agent: &sys::hsa_agent_t, pointer: *mut c_void) -> Result<()> {
        // SAFETY: the caller's contract; one agent, no attributes.
        let status = unsafe { self.api.hsa_amd_agents_allow_access(1, agent, std::ptr::null(), pointer) };
        self.check("hsa_amd_agents_allow_access", status)
    }

    /// Sets `words` 32-bit words at `pointer` to `value`.
    ///
    /// # Safety
    /// `pointer` is an allocation of at least `words` words that nothing else uses meanwhile.
    pub unsafe fn memory_fill(&self, pointer: *mut c_void, value: u32, words: usize) -> Result<()> {
        // SAFETY: the caller's contract.
        self.check("hsa_amd_memory_fill", unsafe { self.api.hsa_amd_memory_fill(pointer, value, words) })
    }

    /// Copies `len` bytes from `source` to `destination`, synchronously.
    ///
    /// # Safety
    /// Both are allocations the runtime can copy between, of at least `len` bytes, that do not overlap.
    pub unsafe fn memory_copy(&self, destination: *mut c_void, source: *const c_void, len: usize) -> Result<()> {
        // SAFETY: the caller's contract.
        self.check("hsa_memory_copy", unsafe { self.api.hsa_memory_copy(destination, source, len) })
    }

    /// A signal of `initial` value that any agent may consume.
    pub fn signal_create(&self, initial: i64) -> Result<sys::hsa_signal_t> {
        let mut signal = sys::hsa_signal_t { handle: 0 };
        // SAFETY: no consumers listed; `signal` receives the handle.
        let status = unsafe { self.api.hsa_signal_create(initial, 0, std::ptr::null(), &mut signal) };
        self.check("hsa_signal_create", status)?;
        Ok(signal)
    }

    /// # Safety
    /// `signal` is alive, not used again, and no packet in flight refers to it.
    pub unsafe fn signal_destroy(&self, signal: sys::hsa_signal_t) -> Result<()> {
        // SAFETY: the caller's contract.
        self.check("hsa_signal_destroy", unsafe { self.api.hsa_signal_destroy(signal) })
    }

    /// The signal's value, with acquire ordering.
    ///
    /// # Safety
    /// `signal` is alive.
    pub unsafe fn signal_load(&self, signal: sys::hsa_signal_t) -> i64 {
        // SAFETY: the caller's contract.
        unsafe { self.api.hsa_signal_load_scacquire(signal) }
    }

    /// Stores `value` into the signal, with release ordering (ringing a queue's doorbell).
    ///
    /// # Safety
    /// `signal` is alive; for a doorbell, every packet up to `value` is written.
    pub unsafe fn signal_store(&self, signal: sys::hsa_signal_t, value: i64) {
        // SAFETY: the caller's contract.
        unsafe { self.api.hsa_signal_store_screlease(signal, value) }
    }

    /// When the dispatch that completed `signal` started and ended, in system timestamp ticks.
    ///
    /// # Safety
    /// `signal` is alive and completed a dispatch on a queue of `agent` with profiling enabled.
    pub unsafe fn dispatch_time(
        &self,
        agent: sys::hsa_agent_t,
        signal: sys::hsa_signal_t,
    ) -> Result<sys::hsa_amd_profiling_dispatch_time_t> {
        let mut time = sys::hsa_amd_profiling_dispatch_time_t::default();
        // SAFETY: the caller's contract; `time` receives the times.
        let status = unsafe { self.api.hsa_amd_profiling_get_dispatch_time(agent, signal, &mut time) };
        self.check("hsa_amd_profiling_get_dispatch_time", status)?;
        Ok(time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runtime_is_named() {
        let error = open_runtime("libhsa-runtime64-not-here.so.1").err().unwrap();
        assert_eq!(error.to_string(), "the ROCm HSA runtime (libhsa-runtime64-not-here.so.1) is not installed");
    }

    #[test]
    fn a_library_without_hsa_is_refused_without_panicking() {
        // libc is present everywhere and exports none of the HSA functions.
        let error = open_runtime("libc.so.6").err().unwrap();
        assert!(matches!(error, OpenError::MissingFunctions { .. }), "{error:?}");
        let error = error.to_string();
        assert!(error.starts_with("libc.so.6 lacks HSA functions the loader needs"), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }

    /// Where the Debian runtime is installed (CI installs it), every function the bindings name must resolve, and a
    /// failed call's status is decoded into its name and the runtime's words.
    #[test]
    fn the_installed_runtime_has_every_function() {
        match open_runtime(LIBRARY) {
            Ok(runtime) => {
                let error = runtime.check("hsa_queue_create", sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES).unwrap_err();
                assert!(error.description.starts_with("HSA_STATUS_ERROR_OUT_OF_RESOURCES"), "{error}");
                assert!(error.to_string().starts_with("hsa_queue_create failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES"));
                let error = runtime.check("hsa_init", sys::HSA_STATUS_ERROR_INVALID_ISA).unwrap_err();
                assert_eq!(error.status_name(), "HSA_STATUS_ERROR_INVALID_ISA");
                assert_eq!(runtime.check("hsa_iterate_agents", sys::HSA_STATUS_INFO_BREAK), Ok(()));
            }
            Err(error) => assert!(matches!(error, OpenError::NotInstalled { .. }), "{error}"),
        }
    }
}
