//! The exit registry: C's `atexit` handlers, Rust's, and C++'s `__cxa_atexit` destructors of objects, in one list
//! run last-in first-out, as C++ requires (an object's destructor and an `atexit` handler run in the reverse order
//! of their registrations). Bounded, safe with concurrent callers.

use core::ffi::c_void;
use core::mem::MaybeUninit;

use crate::abi::FiniCallback;

/// The registry is full; C's `atexit` reports this as a non-zero return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryFull;

impl core::fmt::Display for RegistryFull {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the atexit registry is full")
    }
}

impl core::error::Error for RegistryFull {}

/// What `__cxa_atexit` registers: a C++ object's destructor (or clang's function that destroys an array of them).
pub type CxxDestructor = unsafe extern "C" fn(object: *mut c_void);

/// A handler to run at exit: C's `void (*)(void)`, a Rust `fn()`, or a C++ destructor with its object. PTX calls
/// through a function pointer only with the callee's exact prototype, so each kind is called through its own type,
/// never one cast to another.
#[derive(Debug, Clone, Copy)]
pub enum Handler {
    C(FiniCallback),
    Rust(fn()),
    Cxx { destructor: CxxDestructor, object: *mut c_void },
}

// SAFETY: a `Cxx` handler's object is a C++ object of static storage that `__cxa_atexit` registered; it is handed
// only to its destructor, by the one thread that runs the exit sequence.
unsafe impl Send for Handler {}

impl Handler {
    fn call(self) {
        match self {
            // SAFETY: C handlers are C-ABI functions taking nothing, registered through `atexit`.
            Handler::C(handler) => unsafe { handler() },
            Handler::Rust(handler) => handler(),
            // SAFETY: `__cxa_atexit`'s contract: the destructor takes this object, which lives until it runs.
            Handler::Cxx { destructor, object } => unsafe { destructor(object) },
        }
    }
}

/// Up to `N` handlers. A spin lock guards it: registrations are rare, and GPU threads have nothing to block on. The
/// one-thread kernels, `_begin` and `_end`, go without it ([`AtExitRegistry::reset_alone`],
/// [`AtExitRegistry::run_all_alone`]): on NVPTX each acquire and release of the lock is a system-scope fence of about
/// 1,000 cycles, and nothing else runs then.
pub struct AtExitRegistry<const N: usize> {
    handlers: spin::mutex::SpinMutex<Handlers<N>>,
}

/// The handlers registered: `slots[..len]`. Slots past `len` hold nothing, so that an empty registry is all zero
/// bytes: the static it lives in needs no initializer in the image (`Option<Handler>`'s `None` is not zero).
struct Handlers<const N: usize> {
    slots: [MaybeUninit<Handler>; N],
    len: usize,
}

impl<const N: usize> Handlers<N> {
    /// Takes the latest handler.
    fn pop(&mut self) -> Option<Handler> {
        self.len = self.len.checked_sub(1)?;
        // `get`, not indexing: `push` keeps `len` within the slots, and an index's bounds check would link the whole
        // panic machinery into every program through `_end`.
        let slot = self.slots.get(self.len)?;
        // SAFETY: every slot below the old `len` was written by `push` (a `Handler` is `Copy`: reading it out leaves
        // nothing to drop twice).
        Some(unsafe { slot.assume_init_read() })
    }

    /// Adds `handler` after the others.
    fn push(&mut self, handler: Handler) -> Result<(), RegistryFull> {
        self.slots.get_mut(self.len).ok_or(RegistryFull)?.write(handler);
        self.len += 1;
        Ok(())
    }
}

impl<const N: usize> Default for AtExitRegistry<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> AtExitRegistry<N> {
    pub const fn new() -> Self {
        Self { handlers: spin::mutex::SpinMutex::new(Handlers { slots: [const { MaybeUninit::uninit() }; N], len: 0 }) }
    }

    /// Adds `handler` to run before every handler registered so far.
    pub fn register(&self, handler: Handler) -> Result<(), RegistryFull> {
        self.locked(|handlers| handlers.push(handler))
    }

    /// Forgets every handler and registers `first`, if given, without the lock: a new run of the program's kernels
    /// starts with only `first`, or none. Only the count is reset: no slot at or above it is ever read before
    /// `register` writes it.
    ///
    /// # Safety
    /// No other thread may use the registry meanwhile, nor hold its lock.
    pub unsafe fn reset_alone(&self, first: Option<Handler>) {
        // SAFETY: the caller guarantees that nothing else reads or writes the handlers now.
        let handlers = unsafe { &mut *self.handlers.as_mut_ptr() };
        handlers.len = 0;
        if let Some(first) = first {
            handlers.slots[0].write(first);
            handlers.len = 1;
        }
    }

    /// Runs every handler, the latest first. A handler may register another; it runs next. The lock is not held
    /// while a handler runs, so handlers may call `atexit` without deadlocking.
    pub fn run_all(&self) {
        while let Some(handler) = self.locked(Handlers::pop) {
            handler.call();
        }
    }

    /// Whether no handler is registered, read without the lock.
    ///
    /// # Safety
    /// No other thread may use the registry meanwhile.
    pub unsafe fn is_empty_alone(&self) -> bool {
        // SAFETY: the caller guarantees that no other thread writes the handlers now.
        unsafe { (*self.handlers.as_mut_ptr()).len == 0 }
    }

    /// [`run_all`](Self::run_all) without taking the lock to take each handler. A handler may still register
    /// another (taking the lock, which is free); it runs next.
    ///
    /// # Safety
    /// No other thread may use the registry until this returns.
    pub unsafe fn run_all_alone(&self) {
        loop {
            // SAFETY: the caller guarantees that no other thread uses the registry; this thread's own `register`
            // calls (from a handler) have returned, and the reference ends before the handler runs.
            let Some(handler) = Handlers::pop(unsafe { &mut *self.handlers.as_mut_ptr() }) else { return };
            handler.call();
        }
    }

    /// Runs `critical` holding the lock. The section runs inside the loop: the lanes of an AMD wavefront that lost
    /// the race spin in lockstep, so a winner that ran its section after leaving the loop would wait for them for
    /// ever (as in the heap's page allocator).
    fn locked<R>(&self, critical: impl FnOnce(&mut Handlers<N>) -> R) -> R {
        loop {
            if let Some(mut handlers) = self.handlers.try_lock() {
                return critical(&mut handlers);
            }
            core::hint::spin_loop();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::vec::Vec;

    // Handlers are plain `extern "C" fn()`, so each test records into its own static log.
    macro_rules! recorder {
        ($log:ident, $($name:ident => $value:expr),+) => {
            static $log: Mutex<Vec<u32>> = Mutex::new(Vec::new());
            $(unsafe extern "C" fn $name() { $log.lock().unwrap().push($value) })+
        };
    }

    #[test]
    fn runs_last_in_first_out() {
        recorder!(LOG, first => 1, second => 2, third => 3);
        let registry = AtExitRegistry::<4>::new();
        for handler in [first as FiniCallback, second, third] {
            registry.register(Handler::C(handler)).unwrap();
        }
        registry.run_all();
        assert_eq!(*LOG.lock().unwrap(), [3, 2, 1]);
    }

    #[test]
    fn reset_alone_leaves_only_its_handler_or_none() {
        recorder!(LOG, old => 1, first => 2, later => 3);
        let registry = AtExitRegistry::<2>::new();
        registry.register(Handler::C(old)).unwrap();
        registry.register(Handler::C(old)).unwrap();
        // SAFETY: this test's registry is used by this thread alone.
        unsafe { registry.reset_alone(Some(Handler::C(first))) };
        registry.register(Handler::C(later)).unwrap();
        assert_eq!(registry.register(Handler::C(later)), Err(RegistryFull));
        registry.run_all();
        assert_eq!(*LOG.lock().unwrap(), [3, 2]);

        registry.register(Handler::C(old)).unwrap();
        // SAFETY: as above.
        unsafe { registry.reset_alone(None) };
        registry.run_all();
        assert_eq!(*LOG.lock().unwrap(), [3, 2], "nothing registered");
        registry.register(Handler::C(later)).unwrap();
        registry.register(Handler::C(later)).unwrap();
        assert_eq!(registry.register(Handler::C(later)), Err(RegistryFull), "every slot free again");
    }

    /// `_end`'s way: the handlers taken without the lock, in the same order, one registered by a handler next.
    #[test]
    fn run_all_alone_runs_what_run_all_would() {
        static REGISTRY: AtExitRegistry<4> = AtExitRegistry::new();
        recorder!(LOG, inner => 2, oldest => 0);
        unsafe extern "C" fn registering() {
            LOG.lock().unwrap().push(10);
            REGISTRY.register(Handler::C(inner)).unwrap();
        }
        // SAFETY: this test's registry is used by this thread alone.
        unsafe { REGISTRY.reset_alone(Some(Handler::C(oldest))) };
        REGISTRY.register(Handler::C(registering)).unwrap();
        // SAFETY: as above.
        unsafe { REGISTRY.run_all_alone() };
        assert_eq!(*LOG.lock().unwrap(), [10, 2, 0]);
        // SAFETY: as above.
        unsafe { REGISTRY.run_all_alone() };
        assert_eq!(LOG.lock().unwrap().len(), 3, "every handler was taken");
    }

    #[test]
    fn reports_full_and_keeps_what_it_has() {
        recorder!(LOG, handler => 7);
        let registry = AtExitRegistry::<2>::new();
        assert_eq!(registry.register(Handler::C(handler)), Ok(()));
        assert_eq!(registry.register(Handler::C(handler)), Ok(()));
        assert_eq!(registry.register(Handler::C(handler)), Err(RegistryFull));
        registry.run_all();
        assert_eq!(*LOG.lock().unwrap(), [7, 7]);
    }

    #[test]
    fn a_handler_registered_during_exit_runs_next() {
        static REGISTRY: AtExitRegistry<4> = AtExitRegistry::new();
        recorder!(LOG, outer => 1, inner => 2, oldest => 0);
        unsafe extern "C" fn registering() {
            LOG.lock().unwrap().push(10);
            REGISTRY.register(Handler::C(inner)).unwrap();
        }
        REGISTRY.register(Handler::C(oldest)).unwrap();
        REGISTRY.register(Handler::C(outer)).unwrap();
        REGISTRY.register(Handler::C(registering)).unwrap();
        REGISTRY.run_all();
        assert_eq!(*LOG.lock().unwrap(), [10, 2, 1, 0]);
    }

    #[test]
    fn rust_and_c_handlers_share_one_order() {
        static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        unsafe extern "C" fn c_handler() {
            LOG.lock().unwrap().push(1);
        }
        fn rust_handler() {
            LOG.lock().unwrap().push(2);
        }
        let registry = AtExitRegistry::<4>::new();
        registry.register(Handler::C(c_handler)).unwrap();
        registry.register(Handler::Rust(rust_handler)).unwrap();
        registry.register(Handler::C(c_handler)).unwrap();
        registry.run_all();
        assert_eq!(*LOG.lock().unwrap(), [1, 2, 1]);
        assert_eq!(std::format!("{RegistryFull}"), "the atexit registry is full");
    }

    #[test]
    fn cxx_destructors_get_their_objects_in_one_order_with_atexit_handlers() {
        static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        unsafe extern "C" fn destroy(object: *mut c_void) {
            // SAFETY: every object registered below is a `u32`.
            LOG.lock().unwrap().push(unsafe { *object.cast::<u32>() });
        }
        unsafe extern "C" fn handler() {
            LOG.lock().unwrap().push(0);
        }
        static FIRST: u32 = 1;
        static SECOND: u32 = 2;
        let registry = AtExitRegistry::<4>::new();
        let object = |value: &'static u32| (value as *const u32).cast_mut().cast::<c_void>();
        registry.register(Handler::Cxx { destructor: destroy, object: object(&FIRST) }).unwrap();
        registry.register(Handler::C(handler)).unwrap();
        registry.register(Handler::Cxx { destructor: destroy, object: object(&SECOND) }).unwrap();
        registry.run_all();
        assert_eq!(*LOG.lock().unwrap(), [2, 0, 1]);
    }

    #[test]
    fn concurrent_registration_loses_nothing_and_overflows_exactly() {
        static COUNT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        unsafe extern "C" fn count() {
            COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let registry = AtExitRegistry::<100>::new();
        let failures: usize = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| (0..20).filter(|_| registry.register(Handler::C(count)).is_err()).count()))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(failures, 160 - 100);
        registry.run_all();
        assert_eq!(COUNT.load(std::sync::atomic::Ordering::Relaxed), 100);
    }
}
