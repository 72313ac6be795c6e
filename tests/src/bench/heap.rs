//! Allocation throughput. A full grid (1,056 blocks of 1,024 threads: eight per SM of an H200) where
//! every thread allocates and frees a block of 16 to 256 bytes 1,000 times, writing its first and last byte: our heap
//! (the C program `heap-throughput-c`, through `malloc` and `free`) against CUDA's device-side `malloc` and `free` in a PTX kernel
//! that does the same, with CUDA's default 8 MiB heap and with a heap as large as ours. Each CUDA configuration
//! runs in a child process of its own, because CUDA fixes its heap's size at the first launch that uses it.

use std::ffi::{CString, c_void};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use cudarc::driver::{result, sys};
use startup_common::abi::LaunchParams;

use crate::baselines::{enter_primary_context, load_module};
use crate::report::{Row, Stats, row};
use crate::runs::{run_ok, session};

/// Blocks of 1,024 threads in the grid.
pub const BLOCKS: u32 = 1056;
/// Allocations per thread.
pub const ROUNDS: u32 = 1000;
/// Allocations per thread of the CUDA baseline: its `malloc` is slow enough that `ROUNDS` would take minutes per
/// launch. Throughput is a rate, and fewer rounds leave its heap less fragmented, so this can only favour CUDA.
pub const CUDA_ROUNDS: u32 = 20;
/// How long one CUDA configuration may take, all its samples together, before it is stopped.
const CUDA_LIMIT: Duration = Duration::from_secs(300);

/// The baseline's kernel: `heap-throughput-c`'s loop in PTX, on CUDA's `malloc` and `free` (extern functions that
/// the driver's JIT links in). The size of thread `t`'s block in round `r` is the program's `block_size`: `x = t *
/// 0x9e3779b9 + r * 0x85ebca6b`, `x ^= x >> 15`, `x *= 0x2c1b3c6d`, `x ^= x >> 12`, `16 + x % 241` (the constants
/// as signed decimals, as LLVM writes them). It adds the thread's failed allocations and blocks that lost their bytes
/// to two counters.
const CUDA_MALLOC_PTX: &str = r#".version 7.8
.target sm_90
.address_size 64
.extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);
.extern .func free(.param .b64 free_param_0);
.visible .entry alloc_free(.param .u32 rounds, .param .u64 counters)
{
	.reg .pred %p<4>;
	.reg .b32 %r<20>;
	.reg .b64 %rd<6>;
	ld.param.u32 %r1, [rounds];
	ld.param.u64 %rd1, [counters];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.u32 %r5, %r2, %r3, %r4;
	mul.lo.s32 %r6, %r5, -1640531527;
	and.b32 %r16, %r5, 255;
	mov.u32 %r7, 0;
	mov.u32 %r8, 0;
	mov.u32 %r9, 0;
$round:
	setp.ge.u32 %p1, %r7, %r1;
	@%p1 bra $done;
	mad.lo.s32 %r10, %r7, -2048144789, %r6;
	shr.u32 %r11, %r10, 15;
	xor.b32 %r10, %r10, %r11;
	mul.lo.s32 %r10, %r10, 739982445;
	shr.u32 %r11, %r10, 12;
	xor.b32 %r10, %r10, %r11;
	rem.u32 %r11, %r10, 241;
	add.u32 %r12, %r11, 16;
	cvt.u64.u32 %rd2, %r12;
	{
	.param .b64 param0;
	st.param.b64 [param0], %rd2;
	.param .b64 retval0;
	call.uni (retval0), malloc, (param0);
	ld.param.b64 %rd3, [retval0];
	}
	setp.eq.u64 %p2, %rd3, 0;
	@%p2 bra $failed;
	add.u64 %rd4, %rd3, %rd2;
	sub.u64 %rd4, %rd4, 1;
	and.b32 %r15, %r7, 255;
	st.volatile.u8 [%rd3], %r15;
	st.volatile.u8 [%rd4], %r16;
	ld.volatile.u8 %r13, [%rd3];
	ld.volatile.u8 %r14, [%rd4];
	setp.ne.u32 %p3, %r13, %r15;
	setp.ne.or.u32 %p3, %r14, %r16, %p3;
	selp.u32 %r17, 1, 0, %p3;
	add.u32 %r9, %r9, %r17;
	{
	.param .b64 param0;
	st.param.b64 [param0], %rd3;
	call.uni free, (param0);
	}
	bra.uni $next;
$failed:
	add.u32 %r8, %r8, 1;
$next:
	add.u32 %r7, %r7, 1;
	bra.uni $round;
$done:
	atom.add.u32 %r18, [%rd1], %r8;
	atom.add.u32 %r19, [%rd1+4], %r9;
	ret;
}
"#;

/// One CUDA configuration's samples: seconds of each launch, and its failed allocations and lost bytes.
#[derive(Debug, Default)]
struct CudaSamples {
    seconds: Vec<f64>,
    failed: u64,
    wrong: u64,
    heap_bytes: usize,
    /// Whether it ran all its samples within [`CUDA_LIMIT`].
    finished: bool,
}

/// The allocation-throughput rows: ours against CUDA's heap as large as ours, and against CUDA's default heap.
pub fn heap_throughput(images: &Path, repeat: usize) -> Result<Vec<Row>> {
    let grid = LaunchParams { threads: [1024, 1, 1], blocks: [BLOCKS, 1, 1] };
    let allocations = grid.total_threads() as f64 * f64::from(ROUNDS);
    let rounds = ROUNDS.to_string();
    let mut ours = session(images, "heap-throughput-c", &[&rounds])?;
    // The first run pays for the JIT and the heap's first slabs; the program exits with 1 if any allocation failed.
    let warm =
        run_ok(&mut ours, &grid).context("heap-throughput-c failed: an allocation of ours failed or lost bytes")?;
    eprintln!("gpu-bench:   ours (warm-up): {:.1} M allocations/s", allocations / warm.as_secs_f64() / 1e6);
    let mut samples = Vec::new();
    for _ in 0..repeat {
        let elapsed = run_ok(&mut ours, &grid)?;
        eprintln!("gpu-bench:   ours: {:.1} M allocations/s", allocations / elapsed.as_secs_f64() / 1e6);
        samples.push(allocations / elapsed.as_secs_f64() / 1e6);
    }
    let ours = Stats::of(samples);
    let heap_bytes = gpu_loader::run::DEFAULT_HEAP_SIZE as usize;

    let mut rows = Vec::new();
    for (name, cuda_heap) in [("heap-throughput", Some(heap_bytes)), ("heap-throughput-8mib", None)] {
        let cuda = cuda_samples(cuda_heap, repeat)?;
        let label = match cuda_heap {
            Some(_) => format!("CUDA malloc/free, heap of {} MiB (as ours)", cuda.heap_bytes >> 20),
            None => format!("CUDA malloc/free, its default heap of {} MiB", cuda.heap_bytes >> 20),
        };
        let total = grid.total_threads() as f64 * f64::from(CUDA_ROUNDS) * cuda.seconds.len() as f64;
        let succeeded = total - cuda.failed as f64;
        // Throughput counts the allocations that succeeded: a NULL is fast, and no allocation.
        let theirs: Vec<f64> = cuda.seconds.iter().map(|s| succeeded / cuda.seconds.len() as f64 / s / 1e6).collect();
        // A baseline so slow that no launch finished in time leaves the row without a ratio, and says so.
        let baseline = (!theirs.is_empty()).then(|| (Stats::of(theirs), label.as_str()));
        let mut row = row(
            name,
            &format!(
                "{} threads × {ROUNDS} malloc + free of 16–256 B, whole grid (CUDA: × {CUDA_ROUNDS})",
                grid.total_threads()
            ),
            "M allocs/s",
            ours.clone(),
            baseline,
            "≥ 2× CUDA, no failure",
        );
        row.note = format!(
            "ours: no allocation failed; {label}: {} of {} allocations returned NULL, {} blocks lost their bytes{}",
            cuda.failed,
            total as u64,
            cuda.wrong,
            if cuda.finished {
                String::new()
            } else {
                format!(" ({} launches finished before it was stopped after {CUDA_LIMIT:?})", cuda.seconds.len())
            }
        );
        rows.push(row);
    }
    Ok(rows)
}

/// Runs the CUDA baseline in a child process with a heap of `heap` bytes (`None`: CUDA's default).
fn cuda_samples(heap: Option<usize>, repeat: usize) -> Result<CudaSamples> {
    let mut command = Command::new(std::env::current_exe()?);
    command.args(["cuda-malloc", "--blocks", &BLOCKS.to_string(), "--rounds", &CUDA_ROUNDS.to_string()]);
    command.args(["--repeat", &repeat.to_string(), "--heap", &heap.unwrap_or(0).to_string()]);
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn()?;
    let mut stdout = child.stdout.take().context("piped stdout")?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let started = Instant::now();
    let (status, finished) = loop {
        if let Some(status) = child.try_wait()? {
            break (Some(status), true);
        }
        if started.elapsed() > CUDA_LIMIT {
            child.kill()?;
            child.wait()?;
            break (None, false);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = reader.join().map_err(|_| anyhow::anyhow!("the reader panicked"))??;
    if let Some(status) = status.filter(|status| !status.success()) {
        bail!("the CUDA malloc baseline failed with {status}: {text}");
    }
    let mut samples = CudaSamples { finished, ..CudaSamples::default() };
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["heap", bytes] => samples.heap_bytes = bytes.parse()?,
            ["sample", seconds, failed, wrong] => {
                eprintln!("gpu-bench:   CUDA malloc: {seconds} s, {failed} NULL, {wrong} lost bytes");
                samples.seconds.push(seconds.parse()?);
                samples.failed += failed.parse::<u64>()?;
                samples.wrong += wrong.parse::<u64>()?;
            }
            _ => bail!("unexpected output of the CUDA malloc baseline: {line:?}"),
        }
    }
    Ok(samples)
}

/// The child process: sets CUDA's heap to `heap` bytes (0: leaves the default), then launches the baseline once to
/// warm up and `repeat` times timed, printing `heap BYTES` and then `sample SECONDS FAILED WRONG` per launch.
pub fn cuda_malloc_child(blocks: u32, rounds: u32, heap: usize, repeat: usize) -> Result<()> {
    enter_primary_context()?;
    if heap > 0 {
        // SAFETY: a plain setting, before any launch that uses the heap.
        unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE, heap) }.result()?;
    }
    let mut limit = 0usize;
    // SAFETY: writes one size_t.
    unsafe { sys::cuCtxGetLimit(&mut limit, sys::CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE) }.result()?;
    println!("heap {limit}");
    let module = load_module(CUDA_MALLOC_PTX)?;
    // SAFETY: the module has this kernel.
    let function = unsafe { result::module::get_function(module, CString::new("alloc_free")?) }?;
    // SAFETY: a plain allocation of two counters, kept until the process exits.
    let counters = unsafe { result::malloc_sync(8) }?;
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking)?;
    let launch = |blocks: u32, rounds: u32| -> Result<(Duration, [u32; 2])> {
        let (mut rounds, mut counters_param) = (rounds, counters);
        // SAFETY: zeroes the counters; then a launch with the kernel's two parameters, in order; then the counters
        // back, once the kernel finished.
        unsafe {
            result::memset_d8_sync(counters, 0, 8)?;
            let started = Instant::now();
            result::launch_kernel(
                function,
                (blocks, 1, 1),
                (1024, 1, 1),
                0,
                stream,
                &mut [(&raw mut rounds).cast::<c_void>(), (&raw mut counters_param).cast::<c_void>()],
            )?;
            result::stream::synchronize(stream)?;
            let elapsed = started.elapsed();
            let mut values = [0u32; 2];
            result::memcpy_dtoh_sync(&mut values, counters)?;
            Ok((elapsed, values))
        }
    };
    launch(1, 10)?;
    for _ in 0..repeat.max(1) {
        let (elapsed, [failed, wrong]) = launch(blocks, rounds)?;
        println!("sample {} {failed} {wrong}", elapsed.as_secs_f64());
    }
    Ok(())
}
