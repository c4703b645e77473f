//! The GCP provider against the in-process mock metadata server: values, long-poll latency and
//! re-arming, faults. What every provider does (404 as no notice, identity, hostile values,
//! nothing answering) is in tests/provider_contract.rs.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, Instant};

use common::provider::{fast_client_options as fast_client, kinds};
use nthd::testing::imds::{ClientOptions, ImdsClient, ImdsError};
use nthd::testing::notice::{Cloud, NoticeKind};
use nthd::testing::provider::gcp::{Gcp, MAINTENANCE_PATH, PREEMPTED_PATH};
use nthd::testing::provider::Timings;
use nthd::testing::provider::{Observation, Provider};
use nthd_testkit::imds::{Fault, LoggedRequest, MockImds, Response};

const RETRY: Duration = Duration::from_millis(100);

/// A provider that long-polls for `wait` and reads the upcoming maintenance window every
/// `upcoming` while a notice is listed.
fn reading_upcoming_every(m: &MockImds, wait: Duration, upcoming: Duration) -> Gcp {
    let client = ImdsClient::new(&m.url(), fast_client()).unwrap();
    let timings = Timings {
        gcp_wait: wait,
        poll: RETRY,
        slow_poll: upcoming,
        ..Timings::defaults(Cloud::Gcp)
    };
    common::provider::gcp(client, timings)
}

fn provider_with(m: &MockImds, wait: Duration, client: ClientOptions) -> Gcp {
    let opts = Timings {
        gcp_wait: wait,
        poll: RETRY,
        ..Timings::defaults(Cloud::Gcp)
    };
    common::provider::gcp(ImdsClient::new(&m.url(), client).unwrap(), opts)
}

fn provider(m: &MockImds, wait: Duration) -> Gcp {
    provider_with(m, wait, ClientOptions::default())
}

fn long_polls(m: &MockImds, path: &str) -> Vec<LoggedRequest> {
    m.requests_for(path)
        .into_iter()
        .filter(|r| r.query_param("wait_for_change").as_deref() == Some("true"))
        .collect()
}

fn quiet_mock() -> MockImds {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(PREEMPTED_PATH, Response::text(200, "FALSE"));
    m.set(MAINTENANCE_PATH, Response::text(200, "NONE"));
    m
}

/// Runs `observe()` while `change` is applied to the mock after `after`; returns the
/// observation and how long after the change it came back.
fn observe_with_change(
    p: &mut Gcp,
    after: Duration,
    change: impl FnOnce() + Send,
) -> (Observation, Duration) {
    std::thread::scope(|scope| {
        let changed = scope.spawn(move || {
            std::thread::sleep(after);
            let t = Instant::now();
            change();
            t
        });
        let o = p.observe();
        let done = Instant::now();
        let changed = changed.join().unwrap();
        (o, done.saturating_duration_since(changed))
    })
}

#[test]
fn notice_present_before_start_is_seen_on_first_observe() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    m.set(
        MAINTENANCE_PATH,
        Response::text(200, "TERMINATE_ON_HOST_MAINTENANCE"),
    );
    let mut p = provider(&m, Duration::from_secs(5));
    assert!(p.next_due() <= Instant::now());
    let t = Instant::now();
    let o = p.observe();
    assert!(t.elapsed() < Duration::from_secs(1), "plain reads, no wait");
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(
        kinds(&o),
        vec![NoticeKind::GcpPreempt, NoticeKind::GcpTerminateMaintenance]
    );
    let mut fresh = o.fresh.clone();
    fresh.sort();
    assert_eq!(
        fresh,
        ["gcp/instance/maintenance-event", "gcp/instance/preempted"]
    );
    let p0 = o
        .notices
        .iter()
        .find(|n| n.kind == NoticeKind::GcpPreempt)
        .unwrap();
    assert_eq!(p0.id, "gcp/preempted");
    // The first reads are plain GETs with the required header.
    for path in [PREEMPTED_PATH, MAINTENANCE_PATH] {
        let r = m.requests_for(path);
        assert_eq!(r.len(), 1, "{path}");
        assert_eq!(r[0].query, "", "{path}");
        assert_eq!(r[0].header("Metadata-Flavor"), Some("Google"));
        assert_eq!(r[0].status, Some(200));
    }
    assert!(p.next_due() <= Instant::now(), "long-polling: due at once");
    assert!(p.describe().contains("long-polling"));
}

#[test]
fn preempt_is_detected_by_long_poll_within_one_round_trip() {
    let m = quiet_mock();
    let wait = Duration::from_secs(10);
    let mut p = provider(&m, wait);
    let o = p.observe();
    assert!(o.ok() && o.notices.is_empty(), "{o:?}");
    let (o, latency) = observe_with_change(&mut p, Duration::from_millis(300), || {
        m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    });
    eprintln!("GCP preempt detection latency: {latency:?}");
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::GcpPreempt]);
    assert!(o.fresh.iter().any(|s| *s == "gcp/instance/preempted"));
    assert!(
        latency < Duration::from_secs(1),
        "detected {latency:?} after the change"
    );
    // It was a long-poll carrying the ETag of the first answer and the wait.
    let lp = long_polls(&m, PREEMPTED_PATH);
    assert_eq!(lp.len(), 1);
    assert_eq!(
        lp[0].query_param("last_etag"),
        Some(Response::text(200, "FALSE").etag())
    );
    assert_eq!(lp[0].query_param("timeout_sec").as_deref(), Some("10"));
    assert_eq!(lp[0].header("Metadata-Flavor"), Some("Google"));
    assert_eq!(lp[0].note.as_deref(), Some("long poll: value changed"));
}

#[test]
fn the_other_key_keeps_its_long_poll_in_flight() {
    let m = quiet_mock();
    let mut p = provider(&m, Duration::from_secs(10));
    p.observe();
    // Preempted changes twice; the maintenance-event long-poll armed at the start is kept.
    let (o, _) = observe_with_change(&mut p, Duration::from_millis(200), || {
        m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    });
    assert_eq!(kinds(&o), vec![NoticeKind::GcpPreempt]);
    let (o, _) = observe_with_change(&mut p, Duration::from_millis(200), || {
        m.set(PREEMPTED_PATH, Response::text(200, "FALSE"));
    });
    assert!(o.notices.is_empty(), "{o:?}");
    assert_eq!(
        long_polls(&m, MAINTENANCE_PATH).len(),
        1,
        "the maintenance-event long-poll is not re-issued when preempted changes"
    );
    // And it still reports its own change within one round trip.
    let (o, latency) = observe_with_change(&mut p, Duration::from_millis(200), || {
        m.set(
            MAINTENANCE_PATH,
            Response::text(200, "MIGRATE_ON_HOST_MAINTENANCE"),
        );
    });
    assert_eq!(kinds(&o), vec![NoticeKind::GcpMigrate]);
    assert!(latency < Duration::from_secs(1), "{latency:?}");
    assert_eq!(long_polls(&m, MAINTENANCE_PATH).len(), 1);
}

#[test]
fn simultaneous_changes_are_both_reported() {
    let m = quiet_mock();
    let mut p = provider(&m, Duration::from_secs(10));
    p.observe();
    let (o, _) = observe_with_change(&mut p, Duration::from_millis(200), || {
        m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
        m.set(
            MAINTENANCE_PATH,
            Response::text(200, "TERMINATE_ON_HOST_MAINTENANCE"),
        );
    });
    let mut seen = kinds(&o);
    if seen.len() < 2 {
        let t = Instant::now();
        let o2 = p.observe();
        assert!(t.elapsed() < Duration::from_secs(1));
        seen = kinds(&o2);
    }
    assert_eq!(
        seen,
        vec![NoticeKind::GcpPreempt, NoticeKind::GcpTerminateMaintenance]
    );
}

#[test]
fn every_maintenance_value() {
    let m = quiet_mock();
    let mut p = provider(&m, Duration::from_secs(10));
    p.observe();
    for (value, want) in [
        (
            "TERMINATE_ON_HOST_MAINTENANCE",
            vec![NoticeKind::GcpTerminateMaintenance],
        ),
        ("MIGRATE_ON_HOST_MAINTENANCE", vec![NoticeKind::GcpMigrate]),
        ("NONE", vec![]),
        ("SOMETHING_NEW", vec![NoticeKind::Unknown]),
        ("NONE", vec![]),
    ] {
        let (o, _) = observe_with_change(&mut p, Duration::from_millis(50), || {
            m.set(MAINTENANCE_PATH, Response::text(200, value));
        });
        assert!(o.ok(), "{value}: {:?}", o.errors);
        assert!(
            o.fresh
                .iter()
                .any(|s| *s == "gcp/instance/maintenance-event"),
            "{value}"
        );
        assert_eq!(kinds(&o), want, "{value}");
    }
    // And back: preempted TRUE then FALSE.
    let (o, _) = observe_with_change(&mut p, Duration::from_millis(50), || {
        m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    });
    assert_eq!(kinds(&o), vec![NoticeKind::GcpPreempt]);
    let (o, _) = observe_with_change(&mut p, Duration::from_millis(50), || {
        m.set(PREEMPTED_PATH, Response::text(200, "FALSE"));
    });
    assert!(o.notices.is_empty() && o.fresh.iter().any(|s| *s == "gcp/instance/preempted"));
}

#[test]
fn a_404_is_long_polled_too() {
    // 404 as no notice: the contract's `not_found_is_no_notice`.
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let mut p = provider(&m, Duration::from_secs(5));
    assert!(p.observe().notices.is_empty());
    // The 404 carries an ETag too, so it is long-polled and a later value is seen.
    let (o, latency) = observe_with_change(&mut p, Duration::from_millis(200), || {
        m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    });
    assert_eq!(kinds(&o), vec![NoticeKind::GcpPreempt]);
    assert!(latency < Duration::from_secs(1));
}

#[test]
fn long_poll_rearms_after_a_broken_answer() {
    let m = quiet_mock();
    let mut p = provider(&m, Duration::from_secs(10));
    p.observe();
    // The next answer breaks off half-way (never sent again: part of it came); the one after
    // is the unchanged value. (A reset before any answer, on a kept connection, is sent again
    // at once: `imds::blocking`'s tests.)
    m.set(
        PREEMPTED_PATH,
        Response::sequence(vec![
            Response::fault(Fault::Truncate),
            Response::text(200, "FALSE"),
        ]),
    );
    let o = p.observe();
    assert_eq!(o.errors.len(), 1, "{o:?}");
    assert_eq!(o.errors[0].source, "gcp/instance/preempted");
    assert!(
        matches!(o.errors[0].error, ImdsError::Connect { .. }),
        "{:?}",
        o.errors[0].error
    );
    assert!(!o.fresh.iter().any(|s| *s == "gcp/instance/preempted"));
    assert!(
        p.next_due() <= Instant::now(),
        "the other key still long-polls, so the provider stays due"
    );
    // Re-armed as a long-poll after the backoff; a change is then seen within a round trip.
    let (o, latency) = observe_with_change(&mut p, Duration::from_millis(600), || {
        m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    });
    let lp = long_polls(&m, PREEMPTED_PATH);
    assert!(o.ok(), "{:?} {lp:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::GcpPreempt]);
    assert!(latency < Duration::from_secs(1), "{latency:?}");
    assert_eq!(lp.len(), 2, "{lp:?}");
    assert_eq!(lp[0].fault, Some(Fault::Truncate));
    assert_eq!(
        lp[1].query_param("last_etag"),
        lp[0].query_param("last_etag")
    );
}

#[test]
fn long_poll_rearms_after_a_503() {
    let m = quiet_mock();
    let mut p = provider(&m, Duration::from_secs(10));
    p.observe();
    m.set(
        PREEMPTED_PATH,
        Response::sequence(vec![
            Response::text(503, "unavailable"),
            Response::text(503, "unavailable"),
            Response::text(200, "FALSE"),
        ]),
    );
    let o = p.observe();
    assert!(
        matches!(o.errors[0].error, ImdsError::Status { status: 503, .. }),
        "{o:?}"
    );
    let o = p.observe();
    assert!(
        matches!(o.errors[0].error, ImdsError::Status { status: 503, .. }),
        "{o:?}"
    );
    let (o, latency) = observe_with_change(&mut p, Duration::from_millis(800), || {
        m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    });
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::GcpPreempt]);
    assert!(latency < Duration::from_secs(1), "{latency:?}");
    assert!(long_polls(&m, PREEMPTED_PATH).len() >= 3);
}

/// Issue 29, item 8: after a burst of failures the long-poll is re-armed within the retry
/// interval, however long the burst was, so a preemption flagged as the burst ends is seen
/// within about one interval (before: after a backoff that had grown to 1.6 s here, 5 s at most).
#[test]
fn a_long_fault_burst_does_not_delay_the_re_arm() {
    let m = quiet_mock();
    let mut p = provider(&m, Duration::from_secs(10));
    p.observe();
    m.set(PREEMPTED_PATH, Response::text(503, "unavailable"));
    let (t, mut failures) = (Instant::now(), 0);
    while t.elapsed() < Duration::from_secs(2) {
        failures += p.observe().errors.len();
    }
    // The burst ends right after a failed read; one retry interval (100 ms) later it is read.
    let (o, latency) = observe_with_change(&mut p, Duration::ZERO, || {
        m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    });
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::GcpPreempt]);
    assert!(
        latency < Duration::from_secs(1),
        "{latency:?} after {failures} failures"
    );
    // Not a busy loop either: about one request per retry interval.
    assert!((8..=25).contains(&failures), "{failures} failures in 2 s");
}

#[test]
fn failures_keep_the_last_known_notice() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    m.set(MAINTENANCE_PATH, Response::text(200, "NONE"));
    let mut p = provider(&m, Duration::from_secs(10));
    assert_eq!(kinds(&p.observe()), vec![NoticeKind::GcpPreempt]);
    m.set(PREEMPTED_PATH, Response::text(500, "oops"));
    let o = p.observe();
    assert!(!o.ok());
    assert_eq!(
        kinds(&o),
        vec![NoticeKind::GcpPreempt],
        "kept while failing"
    );
    assert!(!o.fresh.iter().any(|s| *s == "gcp/instance/preempted"));
}

#[tokio::test]
async fn malformed_values_are_errors_not_notices() {
    let m = quiet_mock();
    m.set(PREEMPTED_PATH, Response::text(200, "MAYBE"));
    let mut p = provider(&m, Duration::from_secs(10));
    let o = p.observe();
    assert_eq!(o.errors.len(), 1, "{o:?}");
    assert!(matches!(o.errors[0].error, ImdsError::Malformed { .. }));
    assert!(o.notices.is_empty());
    assert_eq!(o.fresh, ["gcp/instance/maintenance-event"]);
    // Not UTF-8 / not HTTP at all.
    m.set(PREEMPTED_PATH, Response::fault(Fault::Garbage));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let o = p.observe();
    assert!(!o.ok(), "{o:?}");
    // Recovers once the value is sane again.
    m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let o = p.observe();
        if kinds(&o) == vec![NoticeKind::GcpPreempt] {
            break;
        }
        assert!(Instant::now() < deadline, "never recovered: {o:?}");
    }
}

#[test]
fn oversized_and_truncated_bodies_are_errors() {
    let m = quiet_mock();
    m.set(PREEMPTED_PATH, Response::huge(64 * 1024 * 1024));
    let mut p = provider(&m, Duration::from_secs(10));
    let o = p.observe();
    assert_eq!(o.errors.len(), 1, "{o:?}");
    assert!(
        matches!(o.errors[0].error, ImdsError::TooLarge { .. }),
        "{:?}",
        o.errors[0].error
    );
    m.set(
        MAINTENANCE_PATH,
        Response::text(200, "MIGRATE_ON_HOST_MAINTENANCE").with_fault(Fault::Truncate),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let o = p.observe();
        if o.errors
            .iter()
            .any(|e| e.source == "gcp/instance/maintenance-event")
        {
            assert!(o.notices.is_empty(), "{o:?}");
            break;
        }
        assert!(Instant::now() < deadline, "no error for the truncated body");
    }
}

#[test]
fn hanging_reads_time_out() {
    let m = quiet_mock();
    m.set(PREEMPTED_PATH, Response::fault(Fault::Hang));
    // Plain read: the client's request timeout.
    let mut p = provider_with(&m, Duration::from_secs(1), fast_client());
    let t = Instant::now();
    let o = p.observe();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(o.errors.len(), 1, "{o:?}");
    assert!(matches!(o.errors[0].error, ImdsError::Timeout { .. }));
    // Long-poll: the wait plus a few seconds.
    let m = quiet_mock();
    let mut p = provider_with(&m, Duration::from_secs(1), fast_client());
    p.observe();
    m.set(PREEMPTED_PATH, Response::fault(Fault::Hang));
    let t = Instant::now();
    let o = loop {
        let o = p.observe();
        if !o.errors.is_empty() {
            break o;
        }
        assert!(t.elapsed() < Duration::from_secs(10));
    };
    match &o.errors[0].error {
        ImdsError::Timeout { timeout, .. } => {
            assert!(*timeout > Duration::from_secs(1) && *timeout <= Duration::from_secs(5));
        }
        e => panic!("{e:?}"),
    }
    // The maintenance key kept working meanwhile (its long-poll timed out server-side).
    m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let o = p.observe();
        if kinds(&o) == vec![NoticeKind::GcpPreempt] {
            break;
        }
        assert!(Instant::now() < deadline, "never recovered: {o:?}");
    }
}

#[test]
fn server_timeouts_reread_and_rearm() {
    let m = quiet_mock();
    let mut p = provider(&m, Duration::from_secs(1));
    p.observe();
    // Two long-poll timeouts (1 s each, unchanged ETag): each is followed by a plain re-read,
    // and observations keep coming with both keys fresh.
    let t = Instant::now();
    let mut fresh = 0;
    while t.elapsed() < Duration::from_millis(2500) {
        let o = p.observe();
        assert!(o.ok(), "{:?}", o.errors);
        fresh += o.fresh.len();
    }
    assert!(fresh >= 4, "{fresh}");
    let lp = long_polls(&m, PREEMPTED_PATH);
    assert!(lp.len() >= 2 && lp.len() <= 4, "{}", lp.len());
    assert!(lp
        .iter()
        .all(|r| r.note.as_deref() != Some("long poll: value changed")));
    let plain = m.requests_for(PREEMPTED_PATH).len() - lp.len();
    assert!(plain >= 2, "a plain re-read follows each timeout ({plain})");
}

#[tokio::test]
async fn same_etag_answered_at_once_backs_off() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    // A server that ignores wait_for_change: it always answers at once, always the same ETag.
    m.set(
        PREEMPTED_PATH,
        Response::text(200, "FALSE").with_header("ETag", "stuck"),
    );
    m.set(MAINTENANCE_PATH, Response::text(200, "NONE"));
    let mut p = provider(&m, Duration::from_secs(30));
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        let o = p.observe();
        assert!(o.ok(), "{:?}", o.errors);
        let due = p.next_due();
        if due > Instant::now() {
            tokio::time::sleep_until(due.into()).await;
        }
    }
    // Backoff from 100 ms doubling: about a dozen requests in 3 s, not thousands.
    let n = m.count(PREEMPTED_PATH);
    assert!((4..=30).contains(&n), "{n} requests in 3 s");
}

#[test]
fn missing_etags_fall_back_to_polling() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(
        PREEMPTED_PATH,
        Response::text(200, "FALSE").with_header("ETag", ""),
    );
    m.set(MAINTENANCE_PATH, Response::text(200, "NONE"));
    let mut p = provider(&m, Duration::from_secs(30));
    p.observe();
    let t = Instant::now();
    m.set(
        PREEMPTED_PATH,
        Response::text(200, "TRUE").with_header("ETag", ""),
    );
    loop {
        let o = p.observe();
        if kinds(&o) == vec![NoticeKind::GcpPreempt] {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(2), "not polled: {o:?}");
    }
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(
        long_polls(&m, PREEMPTED_PATH).is_empty(),
        "no long-poll without an ETag"
    );
}

#[test]
fn the_metadata_flavor_header_is_always_sent() {
    let m = quiet_mock();
    let mut p = provider(&m, Duration::from_secs(1));
    p.observe();
    let (o, _) = observe_with_change(&mut p, Duration::from_millis(100), || {
        m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    });
    assert_eq!(kinds(&o), vec![NoticeKind::GcpPreempt]);
    let reqs = m.requests();
    assert!(reqs.len() >= 3);
    for r in &reqs {
        assert_eq!(r.header("Metadata-Flavor"), Some("Google"), "{r:?}");
        assert_ne!(r.status, Some(403), "{r:?}");
    }
    // A 403 (what the server says without the header) is an error, not "no notice".
    m.set(
        MAINTENANCE_PATH,
        Response::text(403, "Missing required header"),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let o = p.observe();
        if let Some(e) = o.errors.first() {
            assert!(
                matches!(e.error, ImdsError::Status { status: 403, .. }),
                "{e:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline);
    }
}

#[tokio::test]
async fn next_due_is_the_retry_time_when_nothing_long_polls() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(PREEMPTED_PATH, Response::text(503, "x"));
    m.set(MAINTENANCE_PATH, Response::text(503, "x"));
    let mut p = provider(&m, Duration::from_secs(10));
    let o = p.observe();
    assert_eq!(o.errors.len(), 2, "{o:?}");
    assert!(o.fresh.is_empty());
    let now = Instant::now();
    let due = p.next_due();
    assert!(due > now && due <= now + RETRY, "{:?}", due - now);
    // Once the keys answer again, long-polling resumes and the provider is due at once.
    m.set(PREEMPTED_PATH, Response::text(200, "FALSE"));
    m.set(MAINTENANCE_PATH, Response::text(200, "NONE"));
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep_until(p.next_due().into()).await;
        let o = p.observe();
        if o.fresh.len() == 2 || (o.ok() && p.next_due() <= Instant::now()) {
            break;
        }
    }
    assert!(p.next_due() <= Instant::now());
}

/// TERMINATE_ON_HOST_MAINTENANCE comes about an hour ahead on GPU VMs: the notice carries the
/// start that `instance/upcoming-maintenance` announces, so the policy can wait for
/// the last safe moment. Without an announcement (404, `{ }`, the "no notifications" error) the
/// notice has no deadline, so nthd acts at once.
#[test]
fn terminate_maintenance_carries_the_upcoming_window_start() {
    use nthd::testing::provider::gcp::UPCOMING_PATH;
    let m = quiet_mock();
    m.set(
        MAINTENANCE_PATH,
        Response::text(200, "TERMINATE_ON_HOST_MAINTENANCE"),
    );
    m.set(
        UPCOMING_PATH,
        Response::json(
            200,
            r#"{"can_reschedule": "false", "maintenance_status": "PENDING", "type": "UNSCHEDULED", "window_start_time": "2030-06-01T10:00:00Z", "window_end_time": "2030-06-01T11:00:00Z"}"#,
        ),
    );
    let mut p = provider_with(&m, Duration::from_secs(1), fast_client());
    let o = p.observe();
    let n = o
        .notices
        .iter()
        .find(|n| n.kind == NoticeKind::GcpTerminateMaintenance)
        .expect("the maintenance notice");
    assert_eq!(
        n.deadline,
        nthd::testing::timefmt::parse_any("2030-06-01T10:00:00Z"),
        "{n:?}"
    );
    // Not re-read on every observation (every `upcoming_interval`, 20 s by default).
    for _ in 0..3 {
        p.observe();
    }
    assert_eq!(m.count(UPCOMING_PATH), 1);

    for (status, body) in [
        (404, "Not Found"),
        (200, "{ }"),
        (
            200,
            r#"{"error": "no notifications have been received yet, try again later"}"#,
        ),
    ] {
        let m = quiet_mock();
        m.set(
            MAINTENANCE_PATH,
            Response::text(200, "TERMINATE_ON_HOST_MAINTENANCE"),
        );
        m.set(UPCOMING_PATH, Response::json(status, body));
        let mut p = provider_with(&m, Duration::from_secs(1), fast_client());
        let o = p.observe();
        let n = o
            .notices
            .iter()
            .find(|n| n.kind == NoticeKind::GcpTerminateMaintenance)
            .unwrap();
        assert_eq!(n.deadline, None, "{status} {body}");
    }
}

fn window(start: &str) -> Response {
    Response::json(
        200,
        format!(
            r#"{{"can_reschedule": "true", "maintenance_status": "PENDING", "type": "SCHEDULED", "window_start_time": "{start}", "window_end_time": "2030-06-02T00:00:00Z"}}"#
        ),
    )
}

fn maintenance_deadline(o: &Observation) -> Option<std::time::SystemTime> {
    o.notices
        .iter()
        .find(|n| n.kind == NoticeKind::GcpTerminateMaintenance)
        .expect("the maintenance notice")
        .deadline
}

/// Google can move a maintenance window while the TERMINATE notice is listed (GPU VMs are
/// warned about an hour ahead): `instance/upcoming-maintenance` is re-read every
/// `upcoming_interval`, and `observe()` returns for that re-read even while both long-polls
/// still wait, so the next observation carries the new start as the notice's deadline.
#[test]
fn a_moved_maintenance_window_moves_the_deadline() {
    use nthd::testing::provider::gcp::UPCOMING_PATH;
    let m = quiet_mock();
    m.set(
        MAINTENANCE_PATH,
        Response::text(200, "TERMINATE_ON_HOST_MAINTENANCE"),
    );
    m.set(UPCOMING_PATH, window("2030-06-01T10:00:00Z"));
    let mut p = reading_upcoming_every(&m, Duration::from_secs(60), Duration::from_millis(300));
    assert!(p
        .describe()
        .contains("instance/upcoming-maintenance every 300ms"));
    let o = p.observe();
    assert_eq!(
        maintenance_deadline(&o),
        nthd::testing::timefmt::parse_any("2030-06-01T10:00:00Z")
    );
    m.set(UPCOMING_PATH, window("2030-06-01T12:00:00Z"));
    let t = Instant::now();
    // observe() returns for the re-read while the long-polls wait 60 s.
    let o = p.observe();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(
        maintenance_deadline(&o),
        nthd::testing::timefmt::parse_any("2030-06-01T12:00:00Z"),
        "the moved window is the new deadline"
    );
    assert!(o.fresh.is_empty() && o.ok(), "no key answered: {o:?}");
    assert_eq!(m.count(UPCOMING_PATH), 2);
    // A failed re-read keeps the start read before; a window withdrawn means at once.
    m.set(UPCOMING_PATH, Response::text(503, "busy"));
    let o = p.observe();
    assert_eq!(
        maintenance_deadline(&o),
        nthd::testing::timefmt::parse_any("2030-06-01T12:00:00Z")
    );
    m.set(UPCOMING_PATH, Response::json(200, "{ }"));
    let o = p.observe();
    assert_eq!(maintenance_deadline(&o), None);
    // Once the maintenance is no longer listed, it is not read any more.
    m.set(MAINTENANCE_PATH, Response::text(200, "NONE"));
    let mut gone = false;
    for _ in 0..3 {
        gone = p.observe().notices.is_empty();
        if gone {
            break;
        }
    }
    assert!(gone, "the maintenance is no longer listed");
    let before = m.count(UPCOMING_PATH);
    // Both long-polls wait 60 s: nothing is due, and observe() does not return.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(p.observe()));
    let waited = rx.recv_timeout(Duration::from_millis(800));
    assert!(waited.is_err(), "{waited:?}");
    assert_eq!(m.count(UPCOMING_PATH), before);
}

/// The re-read follows `upcoming_interval`, not the observations: here `maintenance-event`
/// has no ETag, so it is polled every 100 ms, and in 2 s the window is read about 5 times.
#[test]
fn the_maintenance_window_is_not_reread_on_every_poll() {
    use nthd::testing::provider::gcp::UPCOMING_PATH;
    let m = quiet_mock();
    m.set(
        MAINTENANCE_PATH,
        Response::text(200, "TERMINATE_ON_HOST_MAINTENANCE").with_header("ETag", ""),
    );
    m.set(UPCOMING_PATH, window("2030-06-01T10:00:00Z"));
    let mut p = reading_upcoming_every(&m, Duration::from_secs(30), Duration::from_millis(500));
    let t = Instant::now();
    let mut observations = 0;
    while t.elapsed() < Duration::from_millis(2200) {
        let o = p.observe();
        assert!(maintenance_deadline(&o).is_some());
        observations += 1;
    }
    let reads = m.count(UPCOMING_PATH);
    assert!(observations >= 12, "{observations} observations");
    assert!(
        (4..=6).contains(&reads),
        "{reads} reads in 2.2 s, every 500 ms"
    );
}

// ------------------------------------------------------------------------------------ identity

mod identity {
    use super::*;
    use common::provider::mock_imds;
    use nthd::testing::notice::Lifecycle;
    use nthd::testing::provider::gcp::{PREEMPTIBLE_PATH, PROVISIONING_MODEL_PATH};
    use nthd_testkit::imds::Config;

    #[test]
    fn the_provisioning_model_decides_the_lifecycle() {
        let m = mock_imds(Config::default(), Some("gcp"));
        let mut p = provider_with(&m, Duration::from_secs(5), fast_client());
        // The values, cut to their last segment: the contract's `identity_is_read`.
        let id = p.identity().unwrap();
        assert_eq!(id.lifecycle, Some(Lifecycle::Spot));
        // The mock answers 403 without Metadata-Flavor, so these reads carried it; the
        // provisioning model answered, so the preemptible flag was not read.
        assert_eq!(m.count(PREEMPTIBLE_PATH), 0);
        m.set(PROVISIONING_MODEL_PATH, Response::text(200, "STANDARD"));
        assert_eq!(p.identity().unwrap().lifecycle, Some(Lifecycle::OnDemand));
    }

    #[test]
    fn without_a_provisioning_model_the_preemptible_flag_decides() {
        let m = mock_imds(Config::default(), Some("gcp"));
        assert!(m.clear(PROVISIONING_MODEL_PATH));
        let mut p = provider_with(&m, Duration::from_secs(5), fast_client());
        let id = p.identity().unwrap();
        assert_eq!(id.lifecycle, Some(Lifecycle::Preemptible));
        assert_eq!(id.zone.as_deref(), Some("us-central1-a"));
        assert_eq!(m.count(PREEMPTIBLE_PATH), 1);
        m.set(PREEMPTIBLE_PATH, Response::text(200, "FALSE"));
        assert_eq!(p.identity().unwrap().lifecycle, Some(Lifecycle::OnDemand));
        // Neither key: unknown, the rest still read.
        assert!(m.clear(PREEMPTIBLE_PATH));
        let id = p.identity().unwrap();
        assert_eq!(id.lifecycle, None);
        assert_eq!(id.instance_type.as_deref(), Some("e2-standard-4"));
    }
}

/// A power-off deferred to the last safe moment before the window: the start is read once more
/// just before that moment, whatever the regular interval, so a window moved at the last minute
/// moves the action; and only once for that moment.
#[test]
fn the_window_is_read_again_just_before_a_deferred_action() {
    use nthd::testing::provider::gcp::{RECHECK_LEAD, UPCOMING_PATH};
    let m = quiet_mock();
    m.set(
        MAINTENANCE_PATH,
        Response::text(200, "TERMINATE_ON_HOST_MAINTENANCE"),
    );
    m.set(UPCOMING_PATH, window("2030-06-01T10:00:00Z"));
    let mut p = reading_upcoming_every(&m, Duration::from_secs(60), Duration::from_secs(600));
    p.observe();
    assert_eq!(m.count(UPCOMING_PATH), 1);
    m.set(UPCOMING_PATH, window("2030-06-01T11:00:00Z"));
    let action = Instant::now() + RECHECK_LEAD + Duration::from_millis(700);
    let at = std::time::SystemTime::now() + RECHECK_LEAD + Duration::from_millis(700);
    p.action_due(Some(at));
    let o = p.observe();
    let read_at = Instant::now();
    assert!(
        read_at + RECHECK_LEAD + Duration::from_millis(20) >= action
            && read_at + RECHECK_LEAD < action + Duration::from_millis(500),
        "read {:?} before the action",
        action.saturating_duration_since(read_at)
    );
    assert_eq!(
        maintenance_deadline(&o),
        nthd::testing::timefmt::parse_any("2030-06-01T11:00:00Z")
    );
    // The same action again: nothing more to read until the regular re-read, though observe()
    // comes back every second while the maintenance is listed (to learn of a new action).
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(2500) {
        p.action_due(Some(at));
        p.observe();
    }
    assert_eq!(m.count(UPCOMING_PATH), 2);
}

/// A VM created with a 120 s preemption notice (`NTHD_GCP_PREEMPTION_NOTICE=2m`): the notice's
/// deadline is the ACPI soft-off, 120 s after `preempted` was first seen TRUE, and stays put
/// while it is listed. Without the setting the notice has none (acted on at once).
#[test]
fn a_preemption_notice_set_gives_the_soft_off_as_deadline() {
    let m = quiet_mock();
    m.set(PREEMPTED_PATH, Response::text(200, "TRUE"));
    let deadline = |p: &mut Gcp| {
        p.observe()
            .notices
            .iter()
            .find(|n| n.kind == NoticeKind::GcpPreempt)
            .expect("the preemption notice")
            .deadline
    };
    let mut plain = provider(&m, Duration::from_secs(1));
    assert_eq!(deadline(&mut plain), None);
    let client = ImdsClient::new(&m.url(), fast_client()).unwrap();
    let timings = Timings {
        gcp_wait: Duration::from_secs(1),
        poll: RETRY,
        gcp_notice: Duration::from_secs(120),
        ..Timings::defaults(Cloud::Gcp)
    };
    let mut p = common::provider::gcp(client, timings);
    let before = std::time::SystemTime::now();
    let first = deadline(&mut p).expect("a deadline");
    let ahead = first.duration_since(before).unwrap();
    assert!(
        ahead >= Duration::from_secs(119) && ahead <= Duration::from_secs(121),
        "{ahead:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(deadline(&mut p), Some(first), "the deadline does not drift");
}
