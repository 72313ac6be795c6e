//! The baselines: what our startup and channel are measured against, written straight against CUDA's driver API
//! (cudarc's `result` and `sys` layers) in the same process or in a child process of `gpu-bench`.

use std::ffi::{CString, c_void};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use cudarc::driver::{result, sys};
use gpu_loader::cuda::CudaBackend;
use gpu_loader::run::Session;
use startup_common::abi::LaunchParams;

/// A module with one empty kernel, `empty`, in the current context.
pub struct EmptyKernel {
    pub function: sys::CUfunction,
    pub stream: sys::CUstream,
}

const EMPTY_PTX: &str = ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry empty()\n{\n\tret;\n}\n";

/// Makes device 0's primary context the current one, for as long as the process lives: how a child process that
/// runs a baseline starts.
pub fn enter_primary_context() -> Result<()> {
    result::init()?;
    let device = result::device::get(0)?;
    // SAFETY: the primary context of device 0, kept until the process exits.
    let context = unsafe { result::primary_ctx::retain(device) }?;
    // SAFETY: the context was just retained.
    unsafe { result::ctx::set_current(context) }?;
    Ok(())
}

/// Loads PTX text as a module of the current context, which it stays in for the process.
pub fn load_module(ptx: impl Into<Vec<u8>>) -> Result<sys::CUmodule> {
    let text = CString::new(ptx)?;
    let mut module = std::ptr::null_mut();
    // SAFETY: a NUL-terminated PTX string.
    unsafe { sys::cuModuleLoadData(&mut module, text.as_ptr().cast()) }.result()?;
    Ok(module)
}

/// Loads `ptx` ([`load_module`]) and returns its kernel `name` and a stream of its own to launch it on.
fn load_kernel(ptx: &str, name: &str) -> Result<(sys::CUfunction, sys::CUstream)> {
    let module = load_module(ptx)?;
    // SAFETY: the module was just loaded; a missing kernel is an error, not undefined behaviour.
    let function = unsafe { result::module::get_function(module, CString::new(name)?) }?;
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking)?;
    Ok((function, stream))
}

impl EmptyKernel {
    pub fn load() -> Result<Self> {
        let (function, stream) = load_kernel(EMPTY_PTX, "empty")?;
        Ok(Self { function, stream })
    }

    /// One launch of `grid` and a wait for it.
    pub fn launch_and_wait(&self, grid: &LaunchParams) -> Result<Duration> {
        let started = Instant::now();
        let [tx, ty, tz] = grid.threads;
        let [bx, by, bz] = grid.blocks;
        // SAFETY: the kernel takes no parameters; the stream is ours.
        unsafe {
            result::launch_kernel(self.function, (bx, by, bz), (tx, ty, tz), 0, self.stream, &mut [])?;
            result::stream::synchronize(self.stream)?;
        }
        Ok(started.elapsed())
    }
}

/// A CUDA graph of three empty kernels, instantiated once: launched and waited for, the least that running the three
/// kernels of a program can cost.
pub struct GraphOfThree {
    exec: sys::CUgraphExec,
    stream: sys::CUstream,
}

impl GraphOfThree {
    /// Captures three launches of `empty` on its stream.
    pub fn capture(empty: &EmptyKernel) -> Result<Self> {
        let stream = empty.stream;
        // SAFETY: the stream is ours and idle; capture records the launches instead of running them.
        unsafe { sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) }
            .result()?;
        for _ in 0..3 {
            // SAFETY: the kernel takes no parameters; the stream is capturing.
            unsafe { result::launch_kernel(empty.function, (1, 1, 1), (1, 1, 1), 0, stream, &mut []) }?;
        }
        let mut graph = std::ptr::null_mut();
        // SAFETY: ends the capture begun above; `graph` receives it.
        unsafe { sys::cuStreamEndCapture(stream, &mut graph) }.result()?;
        let mut exec = std::ptr::null_mut();
        // SAFETY: `graph` is the captured graph; it and its instance live as long as the process.
        unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) }.result()?;
        Ok(Self { exec, stream })
    }

    /// One launch of the graph and a wait for it.
    pub fn launch_and_wait(&self) -> Result<Duration> {
        let started = Instant::now();
        // SAFETY: the instance and the stream are ours.
        unsafe {
            sys::cuGraphLaunch(self.exec, self.stream).result()?;
            result::stream::synchronize(self.stream)?;
        }
        Ok(started.elapsed())
    }
}

/// Waits for `stream`, or fails after `limit`: a benchmark that hangs must say so, not stall the run.
fn wait_for(stream: sys::CUstream, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        // SAFETY: a query on our stream.
        match unsafe { sys::cuStreamQuery(stream) } {
            sys::CUresult::CUDA_SUCCESS => return Ok(()),
            sys::CUresult::CUDA_ERROR_NOT_READY if Instant::now() < deadline => std::hint::spin_loop(),
            sys::CUresult::CUDA_ERROR_NOT_READY => bail!("a baseline kernel did not finish within {limit:?}"),
            error => bail!("a baseline kernel failed: {error:?}"),
        }
    }
}

/// The child of `loader-run`'s baseline.
pub fn bare_run(image: &Path) -> Result<()> {
    enter_primary_context()?;
    load_module(std::fs::read(image)?)?;
    EmptyKernel::load()?.launch_and_wait(&LaunchParams::SINGLE)?;
    Ok(())
}

/// LLVM libc's first design: one kernel whose threads meet at a global atomic barrier before and after `main`.
const BARRIER_PTX: &str = r#".version 7.8
.target sm_90
.address_size 64
.visible .global .align 4 .u32 arrived;
.visible .entry barrier_start(.param .u32 total)
{
	.reg .pred %p<3>;
	.reg .b32 %r<6>;
	ld.param.u32 %r1, [total];
	shl.b32 %r5, %r1, 1;
	atom.global.add.u32 %r2, [arrived], 1;
$before:
	ld.volatile.global.u32 %r3, [arrived];
	setp.lt.u32 %p1, %r3, %r1;
	@%p1 nanosleep.u32 64;
	@%p1 bra.uni $before;
	atom.global.add.u32 %r2, [arrived], 1;
$after:
	ld.volatile.global.u32 %r4, [arrived];
	setp.lt.u32 %p2, %r4, %r5;
	@%p2 nanosleep.u32 64;
	@%p2 bra.uni $after;
	ret;
}
"#;

/// [`BARRIER_PTX`] loaded in the current context, with its counter and a stream of its own.
pub struct BarrierKernel {
    function: sys::CUfunction,
    arrived: sys::CUdeviceptr,
    stream: sys::CUstream,
}

impl BarrierKernel {
    pub fn load() -> Result<Self> {
        let module = load_module(BARRIER_PTX)?;
        // SAFETY: the module has this kernel and this global.
        let function = unsafe { result::module::get_function(module, CString::new("barrier_start")?) }?;
        // SAFETY: as above.
        let (arrived, _) = unsafe { result::module::get_global(module, CString::new("arrived")?) }?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)?;
        Ok(Self { function, arrived, stream })
    }

    /// Blocks of 1024 threads of the kernel that one SM holds at once.
    pub fn blocks_per_sm(&self) -> Result<u32> {
        // SAFETY: the kernel is loaded; 1024 threads, no dynamic shared memory.
        Ok(unsafe { result::occupancy::max_active_block_per_multiprocessor(self.function, 1024, 0) }? as u32)
    }

    /// One launch of `launch.blocks[0]` blocks of `launch.threads[0]` threads, from a zeroed counter, and a wait for
    /// it; a grid beyond residency never finishes, which fails after 20 s.
    pub fn launch_and_wait(&self, launch: &LaunchParams) -> Result<Duration> {
        // SAFETY: resets the 4-byte counter; then one launch of the barrier kernel with its one parameter.
        unsafe {
            result::memset_d8_sync(self.arrived, 0, 4)?;
            let mut total = launch.total_threads() as u32;
            let started = Instant::now();
            result::launch_kernel(
                self.function,
                (launch.blocks[0], 1, 1),
                (launch.threads[0], 1, 1),
                0,
                self.stream,
                &mut [(&raw mut total).cast::<c_void>()],
            )?;
            wait_for(self.stream, Duration::from_secs(20))?;
            Ok(started.elapsed())
        }
    }
}

/// The raw hand-off: the device writes the round's number to one word of mapped host memory and waits for the host to
/// write it back to another.
const PING_PONG_PTX: &str = r#".version 7.8
.target sm_90
.address_size 64
.visible .entry ping_pong(.param .u64 to_host, .param .u64 to_device, .param .u32 rounds)
{
	.reg .pred %p<3>;
	.reg .b32 %r<3>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd1, [to_host];
	ld.param.u64 %rd2, [to_device];
	ld.param.u32 %r1, [rounds];
	mov.u32 %r2, 0;
$loop:
	setp.ge.u32 %p1, %r2, %r1;
	@%p1 bra.uni $done;
	add.u32 %r2, %r2, 1;
	cvt.u64.u32 %rd3, %r2;
	st.release.sys.u64 [%rd1], %rd3;
$wait:
	ld.acquire.sys.u64 %rd4, [%rd2];
	setp.ne.u64 %p2, %rd4, %rd3;
	@%p2 bra.uni $wait;
	bra.uni $loop;
$done:
	ret;
}
"#;

/// The raw hand-off as a kernel of its own, loaded in the current context, and the host's side of it.
pub struct PingPong {
    function: sys::CUfunction,
    stream: sys::CUstream,
}

impl PingPong {
    pub const ROUNDS: u32 = 20_000;

    pub fn load() -> Result<Self> {
        let (function, stream) = load_kernel(PING_PONG_PTX, "ping_pong")?;
        Ok(Self { function, stream })
    }

    /// Seconds per round trip over [`PingPong::ROUNDS`] rounds of one launch, through the two words that carry the
    /// hand-off of port 0 in `session`'s RPC region (its client and server outboxes), the port a lone thread's
    /// messages take. The same words matter: the raw round trip takes one of two speeds by the pair of SM and host
    /// address (`docs/performance.md`), so a baseline in memory of its own would be a draw of its own.
    /// The words get back their values afterwards, so the session's next run finds the port as it left it.
    pub fn sample(&self, session: &Session<CudaBackend>) -> Result<f64> {
        let (region, layout) = session.rpc_region();
        let word = |index: usize| {
            // SAFETY: the index is a word of the region's layout, inside the region, which the session keeps alive;
            // no run of the session is in progress, so nothing else accesses it until this sample is done.
            let host = unsafe { AtomicU64::from_ptr(region.host.cast::<u64>().add(index)) };
            (host, region.device + 8 * index as u64)
        };
        let (to_host, mut to_host_device) = word(layout.client_outbox(0));
        let (to_device, mut to_device_device) = word(layout.server_outbox(0));
        let left = (to_host.load(Ordering::SeqCst), to_device.load(Ordering::SeqCst));
        to_host.store(0, Ordering::SeqCst);
        to_device.store(0, Ordering::SeqCst);
        let mut rounds = Self::ROUNDS;
        let started = Instant::now();
        // SAFETY: the kernel takes two pointers and a count, given in this order.
        unsafe {
            result::launch_kernel(
                self.function,
                (1, 1, 1),
                (1, 1, 1),
                0,
                self.stream,
                &mut [
                    (&raw mut to_host_device).cast::<c_void>(),
                    (&raw mut to_device_device).cast::<c_void>(),
                    (&raw mut rounds).cast::<c_void>(),
                ],
            )?;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for round in 1..=u64::from(Self::ROUNDS) {
            while to_host.load(Ordering::Acquire) != round {
                if Instant::now() > deadline {
                    bail!("the ping-pong kernel stopped answering at round {round}");
                }
                std::hint::spin_loop();
            }
            to_device.store(round, Ordering::Release);
        }
        wait_for(self.stream, Duration::from_secs(20))?;
        let elapsed = started.elapsed();
        to_host.store(left.0, Ordering::SeqCst);
        to_device.store(left.1, Ordering::SeqCst);
        Ok(elapsed.as_secs_f64() / f64::from(Self::ROUNDS))
    }
}

/// The `vprintf` comparator: one line per thread, the same text `print-flood` prints.
pub fn vprintf_child(blocks: u32, fifo: usize) -> Result<()> {
    let format = b"line %u from thread %u of block %u\n\0";
    let bytes = format.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(", ");
    let ptx = format!(
        r#".version 7.8
.target sm_90
.address_size 64
.extern .func (.param .b32 func_retval0) vprintf (.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.global .align 1 .b8 line_format[{len}] = {{{bytes}}};
.visible .entry print_lines()
{{
	.local .align 8 .b8 depot[16];
	.reg .b32 %r<6>;
	.reg .b64 %rd<6>;
	mov.u64 %rd1, depot;
	cvta.local.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mad.lo.u32 %r4, %r2, %r3, %r1;
	st.local.u32 [%rd1], %r4;
	st.local.u32 [%rd1+4], %r1;
	st.local.u32 [%rd1+8], %r2;
	mov.u64 %rd3, line_format;
	cvta.global.u64 %rd4, %rd3;
	{{
	.param .b64 param0;
	st.param.b64 [param0], %rd4;
	.param .b64 param1;
	st.param.b64 [param1], %rd2;
	.param .b32 retval0;
	call.uni (retval0), vprintf, (param0, param1);
	}}
	ret;
}}
"#,
        len = format.len()
    );
    enter_primary_context()?;
    if fifo > 0 {
        // SAFETY: a plain setting, before any launch.
        unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_PRINTF_FIFO_SIZE, fifo) }.result()?;
    }
    let module = load_module(ptx)?;
    // SAFETY: the module has this kernel, which takes no parameters.
    unsafe {
        let function = result::module::get_function(module, CString::new("print_lines")?)?;
        result::launch_kernel(function, (blocks, 1, 1), (1024, 1, 1), 0, std::ptr::null_mut(), &mut [])?;
    }
    // The driver writes the FIFO out at synchronisation.
    result::ctx::synchronize()?;
    Ok(())
}
