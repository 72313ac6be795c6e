//! Many host threads act as clients (`HostThread`, one lane each) against one server thread over one region.

mod common;

use common::{Rng, TestServer, client, region, run_clients, scaled};
use startup_common::gpu::HostThread;
use startup_common::libc::io::{self, Stream};
use startup_common::rpc::Client;
use startup_common::rpc::testing::TestOperations;

#[test]
fn every_increment_is_answered_exactly_once() {
    let threads = scaled(32, 3);
    let rounds = scaled(2000, 3);
    let region = region(16, 1);
    let client = client::<HostThread>(&region);
    let mut server = TestServer::new(&region);
    run_clients(&mut server, threads, |t| {
        for r in 0..rounds {
            let value = (t as u64) << 32 | r as u64;
            assert_eq!(client.test_increment(value), value + 1);
        }
    });
    assert_eq!(server.seen.increments(), threads * rounds);
}

#[test]
fn echoes_of_random_lengths_come_back_intact() {
    let threads = scaled(16, 2);
    let rounds = scaled(300, 3);
    let region = region(8, 1);
    let client = client::<HostThread>(&region);
    let mut server = TestServer::new(&region);
    run_clients(&mut server, threads, |t| {
        let mut rng = Rng(t as u64 + 1);
        let mut output = vec![0u8; 700];
        for r in 0..rounds {
            // Lengths 0, exactly one packet, and several packets all come up.
            let len = match r % 4 {
                0 => 0,
                1 => 56,
                _ => rng.below(700) as usize,
            };
            let input: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            output.fill(0xee);
            assert_eq!(client.test_echo(&input, &mut output), len);
            assert_eq!(&output[..len], &input[..], "thread {t} round {r}");
            assert!(output[len..].iter().all(|&b| b == 0xee), "nothing written past the echo");
        }
    });
    assert_eq!(server.seen.echoes(), threads * rounds);
}

#[test]
fn echo_into_a_short_buffer_is_truncated_but_reports_the_length() {
    let region = region(2, 1);
    let client = client::<HostThread>(&region);
    let mut server = TestServer::new(&region);
    run_clients(&mut server, 1, |_| {
        let input: Vec<u8> = (0..200).map(|i| i as u8).collect();
        let mut output = [0u8; 70];
        assert_eq!(client.test_echo(&input, &mut output), 200);
        assert_eq!(&output[..], &input[..70]);
    });
}

/// Long lines from many threads at once, through `print` (formatted, chunked), `write` and `write_line`: every line
/// arrives whole and unmixed, none is lost or duplicated, and each thread's lines keep their order.
#[test]
fn concurrent_prints_arrive_whole_and_in_order() {
    let threads = scaled(16, 2);
    let lines = scaled(40, 2);
    let region = region(8, 1);
    let client = client::<HostThread>(&region);
    let mut server = TestServer::new(&region);
    let payload = |t: usize, l: usize| -> String {
        let len = (t * 131 + l * 977) % 1500;
        (0..len).map(|i| (b'a' + ((t + l + i) % 26) as u8) as char).collect()
    };
    run_clients(&mut server, threads, |t| {
        for l in 0..lines {
            let text = payload(t, l);
            match l % 3 {
                0 => io::print(&client, Stream::Stdout, format_args!("T{t} L{l} {}|{}\n", text, l)),
                1 => io::write_line(&client, Stream::Stdout, format!("T{t} L{l} {text}|{l}").as_bytes()),
                _ => io::write(&client, Stream::Stdout, format!("T{t} L{l} {text}|{l}\n").as_bytes()),
            }
            io::print(&client, Stream::Stderr, format_args!("E{t} {l}{}", "\n"));
        }
    });
    let stdout = &server.seen.messages[&1];
    assert_eq!(stdout.len(), threads * lines);
    let mut next = vec![0; threads];
    for message in stdout {
        let text = std::str::from_utf8(message).unwrap();
        let (t, l) = parse(text);
        assert_eq!(l, next[t], "thread {t}'s lines out of order");
        next[t] += 1;
        assert_eq!(text, format!("T{t} L{l} {}|{l}\n", payload(t, l)));
    }
    assert!(next.iter().all(|&n| n == lines));
    let stderr = &server.seen.messages[&2];
    assert_eq!(stderr.len(), threads * lines);
    let mut stderr: Vec<String> = stderr.iter().map(|m| String::from_utf8(m.clone()).unwrap()).collect();
    stderr.sort();
    let mut expected: Vec<String> = (0..threads).flat_map(|t| (0..lines).map(move |l| format!("E{t} {l}\n"))).collect();
    expected.sort();
    assert_eq!(stderr, expected);
}

fn parse(line: &str) -> (usize, usize) {
    let mut words = line.split(' ');
    let t = words.next().unwrap().strip_prefix('T').unwrap().parse().unwrap();
    let l = words.next().unwrap().strip_prefix('L').unwrap().parse().unwrap();
    (t, l)
}

/// A message longer than the print buffer many times over, from a `Display` that writes in small pieces.
#[test]
fn a_very_long_formatted_message_is_not_cut() {
    struct Many(usize);
    impl std::fmt::Display for Many {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            for i in 0..self.0 {
                write!(f, "{i},")?;
            }
            Ok(())
        }
    }
    let count = scaled(5000, 100);
    let region = region(4, 1);
    let client = client::<HostThread>(&region);
    let mut server = TestServer::new(&region);
    run_clients(&mut server, 2, |t| io::print(&client, Stream::Stdout, format_args!("[{t}:{}]", Many(count))));
    let mut got: Vec<String> = server.seen.messages[&1].iter().map(|m| String::from_utf8(m.clone()).unwrap()).collect();
    got.sort();
    let body: String = (0..count).map(|i| format!("{i},")).collect();
    assert_eq!(got, [format!("[0:{body}]"), format!("[1:{body}]")]);
    assert!(body.len() > 10 * io::PRINT_BUFFER);
}

#[test]
fn c_streams_are_told_apart_by_address() {
    use startup_common::libc::stdio::{File, STDERR, STDIN, STDOUT, Target};
    let target = |file: &File| File::target_of(file as *const File as *mut File).map(|(_, target)| target);
    assert_eq!(target(&STDOUT), Ok(Target::Output(Stream::Stdout)));
    assert_eq!(target(&STDERR), Ok(Target::Output(Stream::Stderr)));
    assert_eq!(target(&STDIN), Ok(Target::Stdin));
    assert_eq!(
        File::target_of(std::ptr::null_mut()).map(|(_, target)| target),
        Err(startup_common::libc::errno::EBADF)
    );
}

#[test]
fn writes_before_reset_are_dropped_quietly() {
    let client = Client::<HostThread>::new();
    io::write_line(&client, Stream::Stdout, b"nobody listens");
    io::print(&client, Stream::Stderr, format_args!("{}", 1));
}
