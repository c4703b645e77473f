//! The Alibaba Cloud provider against the in-process mock IMDS: spot termination-time, hardened
//! (token) and normal mode, faults. What every provider does (404 as no notice, identity,
//! hostile values, nothing answering) is in tests/provider_contract.rs.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, UNIX_EPOCH};

use common::provider::{client, kinds, observe_until};
use nthd::testing::imds::ImdsError;
use nthd::testing::notice::NoticeKind;
use nthd::testing::provider::alibaba::{Alibaba, SPOT_PATH, TOKEN_PATH};
use nthd::testing::provider::Provider;
use nthd_testkit::imds::{Config, Fault, MockImds, Response, TokenMode};

const TOKEN_HEADER: &str = "X-aliyun-ecs-metadata-token";

fn provider(m: &MockImds) -> Alibaba {
    common::provider::alibaba(client(&m.url()), Duration::from_millis(50))
}

fn config(alibaba_token: TokenMode) -> Config {
    Config {
        // No AWS token is ever sent: AWS enforcement must be off for /latest/ reads.
        aws_token: TokenMode::Optional,
        alibaba_token,
        ..Config::default()
    }
}

fn mock(alibaba_token: TokenMode) -> MockImds {
    MockImds::builder()
        .listen("127.0.0.1:0")
        .config(config(alibaba_token))
        .start_blocking()
        .unwrap()
}

fn gets(m: &MockImds) -> Vec<nthd_testkit::imds::LoggedRequest> {
    m.requests_for(SPOT_PATH)
}

#[test]
fn termination_time_is_a_notice_with_its_deadline() {
    let m = mock(TokenMode::Optional);
    m.set(SPOT_PATH, Response::text(200, "2015-01-05T18:02:00Z"));
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::AlibabaSpot]);
    let n = &o.notices[0];
    assert_eq!(n.id, "alibaba/spot/termination");
    assert_eq!(
        n.deadline,
        Some(UNIX_EPOCH + Duration::from_secs(1_420_480_920))
    );
    // Withdrawn: 404 again, fresh and empty.
    m.clear(SPOT_PATH);
    let o = observe_until(&mut p, |o| o.notices.is_empty());
    assert_eq!(o.fresh, ["alibaba/spot/termination-time"]);
}

#[test]
fn unparseable_time_is_still_a_notice() {
    let m = mock(TokenMode::Optional);
    m.set(SPOT_PATH, Response::text(200, "in five minutes"));
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::AlibabaSpot]);
    assert!(o.notices[0].deadline.is_none());
    assert_eq!(o.notices[0].id, "alibaba/spot/termination");
}

#[test]
fn hardened_mode_uses_a_cached_token() {
    let m = mock(TokenMode::Required);
    m.set(SPOT_PATH, Response::text(200, "2030-01-05T18:02:00Z"));
    let mut p = provider(&m);
    for _ in 0..4 {
        let o = observe_until(&mut p, |o| !o.fresh.is_empty());
        assert!(o.ok(), "{:?}", o.errors);
        assert_eq!(kinds(&o), vec![NoticeKind::AlibabaSpot]);
    }
    assert_eq!(m.stats().alibaba_tokens_issued, 1, "the token is cached");
    assert_eq!(p.tokens_fetched(), 1);
    let put = m.requests_for(TOKEN_PATH);
    assert_eq!(put.len(), 1);
    assert_eq!(put[0].method, "PUT");
    assert_eq!(
        put[0].header("X-aliyun-ecs-metadata-token-ttl-seconds"),
        Some("21600")
    );
    for r in gets(&m) {
        assert!(r.header(TOKEN_HEADER).is_some(), "{r:?}");
        assert_eq!(r.status, Some(200));
    }
    assert!(p.describe().contains("hardened"));
}

#[test]
fn hardened_mode_404_is_no_notice() {
    let m = mock(TokenMode::Required);
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert!(o.notices.is_empty());
    assert_eq!(gets(&m)[0].status, Some(404));
}

#[test]
fn a_rejected_token_is_replaced_once() {
    let m = MockImds::builder()
        .listen("127.0.0.1:0")
        .config(config(TokenMode::Required))
        .route(SPOT_PATH, Response::text(200, "2030-01-05T18:02:00Z"))
        .start_blocking()
        .unwrap();
    let mut p = provider(&m);
    assert!(p.observe().ok());
    // The server forgets every token (as after an expiry): 401, new token, read again.
    m.reset();
    let o = observe_until(&mut p, |o| !o.fresh.is_empty());
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::AlibabaSpot]);
    assert_eq!(m.stats().alibaba_tokens_issued, 2);
    let g = gets(&m);
    assert_eq!(g.len(), 2, "{g:?}");
    assert_eq!(g[0].status, Some(401));
    assert_eq!(g[1].status, Some(200));
}

#[test]
fn a_token_that_keeps_failing_is_an_error_not_a_loop() {
    let m = mock(TokenMode::Required);
    m.config(|c| c.token_always_401 = true);
    let mut p = provider(&m);
    let o = p.observe();
    assert_eq!(o.errors.len(), 1, "{o:?}");
    assert!(
        matches!(o.errors[0].error, ImdsError::Status { status: 401, .. }),
        "{:?}",
        o.errors
    );
    assert_eq!(gets(&m).len(), 2, "one retry with a fresh token");
    assert_eq!(m.stats().alibaba_tokens_issued, 2);
}

#[test]
fn normal_mode_reads_without_a_token() {
    for status in [403u16, 404, 405] {
        let m = mock(TokenMode::Refused);
        m.config(|c| c.token_put_status = status);
        m.set(SPOT_PATH, Response::text(200, "2030-01-05T18:02:00Z"));
        let mut p = provider(&m);
        for _ in 0..3 {
            let o = observe_until(&mut p, |o| !o.fresh.is_empty());
            assert!(o.ok(), "{status}: {:?}", o.errors);
            assert_eq!(kinds(&o), vec![NoticeKind::AlibabaSpot]);
        }
        assert_eq!(
            m.count(TOKEN_PATH),
            1,
            "{status}: the refusal is remembered"
        );
        for r in gets(&m) {
            assert!(r.header(TOKEN_HEADER).is_none(), "{r:?}");
        }
        assert!(p.describe().contains("normal mode"));
    }
}

#[test]
fn hardened_mode_switched_on_later_is_followed() {
    let m = mock(TokenMode::Refused);
    m.set(SPOT_PATH, Response::text(200, "2030-01-05T18:02:00Z"));
    let mut p = provider(&m);
    assert!(p.observe().ok());
    m.config(|c| c.alibaba_token = TokenMode::Required);
    let o = observe_until(&mut p, |o| !o.fresh.is_empty());
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::AlibabaSpot]);
    assert_eq!(m.stats().alibaba_tokens_issued, 1);
    assert!(gets(&m).last().unwrap().header(TOKEN_HEADER).is_some());
}

#[test]
fn token_put_failures_are_errors() {
    let m = mock(TokenMode::Required);
    m.set(TOKEN_PATH, Response::text(500, "oops"));
    let mut p = provider(&m);
    let o = p.observe();
    assert!(
        matches!(o.errors[0].error, ImdsError::Status { status: 500, .. }),
        "{:?}",
        o.errors
    );
    assert!(gets(&m).is_empty(), "no tokenless read after a failed PUT");
    m.set(TOKEN_PATH, Response::text(200, "bad token\u{7}"));
    let o = observe_until(&mut p, |o| !o.ok());
    assert!(matches!(o.errors[0].error, ImdsError::Malformed { .. }));
    m.set(TOKEN_PATH, Response::fault(Fault::Hang));
    let o = observe_until(&mut p, |o| !o.ok());
    assert!(matches!(o.errors[0].error, ImdsError::Timeout { .. }));
}

#[test]
fn faults_are_errors_and_keep_the_last_state() {
    let m = mock(TokenMode::Optional);
    m.set(SPOT_PATH, Response::text(200, "2030-01-05T18:02:00Z"));
    let mut p = provider(&m);
    assert_eq!(kinds(&p.observe()), vec![NoticeKind::AlibabaSpot]);
    for (what, resp) in [
        ("503", Response::text(503, "busy")),
        ("500", Response::text(500, "oops")),
        ("hang", Response::fault(Fault::Hang)),
        ("reset", Response::fault(Fault::Reset)),
        ("garbage", Response::fault(Fault::Garbage)),
        ("huge", Response::huge(16 * 1024 * 1024)),
    ] {
        m.set(SPOT_PATH, resp);
        let o = observe_until(&mut p, |o| !o.ok());
        match (what, &o.errors[0].error) {
            ("503", ImdsError::Status { status: 503, .. })
            | ("500", ImdsError::Status { status: 500, .. })
            | ("hang", ImdsError::Timeout { .. })
            | ("huge", ImdsError::TooLarge { .. })
            | ("reset" | "garbage", _) => {}
            (w, e) => panic!("{w}: {e:?}"),
        }
        assert!(o.fresh.is_empty(), "{what}");
        assert_eq!(kinds(&o), vec![NoticeKind::AlibabaSpot], "{what}: kept");
    }
}

// ------------------------------------------------------------------------------------ identity

mod identity {
    use super::*;
    use common::provider::mock_imds;
    use nthd::testing::notice::Identity;
    use nthd::testing::provider::alibaba::{INSTANCE_ID_PATH, INSTANCE_TYPE_PATH, ZONE_PATH};
    use nthd_testkit::imds::identity as mock;

    #[test]
    fn every_key_in_hardened_mode_and_no_lifecycle() {
        let m = mock_imds(config(TokenMode::Required), Some("alibaba"));
        let mut p = provider(&m);
        let id = p.identity().unwrap();
        assert_eq!(
            id,
            Identity {
                instance_id: Some(mock::ALIBABA_INSTANCE_ID.into()),
                instance_type: Some(mock::ALIBABA_INSTANCE_TYPE.into()),
                zone: Some(mock::ALIBABA_ZONE.into()),
                lifecycle: None,
            }
        );
        for path in [INSTANCE_ID_PATH, INSTANCE_TYPE_PATH, ZONE_PATH] {
            let r = m.requests_for(path);
            assert_eq!(r.len(), 1, "{path}");
            assert!(r[0].header(TOKEN_HEADER).is_some(), "{path}");
        }
    }

    #[test]
    fn normal_mode_and_a_missing_key() {
        let m = mock_imds(config(TokenMode::Refused), Some("alibaba"));
        assert!(m.clear(ZONE_PATH));
        let mut p = provider(&m);
        let id = p.identity().unwrap();
        assert_eq!(id.zone, None);
        assert_eq!(id.instance_id.as_deref(), Some(mock::ALIBABA_INSTANCE_ID));
        assert_eq!(
            id.instance_type.as_deref(),
            Some(mock::ALIBABA_INSTANCE_TYPE)
        );
    }
}
