//! The AWS provider against the in-process mock IMDS: every source, token handling, faults.
//! What every provider does (404 as no notice, identity, hostile values, nothing answering) is
//! in tests/provider_contract.rs.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, Instant};

use common::provider::{client, kinds, mock_imds};
use nthd::testing::imds::{ClientOptions, ImdsClient, ImdsError};
use nthd::testing::notice::{NoticeKind, NoticeStatus};
use nthd::testing::provider::aws::{self, Aws, AwsOptions};
use nthd::testing::provider::Provider;
use nthd_testkit::imds::{Config, Fault, MockImds, Response, TokenMode};

fn provider(m: &MockImds, opts: AwsOptions) -> Aws {
    common::provider::aws(client(&m.url()), opts)
}

const SPOT_TERMINATE: &str = r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#;

#[test]
fn no_notices_means_404_everywhere_and_one_token() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let mut p = provider(&m, AwsOptions::default());
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert!(o.notices.is_empty());
    assert_eq!(
        o.fresh.len(),
        4,
        "all four sources are read on the first observation"
    );
    for path in [
        aws::SPOT_PATH,
        aws::REBALANCE_PATH,
        aws::SCHEDULED_PATH,
        aws::ASG_PATH,
    ] {
        assert_eq!(m.count(path), 1, "{path}");
    }
    assert_eq!(m.stats().aws_tokens_issued, 1);
}

#[test]
fn every_source_yields_typed_notices() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(aws::SPOT_PATH, Response::json(200, SPOT_TERMINATE));
    m.set(
        aws::REBALANCE_PATH,
        Response::json(200, r#"{"noticeTime":"2030-01-01T00:00:00Z"}"#),
    );
    m.set(aws::ASG_PATH, Response::text(200, "Terminated"));
    m.set(
        aws::SCHEDULED_PATH,
        Response::json(
            200,
            r#"[{"NotBefore":"21 Jan 2030 09:00:43 GMT","Code":"instance-stop","Description":"d","EventId":"instance-event-1","NotAfter":"21 Jan 2030 09:17:23 GMT","State":"active"},
                {"NotBefore":"21 Jan 2030 09:00:43 GMT","Code":"system-reboot","EventId":"instance-event-2","State":"canceled"}]"#,
        ),
    );
    let mut p = provider(&m, AwsOptions::default());
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(
        kinds(&o),
        vec![
            NoticeKind::SpotTerminate,
            NoticeKind::Rebalance,
            NoticeKind::AsgTerminate,
            NoticeKind::ScheduledStop,
            NoticeKind::ScheduledReboot
        ]
    );
    let reboot = o
        .notices
        .iter()
        .find(|n| n.kind == NoticeKind::ScheduledReboot)
        .unwrap();
    assert_eq!(reboot.status, NoticeStatus::Canceled);
    assert_eq!(reboot.event_id.as_deref(), Some("instance-event-2"));
    let spot = o
        .notices
        .iter()
        .find(|n| n.kind == NoticeKind::SpotTerminate)
        .unwrap();
    assert!(spot.deadline.is_some());
    assert!(spot.raw.contains("terminate"));
}

#[tokio::test]
async fn spot_actions_and_asg_states() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let mut p = provider(
        &m,
        AwsOptions {
            poll_interval: Duration::from_millis(100),
            ..AwsOptions::default()
        },
    );
    for (body, want) in [
        (
            r#"{"action":"stop","time":"2030-01-01T00:02:00Z"}"#,
            NoticeKind::SpotStop,
        ),
        (
            r#"{"action":"hibernate","time":"2030-01-01T00:02:00Z"}"#,
            NoticeKind::SpotHibernate,
        ),
        (
            r#"{"action":"levitate","time":"2030-01-01T00:02:00Z"}"#,
            NoticeKind::Unknown,
        ),
    ] {
        m.set(aws::SPOT_PATH, Response::json(200, body));
        tokio::time::sleep_until(p.next_due().into()).await;
        let o = p.observe();
        assert_eq!(kinds(&o), vec![want], "{body}");
    }
    m.clear(aws::SPOT_PATH);
    for (state, want) in [
        ("InService", vec![]),
        ("Warmed:Hibernated", vec![NoticeKind::AsgOther]),
    ] {
        m.set(aws::ASG_PATH, Response::text(200, state));
        // The ASG source is read every third interval.
        let deadline = Instant::now() + Duration::from_secs(2);
        let before = m.count(aws::ASG_PATH);
        while m.count(aws::ASG_PATH) == before && Instant::now() < deadline {
            tokio::time::sleep_until(p.next_due().into()).await;
            p.observe();
        }
        tokio::time::sleep_until(p.next_due().into()).await;
        let o = p.observe();
        assert_eq!(kinds(&o), want, "{state}");
    }
}

#[tokio::test]
async fn rejected_token_is_replaced_once_then_reported() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(aws::SPOT_PATH, Response::json(200, SPOT_TERMINATE));
    let mut p = provider(&m, AwsOptions::default());
    assert!(p.observe().ok());
    assert_eq!(m.stats().aws_tokens_issued, 1);
    m.config(|c| c.token_always_401 = true);
    tokio::time::sleep_until(p.next_due().into()).await;
    let gets_before = m.count(aws::SPOT_PATH);
    let o = p.observe();
    // One 401, a fresh token, one more try, then the error; the last known notice is kept.
    assert_eq!(m.count(aws::SPOT_PATH) - gets_before, 2);
    assert_eq!(m.stats().aws_tokens_issued, 2);
    assert!(
        matches!(o.errors[0].error, ImdsError::Status { status: 401, .. }),
        "{:?}",
        o.errors
    );
    assert_eq!(
        kinds(&o),
        vec![NoticeKind::SpotTerminate],
        "the last known notice is kept"
    );
    m.config(|c| c.token_always_401 = false);
    tokio::time::sleep_until(p.next_due().into()).await;
    assert!(p.observe().ok());
}

#[tokio::test]
async fn token_is_refreshed_before_it_expires() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let mut p = provider(
        &m,
        AwsOptions {
            token_ttl: Duration::from_secs(1),
            poll_interval: Duration::from_millis(200),
            ..AwsOptions::default()
        },
    );
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500) {
        tokio::time::sleep_until(p.next_due().into()).await;
        let o = p.observe();
        assert!(
            o.ok(),
            "no read may fail on an expired token: {:?}",
            o.errors
        );
    }
    let issued = m.stats().aws_tokens_issued;
    assert!(
        (3..=5).contains(&issued),
        "a 1 s token refreshed at 80%: {issued} tokens in 2.5 s"
    );
    assert_eq!(p.tokens_fetched(), issued);
}

#[test]
fn imdsv1_only_endpoint_is_refused_unless_allowed() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.config(|c| {
        c.aws_token = TokenMode::Refused;
        c.token_put_status = 405;
    });
    m.set(aws::SPOT_PATH, Response::json(200, SPOT_TERMINATE));
    let mut p = provider(&m, AwsOptions::default());
    let o = p.observe();
    assert!(o.notices.is_empty());
    assert_eq!(
        o.errors.len(),
        1,
        "a refused token is reported once, not per source"
    );
    let e = o.errors[0].error.to_string();
    assert!(
        e.contains("/latest/api/token") && e.contains("405") && e.contains("NTHD_AWS_IMDSV1"),
        "{e}"
    );
    assert_eq!(
        m.count(aws::SPOT_PATH),
        0,
        "never falls back to IMDSv1 silently"
    );

    let mut p = provider(
        &m,
        AwsOptions {
            allow_imdsv1: true,
            ..AwsOptions::default()
        },
    );
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::SpotTerminate]);
    assert!(p.describe().contains("IMDSv1"));
}

#[tokio::test]
async fn server_errors_back_off_and_recover() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(
        aws::SPOT_PATH,
        Response::sequence(vec![
            Response::status(503),
            Response::status(500),
            Response::json(200, SPOT_TERMINATE),
        ]),
    );
    let mut p = provider(
        &m,
        AwsOptions {
            poll_interval: Duration::from_millis(50),
            ..AwsOptions::default()
        },
    );
    let mut errors = 0;
    let start = Instant::now();
    loop {
        tokio::time::sleep_until(p.next_due().into()).await;
        let o = p.observe();
        if o.notices
            .iter()
            .any(|n| n.kind == NoticeKind::SpotTerminate)
        {
            break;
        }
        errors += o
            .errors
            .iter()
            .filter(|e| {
                matches!(
                    e.error,
                    ImdsError::Status {
                        status: 500..=599,
                        ..
                    }
                )
            })
            .count();
        assert!(start.elapsed() < Duration::from_secs(5), "never recovered");
    }
    assert_eq!(errors, 2);
}

#[test]
fn hang_times_out_without_stalling_the_provider() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(aws::SPOT_PATH, Response::fault(Fault::Hang));
    let mut p = provider(&m, AwsOptions::default());
    let t = Instant::now();
    let o = p.observe();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let e = o
        .errors
        .iter()
        .find(|e| e.source == "aws/spot/instance-action")
        .unwrap();
    assert!(
        matches!(e.error, ImdsError::Timeout { .. }),
        "{:?}",
        e.error
    );
    assert!(e.error.to_string().contains(aws::SPOT_PATH));
    assert_eq!(o.fresh.len(), 3, "the other sources are still read");
}

#[tokio::test]
async fn malformed_truncated_and_oversized_bodies_are_errors() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(
        aws::SPOT_PATH,
        Response::json(200, r#"{"action": "terminate", "#),
    );
    m.set(aws::SCHEDULED_PATH, Response::huge(1 << 30));
    m.set(
        aws::REBALANCE_PATH,
        Response::json(200, "{}").with_fault(Fault::Truncate),
    );
    m.set(aws::ASG_PATH, Response::fault(Fault::Garbage));
    let mut p = provider(&m, AwsOptions::default());
    let t = Instant::now();
    let o = p.observe();
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "a 1 GiB body must not be read: {:?}",
        t.elapsed()
    );
    assert!(o.notices.is_empty());
    let err = |src: &str| {
        o.errors
            .iter()
            .find(|e| e.source == src)
            .map_or_else(|| panic!("no error for {src}"), |e| &e.error)
    };
    assert!(matches!(
        err("aws/spot/instance-action"),
        ImdsError::Malformed { .. }
    ));
    assert!(matches!(
        err("aws/events/maintenance/scheduled"),
        ImdsError::TooLarge { .. }
    ));
    assert!(err("aws/events/recommendations/rebalance")
        .to_string()
        .contains(aws::REBALANCE_PATH));
    assert!(err("aws/autoscaling/target-lifecycle-state")
        .to_string()
        .contains(aws::ASG_PATH));
}

#[test]
fn unreachable_endpoint_is_an_error_naming_the_url() {
    let client = ImdsClient::new("http://127.0.0.1:9", ClientOptions::default()).unwrap();
    let mut p = common::provider::aws(client, AwsOptions::default());
    let o = p.observe();
    assert!(o.fresh.is_empty());
    let e = o.errors[0].error.to_string();
    assert!(
        e.contains("http://127.0.0.1:9/latest/api/token") && e.contains("NTHD_IMDS_ENDPOINT"),
        "{e}"
    );
}

#[tokio::test]
async fn sources_are_polled_at_rates_that_fit_their_lead_times() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let mut p = provider(
        &m,
        AwsOptions {
            poll_interval: Duration::from_millis(100),
            slow_poll_interval: Duration::from_millis(1000),
            ..AwsOptions::default()
        },
    );
    let end = Instant::now() + Duration::from_millis(1950);
    while p.next_due() < end {
        tokio::time::sleep_until(p.next_due().into()).await;
        p.observe();
    }
    let spot = m.count(aws::SPOT_PATH);
    let asg = m.count(aws::ASG_PATH);
    let slow = m.count(aws::SCHEDULED_PATH);
    assert!((15..=21).contains(&spot), "spot every 100 ms: {spot}");
    assert!((5..=8).contains(&asg), "ASG every 300 ms: {asg}");
    assert_eq!(slow, 2, "slow sources at 0 s and 1 s");
    assert_eq!(m.count(aws::REBALANCE_PATH), 2);
    assert_eq!(m.stats().aws_tokens_issued, 1, "the token is cached");
    // One connection per source read at the same instant (four at the start), all kept.
    assert!(
        m.stats().connections <= 4,
        "keep-alive: {} connections",
        m.stats().connections
    );
}

/// Observes for `secs`, each poll when due; returns how many spot reads the mock saw.
async fn run_for(p: &mut Aws, m: &MockImds, d: Duration) -> usize {
    let before = m.count(aws::SPOT_PATH);
    let end = std::time::Instant::now() + d;
    while std::time::Instant::now() < end {
        tokio::time::sleep_until(p.next_due().into()).await;
        p.observe();
    }
    m.count(aws::SPOT_PATH) - before
}

/// A rebalance recommendation usually comes 10-20 minutes before the spot notice: while one is
/// listed, spot is read every 200 ms, for at most the boost's limit, then at the normal pace.
#[tokio::test]
async fn a_rebalance_recommendation_speeds_up_spot_reads_for_a_while() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let mut p = provider(
        &m,
        AwsOptions {
            poll_interval: Duration::from_secs(1),
            slow_poll_interval: Duration::from_millis(300),
            rebalance_boost: Some(Duration::from_millis(200)),
            boost_max: Duration::from_secs(3),
            ..AwsOptions::default()
        },
    );
    let normal = run_for(&mut p, &m, Duration::from_secs(2)).await;
    assert!(
        (1..=3).contains(&normal),
        "{normal} spot reads in 2 s unboosted"
    );
    assert!(!p.boosted());

    m.set(
        aws::REBALANCE_PATH,
        Response::json(200, r#"{"noticeTime":"2030-01-01T00:00:00Z"}"#),
    );
    run_for(&mut p, &m, Duration::from_millis(400)).await;
    assert!(p.boosted());
    let boosted = run_for(&mut p, &m, Duration::from_secs(2)).await;
    assert!(
        (8..=11).contains(&boosted),
        "{boosted} spot reads in 2 s boosted (every 200 ms)"
    );
    // Past the limit (3 s here, 30 min by default) the pace is normal again.
    run_for(&mut p, &m, Duration::from_secs(1)).await;
    assert!(!p.boosted());
    let after = run_for(&mut p, &m, Duration::from_secs(2)).await;
    assert!(
        (1..=3).contains(&after),
        "{after} spot reads in 2 s after the limit"
    );

    // Gone and back: a new recommendation boosts again.
    m.clear(aws::REBALANCE_PATH);
    run_for(&mut p, &m, Duration::from_millis(700)).await;
    m.set(
        aws::REBALANCE_PATH,
        Response::json(200, r#"{"noticeTime":"2030-01-01T01:00:00Z"}"#),
    );
    run_for(&mut p, &m, Duration::from_millis(700)).await;
    assert!(p.boosted());
}

/// Observes, each poll when due, until spot is boosted or `limit` has passed; how long that took.
async fn time_to_boost(p: &mut Aws, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        tokio::time::sleep_until(p.next_due().min(start + limit).into()).await;
        p.observe();
        if p.boosted() {
            return Some(start.elapsed());
        }
    }
    None
}

/// With the defaults (20 s slow poll, 200 ms boost) the boost starts within 5 s of a rebalance
/// recommendation appearing: the recommendation is read every 4 s, not on the slow poll. The
/// scheduled events stay on the slow poll, and with the boost off so does the recommendation.
#[tokio::test]
async fn the_boost_starts_within_5s_of_a_rebalance_recommendation() {
    let on = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let off = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let mut p_on = provider(&on, AwsOptions::default());
    let mut p_off = provider(
        &off,
        AwsOptions {
            rebalance_boost: None,
            ..AwsOptions::default()
        },
    );
    assert!(p_on
        .describe()
        .contains("rebalance recommendation every 4s, scheduled events every 20s"));
    assert!(p_off
        .describe()
        .contains("rebalance recommendation every 20s, scheduled events every 20s"));
    // The first observation reads every source; the recommendation appears just after it.
    assert!(p_on.observe().ok() && p_off.observe().ok());
    let rebalance = Response::json(200, r#"{"noticeTime":"2030-01-01T00:00:00Z"}"#);
    on.set(aws::REBALANCE_PATH, rebalance.clone());
    off.set(aws::REBALANCE_PATH, rebalance);
    let limit = Duration::from_secs(5);
    let (took, _) = tokio::join!(
        time_to_boost(&mut p_on, limit),
        time_to_boost(&mut p_off, limit)
    );
    let took = took.expect("spot was not boosted within 5 s of the recommendation");
    assert!(
        took >= Duration::from_millis(3500),
        "read on the 4 s grid: {took:?}"
    );
    assert_eq!(on.count(aws::REBALANCE_PATH), 2, "at 0 s and 4 s");
    assert_eq!(
        on.count(aws::SCHEDULED_PATH),
        1,
        "scheduled events stay on the slow poll"
    );
    assert_eq!(
        off.count(aws::REBALANCE_PATH),
        1,
        "boost off: on the slow poll"
    );
    assert_eq!(off.count(aws::SCHEDULED_PATH), 1);
}

// ------------------------------------------------------------------------------------ identity

#[test]
fn identity_reads_every_key_with_the_token() {
    // The values read: the contract's `identity_is_read`.
    let m = mock_imds(Config::default(), Some("aws"));
    let mut p = provider(&m, AwsOptions::default());
    p.identity().unwrap();
    // IMDSv2 only (the mock's default): every read carried the one token.
    for path in [
        aws::INSTANCE_ID_PATH,
        aws::INSTANCE_TYPE_PATH,
        aws::ZONE_PATH,
        aws::LIFE_CYCLE_PATH,
    ] {
        let r = m.requests_for(path);
        assert_eq!(r.len(), 1, "{path}");
        assert!(r[0].header("X-aws-ec2-metadata-token").is_some(), "{path}");
    }
    assert_eq!(m.stats().aws_tokens_issued, 1);
}

#[test]
fn identity_without_a_life_cycle_key_keeps_the_rest() {
    use nthd::testing::notice::Lifecycle;
    let m = mock_imds(Config::default(), Some("aws"));
    assert!(m.clear(aws::LIFE_CYCLE_PATH));
    let mut p = provider(&m, AwsOptions::default());
    let id = p.identity().unwrap();
    assert_eq!(id.lifecycle, None);
    assert_eq!(id.instance_id.as_deref(), Some("i-0123456789abcdef0"));
    assert_eq!(id.instance_type.as_deref(), Some("m5.large"));
    assert_eq!(id.zone.as_deref(), Some("us-east-1a"));
    // Known values map; an unknown one is not guessed.
    m.set(aws::LIFE_CYCLE_PATH, Response::text(200, "on-demand\n"));
    assert_eq!(p.identity().unwrap().lifecycle, Some(Lifecycle::OnDemand));
    m.set(aws::LIFE_CYCLE_PATH, Response::text(200, "scheduled"));
    assert_eq!(p.identity().unwrap().lifecycle, None);
}

/// Hostile values are dropped (the contract's `hostile_values_are_dropped`), not cut down.
#[test]
fn identity_values_at_the_length_limit() {
    let m = mock_imds(Config::default(), Some("aws"));
    let mut p = provider(&m, AwsOptions::default());
    // One character over MAX_IDENTITY is dropped, not cut; exactly MAX_IDENTITY is kept.
    let max = nthd::testing::notice::MAX_IDENTITY;
    m.set(
        aws::INSTANCE_ID_PATH,
        Response::text(200, "i".repeat(max + 1)),
    );
    m.set(aws::ZONE_PATH, Response::text(200, "z".repeat(max)));
    let id = p.identity().unwrap();
    assert_eq!(id.instance_id, None);
    assert_eq!(id.zone.map(|z| z.len()), Some(max));
}

#[test]
fn identity_is_an_error_when_nothing_answers() {
    let m = mock_imds(Config::default(), Some("aws"));
    for path in [
        aws::INSTANCE_ID_PATH,
        aws::INSTANCE_TYPE_PATH,
        aws::ZONE_PATH,
    ] {
        m.set(path, Response::status(503));
    }
    m.set(aws::LIFE_CYCLE_PATH, Response::fault(Fault::Reset));
    let mut p = provider(&m, AwsOptions::default());
    let e = p.identity().unwrap_err();
    assert!(
        matches!(&e, ImdsError::Status { status: 503, url, .. } if url.ends_with(aws::INSTANCE_ID_PATH)),
        "the first failure is reported: {e:?}"
    );
    // A refused token fails every key.
    let m = mock_imds(Config::default(), Some("aws"));
    m.config(|c| c.aws_token = TokenMode::Refused);
    let mut p = provider(&m, AwsOptions::default());
    assert!(matches!(p.identity(), Err(ImdsError::TokenRefused { .. })));
    // Nothing listening at all: the contract's `nothing_answering_is_an_error`.
}

/// The sources due at one instant go out together, so their answers share a wakeup: with
/// every answer held back 800 ms, the four first reads all reach the mock before the first
/// answer leaves it (one after the other they would arrive 800 ms apart or more).
#[test]
fn sources_due_together_are_read_together() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    for path in aws::SOURCE_PATHS {
        m.set(path, Response::status(404).with_delay(800));
    }
    let client = ImdsClient::new(
        &m.url(),
        ClientOptions {
            request_timeout: Duration::from_secs(5),
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let mut p = common::provider::aws(client, AwsOptions::default());
    let o = p.observe();
    assert_eq!(o.fresh.len(), 4, "every source read: {:?}", o.errors);
    let arrivals: Vec<u64> = m
        .requests()
        .iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.t_ms)
        .collect();
    assert_eq!(arrivals.len(), 4, "{arrivals:?}");
    let spread = arrivals.iter().max().unwrap() - arrivals.iter().min().unwrap();
    assert!(spread < 800, "the reads went out {spread} ms apart");
    assert_eq!(m.stats().aws_tokens_issued, 1, "one token for all four");
}

/// Reads rejected together share one new token: one more try each, not a token apiece.
#[test]
fn reads_rejected_together_share_one_new_token() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let mut p = provider(&m, AwsOptions::default());
    assert!(p.observe().ok());
    m.config(|c| c.token_always_401 = true);
    // The first round again: 20 s on, when all four sources fall due together.
    let mut p = provider(&m, AwsOptions::default());
    let o = p.observe();
    assert_eq!(o.errors.len(), 4, "{:?}", o.errors);
    let gets = m.requests().iter().filter(|r| r.method == "GET").count();
    assert_eq!(
        gets,
        4 + 4 + 4,
        "the first round, then each read and its one retry"
    );
    assert_eq!(
        m.stats().aws_tokens_issued,
        3,
        "one per provider, one renewal"
    );
}
