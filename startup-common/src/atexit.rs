//! C's `atexit` registry: bounded, safe with concurrent callers, run last-in first-out.

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

/// A handler to run at exit: C's `void (*)(void)` or a Rust `fn()`. PTX calls through a function pointer only with
/// the callee's exact prototype, so each kind is called through its own type, never one cast to the other.
#[derive(Debug, Clone, Copy)]
pub enum Handler {
    C(FiniCallback),
    Rust(fn()),
}

impl Handler {
    fn call(self) {
        match self {
            // SAFETY: C handlers are C-ABI functions taking nothing, registered through `atexit`.
            Handler::C(handler) => unsafe { handler() },
            Handler::Rust(handler) => handler(),
        }
    }
}

/// Up to `N` handlers. A spin lock guards it: registrations are rare, and GPU threads have nothing to block on.
pub struct AtExitRegistry<const N: usize> {
    handlers: spin::Mutex<Handlers<N>>,
}

struct Handlers<const N: usize> {
    slots: [Option<Handler>; N],
    len: usize,
}

impl<const N: usize> Default for AtExitRegistry<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> AtExitRegistry<N> {
    pub const fn new() -> Self {
        Self { handlers: spin::Mutex::new(Handlers { slots: [None; N], len: 0 }) }
    }

    /// Adds `handler` to run before every handler registered so far.
    pub fn register(&self, handler: Handler) -> Result<(), RegistryFull> {
        let mut handlers = self.handlers.lock();
        let len = handlers.len;
        let slot = handlers.slots.get_mut(len).ok_or(RegistryFull)?;
        *slot = Some(handler);
        handlers.len += 1;
        Ok(())
    }

    /// Forgets every handler: a new run of the program's kernels starts with an empty registry.
    pub fn clear(&self) {
        let mut handlers = self.handlers.lock();
        handlers.slots = [None; N];
        handlers.len = 0;
    }

    /// Runs every handler, the latest first. A handler may register another; it runs next. The lock is not held
    /// while a handler runs, so handlers may call `atexit` without deadlocking.
    pub fn run_all(&self) {
        while let Some(handler) = self.pop() {
            handler.call();
        }
    }

    fn pop(&self) -> Option<Handler> {
        let mut handlers = self.handlers.lock();
        let len = handlers.len.checked_sub(1)?;
        handlers.len = len;
        handlers.slots[len].take()
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
    fn clear_empties_the_registry() {
        recorder!(LOG, handler => 1);
        let registry = AtExitRegistry::<2>::new();
        registry.register(Handler::C(handler)).unwrap();
        registry.register(Handler::C(handler)).unwrap();
        registry.clear();
        registry.register(Handler::C(handler)).unwrap();
        registry.run_all();
        assert_eq!(*LOG.lock().unwrap(), [1]);
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
