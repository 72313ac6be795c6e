//! Lane groups of several threads (`SimWarp`): one port per group, one lane acting for it, a buffer per lane, lanes
//! with different lengths, and two divergent groups of one warp competing for ports.

mod common;

use std::sync::Arc;

use common::{SIM_LANES, SimGroup, SimWarp, TestServer, become_lane, region, scaled};
use startup_common::io::{self, Stream};
use startup_common::rpc::Client;

/// Runs `body(warp, lane)` on every lane of `warps` warps, each warp split into the groups `masks`.
fn run_warps(
    server: &mut TestServer,
    client: &Client<SimWarp>,
    warps: u32,
    masks: &[u64],
    body: impl Fn(&Client<SimWarp>, u32, u32) + Sync,
) {
    assert_eq!(masks.iter().fold(0, |all, m| all | m), (1 << SIM_LANES) - 1);
    std::thread::scope(|scope| {
        let mut workers = Vec::new();
        for warp in 0..warps {
            for &mask in masks {
                let group = SimGroup::new(mask);
                for lane in (0..SIM_LANES).filter(|lane| mask & (1 << lane) != 0) {
                    let group = Arc::clone(&group);
                    let body = &body;
                    workers.push(scope.spawn(move || {
                        become_lane(group, lane, warp);
                        body(client, warp, lane)
                    }));
                }
            }
        }
        server.serve_until(|| workers.iter().all(|w| w.is_finished()));
    });
}

fn client(region: &startup_common::rpc::HostRegion) -> Client<SimWarp> {
    let client = Client::new();
    // SAFETY: the region is fresh and zeroed, laid out for `SIM_LANES` lanes, and outlives every use of the client.
    unsafe { client.reset(region.as_ptr(), region.layout().port_count()) };
    client
}

#[test]
fn a_warp_increments_together_with_one_message() {
    let rounds = scaled(200, 2) as u64;
    let warps = scaled(4, 1) as u32;
    let region = region(4, SIM_LANES);
    let client = client(&region);
    let mut server = TestServer::new(&region);
    run_warps(&mut server, &client, warps, &[0b1111], |client, warp, lane| {
        for r in 0..rounds {
            let value = u64::from(warp) << 40 | u64::from(lane) << 32 | r;
            assert_eq!(client.test_increment(value), value + 1);
        }
    });
    assert_eq!(server.seen.increments, warps as usize * SIM_LANES as usize * rounds as usize);
    // One message per warp per round, sent for all four lanes.
    assert_eq!(server.seen.masks.len(), warps as usize * rounds as usize);
    assert!(server.seen.masks.iter().all(|&mask| mask == 0b1111));
}

#[test]
fn lanes_stream_different_lengths_in_one_message() {
    let rounds = scaled(100, 2);
    let region = region(4, SIM_LANES);
    let client = client(&region);
    let mut server = TestServer::new(&region);
    run_warps(&mut server, &client, scaled(3, 1) as u32, &[0b1111], |client, warp, lane| {
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

/// Two groups of one warp (as after a divergent branch) start at the same port and compete for it.
#[test]
fn divergent_groups_of_one_warp_both_progress() {
    let rounds = scaled(200, 2) as u64;
    let region = region(2, SIM_LANES);
    let client = client(&region);
    let mut server = TestServer::new(&region);
    run_warps(&mut server, &client, 2, &[0b0101, 0b1010], |client, warp, lane| {
        for r in 0..rounds {
            let value = u64::from(warp) << 40 | u64::from(lane) << 32 | r;
            assert_eq!(client.test_increment(value), value + 1);
        }
    });
    assert_eq!(server.seen.increments, 2 * 4 * rounds as usize);
    assert!(server.seen.masks.iter().all(|&mask| mask == 0b0101 || mask == 0b1010));
}

/// Lanes print lines of different lengths at once, each past the print buffer: each line arrives whole. (The
/// simulated group cannot shrink when lanes diverge, so every lane here sends the same number of chunks; on a GPU the
/// lanes that fill their buffer first send their chunk as a smaller group.)
#[test]
fn lanes_print_their_own_lines() {
    let lines = scaled(20, 1);
    let region = region(4, SIM_LANES);
    let client = client(&region);
    let mut server = TestServer::new(&region);
    let text = |warp: u32, lane: u32, l: usize| "=".repeat(300 + (lane as usize * 53 + l * 17 + warp as usize) % 180);
    run_warps(&mut server, &client, 2, &[0b1111], |client, warp, lane| {
        for l in 0..lines {
            io::print(client, Stream::Stdout, format_args!("w{warp} l{lane} #{l} {}\n", text(warp, lane, l)));
        }
    });
    let mut got: Vec<String> = server.seen.messages[&1].iter().map(|m| String::from_utf8(m.clone()).unwrap()).collect();
    got.sort();
    let mut expected: Vec<String> = (0..2)
        .flat_map(|w| (0..SIM_LANES).flat_map(move |n| (0..lines).map(move |l| (w, n, l))))
        .map(|(w, n, l)| format!("w{w} l{n} #{l} {}\n", text(w, n, l)))
        .collect();
    expected.sort();
    assert_eq!(got, expected);
}
