//! The `/metrics` server under abuse, with the real binary: 1,000 concurrent connections,
//! a quarter of them silent, a quarter malformed or oversized, while the daemon keeps polling
//! and pinging its watchdog. The server holds at most a bounded number of connections, answers
//! every well-formed scrape, and never stalls the loop.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, Instant};

use common::{expect_started, free_port, Notify, Nthd};
use nthd::testing::provider::aws;
use nthd_testkit::imds::MockImds;
use nthd_testkit::logind::{FakeLogind, PrivateBus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CLIENTS: usize = 1000;

/// What one client does, by its number.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Client {
    /// `GET /metrics`: must get 200 and the exposition.
    Scrape,
    /// Connects and sends nothing: must be cut off by the server.
    Silent,
    /// Bytes that are not HTTP: 400 or a closed connection.
    Garbage,
    /// A 20 KiB header: 431 or a closed connection, never a buffer that grows.
    Oversized,
    /// `POST /metrics`: 405.
    Post,
    /// `HEAD /metrics`: 200 with no body.
    Head,
}

fn client(i: usize) -> Client {
    match i % 8 {
        0 | 4 => Client::Scrape,
        1 | 5 => Client::Silent,
        2 => Client::Garbage,
        3 => Client::Oversized,
        6 => Client::Post,
        _ => Client::Head,
    }
}

fn request(c: Client) -> Vec<u8> {
    match c {
        Client::Scrape => b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        Client::Silent => Vec::new(),
        Client::Garbage => b"\x16\x03\x01\x02\x00 not http at all\r\n\r\n".to_vec(),
        Client::Oversized => {
            let mut r = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ".to_vec();
            r.extend(std::iter::repeat_n(b'a', 20 * 1024));
            r.extend(b"\r\n\r\n");
            r
        }
        Client::Post => b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".to_vec(),
        Client::Head => b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
    }
}

/// Runs one client; returns how long it took and what came back (until the server closed).
/// A client that gets no answer in 60 s fails the test.
async fn run_client(addr: String, c: Client) -> (Duration, String) {
    let t0 = Instant::now();
    let talk = async {
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        // A write may fail once the server has answered and closed (the oversized head).
        let _ = s.write_all(&request(c)).await;
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got).await;
        got
    };
    let got = tokio::time::timeout(Duration::from_secs(60), talk)
        .await
        .unwrap_or_else(|_| panic!("{c:?}: no answer and no close in 60 s"));
    (t0.elapsed(), String::from_utf8_lossy(&got).into_owned())
}

/// Checks one client's answer against what its kind must get.
fn check(c: Client, resp: &str) {
    let status = resp.split("\r\n").next().unwrap_or("");
    match c {
        Client::Scrape => {
            assert!(status.starts_with("HTTP/1.1 200"), "{c:?}: {resp:.200}");
            assert!(resp.contains("\nnthd_info{"), "{c:?}: {resp:.400}");
        }
        Client::Head => {
            assert!(status.starts_with("HTTP/1.1 200"), "{c:?}: {resp:.200}");
            assert!(resp.ends_with("\r\n\r\n"), "HEAD has no body: {resp:.400}");
        }
        Client::Post => assert!(status.starts_with("HTTP/1.1 405"), "{c:?}: {resp:.200}"),
        Client::Silent => assert!(
            status.is_empty() || status.starts_with("HTTP/1.1 408"),
            "{c:?}: {resp:.200}"
        ),
        Client::Garbage => assert!(
            status.is_empty() || status.starts_with("HTTP/1.1 400"),
            "{c:?}: {resp:.200}"
        ),
        Client::Oversized => assert!(
            status.is_empty() || status.starts_with("HTTP/1.1 431"),
            "{c:?}: {resp:.200}"
        ),
    }
}

/// Open file descriptors of a process (its sockets among them).
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, std::iter::Iterator::count)
}

/// The most fds nthd (`pid`) holds idle over a second: the count moves by one or two (the
/// metadata client's pooled connection).
async fn idle_fds(pid: u32) -> usize {
    let mut fds_idle = 0;
    for _ in 0..50 {
        fds_idle = fds_idle.max(fds(pid));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fds_idle
}

/// All the clients at once against `addr`, each answer checked: the most fds nthd (`pid`)
/// held meanwhile, and the slowest scrape.
async fn storm_of_clients(addr: &str, pid: u32, fds_idle: usize) -> (usize, Duration) {
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| tokio::spawn(run_client(addr.to_string(), client(i))))
        .collect();
    let mut peak_fds = fds_idle;
    while !clients.iter().all(tokio::task::JoinHandle::is_finished) {
        peak_fds = peak_fds.max(fds(pid));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut slowest_scrape = Duration::ZERO;
    for (i, c) in clients.into_iter().enumerate() {
        let (took, resp) = c.await.unwrap();
        check(client(i), &resp);
        if client(i) == Client::Scrape {
            slowest_scrape = slowest_scrape.max(took);
        }
    }
    (peak_fds, slowest_scrape)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_hostile_connections_neither_stall_the_loop_nor_grow_without_bound() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut notify = Notify::new();
    let addr = format!("127.0.0.1:{}", free_port());
    // WatchdogSec=3s: the loop pings every second.
    let mut n = Nthd::start(
        bus.address(),
        &imds.url(),
        state.path(),
        &[
            ("NOTIFY_SOCKET", notify.path.to_str().unwrap()),
            ("WATCHDOG_USEC", "3000000"),
            ("NTHD_METRICS_LISTEN", &addr),
        ],
    );
    expect_started(&logind, &n).await;
    let (_, first) = run_client(addr.clone(), Client::Scrape).await;
    check(Client::Scrape, &first);
    let pid = n.child.id();
    let fds_idle = idle_fds(pid).await;

    let t0 = Instant::now();
    let polls0 = imds.count(aws::SPOT_PATH);
    let (peak_fds, slowest_scrape) = storm_of_clients(&addr, pid, fds_idle).await;
    let storm = t0.elapsed();
    let polls = imds.count(aws::SPOT_PATH) - polls0;
    let gap = notify.longest_watchdog_gap(t0);
    eprintln!(
        "{CLIENTS} connections in {storm:.1?}: slowest scrape {slowest_scrape:.1?}, nthd fds \
         {fds_idle} idle and {peak_fds} at most, {polls} polls at 200 ms, longest watchdog gap \
         {gap:.1?}"
    );

    assert!(n.running(), "{}", n.log());
    // Bounded: what it holds idle, plus at most 64 connections, one being accepted and one
    // for the metadata client's next connection. The old server held one per client.
    assert!(
        peak_fds <= fds_idle + 66,
        "nthd held {peak_fds} fds under load, {fds_idle} idle"
    );
    // The loop kept its pace: a poll every 200 ms (half of them is plenty on a loaded
    // machine), and a watchdog ping every second, never more than 2 s apart.
    let expected = storm.as_millis() / 200;
    assert!(
        polls as u128 * 2 >= expected,
        "{polls} polls in {storm:?}, expected about {expected}"
    );
    assert!(gap <= Duration::from_secs(2), "watchdog gap {gap:?}");
    // And it still answers.
    let (_, after) = run_client(addr, Client::Scrape).await;
    check(Client::Scrape, &after);
    assert!(!n.log().contains("panicked"), "{}", n.log());
}
