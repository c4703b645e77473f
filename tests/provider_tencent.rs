//! The Tencent Cloud provider against the in-process mock IMDS: spot termination-time (UTC+8),
//! malformed bodies and faults, the charge type. What every provider does (404 as no notice,
//! identity, hostile values, nothing answering) is in tests/provider_contract.rs.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, UNIX_EPOCH};

use common::provider::{client, kinds, mock_imds, observe_until};
use nthd::testing::imds::ImdsError;
use nthd::testing::notice::{Cloud, NoticeKind};
use nthd::testing::provider::tencent::{Tencent, SPOT_PATH};
use nthd::testing::provider::{Observation, Provider};
use nthd_testkit::imds::{Config, Fault, MockImds, Response, TokenMode};

const SOURCE: &str = "tencent/spot/termination-time";

fn provider(m: &MockImds) -> Tencent {
    common::provider::tencent(client(&m.url()), Duration::from_millis(50))
}

fn config() -> Config {
    Config {
        // Tencent sends no token: AWS enforcement must be off for /latest/ reads.
        aws_token: TokenMode::Optional,
        ..Config::default()
    }
}

fn mock() -> MockImds {
    mock_imds(config(), None)
}

fn deadline_secs(o: &Observation) -> u64 {
    o.notices[0]
        .deadline
        .unwrap()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn the_default_endpoint_is_the_link_local_address_and_the_host_name_still_works() {
    // An address, so that nthd needs no DNS and the unit's IPAddressAllow= can admit it.
    let base = Cloud::Tencent.default_endpoint();
    assert_eq!(base, "http://169.254.0.23");
    assert_eq!(
        client(base).url(SPOT_PATH),
        "http://169.254.0.23/latest/meta-data/spot/termination-time"
    );
    // The documented name remains accepted as NTHD_IMDS_ENDPOINT.
    use clap::Parser;
    let mut cli = nthd::testing::config::Cli::try_parse_from([
        "nthd",
        "--provider",
        "tencent",
        "--imds-endpoint",
        "http://metadata.tencentyun.com",
    ])
    .unwrap();
    assert!(cli.opts.validate().is_empty());
    assert_eq!(
        cli.opts.provider_settings().endpoint.as_deref(),
        Some("http://metadata.tencentyun.com")
    );
    assert_eq!(
        client("http://metadata.tencentyun.com").url(SPOT_PATH),
        "http://metadata.tencentyun.com/latest/meta-data/spot/termination-time"
    );
    assert_eq!(Cloud::Tencent.name(), "tencent");
    assert_eq!(
        NoticeKind::from_name("tencent-spot"),
        Some(NoticeKind::TencentSpot)
    );
    assert_eq!(
        NoticeKind::TencentSpot.info().env,
        "NTHD_ACTION_TENCENT_SPOT"
    );
}

/// The contract's `not_found_is_no_notice` (tests/provider_contract.rs), and how it is read.
#[test]
fn not_found_is_one_get_answered_404() {
    let m = mock();
    let mut p = provider(&m);
    assert!(p.observe().ok());
    let r = m.requests_for(SPOT_PATH);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].method, "GET");
    assert_eq!(r[0].status, Some(404));
    assert!(p.describe().contains("Tencent Cloud"), "{}", p.describe());
}

#[test]
fn termination_time_is_a_notice_read_as_utc_plus_8() {
    let m = mock();
    m.set(SPOT_PATH, Response::text(200, "2018-08-18 12:05:33"));
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::TencentSpot]);
    assert_eq!(o.notices[0].id, "tencent/spot/termination");
    assert_eq!(o.notices[0].source, SOURCE);
    // 2018-08-18T04:05:33Z
    assert_eq!(deadline_secs(&o), 1_534_565_133);
    // Withdrawn: 404 again, fresh and empty.
    m.clear(SPOT_PATH);
    let o = observe_until(&mut p, |o| o.notices.is_empty());
    assert_eq!(o.fresh, [SOURCE]);
}

#[test]
fn early_morning_in_beijing_is_the_previous_day_in_utc() {
    let m = mock();
    m.set(SPOT_PATH, Response::text(200, "2018-08-18 04:05:33\n"));
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    // 2018-08-17T20:05:33Z
    assert_eq!(deadline_secs(&o), 1_534_536_333);
    assert!(
        o.notices[0].detail.contains("2018-08-17T20:05:33Z"),
        "{}",
        o.notices[0].detail
    );
}

#[test]
fn malformed_time_is_an_error_naming_the_url_and_keeps_the_last_state() {
    let m = mock();
    let mut p = provider(&m);
    let url = format!("{}{SPOT_PATH}", m.url());
    m.set(SPOT_PATH, Response::text(200, "in two minutes"));
    let o = p.observe();
    assert_eq!(o.errors.len(), 1, "{o:?}");
    assert_eq!(o.errors[0].source, SOURCE);
    assert!(
        matches!(&o.errors[0].error, ImdsError::Malformed { url: u, .. } if *u == url),
        "{:?}",
        o.errors
    );
    assert!(o.notices.is_empty() && o.fresh.is_empty());
    // A good answer, then garbage again: the notice is kept, not dropped.
    m.set(SPOT_PATH, Response::text(200, "2030-01-05 18:02:00"));
    let o = observe_until(&mut p, nthd::testing::provider::Observation::ok);
    assert_eq!(kinds(&o), vec![NoticeKind::TencentSpot]);
    m.set(SPOT_PATH, Response::text(200, "2030-01-05T18:02:00"));
    let o = observe_until(&mut p, |o| !o.ok());
    assert!(matches!(o.errors[0].error, ImdsError::Malformed { .. }));
    assert_eq!(kinds(&o), vec![NoticeKind::TencentSpot], "kept");
}

#[test]
fn faults_are_errors_and_keep_the_last_state() {
    let m = mock();
    m.set(SPOT_PATH, Response::text(200, "2030-01-05 18:02:00"));
    let mut p = provider(&m);
    assert_eq!(kinds(&p.observe()), vec![NoticeKind::TencentSpot]);
    for (what, resp) in [
        ("503", Response::text(503, "busy")),
        ("500", Response::text(500, "oops")),
        ("403", Response::text(403, "forbidden")),
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
            | ("403", ImdsError::Status { status: 403, .. })
            | ("hang", ImdsError::Timeout { .. })
            | ("huge", ImdsError::TooLarge { .. })
            | ("reset" | "garbage", _) => {}
            (w, e) => panic!("{w}: {e:?}"),
        }
        assert!(o.fresh.is_empty(), "{what}");
        assert_eq!(kinds(&o), vec![NoticeKind::TencentSpot], "{what}: kept");
    }
}

// ------------------------------------------------------------------------------------ identity

mod identity {
    use super::*;
    use nthd::testing::notice::Lifecycle;
    use nthd::testing::provider::tencent::CHARGE_TYPE_PATH;
    use nthd_testkit::imds::identity as mock;

    #[test]
    fn the_charge_type_is_the_lifecycle() {
        // Every key as the mock serves it: the contract's `identity_is_read`.
        let m = mock_imds(config(), Some("tencent"));
        let mut p = provider(&m);
        assert_eq!(p.identity().unwrap().lifecycle, Some(Lifecycle::Spot));
        m.set(CHARGE_TYPE_PATH, Response::text(200, "POSTPAID_BY_HOUR"));
        assert_eq!(p.identity().unwrap().lifecycle, Some(Lifecycle::OnDemand));
        m.set(CHARGE_TYPE_PATH, Response::text(200, "CDHPAID"));
        assert_eq!(p.identity().unwrap().lifecycle, None);
    }

    #[test]
    fn a_missing_charge_type_leaves_only_the_lifecycle_unknown() {
        let m = mock_imds(config(), Some("tencent"));
        assert!(m.clear(CHARGE_TYPE_PATH));
        let mut p = provider(&m);
        let id = p.identity().unwrap();
        assert_eq!(id.lifecycle, None);
        assert_eq!(id.instance_id.as_deref(), Some(mock::TENCENT_INSTANCE_ID));
        assert_eq!(id.zone.as_deref(), Some(mock::TENCENT_ZONE));
    }
}
