//! A test server over `rpc::Server` that holds each thread's chunked output until its last chunk, as the loader does
//! (without the loader's caps), and a simulated warp: lane groups of several real threads, so the SIMT paths
//! (ballots, broadcasts, per-lane lengths) run on the host.

#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::{Arc, Barrier, Condvar, Mutex};

use gpu_startup_protocol::messages::WriteHead;
use gpu_startup_protocol::region::Layout;
use startup_common::BlockMemory;
use startup_common::abi::LaunchParams;
use startup_common::gpu::{Gpu, ThreadIds};
use startup_common::libc::io::Stream;
use startup_common::rpc::{Client, HostBlockMemory, HostCalls, HostRegion, Server, opcode, testing};

/// Scales a count down under Miri, where every thread switch is slow.
pub fn scaled(normal: usize, miri: usize) -> usize {
    if cfg!(miri) { miri } else { normal }
}

/// What a test server saw.
#[derive(Default)]
pub struct Seen {
    /// Whole messages per stream number, in the order they were completed.
    pub messages: HashMap<u8, Vec<Vec<u8>>>,
    /// Lanes served per host call opcode (the test operations).
    pub lanes_by_opcode: HashMap<u32, usize>,
    /// Lane masks of the messages served.
    pub masks: Vec<u64>,
}

impl Seen {
    /// How many lanes sent a test increment.
    pub fn increments(&self) -> usize {
        self.lanes_by_opcode.get(&testing::INCREMENT.opcode().number()).copied().unwrap_or(0)
    }

    /// How many lanes sent a test echo.
    pub fn echoes(&self) -> usize {
        self.lanes_by_opcode.get(&testing::ECHO.number()).copied().unwrap_or(0)
    }
}

/// A server for the startup's operations, which it checks as it serves them, and the test operations, which their
/// handlers serve.
pub struct TestServer {
    server: Server,
    /// Each writing thread's unfinished message, by its thread and group and the stream.
    messages: HashMap<(u64, u64, u8), Vec<u8>>,
    calls: HostCalls,
    pub seen: Seen,
}

impl TestServer {
    pub fn new(region: &HostRegion) -> Self {
        let layout = region.layout();
        // SAFETY: every test keeps the region alive for as long as its server, and has only one server.
        let server = unsafe { Server::new(region.as_ptr(), layout.port_count(), layout.lane_size()) };
        Self { server, messages: HashMap::new(), calls: testing::operations(), seen: Seen::default() }
    }

    /// One pass over all ports; whether any had work.
    pub fn serve_once(&mut self) -> bool {
        let mut any = false;
        for index in 0..self.server.port_count() {
            let Some(mut port) = self.server.open(index) else { continue };
            any = true;
            self.seen.masks.push(port.lane_mask());
            match port.opcode() {
                opcode::WRITE => {
                    for chunk in port.recv_n_vec::<{ WriteHead::WORDS }>(u64::MAX).unwrap() {
                        let head = WriteHead::decode(chunk.head);
                        let stream = Stream::from_number(u32::from(head.stream))
                            .unwrap_or_else(|| panic!("bad stream {}", head.stream));
                        let key = (head.thread, head.group, stream as u8);
                        let held = self.messages.entry(key).or_default();
                        held.extend_from_slice(&chunk.data);
                        if head.flags & WriteHead::MORE == 0 {
                            let mut message = self.messages.remove(&key).unwrap_or_default();
                            if head.flags & WriteHead::NEWLINE != 0 {
                                message.push(b'\n');
                            }
                            self.seen.messages.entry(head.stream).or_default().push(message);
                        }
                    }
                    port.send(|_, packet| packet.set(0, 0));
                }
                other => {
                    *self.seen.lanes_by_opcode.entry(other).or_default() += port.lanes().count();
                    let served = self.calls.serve(&mut port).unwrap_or_else(|| panic!("unexpected opcode {other:#x}"));
                    served.unwrap_or_else(|error| panic!("opcode {other:#x} failed: {error}"));
                }
            }
        }
        any
    }

    /// Serves until `done` says the clients have finished, then a last pass.
    pub fn serve_until(&mut self, done: impl Fn() -> bool) {
        loop {
            let finished = done();
            if !self.serve_once() {
                if finished {
                    break;
                }
                std::thread::yield_now();
            }
        }
        let unfinished: Vec<_> = self.messages.keys().collect();
        assert!(unfinished.is_empty(), "messages left unfinished: {unfinished:?}");
    }
}

/// A fresh zeroed region.
pub fn region(ports: u32, lanes: u32) -> HostRegion {
    HostRegion::new(Layout::new(ports, lanes))
}

/// A client of `region`, reset for a run; the region must be laid out for `G`'s lanes.
pub fn client<G: Gpu>(region: &HostRegion) -> Client<G> {
    assert_eq!(region.layout().lane_size(), G::LANE_SIZE, "the region is laid out for another lane count");
    let client = Client::new();
    // SAFETY: the region is fresh and zeroed, laid out for `G`'s lanes (checked above), and every test keeps it alive
    // for as long as the client.
    unsafe { client.reset(region.as_ptr(), region.layout().port_count()) };
    client
}

/// Runs `body(n)` on `threads` threads while `server` serves; returns once all are done and served.
pub fn run_clients(server: &mut TestServer, threads: usize, body: impl Fn(usize) + Sync) {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|n| {
                let body = &body;
                scope.spawn(move || body(n))
            })
            .collect();
        server.serve_until(|| workers.iter().all(|w| w.is_finished()));
    });
}

/// A deterministic pseudo-random sequence.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// ---- The simulated warp ---------------------------------------------------------------------------------------

/// Lanes per simulated warp.
pub const SIM_LANES: u32 = 4;

/// The lanes of one simulated group: for every lane operation, the lanes of its mask (all of the group's, or some of
/// them, as after a branch) meet and exchange a value.
pub struct SimGroup {
    mask: u64,
    /// How long every lane but the lowest waits after each lane operation: lanes that run apart between two
    /// operations, as independent thread scheduling lets them, so that a hand-off without a warp barrier shows.
    lag: Option<std::time::Duration>,
    /// A lane of the group panicked: the others stop waiting for it and panic too, so that a test fails rather than
    /// hangs.
    abandoned: std::sync::atomic::AtomicBool,
    /// The operation under way for each mask, indexed by the mask.
    rounds: Mutex<[Round; 1 << SIM_LANES]>,
    changed: Condvar,
}

/// One lane operation of some lanes: which have arrived, their values, which have left with the result. All clear:
/// none under way.
#[derive(Clone, Copy, Default)]
struct Round {
    arrived: u64,
    left: u64,
    values: [u64; SIM_LANES as usize],
}

impl SimGroup {
    pub fn new(mask: u64) -> Arc<Self> {
        Arc::new(Self {
            mask,
            lag: None,
            abandoned: std::sync::atomic::AtomicBool::new(false),
            rounds: Mutex::new([Round::default(); 1 << SIM_LANES]),
            changed: Condvar::new(),
        })
    }

    /// Marks the group abandoned if the calling lane panics before the guard drops.
    pub fn abandon_on_panic(self: &Arc<Self>) -> impl Drop {
        struct Guard(Arc<SimGroup>);
        impl Drop for Guard {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.abandoned.store(true, std::sync::atomic::Ordering::Relaxed);
                    self.0.changed.notify_all();
                }
            }
        }
        Guard(Arc::clone(self))
    }

    /// A group whose lanes other than the lowest lag `lag` behind after every lane operation.
    pub fn lagging(mask: u64, lag: std::time::Duration) -> Arc<Self> {
        Arc::new(Self { lag: Some(lag), ..Arc::into_inner(Self::new(mask)).expect("just made") })
    }
}

impl SimGroup {
    /// Waits for a change of the group's rounds; panics once another lane of the group has panicked, which would
    /// leave this one waiting for ever.
    fn wait<'a>(
        &self,
        rounds: std::sync::MutexGuard<'a, [Round; 1 << SIM_LANES]>,
    ) -> std::sync::MutexGuard<'a, [Round; 1 << SIM_LANES]> {
        let (rounds, _) = self.changed.wait_timeout(rounds, std::time::Duration::from_millis(10)).unwrap();
        assert!(!self.abandoned.load(std::sync::atomic::Ordering::Relaxed), "another lane of the group panicked");
        rounds
    }
}

/// One simulated launch: a block of `warps` warps, every lane a thread. With block memory, the client gives each warp
/// a port of its own whenever the region has enough ports (as on a GPU); without, every group takes a shared port.
pub struct SimLaunch {
    warps: u32,
    memory: Option<HostBlockMemory<MAX_SIM_WARPS>>,
    barrier: Barrier,
    /// When a lane operation panics instead of going on: a hand-off that loses a message leaves lanes polling for
    /// ever, and a test must fail rather than hang.
    deadline: std::time::Instant,
}

/// The most warps in a simulated block.
pub const MAX_SIM_WARPS: usize = 8;

impl SimLaunch {
    pub fn new(warps: u32, block_memory: bool) -> Arc<Self> {
        assert!(warps as usize <= MAX_SIM_WARPS);
        let memory = block_memory.then(HostBlockMemory::default);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(scaled(30, 900) as u64);
        Arc::new(Self { warps, memory, barrier: Barrier::new((warps * SIM_LANES) as usize), deadline })
    }
}

struct LaneState {
    group: Arc<SimGroup>,
    lane: u32,
    warp: u32,
    launch: Arc<SimLaunch>,
}

thread_local! {
    static LANE: RefCell<Option<LaneState>> = const { RefCell::new(None) };
}

/// Makes the calling thread lane `lane` of `group` in warp `warp` of `launch`.
pub fn become_lane(group: Arc<SimGroup>, lane: u32, warp: u32, launch: Arc<SimLaunch>) {
    assert!(group.mask & (1 << lane) != 0);
    LANE.with(|state| *state.borrow_mut() = Some(LaneState { group, lane, warp, launch }));
}

fn with_lane<R>(f: impl FnOnce(&LaneState) -> R) -> R {
    LANE.with(|state| f(state.borrow().as_ref().expect("the thread is a simulated lane")))
}

/// Every lane of `mask` (lanes of the calling lane's group, itself included) contributes `value`; all get every
/// lane's value once all have arrived.
fn exchange(mask: u64, value: u64) -> [u64; SIM_LANES as usize] {
    with_lane(|state| {
        let me = 1u64 << state.lane;
        let group = &state.group;
        assert!(std::time::Instant::now() < state.launch.deadline, "the simulated launch ran past its deadline");
        assert!(mask & me != 0 && mask & !group.mask == 0, "lane {} in a lane operation of {mask:#b}", state.lane);
        let index = mask as usize;
        let mut rounds = group.rounds.lock().unwrap();
        // A round of the same lanes that has all arrived is the last one, still being left: wait for it to end.
        while rounds[index].arrived == mask {
            rounds = group.wait(rounds);
        }
        let round = &mut rounds[index];
        round.values[state.lane as usize] = value;
        round.arrived |= me;
        if round.arrived == mask {
            group.changed.notify_all();
        }
        while rounds[index].arrived != mask {
            rounds = group.wait(rounds);
        }
        let round = &mut rounds[index];
        let values = round.values;
        round.left |= me;
        if round.left == mask {
            *round = Round::default();
            group.changed.notify_all();
        }
        drop(rounds);
        if let Some(lag) = group.lag.filter(|_| state.lane != mask.trailing_zeros()) {
            std::thread::sleep(lag);
        }
        values
    })
}

/// A GPU whose lanes are host threads grouped by [`SimGroup`]: a group behaves like the lanes of a warp that run
/// together (two groups of one warp behave like divergent branches under independent thread scheduling).
pub struct SimWarp;

// SAFETY: every lane of a mask meets the others in `exchange` (under a mutex, which also orders their memory
// accesses), so `broadcast_first` and `ballot` return the same value in every lane of the mask, and `sync_lanes`
// returns only when all have arrived.
unsafe impl Gpu for SimWarp {
    const LANE_SIZE: u32 = SIM_LANES;
    // Each lane is a thread: groups of one warp make progress on their own, as under independent thread scheduling.
    const INDEPENDENT_LANES: bool = true;

    fn lane_id() -> u32 {
        with_lane(|state| state.lane)
    }

    fn lane_mask() -> u64 {
        with_lane(|state| state.group.mask)
    }

    fn broadcast_first(mask: u64, value: u32) -> u32 {
        exchange(mask, u64::from(value))[mask.trailing_zeros() as usize] as u32
    }

    fn ballot(mask: u64, predicate: bool) -> u64 {
        let all = exchange(mask, predicate as u64);
        (0..SIM_LANES)
            .filter(|&lane| mask & (1 << lane) != 0 && all[lane as usize] != 0)
            .fold(0, |m, lane| m | 1 << lane)
    }

    fn sync_lanes(mask: u64) {
        exchange(mask, 0);
    }

    fn sleep_briefly() {
        std::thread::yield_now();
    }

    fn thread_ids() -> ThreadIds {
        with_lane(|state| ThreadIds { thread: [state.warp * SIM_LANES + state.lane, 0, 0], block: [0; 3] })
    }

    fn launch_shape() -> LaunchParams {
        with_lane(|state| LaunchParams { threads: [state.launch.warps * SIM_LANES, 1, 1], blocks: [1, 1, 1] })
    }

    /// The memory starts as garbage, as on a GPU: the client must fill it in `prepare_block`.
    fn block_memory() -> Option<NonNull<BlockMemory>> {
        with_lane(|state| state.launch.memory.as_ref().map(HostBlockMemory::as_block_memory))
    }

    fn sync_block() {
        with_lane(|state| Arc::clone(&state.launch)).barrier.wait();
    }

    fn nanoseconds() -> u64 {
        startup_common::gpu::host_nanoseconds()
    }

    fn end_thread() -> ! {
        panic!("a simulated lane ended")
    }

    fn trap() -> ! {
        panic!("a simulated lane trapped")
    }
}
