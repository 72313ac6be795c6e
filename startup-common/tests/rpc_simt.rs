//! Lane groups of several threads (`SimWarp`): one port per group, one lane acting for it, a buffer per lane, lanes
//! with different lengths, and two divergent groups of one warp competing for ports.

mod common;

use std::sync::Arc;

use common::{SIM_LANES, SimGroup, SimLaunch, SimWarp, TestServer, become_lane, client, region, scaled};
use startup_common::Gpu;
use startup_common::libc::io::{self, Stream};
use startup_common::rpc::Client;
use startup_common::rpc::testing::{self, TestOperations};

/// Runs `body(warp, lane)` on every lane of `warps` warps, each warp split into the groups `masks`, in one block that
/// has block memory when `block_memory` (so warps get ports of their own where the region has enough).
fn run_warps(
    server: &mut TestServer,
    client: &Client<SimWarp>,
    launch: (u32, bool),
    masks: &[u64],
    body: impl Fn(&Client<SimWarp>, u32, u32) + Sync,
) {
    run_groups(server, client, launch, masks, |_, mask| SimGroup::new(mask), body)
}

/// Like [`run_warps`], with the groups `group` makes of each warp's masks.
fn run_groups(
    server: &mut TestServer,
    client: &Client<SimWarp>,
    (warps, block_memory): (u32, bool),
    masks: &[u64],
    group: impl Fn(u32, u64) -> Arc<SimGroup>,
    body: impl Fn(&Client<SimWarp>, u32, u32) + Sync,
) {
    assert_eq!(masks.iter().fold(0, |all, m| all | m), (1 << SIM_LANES) - 1);
    let launch = SimLaunch::new(warps, block_memory);
    std::thread::scope(|scope| {
        let mut workers = Vec::new();
        for warp in 0..warps {
            for &mask in masks {
                let group = group(warp, mask);
                for lane in (0..SIM_LANES).filter(|lane| mask & (1 << lane) != 0) {
                    let group = Arc::clone(&group);
                    let launch = Arc::clone(&launch);
                    let body = &body;
                    workers.push(scope.spawn(move || {
                        let _abandon = group.abandon_on_panic();
                        become_lane(Arc::clone(&group), lane, warp, launch);
                        // SAFETY: every lane of the block calls it first, as each kernel of the startup does.
                        unsafe { client.prepare_block() };
                        body(client, warp, lane)
                    }));
                }
            }
        }
        server.serve_until(|| workers.iter().all(|w| w.is_finished()));
    });
}

/// Each test runs on a block with block memory (each warp uses a port of its own, the region having enough) and on one
/// without (groups take shared ports).
const BLOCK_MEMORY: [bool; 2] = [true, false];

#[test]
fn a_warp_increments_together_with_one_message() {
    let rounds = scaled(200, 2) as u64;
    let warps = scaled(4, 1) as u32;
    for block_memory in BLOCK_MEMORY {
        let region = region(4, SIM_LANES);
        let client = client::<SimWarp>(&region);
        let mut server = TestServer::new(&region);
        run_warps(&mut server, &client, (warps, block_memory), &[0b1111], |client, warp, lane| {
            for r in 0..rounds {
                let value = u64::from(warp) << 40 | u64::from(lane) << 32 | r;
                assert_eq!(client.test_increment(value), value + 1);
            }
        });
        assert_eq!(server.seen.increments(), warps as usize * SIM_LANES as usize * rounds as usize);
        // One message per warp per round, sent for all four lanes.
        assert_eq!(server.seen.masks.len(), warps as usize * rounds as usize);
        assert!(server.seen.masks.iter().all(|&mask| mask == 0b1111));
    }
}

/// Lanes that lag behind their group's lowest lane after every lane operation, as lanes may under independent thread
/// scheduling: each lane's packet still reaches the host, and each lane reads its own reply, on the warp's own port
/// and on shared ones. The warp barriers before the leader hands a port to the host (`Port::toggle`) and before it
/// unlocks the port (`Port`'s drop) are what this checks: without either, the leader runs ahead of the lagging lanes
/// and a lane's request or reply is lost.
#[test]
#[cfg_attr(miri, ignore = "real-time lags: the interpreter runs the other warp's calls for as long, which takes hours")]
fn lagging_lanes_send_and_receive_whole_messages() {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let rounds = 12;
    // The warps' own ports, then one port that both warps take in turn, where a lane that lags behind its leader's
    // unlock would read the other warp's packet.
    for (block_memory, ports) in [(true, 4), (false, 1)] {
        let region = region(ports, SIM_LANES);
        let client = client::<SimWarp>(&region);
        let mut server = TestServer::new(&region);
        // Warp 0's lanes lag; warp 1's do not, and keep sending until warp 0 is done, so that it takes a port as
        // soon as warp 0's leader lets it go.
        let lagging = |warp, mask| match warp {
            0 => SimGroup::lagging(mask, std::time::Duration::from_millis(3)),
            _ => SimGroup::new(mask),
        };
        let (lagging_lanes_done, quick_calls) = (AtomicU32::new(0), AtomicU32::new(0));
        run_groups(&mut server, &client, (2, block_memory), &[0b1111], lagging, |client, warp, lane| {
            let mut r = 0;
            loop {
                let more = if warp == 0 { r < rounds } else { lagging_lanes_done.load(Relaxed) < SIM_LANES };
                // A group's lanes make the same calls, so they decide together, by the lowest lane's view: warp 1's
                // lanes read the count at different times, and a lane that left alone would leave the others waiting
                // for it in the group's next lane operation.
                if SimWarp::broadcast_first(0b1111, u32::from(more)) == 0 {
                    break;
                }
                let value = u64::from(warp) << 40 | u64::from(lane) << 32 | r;
                assert_eq!(client.test_increment(value), value + 1, "warp {warp} lane {lane} round {r}");
                r += 1;
            }
            match warp {
                0 => lagging_lanes_done.fetch_add(1, Relaxed),
                _ => quick_calls.fetch_add(r as u32, Relaxed),
            };
        });
        let calls = SIM_LANES as usize * rounds as usize + quick_calls.into_inner() as usize;
        assert_eq!(server.seen.increments(), calls);
    }
}

#[test]
fn lanes_stream_different_lengths_in_one_message() {
    let rounds = scaled(100, 2);
    for block_memory in BLOCK_MEMORY {
        let region = region(4, SIM_LANES);
        let client = client::<SimWarp>(&region);
        let mut server = TestServer::new(&region);
        run_warps(&mut server, &client, (scaled(3, 1) as u32, block_memory), &[0b1111], |client, warp, lane| {
            for r in 0..rounds {
                // Lane 0 often sends nothing while another sends several packets.
                let len = ((lane as usize * 97 + r * 31 + warp as usize * 7) % 300) * (lane as usize % 2 + (r % 3));
                let input: Vec<u8> = (0..len).map(|i| (i + lane as usize * 3 + r) as u8).collect();
                let mut output = vec![0u8; len + 8];
                assert_eq!(client.test_echo(&input, &mut output), len);
                assert_eq!(&output[..len], &input[..]);
            }
        });
    }
}

/// The suite's example host calls from whole and divergent warps: every lane gets the answer to its own request, in
/// one message per group, and the host's state counts every lane.
#[test]
fn host_calls_answer_each_lane() {
    let warps = scaled(3, 1) as u32;
    for (block_memory, masks) in [(true, &[0b1111][..]), (false, &[0b0110, 0b1001][..])] {
        let region = region(4, SIM_LANES);
        let client = client::<SimWarp>(&region);
        let mut server = TestServer::new(&region);
        run_warps(&mut server, &client, (warps, block_memory), masks, |client, warp, lane| {
            let number = (u64::from(warp * SIM_LANES + lane) + 1) << 20;
            assert_eq!(client.call(testing::SQUARE, number), number * number);
            let text = format!("lane {lane} of warp {warp}: {}", "x".repeat(lane as usize * 40));
            let mut reversed = vec![0u8; text.len()];
            let mut port = client.open(testing::REVERSE.number());
            port.send_n(text.as_bytes());
            assert_eq!(port.recv_n(&mut reversed), text.len());
            port.close();
            assert!(reversed.iter().eq(text.as_bytes().iter().rev()), "lane {lane} of warp {warp}");
        });
        let squares = warps as usize * SIM_LANES as usize;
        assert_eq!(server.seen.lanes_by_opcode[&testing::SQUARE.opcode().number()], squares);
        let seen = std::thread::scope(|scope| {
            let asker = scope.spawn(|| {
                let launch = SimLaunch::new(1, false);
                become_lane(SimGroup::new(1), 0, 0, launch);
                // SAFETY: the one lane of the block calls it first, as each kernel of the startup does.
                unsafe { client.prepare_block() };
                client.call(testing::SQUARES_SEEN, ())
            });
            server.serve_until(|| asker.is_finished());
            asker.join().unwrap()
        });
        assert_eq!(seen, squares as u64);
    }
}

/// Lanes that run a host call together, each with its own call (as lanes of a warp may run a shared function they
/// reached from different call sites): each lane is served by its own call, the lanes of each opcode in a message of
/// their own, on the warp's own port and on shared ones. Without the split by opcode in `Client::open`, the host
/// serves all four lanes as the lowest lane's call, and lanes 1 and 3 get a successor where they asked for a square.
#[test]
fn lanes_running_together_with_different_calls_are_each_served_by_their_own() {
    let rounds = scaled(50, 2) as u64;
    for block_memory in BLOCK_MEMORY {
        let region = region(4, SIM_LANES);
        let client = client::<SimWarp>(&region);
        let mut server = TestServer::new(&region);
        run_warps(&mut server, &client, (2, block_memory), &[0b1111], |client, warp, lane| {
            for r in 0..rounds {
                let value = u64::from(warp) << 20 | u64::from(lane) << 16 | r;
                // One call site, as in a shared function: the call is data.
                let (call, expected) =
                    if lane % 2 == 0 { (testing::INCREMENT, value + 1) } else { (testing::SQUARE, value * value) };
                assert_eq!(client.call(call, value), expected, "warp {warp} lane {lane} round {r}");
            }
        });
        let by_opcode = &server.seen.lanes_by_opcode;
        let calls = 2 * 2 * rounds as usize;
        assert_eq!(by_opcode.get(&testing::INCREMENT.opcode().number()), Some(&calls));
        assert_eq!(by_opcode.get(&testing::SQUARE.opcode().number()), Some(&calls));
        assert!(server.seen.masks.iter().all(|&mask| mask == 0b0101 || mask == 0b1010), "one opcode per message");
    }
}

/// Two groups of one warp (as after a divergent branch) start at the same port and compete for it.
#[test]
fn divergent_groups_of_one_warp_both_progress() {
    let rounds = scaled(200, 2) as u64;
    for block_memory in BLOCK_MEMORY {
        let region = region(2, SIM_LANES);
        let client = client::<SimWarp>(&region);
        let mut server = TestServer::new(&region);
        run_warps(&mut server, &client, (2, block_memory), &[0b0101, 0b1010], |client, warp, lane| {
            for r in 0..rounds {
                let value = u64::from(warp) << 40 | u64::from(lane) << 32 | r;
                assert_eq!(client.test_increment(value), value + 1);
            }
        });
        assert_eq!(server.seen.increments(), 2 * 4 * rounds as usize);
        assert!(server.seen.masks.iter().all(|&mask| mask == 0b0101 || mask == 0b1010));
    }
}

/// Lanes print lines of different lengths at once, each past the print buffer: each line arrives whole. (The
/// simulated group cannot shrink when lanes diverge, so every lane here sends the same number of chunks; on a GPU the
/// lanes that fill their buffer first send their chunk as a smaller group.)
#[test]
fn lanes_print_their_own_lines() {
    let lines = scaled(20, 1);
    for block_memory in BLOCK_MEMORY {
        let region = region(4, SIM_LANES);
        let client = client::<SimWarp>(&region);
        let mut server = TestServer::new(&region);
        let text =
            |warp: u32, lane: u32, l: usize| "=".repeat(300 + (lane as usize * 53 + l * 17 + warp as usize) % 180);
        run_warps(&mut server, &client, (2, block_memory), &[0b1111], |client, warp, lane| {
            for l in 0..lines {
                io::print(client, Stream::Stdout, format_args!("w{warp} l{lane} #{l} {}\n", text(warp, lane, l)));
            }
        });
        let mut got: Vec<String> =
            server.seen.messages[&1].iter().map(|m| String::from_utf8(m.clone()).unwrap()).collect();
        got.sort();
        let mut expected: Vec<String> = (0..2)
            .flat_map(|w| (0..SIM_LANES).flat_map(move |n| (0..lines).map(move |l| (w, n, l))))
            .map(|(w, n, l)| format!("w{w} l{n} #{l} {}\n", text(w, n, l)))
            .collect();
        expected.sort();
        assert_eq!(got, expected);
    }
}

/// With block memory and ports enough, warp `w` always uses port `w`; with fewer ports than warps, groups fall back to
/// shared ports, and the block memory goes unused.
#[test]
fn warps_use_their_own_ports_when_the_region_has_enough() {
    let rounds = scaled(50, 2) as u64;
    for (ports, own) in [(3, true), (2, false)] {
        let region = region(ports, SIM_LANES);
        let client = client::<SimWarp>(&region);
        let mut server = TestServer::new(&region);
        let used = std::sync::Mutex::new(std::collections::BTreeSet::new());
        run_warps(&mut server, &client, (3, true), &[0b0011, 0b1100], |client, warp, lane| {
            for r in 0..rounds {
                let mut port = client.open(testing::INCREMENT.opcode().number());
                if own {
                    assert_eq!(port.index(), warp, "warp {warp} lane {lane} is on another warp's port");
                }
                used.lock().unwrap().insert(port.index());
                port.send(|packet| packet.set(0, r));
                let mut reply = 0;
                port.recv(|packet| reply = packet.get(0));
                port.close();
                assert_eq!(reply, r + 1);
            }
        });
        assert_eq!(server.seen.increments(), 3 * 4 * rounds as usize);
        assert!(used.into_inner().unwrap().iter().all(|&port| port < ports));
    }
}

/// A group that opens a port while it holds its warp's own one (as a panic report inside a port operation does)
/// takes a port no warp owns; where there is none it traps (on a GPU the loader reports a device fault) rather than
/// wait for itself forever: groups of a diverged warp, and a whole warp.
#[test]
fn a_group_that_opens_a_second_port_takes_one_no_warp_owns() {
    for groups in [&[0b0011, 0b1100][..], &[0b1111]] {
        a_group_opens_a_second_port(groups);
    }
    for groups in [&[0b0001, 0b0010, 0b0100, 0b1000][..], &[0b1111]] {
        a_group_opens_a_second_port_where_none_is_free(groups);
    }
}

fn a_group_opens_a_second_port(groups: &[u64]) {
    let rounds = scaled(20, 1) as u64;
    let region = region(2, SIM_LANES);
    let client = client::<SimWarp>(&region);
    let mut server = TestServer::new(&region);
    run_warps(&mut server, &client, (1, true), groups, |client, _warp, lane| {
        for r in 0..rounds {
            let mut outer = client.open(testing::INCREMENT.opcode().number());
            assert_eq!(outer.index(), 0, "the warp's own port");
            outer.send(|packet| packet.set(0, r));
            assert_eq!(client.test_increment(u64::from(lane) << 32 | r), (u64::from(lane) << 32 | r) + 1);
            let mut nested = client.open(testing::INCREMENT.opcode().number());
            assert_eq!(nested.index(), 1, "the port no warp owns");
            nested.send(|packet| packet.set(0, r));
            nested.recv(|packet| assert_eq!(packet.get(0), r + 1));
            nested.close();
            outer.recv(|packet| assert_eq!(packet.get(0), r + 1));
            outer.close();
        }
    });
    assert_eq!(server.seen.increments(), 3 * 4 * rounds as usize);
}

fn a_group_opens_a_second_port_where_none_is_free(groups: &[u64]) {
    let region = self::region(1, SIM_LANES);
    let client = self::client::<SimWarp>(&region);
    let mut server = TestServer::new(&region);
    let trapped = std::sync::atomic::AtomicU32::new(0);
    run_warps(&mut server, &client, (1, true), groups, |client, _warp, _lane| {
        let outer = client.open(testing::INCREMENT.opcode().number());
        let inner = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            client.open(testing::INCREMENT.opcode().number())
        }));
        let message = inner.err().and_then(|panic| panic.downcast_ref::<&str>().map(|s| s.to_string()));
        assert_eq!(message.as_deref(), Some("a simulated lane trapped"));
        trapped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        outer.close();
    });
    assert_eq!(trapped.into_inner(), SIM_LANES);
}
