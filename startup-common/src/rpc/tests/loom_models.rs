//! Loom models of the hand-off: `RUSTFLAGS="--cfg loom" cargo test -p startup-common --release --features host loom`.

use super::*;
use loom::thread;
use std::sync::Arc;

fn builder() -> loom::model::Builder {
    let mut builder = loom::model::Builder::new();
    // The clients and the server poll, and loom explores every value each poll may read: the full space of the
    // one-port models is beyond a small machine's hours. So the defaults bound it (2 preemptions, the first
    // 20 000 executions); `LOOM_MAX_PREEMPTIONS` and `LOOM_MAX_PERMUTATIONS` (0: no limit) widen it.
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.max_permutations = match std::env::var("LOOM_MAX_PERMUTATIONS") {
        Ok(limit) => Some(limit.parse().expect("a number")).filter(|&limit| limit > 0),
        Err(_) => Some(20_000),
    };
    builder.max_branches = 100_000;
    builder
}

fn setup(ports: u32) -> (Arc<HostRegion>, Arc<Client<HostThread>>) {
    let region = Arc::new(HostRegion::new(Layout::new(ports, 1)));
    let client = Arc::new(Client::new());
    // SAFETY: a fresh region of loom atomics for `ports` ports of one lane, kept alive by the `Arc`s until every
    // thread of the model is joined.
    unsafe { client.reset(region.as_ptr(), ports) };
    (region, client)
}

/// Serves `messages` increments (or one-packet sends, answered when `reply`) and returns what was received.
fn serve(region: &HostRegion, messages: usize) -> std::vec::Vec<(u32, u64)> {
    let layout = region.layout();
    // SAFETY: the region outlives this function; the model has one server.
    let mut server = unsafe { Server::new(region.as_ptr(), layout.port_count(), layout.lane_size()) };
    let mut seen = std::vec::Vec::new();
    while seen.len() < messages {
        let mut any = false;
        for index in 0..layout.port_count() {
            if let Some(mut port) = server.open(index) {
                any = true;
                let opcode = port.opcode();
                let mut value = 0;
                port.recv(|_, packet| value = packet.get(0));
                if opcode == TEST_INCREMENT {
                    port.send(|_, packet| packet.set(0, value + 1));
                }
                seen.push((opcode, value));
            }
        }
        if !any {
            thread::yield_now();
        }
    }
    seen
}

/// Two clients share one port: the lock and the ownership check serialize them, and each reply reaches the
/// client that asked.
#[test]
fn loom_two_clients_one_port() {
    builder().check(|| two_clients_increment(1, [1, 11]));
}

/// Two clients, two ports: they may pick either port; nothing is lost or duplicated.
#[test]
fn loom_two_clients_two_ports() {
    builder().check(|| two_clients_increment(2, [5, 6]));
}

/// Two clients on a region of `ports` ports each ask for one of `values` to be incremented; the server sees each
/// request once, and each client gets its own answer.
fn two_clients_increment(ports: u32, values: [u64; 2]) {
    let (region, client) = setup(ports);
    let workers = values.map(|value| {
        let client = client.clone();
        thread::spawn(move || assert_eq!(client.test_increment(value), value + 1))
    });
    let mut seen = serve(&region, 2);
    seen.sort();
    assert_eq!(seen, values.map(|value| (TEST_INCREMENT, value)));
    for worker in workers {
        worker.join().unwrap();
    }
}

/// A send-only message leaves the port with the server; a second client on the only port must wait
/// for the server to finish it, and must not see or clobber its packet.
#[test]
fn loom_send_only_then_request_on_one_port() {
    builder().check(|| {
        let (region, client) = setup(1);
        let sending = {
            let client = client.clone();
            thread::spawn(move || send_only(&client, 3))
        };
        let asking = {
            let client = client.clone();
            thread::spawn(move || assert_eq!(client.test_increment(7), 8))
        };
        let mut seen = serve(&region, 2);
        seen.sort();
        assert_eq!(seen, [(SEND_ONLY, 3), (TEST_INCREMENT, 7)]);
        sending.join().unwrap();
        asking.join().unwrap();
    });
}

/// Two lane groups of one warp (a divergent branch): lane 0 and lane 1 of a two-lane warp, each a group of its
/// own, in a block with block memory and a region with a port for every warp.
struct TwoLaneWarp;

loom::thread_local! {
    static LANE: std::cell::Cell<u32> = std::cell::Cell::new(0);
}

loom::lazy_static! {
    /// The block's memory, for its one warp; fresh in every execution of a model.
    static ref BLOCK_MEMORY: HostBlockMemory<1> = HostBlockMemory::default();
}

// SAFETY: every group is one lane, so every lane operation is trivially uniform across it.
unsafe impl crate::Gpu for TwoLaneWarp {
    const LANE_SIZE: u32 = 2;

    fn lane_id() -> u32 {
        LANE.with(|lane| lane.get())
    }

    fn lane_mask() -> u64 {
        1 << Self::lane_id()
    }

    fn broadcast_first(_mask: u64, value: u32) -> u32 {
        value
    }

    fn ballot(mask: u64, predicate: bool) -> u64 {
        if predicate { mask } else { 0 }
    }

    fn sync_lanes(_mask: u64) {}

    fn sleep_briefly() {
        thread::yield_now();
    }

    fn thread_ids() -> crate::ThreadIds {
        crate::ThreadIds { thread: [Self::lane_id(), 0, 0], block: [0; 3] }
    }

    fn launch_shape() -> crate::abi::LaunchParams {
        crate::abi::LaunchParams { threads: [2, 1, 1], blocks: [1, 1, 1] }
    }

    fn block_memory() -> Option<core::ptr::NonNull<crate::BlockMemory>> {
        Some(BLOCK_MEMORY.as_block_memory())
    }

    /// The models prepare the block on their main thread, as lane 0, before they start the lanes.
    fn sync_block() {}

    fn nanoseconds() -> u64 {
        crate::gpu::host_nanoseconds()
    }

    fn end_thread() -> ! {
        unreachable!("no lane ends in the models")
    }

    fn trap() -> ! {
        panic!("a lane trapped")
    }
}

fn spawn_lane(lane: u32, body: impl FnOnce() + Send + 'static) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        LANE.with(|cell| cell.set(lane));
        body()
    })
}

fn setup_two_lanes() -> (Arc<HostRegion>, Arc<Client<TwoLaneWarp>>) {
    let region = Arc::new(HostRegion::new(Layout::new(1, 2)));
    let client = Arc::new(Client::new());
    // SAFETY: a fresh region of loom atomics for one port of two lanes, kept alive by the `Arc`s until every
    // thread of the model is joined.
    unsafe { client.reset(region.as_ptr(), 1) };
    // SAFETY: as the block's lane 0 (the main thread's lane), before any lane uses the client; spawning the lanes
    // orders it before them, as the barrier would.
    unsafe { client.prepare_block() };
    (region, client)
}

/// The two groups of the warp share its own port through the block-memory lock: each reply reaches the group that
/// asked.
#[test]
fn loom_two_groups_of_a_warp_on_its_own_port() {
    builder().check(|| {
        let (region, client) = setup_two_lanes();
        let workers: std::vec::Vec<_> = (0..2u32)
            .map(|lane| {
                let client = client.clone();
                let value = 10 * u64::from(lane) + 1;
                spawn_lane(lane, move || {
                    let mut port = client.open(TEST_INCREMENT);
                    assert_eq!(port.index(), 0, "the warp's own port");
                    port.send(|packet| packet.set(0, value));
                    let mut reply = 0;
                    port.recv(|packet| reply = packet.get(0));
                    port.close();
                    assert_eq!(reply, value + 1);
                })
            })
            .collect();
        let mut seen = serve(&region, 2);
        seen.sort();
        assert_eq!(seen, [(TEST_INCREMENT, 1), (TEST_INCREMENT, 11)]);
        for worker in workers {
            worker.join().unwrap();
        }
    });
}

/// On the warp's own port, a group that follows a send-only message waits for the server to finish
/// it instead of moving to another port, and does not see or clobber its packet.
#[test]
fn loom_send_only_then_request_on_a_warps_own_port() {
    builder().check(|| {
        let (region, client) = setup_two_lanes();
        let sending = {
            let client = client.clone();
            spawn_lane(0, move || send_only(&client, 3))
        };
        let asking = {
            let client = client.clone();
            spawn_lane(1, move || assert_eq!(client.test_increment(7), 8))
        };
        let mut seen = serve(&region, 2);
        seen.sort();
        assert_eq!(seen, [(SEND_ONLY, 3), (TEST_INCREMENT, 7)]);
        sending.join().unwrap();
        asking.join().unwrap();
    });
}

/// A two-packet stream each way between one client and the server.
#[test]
fn loom_multi_packet_echo() {
    builder().check(|| {
        let (region, client) = setup(1);
        let worker = thread::spawn(move || {
            let input: std::vec::Vec<u8> = (0..70).collect();
            let mut output = [0u8; 70];
            assert_eq!(client.test_echo(&input, &mut output), 70);
            assert_eq!(&output[..], &input[..]);
        });
        // SAFETY: the region outlives the server; the model has one server.
        let mut server = unsafe { Server::new(region.as_ptr(), 1, 1) };
        loop {
            if let Some(mut port) = server.open(0) {
                let received = port.recv_n_vec::<0>(u64::MAX).unwrap();
                assert_eq!(received[0].data.len(), 70);
                port.send_n(|_| &received[0].data);
                break;
            }
            thread::yield_now();
        }
        worker.join().unwrap();
    });
}
