//! Logs a fleet can afford: the real binary against a hostile metadata service that repeats odd
//! answers on every poll, with control characters and oversized text. The log must stay within a
//! fixed budget of lines and bytes, and no metadata text may forge a line or reach the terminal
//! raw.
//!
//! A third nthd reads Tencent's spot path, which fails on every read, in turn three ways (HTTP
//! 500, a body that is no time, HTTP 503): a spot path is read again every interval while it
//! fails, and that must cost a line per kind of failure, not one per read.
//!
//! `hostile_metadata_for_ten_minutes` is the full run (600 reads at 1 poll/s, about 10 minutes,
//! AWS, Azure and Tencent side by side); `tests/run-all.sh` runs it (`--ignored`). The short test
//! runs the same checks for 200 reads at 10 polls/s (about 20 s) in every `cargo test`. Each
//! run ends after its number of reads, not after a time: the budget is per read, and a slow
//! machine only takes longer.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, Instant};

use common::Nthd;

use nthd::testing::provider::{aws, azure, tencent};
use nthd_testkit::imds::{MockImds, Response, TokenMode};
use nthd_testkit::logind::{FakeLogind, PrivateBus};

/// Escape sequences, a forged log line, a bidi override, and lots of text.
fn nasty(tag: &str) -> String {
    format!(
        "{tag}\n2026-01-01T00:00:00Z ERROR FORGED line\r\x1b[2J\x1b[31mred\u{202e}{}",
        "x".repeat(5000)
    )
}

fn azure_doc(variant: u64) -> Response {
    let events = serde_json::json!([
        // No usable EventId, for this VM.
        {"EventType": "Preempt", "Resources": ["vm1"], "EventStatus": "Scheduled",
         "NotBefore": "", "Description": nasty("noid")},
        // An unknown type and status, a NotBefore that does not parse; a new variant now and
        // then, as a broken service might produce.
        {"EventId": format!("E-{variant}"), "EventType": format!("Bogus{variant}\n"),
         "Resources": ["vm1"], "EventStatus": "Weird\x1b", "NotBefore": "soon\x07",
         "Description": nasty("desc")},
    ]);
    Response::json(
        200,
        serde_json::json!({"DocumentIncarnation": variant, "Events": events}).to_string(),
    )
}

fn aws_spot(variant: u64) -> Response {
    Response::json(
        200,
        serde_json::json!({"action": format!("explode{variant}\n\x1b[31m"), "time": "not a time\r"})
            .to_string(),
    )
}

fn aws_scheduled() -> Response {
    Response::json(
        200,
        serde_json::json!([{"Code": "mystery\nFORGED", "EventId": "instance-event-1",
            "State": "odd\x1b", "NotBefore": "whenever", "Description": nasty("sched")}])
        .to_string(),
    )
}

/// Fails every read, in turn with a 500, a body that is no time, a 503 (the last one sticks).
fn failing_in_turn() -> Response {
    let kinds = [
        Response::status(500),
        Response::text(200, "soon"),
        Response::status(503),
    ];
    Response::sequence(kinds.iter().cycle().take(3000).cloned().collect())
}

struct Budget {
    lines: usize,
    bytes: usize,
}

/// The metadata of the three clouds at once: AWS and Azure notices full of oddities, and every
/// Tencent read failing in turn.
async fn odd_metadata() -> MockImds {
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    imds.set(azure::NAME_PATH, Response::text(200, "vm1"));
    imds.set(azure::EVENTS_PATH, azure_doc(0));
    imds.set(aws::SPOT_PATH, aws_spot(0));
    imds.set(aws::SCHEDULED_PATH, aws_scheduled());
    // Tencent's reads carry no AWS token: the mock must not require one under /latest/.
    imds.config(|c| c.aws_token = TokenMode::Optional);
    imds.set(tencent::SPOT_PATH, failing_in_turn());
    imds
}

/// One daemon's log against the budget and the rules for what a line may hold.
fn check_log(
    name: &str,
    log: &str,
    budget: &Budget,
    duration: Duration,
    polls: usize,
    failed: usize,
) {
    let lines = log.lines().count();
    eprintln!(
        "{name}: {lines} lines, {} bytes over {:?} ({polls} Azure polls, {failed} failed \
         Tencent reads)",
        log.len(),
        duration
    );
    assert!(
        lines <= budget.lines && log.len() <= budget.bytes,
        "{name}: {lines} lines / {} bytes is over the budget of {} / {}:\n{}",
        log.len(),
        budget.lines,
        budget.bytes,
        &log[..log.len().min(20_000)]
    );
    assert!(
        !log.contains('\x1b') && !log.contains('\r') && !log.contains('\u{202e}'),
        "{name}: raw control characters in the log"
    );
    assert!(
        !log.lines().any(|l| l.starts_with("2026-01-01T00:00:00Z")),
        "{name}: a forged line:\n{log}"
    );
    assert!(
        log.lines().all(|l| l.len() <= 4096),
        "{name}: a line over 4 KiB"
    );
}

/// Runs the three daemons until each cloud's source was read `polls` times (Azure's events,
/// Tencent's failing spot path), with a new variant of the odd answers every tenth of the way.
/// The budget is per run of that many reads, however long a slow machine (qemu-user) takes.
async fn run(polls: usize, poll: &str, budget: Budget) {
    let bus = PrivateBus::start().unwrap();
    let _logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = odd_metadata().await;
    let state_aws = tempfile::tempdir().unwrap();
    let state_azure = tempfile::tempdir().unwrap();
    let state_tencent = tempfile::tempdir().unwrap();
    let env = |provider| {
        [
            ("NTHD_PROVIDER", provider),
            ("NTHD_POLL_INTERVAL", poll),
            ("NTHD_SLOW_POLL_INTERVAL", poll),
        ]
    };
    let a = Nthd::start(bus.address(), &imds.url(), state_aws.path(), &env("aws"));
    let z = Nthd::start(
        bus.address(),
        &imds.url(),
        state_azure.path(),
        &env("azure"),
    );
    let t = Nthd::start(
        bus.address(),
        &imds.url(),
        state_tencent.path(),
        &env("tencent"),
    );

    // Ten variants over the run: each is a distinct oddity, warned about once.
    let nominal = Duration::from_secs_f64(parse_secs(poll) * polls as f64);
    let limit = (nominal * 5).max(Duration::from_secs(60));
    let start = Instant::now();
    let mut variant = 0;
    let (mut read, mut failed) = (0, 0);
    while read < polls || failed < polls {
        assert!(
            start.elapsed() < limit,
            "only {read} Azure polls and {failed} failed Tencent reads in {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        (read, failed) = (
            imds.count(azure::EVENTS_PATH),
            imds.count(tencent::SPOT_PATH),
        );
        while variant < (read * 10 / polls).min(10) {
            variant += 1;
            imds.set(azure::EVENTS_PATH, azure_doc(variant as u64));
            imds.set(aws::SPOT_PATH, aws_spot(variant as u64));
        }
    }
    let took = start.elapsed();
    for (name, n) in [("aws", &a), ("azure", &z), ("tencent", &t)] {
        check_log(name, &n.log(), &budget, took, read, failed);
    }
}

fn parse_secs(poll: &str) -> f64 {
    nthd::testing::timefmt::parse_duration(poll)
        .unwrap()
        .as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_metadata_for_twenty_seconds() {
    run(
        200,
        "100ms",
        Budget {
            lines: 80,
            bytes: 64 * 1024,
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "10 minutes; tests/run-all.sh runs it"]
async fn hostile_metadata_for_ten_minutes() {
    run(
        600,
        "1s",
        Budget {
            lines: 100,
            bytes: 96 * 1024,
        },
    )
    .await;
}
