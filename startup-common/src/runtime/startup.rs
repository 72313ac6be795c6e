//! What `_begin`, `_start` and `_end` do, once for both targets.
//!
//! The three kernels replace the single kernel with a global barrier that LLVM libc's GPU startup first used: work
//! that needs single-threaded semantics (constructors, the exit sequence) runs in a kernel launched with one thread,
//! and `main` runs in a kernel of its own on the user's grid. Kernel boundaries order memory for us, so no thread
//! waits on another, and a grid larger than the device holds at once still makes progress.

use core::ffi::{c_char, c_int};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use crate::abi::{
    BeginArgs, Control, EndArgs, FiniCallback, InitCallback, MainFn, PANIC_EXIT_CODE, ProgramEnd, StartArgs, progress,
};
use crate::gpu::Gpu;
use crate::libc::heap::Heap;
use crate::rpc;
use crate::runtime::atexit::{AtExitRegistry, Handler, RegistryFull};
use ending::report_panicked_threads;

mod ending;

/// How many handlers the exit registry holds: C's `atexit` handlers (C requires room for at least 32) and C++'s
/// destructors of objects with static storage, one for each such object constructed. In a program with destructors,
/// one slot is taken by their walk.
pub const ATEXIT_CAPACITY: usize = 1024;

/// What `main` returns on every thread of a program that defines none (see [`Runtime::missing_main`]).
pub const MISSING_MAIN_STATUS: c_int = 1;

/// All the state of one program's startup. Each target crate holds exactly one, in a `static`, through
/// [`target_runtime!`](crate::target_runtime).
pub struct Runtime<G: Gpu> {
    client: rpc::Client<G>,
    heap: Heap<G>,
    atexit: AtExitRegistry<ATEXIT_CAPACITY>,
    exiting: AtomicBool,
    /// Non-zero once the program's end is reported (in [`Control::end`]): the first report stands, as when `abort`
    /// races with another thread's `exit`. (A word, not a bool: NVPTX has no byte-sized atomic exchange.)
    end_reported: AtomicU32,
    /// Set once `_begin` ran every constructor: until then (a constructor panicked or called `exit`), `main` must
    /// not run.
    constructed: AtomicBool,
    /// Threads that panicked in this run.
    panicked: AtomicU32,
    /// Whether a thread already said that the program has no `main`.
    missing_main_reported: AtomicBool,
    control: AtomicPtr<Control>,
    arguments: Arguments,
    /// Each GPU thread's copies of std's thread-locals (a std program's; empty otherwise).
    thread_locals: crate::runtime::std_os::ThreadLocals,
}

/// `main`'s arguments, kept by `_begin` for the whole program: the loader's arrays live until it ends.
struct Arguments {
    argc: AtomicUsize,
    argv: AtomicPtr<*mut c_char>,
    envp: AtomicPtr<*mut c_char>,
}

/// Where a target keeps its constructor and destructor arrays.
pub struct CallbackArrays {
    pub init: &'static [InitCallback],
    pub fini: &'static [FiniCallback],
}

impl<G: Gpu> Default for Runtime<G> {
    fn default() -> Self {
        Self::new()
    }
}

impl<G: Gpu> Runtime<G> {
    pub const fn new() -> Self {
        Self {
            client: rpc::Client::new(),
            heap: Heap::new(),
            atexit: AtExitRegistry::new(),
            exiting: AtomicBool::new(false),
            end_reported: AtomicU32::new(0),
            constructed: AtomicBool::new(false),
            panicked: AtomicU32::new(0),
            missing_main_reported: AtomicBool::new(false),
            control: AtomicPtr::new(core::ptr::null_mut()),
            arguments: Arguments {
                argc: AtomicUsize::new(0),
                argv: AtomicPtr::new(core::ptr::null_mut()),
                envp: AtomicPtr::new(core::ptr::null_mut()),
            },
            thread_locals: crate::runtime::std_os::ThreadLocals::new(),
        }
    }

    /// The RPC client every thread of the program shares.
    pub fn client(&self) -> &rpc::Client<G> {
        &self.client
    }

    /// The device heap every thread of the program shares.
    pub fn heap(&self) -> &Heap<G> {
        &self.heap
    }

    /// `__emutls_get_address` for the calling GPU thread: its copy of `control`'s thread-local
    /// ([`std_os::ThreadLocals`](crate::runtime::std_os::ThreadLocals)). When the heap has no room for it the
    /// program ends as [`Runtime::fatal`] does: the code `lower-emutls` makes uses the address unchecked, so null
    /// would be a fault with no word of why.
    ///
    /// # Safety
    /// `control` must be a control variable that LLVM's `lower-emutls` made.
    pub unsafe fn thread_local(&self, control: &crate::runtime::std_os::EmutlsControl) -> *mut u8 {
        let (thread, threads) = crate::runtime::std_os::thread_in_grid::<G>();
        // SAFETY: the caller's control variable, and the calling thread's own index.
        let copy = unsafe { self.thread_locals.address(&self.heap, control, thread, threads) };
        if copy.is_null() {
            self.fatal(format_args!(
                "no room in the device heap for a thread-local of {} bytes (give it more with --heap-size)",
                control.size
            ));
        }
        copy
    }

    /// The body of `_begin`, run by exactly one thread before any other kernel of the program.
    ///
    /// # Safety
    /// `args` must come from the loader as `docs/abi.md` describes (a valid RPC region, argv and envp arrays), and no
    /// other thread may use the runtime while this runs.
    pub unsafe fn begin(&self, args: &BeginArgs, arrays: &CallbackArrays) {
        // SAFETY: the loader hands a region laid out by `region::Layout` for this many ports, and nothing else uses the
        // client yet: `_begin` is the program's first kernel and runs on one thread.
        unsafe { self.client.reset(args.rpc_region, args.rpc_port_count) };
        // SAFETY: the start of the kernel, after the reset, on every thread of the block (the only one).
        unsafe { self.client.prepare_block() };
        // SAFETY: the loader reserved the pool for the heap alone; this is the program's only thread now, and the
        // kernel boundary publishes the reset to `_start`. Blocks of an earlier run of the program are gone with it.
        // (The loom models run the heap on a host pool of loom atomics, which raw memory cannot hold.)
        #[cfg(not(loom))]
        unsafe {
            self.heap.reset(args.heap, args.heap_size)
        };
        crate::libc::errno::clear::<G>();
        // The host closed the last run's files when it ended.
        crate::libc::stdio::reset();
        self.control.store(args.control, Ordering::Relaxed);
        // Relaxed: the kernel boundary orders these before any other kernel reads them, and constructors run on this
        // thread.
        self.arguments.argc.store(usize::try_from(args.argc).unwrap_or(0), Ordering::Relaxed);
        self.arguments.argv.store(args.argv, Ordering::Relaxed);
        self.arguments.envp.store(args.envp, Ordering::Relaxed);
        // The loader may run a loaded program's kernels again (a test binary runs them once per test): each `_begin`
        // starts a new run.
        self.exiting.store(false, Ordering::Relaxed);
        self.end_reported.store(0, Ordering::Relaxed);
        self.constructed.store(false, Ordering::Relaxed);
        self.panicked.store(0, Ordering::Relaxed);
        self.missing_main_reported.store(false, Ordering::Relaxed);
        self.thread_locals.reset();

        // The destructors are registered first so that they run last: after every handler that a constructor or
        // `main` registers later, as C requires of `atexit` handlers versus static destructors. Without destructors
        // nothing is registered, and `_end` of a program that registers no handler finds the registry empty.
        FINI_ARRAY.set(arrays.fini);
        let fini_walk = (!arrays.fini.is_empty()).then_some(Handler::C(run_fini_array));
        // SAFETY: this is the program's only thread, and no thread of an earlier run holds the lock: the kernels of
        // an earlier run ended before this one began (queue order), and none ends while holding it.
        unsafe { self.atexit.reset_alone(fini_walk) };

        for init in arrays.init {
            // SAFETY: constructors are C-ABI functions of exactly this prototype (see `InitCallback`); argv and envp
            // are the loader's arrays, valid for the whole program.
            unsafe { init(args.argc, args.argv, args.envp) };
        }
        self.constructed.store(true, Ordering::Relaxed);
        // Through the argument, not the runtime's copy: a load fewer on the one thread every run waits for.
        report_constructed(args.control);
        report_progress(args.control, progress::BEGIN_DONE);
    }

    /// The body of `_start`, run by every thread of the user's grid: calls `main`, or the test that `args.test`
    /// names.
    ///
    /// # Safety
    /// `args` must come from the loader (`args.test` null or the address of a test's entry global); `_begin` must
    /// have completed.
    pub unsafe fn start(&self, args: &StartArgs, main: MainFn) {
        // Read before the block's barrier, so that their trips to L2 overlap `prepare_block`'s.
        let exiting = self.exiting.load(Ordering::Relaxed);
        let constructed = self.constructed.load(Ordering::Relaxed);
        // SAFETY: the start of the kernel, on every thread of every block: all of them take this path.
        unsafe { self.client.prepare_block() };
        crate::libc::errno::clear::<G>();
        // A constructor called `exit` or panicked, or a thread of a block that ran earlier called `exit`: the program
        // is over, and `main` must not run. (The loader queued this kernel before it could know.)
        if exiting || !constructed {
            return;
        }
        // Two call sites rather than one through a chosen pointer: a program's `main` stays a direct call, which LTO
        // may inline into `_start`.
        let status = if args.test.is_null() {
            // SAFETY: the program provides `main` with C's prototype; the arguments come from the loader.
            unsafe { main(args.argc, args.argv, args.envp) }
        } else {
            // SAFETY: the loader passes the address of a `__gpu_test_entry_*` global of this image, which holds a
            // function with `main`'s prototype (`gpu_test!` defines both); the arguments come from the loader.
            unsafe { args.test.read()(args.argc, args.argv, args.envp) }
        };
        // Relaxed is enough: the end of the kernel orders this before `_end` reads it. A zero changes nothing, and
        // an atomic the kernel's end must wait for costs every run that succeeds.
        if status != 0 {
            // SAFETY: `result` is a device allocation the loader made for exactly this word.
            unsafe { AtomicI32::from_ptr(args.result) }.fetch_or(status, Ordering::Relaxed);
        }
    }

    /// The body of `_end`, run by one thread after `_start` completed: the exit sequence with `main`'s combined
    /// result.
    ///
    /// # Safety
    /// `args` must come from the loader; `_start` must have completed.
    // Inlined into `_end`, its one caller: the argument then stays in parameter space, where a call would pass it
    // through local memory, a trip more before the result word's.
    #[inline(always)]
    pub unsafe fn end(&self, args: &EndArgs) -> ! {
        // Every word `_end` decides on, read first and together, before the block's barrier (which waits for them):
        // each read is a trip to L2, and reads issued together overlap, where a read after each branch would wait
        // for the one before. Relaxed: `_start`'s end orders them, and on NVPTX each acquire is a system-scope fence
        // of about 1,000 cycles. This is the program's only thread: a plain read and write of the result word.
        let control = self.control.load(Ordering::Relaxed);
        let panicked = self.panicked.load(Ordering::Relaxed);
        let exiting = self.exiting.load(Ordering::Relaxed);
        // SAFETY: the loader's result word, which `_start` finished writing before this kernel began.
        let result = unsafe { AtomicI32::from_ptr(args.result) };
        let status = result.load(Ordering::Relaxed);
        // SAFETY: `_start` is over, and this thread registers nothing before it reads.
        let handlers_registered = !unsafe { self.atexit.is_empty_alone() };
        // SAFETY: the start of the kernel, on every thread of the block (the only one).
        unsafe { self.client.prepare_block() };
        crate::libc::errno::clear::<G>();
        report_progress(control, progress::END_STARTED);
        // Zeroed whatever way the program ends: the loader runs a loaded program again (a test binary runs it once
        // per test) and copies a zero only after a run that did not reach this point.
        result.store(0, Ordering::Relaxed);
        if panicked > 0 {
            // Every panicking thread has ended: the count is exact now. A panic ends the program as
            // `panic = "abort"` does, without running handlers.
            report_panicked_threads(control, panicked);
            self.exiting.store(true, Ordering::Relaxed);
            // Unless a thread aborted or exited first.
            if self.end_reported.load(Ordering::Relaxed) == 0 {
                // SAFETY: null, or the loader's control block, which lives for the whole program.
                unsafe { ProgramEnd::Exit(PANIC_EXIT_CODE).report(control) };
            }
            G::end_thread()
        }
        if exiting {
            // A constructor or a thread of `_start` called `exit` (or `abort`), which reported the end.
            G::end_thread();
        }
        // `exit`'s sequence, for the program's only thread: `_start` is over. Relaxed, and the handlers taken without
        // the lock.
        self.exiting.store(true, Ordering::Relaxed);
        if handlers_registered {
            // SAFETY: `_start` has completed: no other thread of the program runs, and none holds the registry's
            // lock.
            unsafe { self.atexit.run_all_alone() };
        }
        // Nothing reported an end before (`exiting` was clear), and a handler that calls `exit` or `abort` does not
        // come back here.
        // SAFETY: as above.
        unsafe { ProgramEnd::Exit(status).report(control) };
        G::end_thread()
    }

    /// What a program's `main` does when the program defines none (the target crates' weak default): says so on
    /// stderr, once, and returns [`MISSING_MAIN_STATUS`]. A test binary needs no `main`: the loader runs its tests.
    pub fn missing_main(&self) -> c_int {
        if !self.missing_main_reported.swap(true, Ordering::Relaxed) {
            crate::libc::io::print(
                &self.client,
                crate::libc::io::Stream::Stderr,
                format_args!(
                    "the program defines no `main` (a test binary runs its tests instead: `gpu-loader IMAGE --list` \
                     lists them)\n"
                ),
            );
        }
        MISSING_MAIN_STATUS
    }

    /// Registers `handler` to run at exit, before the handlers registered earlier. Fails when the registry is full,
    /// where C's `atexit` returns non-zero.
    pub fn atexit(&self, handler: Handler) -> Result<(), RegistryFull> {
        self.atexit.register(handler)
    }

    /// The program's arguments, `argv[0]` (the image) first, as C strings; empty before `_begin` ran.
    pub fn argv(&self) -> &'static [*mut c_char] {
        let argv = self.arguments.argv.load(Ordering::Relaxed);
        if argv.is_null() {
            return &[];
        }
        // SAFETY: `_begin` stored the loader's array of `argc` pointers (`begin`'s contract), which lives as long as
        // the program.
        unsafe { core::slice::from_raw_parts(argv, self.arguments.argc.load(Ordering::Relaxed)) }
    }

    /// The loader's environment array as C's `environ` is: `NAME=value` C strings, then a null pointer; null before
    /// `_begin` ran.
    pub fn environ(&self) -> *mut *mut c_char {
        self.arguments.envp.load(Ordering::Relaxed)
    }

    /// The program's environment, `NAME=value` C strings; empty before `_begin` ran.
    pub fn envp(&self) -> &'static [*mut c_char] {
        let envp = self.arguments.envp.load(Ordering::Relaxed);
        if envp.is_null() {
            return &[];
        }
        let mut len = 0;
        // SAFETY: the loader's array ends with a null pointer (`begin`'s contract); every entry up to it is readable.
        while !unsafe { envp.add(len).read() }.is_null() {
            len += 1;
        }
        // SAFETY: the `len` entries before the null pointer, in an array that lives as long as the program.
        unsafe { core::slice::from_raw_parts(envp, len) }
    }

    /// C's `exit`: runs the exit sequence once, however many threads call it, and ends the program with `status`.
    pub fn exit(&self, status: c_int) -> ! {
        if self.exiting.swap(true, Ordering::AcqRel) {
            // Another thread runs the exit sequence; the host ends the program when it reports.
            G::end_thread();
        }
        self.atexit.run_all();
        self.report_end(ProgramEnd::Exit(status));
        G::end_thread()
    }

    /// C's `abort`: ends the program abnormally, running no handlers.
    pub fn abort(&self) -> ! {
        self.exiting.store(true, Ordering::Release);
        self.report_end(ProgramEnd::Abort);
        G::end_thread()
    }

    /// Tells the host how the program ended, unless an earlier report did: the host stops serving the program once
    /// it sees the end (after the messages already sent).
    fn report_end(&self, end: ProgramEnd) {
        if self.end_reported.swap(1, Ordering::Relaxed) == 0 {
            // SAFETY: null, or the loader's control block, stored by `_begin`, which lives for the whole program.
            unsafe { end.report(self.control.load(Ordering::Relaxed)) };
        }
    }

    /// The loader's control block, for test programs that write over it to check how the loader copes
    /// (`tests/programs/rpc-scribble`); null before `_begin` ran.
    #[cfg(feature = "testing")]
    pub fn control_for_testing(&self) -> *mut Control {
        self.control.load(Ordering::Relaxed)
    }
}

/// Writes a [`progress`] marker into the loader's control block, when there is one (null: before `_begin`, or in host
/// tests).
fn report_progress(control: *mut Control, marker: u32) {
    if !control.is_null() {
        // SAFETY: the loader's control block lives for the whole program; only one-thread kernels write this word.
        unsafe { core::ptr::addr_of_mut!((*control).progress).write_volatile(marker) };
    }
}

fn report_constructed(control: *mut Control) {
    if !control.is_null() {
        // SAFETY: the loader's control block lives for the whole program; only `_begin`, one thread, writes this.
        unsafe { core::ptr::addr_of_mut!((*control).constructed).write_volatile(1) };
    }
}

/// The destructor array `_begin` found, for the `atexit` handler that walks it. A program has one runtime, so one
/// global suffices, and a plain `extern "C" fn()` can reach it (PTX calls handlers through exact prototypes only).
struct FiniArray {
    start: AtomicPtr<FiniCallback>,
    len: AtomicUsize,
}

static FINI_ARRAY: FiniArray = FiniArray { start: AtomicPtr::new(core::ptr::null_mut()), len: AtomicUsize::new(0) };

impl FiniArray {
    fn set(&self, array: &'static [FiniCallback]) {
        self.start.store(array.as_ptr().cast_mut(), Ordering::Relaxed);
        self.len.store(array.len(), Ordering::Relaxed);
    }

    fn get(&self) -> &'static [FiniCallback] {
        let start = self.start.load(Ordering::Relaxed);
        if start.is_null() {
            return &[];
        }
        // SAFETY: `set` stored the parts of a `'static` slice; `_begin` and the exit sequence run on one thread each,
        // ordered by kernel boundaries.
        unsafe { core::slice::from_raw_parts(start, self.len.load(Ordering::Relaxed)) }
    }
}

/// Runs the destructors. Arrays are in ascending priority order, as the linker sorts `.fini_array.N` (and the
/// loader builds the NVIDIA array the same way), so the walk goes backwards: highest priority first.
unsafe extern "C" fn run_fini_array() {
    for fini in FINI_ARRAY.get().iter().rev() {
        // SAFETY: destructors are C-ABI functions taking nothing, as the array's element type says.
        unsafe { fini() };
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
