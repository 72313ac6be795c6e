//! What a C++ program needs of the runtime beyond C's: the parts of the Itanium C++ ABI that clang's code calls
//! when exceptions and RTTI are off. [`cxx_runtime!`](crate::cxx_runtime) exports them from a target crate:
//!
//! - `__cxa_atexit` and `__dso_handle`: each object of static storage registers its destructor once constructed,
//!   in the exit registry that C's `atexit` handlers share ([`crate::runtime::atexit`]), so they run in the reverse order of
//!   their registrations, before the destructors of `.fini_array`.
//! - `__cxa_guard_acquire`/`release`/`abort`: the first thread to reach a function-local static constructs it while
//!   the others wait ([`guard_acquire`]).
//! - `__cxa_pure_virtual` and `__cxa_deleted_virtual`: a call through a vtable slot with no function ends the
//!   program with a message.
//! - `operator new` and `operator delete` in all their replaceable forms (`[]`, sized, aligned, `nothrow`), on the
//!   device heap ([`crate::runtime::allocator::Allocator::operator_new`]).

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::gpu::Gpu;
use crate::sync::AtomicU64;

/// Clang's guard of a function-local static, as this runtime uses its 64 bits: byte 0 (the low byte; both GPUs and
/// every host that runs the tests are little-endian) is 1 once the object is constructed, which clang's inline code
/// reads before it calls [`guard_acquire`]; the bits above hold the constructing thread's [`Initializer`] key, 0
/// while no thread constructs it.
const CONSTRUCTED: u64 = 1;
const KEY_SHIFT: u32 = 8;

/// Why [`guard_acquire`] cannot let the calling thread wait for the object's construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardError {
    /// The thread that constructs the object reached its initialization again (C++ leaves this undefined; it would
    /// wait for itself for ever).
    Recursive,
    /// Another lane of the calling thread's own lane group constructs it, on a target whose lanes cannot wait for one
    /// another (see [`Gpu::INDEPENDENT_LANES`]).
    LaneGroupMate,
}

impl core::fmt::Display for GuardError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            GuardError::Recursive => "recursive initialization of a function-local static",
            GuardError::LaneGroupMate => {
                "another lane of this wavefront is constructing this function-local static, and the lanes of a \
                 wavefront cannot wait for one another: construct it before they reach it together (from a \
                 constructor, or in one lane of each wavefront first)"
            }
        })
    }
}

/// The calling thread as a guard records it: its lane group's number in the grid and its lane in the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Initializer {
    group: u64,
    lane: u32,
}

impl Initializer {
    /// Bits of the key that hold the lane (lanes are below 64).
    const LANE_BITS: u32 = 6;

    /// The calling thread: lane groups are consecutive runs of [`Gpu::LANE_SIZE`] threads of a block, x fastest.
    pub fn current<G: Gpu>() -> Self {
        let ids = G::thread_ids();
        let shape = G::launch_shape();
        let [tx, ty, tz] = ids.thread.map(u64::from);
        let [nx, ny, nz] = shape.threads.map(u64::from);
        let [bx, by, bz] = ids.block.map(u64::from);
        let [mx, my, _] = shape.blocks.map(u64::from);
        let lane_size = u64::from(G::LANE_SIZE);
        let groups_per_block = (nx * ny * nz).div_ceil(lane_size);
        let thread_in_block = tx + nx * (ty + ny * tz);
        let block = bx.wrapping_add(mx.wrapping_mul(by.wrapping_add(my.wrapping_mul(bz))));
        Self {
            group: block.wrapping_mul(groups_per_block).wrapping_add(thread_in_block / lane_size),
            lane: G::lane_id(),
        }
    }

    /// The guard's bits for this thread, never 0: its group and lane, plus one, above byte 0. Group numbers past
    /// 2^49 (a grid of more than 2^55 threads) wrap.
    fn key(self) -> u64 {
        let thread = (self.group << Self::LANE_BITS | u64::from(self.lane)) & ((1 << (64 - KEY_SHIFT - 1)) - 1);
        (thread + 1) << KEY_SHIFT
    }

    /// The lane group of the thread whose [`Initializer::key`] is `key`.
    fn group_of(key: u64) -> u64 {
        ((key >> KEY_SHIFT) - 1) >> Self::LANE_BITS
    }
}

/// `__cxa_guard_acquire`: `true` when the caller is to construct the object (and then call [`guard_release`], or
/// [`guard_abort`] to give up), `false` once another thread has constructed it. While another thread constructs it,
/// the caller waits. On a target whose lanes cannot wait for one another, a lane whose group-mate constructs the
/// object gets [`GuardError::LaneGroupMate`] instead of waiting for ever.
pub fn guard_acquire<G: Gpu>(guard: &AtomicU64, me: Initializer) -> Result<bool, GuardError> {
    let key = me.key();
    loop {
        let state = guard.load(Acquire);
        if state & CONSTRUCTED != 0 {
            return Ok(false);
        }
        let holder = state & !((1 << KEY_SHIFT) - 1);
        if holder == 0 {
            // The winner constructs after it returns; the lanes that lost wait for it below, which a lane of the
            // winner's own group can do only where lanes progress independently. (A compare-exchange keeps its
            // ordering on NVIDIA, where LLVM 22 drops that of other read-modify-writes; see `Gpu::lock_fetch_or`.)
            if guard.compare_exchange(state, key, Acquire, Relaxed).is_ok() {
                return Ok(true);
            }
            continue;
        }
        if holder == key {
            return Err(GuardError::Recursive);
        }
        if !G::INDEPENDENT_LANES && Initializer::group_of(holder) == Initializer::group_of(key) {
            return Err(GuardError::LaneGroupMate);
        }
        G::sleep_briefly();
    }
}

/// `__cxa_guard_release`: the object is constructed; every waiter and every later caller goes on without it.
pub fn guard_release(guard: &AtomicU64) {
    guard.store(CONSTRUCTED, Release);
}

/// `__cxa_guard_abort`: the construction failed; the next caller of [`guard_acquire`] constructs it.
pub fn guard_abort(guard: &AtomicU64) {
    guard.store(0, Release);
}

/// The C++ runtime's entry points in a target crate, which [`target_runtime!`](crate::target_runtime) invokes: the
/// Itanium C++ ABI functions of this module's docs under their C names, and `operator new`/`operator delete` under
/// their mangled ones (`_Znwm` is `operator new(unsigned long)`), on the crate's `RUNTIME` and `ALLOCATOR`.
#[macro_export]
macro_rules! cxx_runtime {
    ($gpu:ty) => {
        /// `__cxa_atexit`: registers `destructor(object)` to run at exit, in one order with C's `atexit` handlers.
        /// A full registry ends the program with a message: clang ignores the result, so a destructor would
        /// otherwise silently never run. `__dso_handle` is ignored (a program is one module).
        #[unsafe(no_mangle)]
        pub extern "C" fn __cxa_atexit(
            destructor: $crate::runtime::atexit::CxxDestructor,
            object: *mut ::core::ffi::c_void,
            _dso_handle: *mut ::core::ffi::c_void,
        ) -> ::core::ffi::c_int {
            if RUNTIME.atexit($crate::runtime::atexit::Handler::Cxx { destructor, object }).is_err() {
                RUNTIME.fatal(format_args!(
                    "__cxa_atexit: the exit registry is full ({} entries), so the destructor of the object at {:p} \
                     could not be registered",
                    $crate::runtime::startup::ATEXIT_CAPACITY,
                    object
                ));
            }
            0
        }

        /// The module's handle that `__cxa_atexit` receives; only its address matters.
        #[unsafe(no_mangle)]
        pub static __dso_handle: u8 = 0;

        /// `__cxa_guard_acquire`: 1 when the caller constructs the function-local static, 0 once it is constructed.
        ///
        /// # Safety
        /// `guard` is clang's 8-byte guard variable of the static.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn __cxa_guard_acquire(guard: *mut u64) -> ::core::ffi::c_int {
            // SAFETY: clang's guard is an aligned 64-bit variable that only atomic operations touch.
            let word = unsafe { ::core::sync::atomic::AtomicU64::from_ptr(guard) };
            match $crate::runtime::cxxabi::guard_acquire::<$gpu>(word, $crate::runtime::cxxabi::Initializer::current::<$gpu>()) {
                Ok(construct) => ::core::ffi::c_int::from(construct),
                Err(error) => RUNTIME.fatal(format_args!("__cxa_guard_acquire({guard:p}): {error}")),
            }
        }

        /// `__cxa_guard_release`: the function-local static is constructed.
        ///
        /// # Safety
        /// `guard` is the guard that `__cxa_guard_acquire` gave this thread to construct.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn __cxa_guard_release(guard: *mut u64) {
            // SAFETY: as in `__cxa_guard_acquire`.
            $crate::runtime::cxxabi::guard_release(unsafe { ::core::sync::atomic::AtomicU64::from_ptr(guard) })
        }

        /// `__cxa_guard_abort`: the construction was abandoned; the next thread to reach it constructs it.
        ///
        /// # Safety
        /// As `__cxa_guard_release`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn __cxa_guard_abort(guard: *mut u64) {
            // SAFETY: as in `__cxa_guard_acquire`.
            $crate::runtime::cxxabi::guard_abort(unsafe { ::core::sync::atomic::AtomicU64::from_ptr(guard) })
        }

        /// The vtable entry of a pure virtual function: called only through an object under construction or
        /// destruction.
        #[unsafe(no_mangle)]
        pub extern "C" fn __cxa_pure_virtual() -> ! {
            RUNTIME.fatal(format_args!("pure virtual function called"))
        }

        /// The vtable entry of a deleted virtual function.
        #[unsafe(no_mangle)]
        pub extern "C" fn __cxa_deleted_virtual() -> ! {
            RUNTIME.fatal(format_args!("deleted virtual function called"))
        }

        $crate::cxx_runtime!(@new "w", "operator new");
        $crate::cxx_runtime!(@new "a", "operator new[]");
        $crate::cxx_runtime!(@delete "l", "operator delete");
        $crate::cxx_runtime!(@delete "a", "operator delete[]");
    };

    // The four `operator new` (`_Znw...`) or `operator new[]` (`_Zna...`) of one kind; `m` is `unsigned long`
    // (`size_t`), `St11align_val_t` is `std::align_val_t`, `RKSt9nothrow_t` is `const std::nothrow_t &`.
    (@new $kind:literal, $call:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("_Zn", $kind, "m"))]
            extern "C" fn new(size: usize) -> *mut ::core::ffi::c_void {
                ALLOCATOR.operator_new($call, size, None)
            }

            #[unsafe(export_name = concat!("_Zn", $kind, "mSt11align_val_t"))]
            extern "C" fn new_aligned(size: usize, alignment: usize) -> *mut ::core::ffi::c_void {
                ALLOCATOR.operator_new($call, size, Some(alignment))
            }

            #[unsafe(export_name = concat!("_Zn", $kind, "mRKSt9nothrow_t"))]
            extern "C" fn new_nothrow(size: usize, _nothrow: *const u8) -> *mut ::core::ffi::c_void {
                ALLOCATOR.operator_new_nothrow(size, None)
            }

            #[unsafe(export_name = concat!("_Zn", $kind, "mSt11align_val_tRKSt9nothrow_t"))]
            extern "C" fn new_aligned_nothrow(
                size: usize,
                alignment: usize,
                _nothrow: *const u8,
            ) -> *mut ::core::ffi::c_void {
                ALLOCATOR.operator_new_nothrow(size, Some(alignment))
            }
        };
    };

    // The six `operator delete` (`_Zdl...`) or `operator delete[]` (`_Zda...`) of one kind: plain, sized, aligned,
    // sized and aligned, and the two `nothrow` ones. The size and the alignment are what the block was allocated
    // with; the heap knows both, so they are not needed.
    (@delete $kind:literal, $call:literal) => {
        const _: () = {
            /// # Safety
            /// `pointer` is null or a block from the matching `operator new` that nothing uses any more.
            #[unsafe(export_name = concat!("_Zd", $kind, "Pv"))]
            unsafe extern "C" fn delete(pointer: *mut ::core::ffi::c_void) {
                // SAFETY: the caller's guarantee, as C++ requires of `operator delete`.
                unsafe { ALLOCATOR.free_as($call, pointer) }
            }

            /// # Safety
            /// As the plain form.
            #[unsafe(export_name = concat!("_Zd", $kind, "Pvm"))]
            unsafe extern "C" fn delete_sized(pointer: *mut ::core::ffi::c_void, _size: usize) {
                // SAFETY: as in the plain form.
                unsafe { ALLOCATOR.free_as($call, pointer) }
            }

            /// # Safety
            /// As the plain form.
            #[unsafe(export_name = concat!("_Zd", $kind, "PvSt11align_val_t"))]
            unsafe extern "C" fn delete_aligned(pointer: *mut ::core::ffi::c_void, _alignment: usize) {
                // SAFETY: as in the plain form.
                unsafe { ALLOCATOR.free_as($call, pointer) }
            }

            /// # Safety
            /// As the plain form.
            #[unsafe(export_name = concat!("_Zd", $kind, "PvmSt11align_val_t"))]
            unsafe extern "C" fn delete_sized_aligned(
                pointer: *mut ::core::ffi::c_void,
                _size: usize,
                _alignment: usize,
            ) {
                // SAFETY: as in the plain form.
                unsafe { ALLOCATOR.free_as($call, pointer) }
            }

            /// # Safety
            /// As the plain form.
            #[unsafe(export_name = concat!("_Zd", $kind, "PvRKSt9nothrow_t"))]
            unsafe extern "C" fn delete_nothrow(pointer: *mut ::core::ffi::c_void, _nothrow: *const u8) {
                // SAFETY: as in the plain form.
                unsafe { ALLOCATOR.free_as($call, pointer) }
            }

            /// # Safety
            /// As the plain form.
            #[unsafe(export_name = concat!("_Zd", $kind, "PvSt11align_val_tRKSt9nothrow_t"))]
            unsafe extern "C" fn delete_aligned_nothrow(
                pointer: *mut ::core::ffi::c_void,
                _alignment: usize,
                _nothrow: *const u8,
            ) {
                // SAFETY: as in the plain form.
                unsafe { ALLOCATOR.free_as($call, pointer) }
            }
        };
    };
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::gpu::HostThread;
    use core::sync::atomic::AtomicU32;
    use std::string::ToString;
    use std::vec::Vec;

    fn thread(group: u64, lane: u32) -> Initializer {
        Initializer { group, lane }
    }

    #[test]
    fn the_first_caller_constructs_and_later_callers_go_on() {
        let guard = AtomicU64::new(0);
        assert_eq!(guard_acquire::<HostThread>(&guard, thread(3, 1)), Ok(true));
        guard_release(&guard);
        assert_eq!(guard.load(Relaxed) & 0xff, 1, "byte 0, which clang's inline check reads, says constructed");
        assert_eq!(guard_acquire::<HostThread>(&guard, thread(3, 1)), Ok(false));
        assert_eq!(guard_acquire::<HostThread>(&guard, thread(9, 0)), Ok(false));
    }

    #[test]
    fn an_abandoned_construction_falls_to_the_next_caller() {
        let guard = AtomicU64::new(0);
        assert_eq!(guard_acquire::<HostThread>(&guard, thread(0, 0)), Ok(true));
        guard_abort(&guard);
        assert_eq!(guard_acquire::<HostThread>(&guard, thread(1, 0)), Ok(true));
    }

    #[test]
    fn a_thread_that_reaches_its_own_construction_again_is_told_so() {
        let guard = AtomicU64::new(0);
        assert_eq!(guard_acquire::<HostThread>(&guard, thread(7, 5)), Ok(true));
        assert_eq!(guard_acquire::<HostThread>(&guard, thread(7, 5)), Err(GuardError::Recursive));
        assert!(GuardError::Recursive.to_string().contains("recursive initialization"));
    }

    /// A target like AMD's, whose lanes cannot wait for one another: a group-mate of the constructing lane is refused
    /// at once, since waiting would never end.
    #[test]
    fn without_independent_lanes_a_group_mate_is_refused_instead_of_waiting_for_ever() {
        const { assert!(!HostThread::INDEPENDENT_LANES) };
        let guard = AtomicU64::new(0);
        assert_eq!(guard_acquire::<HostThread>(&guard, thread(12, 0)), Ok(true));
        assert_eq!(guard_acquire::<HostThread>(&guard, thread(12, 63)), Err(GuardError::LaneGroupMate));
        assert!(GuardError::LaneGroupMate.to_string().contains("wavefront"));
    }

    #[test]
    fn keys_keep_groups_and_lanes_apart_and_are_never_zero() {
        let keys = [thread(0, 0), thread(0, 1), thread(1, 0), thread(u64::MAX >> 15, 63)].map(Initializer::key);
        assert!(keys.iter().all(|&key| key != 0 && key & 0xff == 0), "{keys:x?}");
        assert_eq!(Initializer::group_of(keys[0]), Initializer::group_of(keys[1]));
        assert_ne!(Initializer::group_of(keys[1]), Initializer::group_of(keys[2]));
        assert_ne!(keys[0], keys[1]);
        assert_eq!(Initializer::group_of(keys[3]), u64::MAX >> 15);
    }

    /// Threads of other groups reach the guard together: one constructs, the others wait until it is done and then
    /// see the object whole.
    #[test]
    fn one_of_many_threads_constructs_and_the_others_wait_for_it() {
        let threads = if cfg!(miri) { 4 } else { 16 };
        for _ in 0..if cfg!(miri) { 2 } else { 50 } {
            let guard = AtomicU64::new(0);
            let object = AtomicU32::new(0);
            let constructors = AtomicU32::new(0);
            let barrier = std::sync::Barrier::new(threads);
            let seen: Vec<u32> = std::thread::scope(|scope| {
                let workers: Vec<_> = (0..threads as u64)
                    .map(|group| {
                        let (guard, object, constructors, barrier) = (&guard, &object, &constructors, &barrier);
                        scope.spawn(move || {
                            barrier.wait();
                            if guard_acquire::<HostThread>(guard, thread(group, 0)).unwrap() {
                                constructors.fetch_add(1, Relaxed);
                                std::thread::yield_now();
                                object.store(42, Relaxed);
                                guard_release(guard);
                            }
                            object.load(Relaxed)
                        })
                    })
                    .collect();
                workers.into_iter().map(|worker| worker.join().unwrap()).collect()
            });
            assert_eq!(constructors.load(Relaxed), 1);
            assert!(seen.iter().all(|&value| value == 42), "{seen:?}");
        }
    }
}

/// Loom models: `RUSTFLAGS="--cfg loom" cargo test -p startup-common --release --features host --lib loom`.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::gpu::HostThread;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    /// Two threads of different groups reach one guard: exactly one constructs, and the other reads the object only
    /// after it is constructed (loom's cell reports any access that the guard does not order).
    #[test]
    fn loom_the_guard_orders_construction_before_every_use() {
        loom::model(|| {
            let guard = Arc::new(AtomicU64::new(0));
            let object = Arc::new(UnsafeCell::new(0u32));
            let reach = |group: u64, guard: Arc<AtomicU64>, object: Arc<UnsafeCell<u32>>| {
                let constructs = guard_acquire::<HostThread>(&guard, Initializer { group, lane: 0 }).unwrap();
                if constructs {
                    // SAFETY: the guard gave this thread the object to construct; no other thread touches it yet.
                    object.with_mut(|value| unsafe { *value = 7 });
                    guard_release(&guard);
                }
                // SAFETY: the object is constructed, and only read from here on.
                (constructs, object.with(|value| unsafe { *value }))
            };
            let other = {
                let (guard, object) = (guard.clone(), object.clone());
                loom::thread::spawn(move || reach(1, guard, object))
            };
            let (mine, value) = reach(0, guard, object);
            let (theirs, other_value) = other.join().unwrap();
            assert!(mine != theirs, "exactly one constructs");
            assert_eq!((value, other_value), (7, 7));
        });
    }
}
