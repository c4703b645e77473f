//! Tencent Cloud CVM instance metadata (`http://169.254.0.23`, `metadata.tencentyun.com`).
//!
//! One source: `meta-data/spot/termination-time`, polled every `poll_interval`, with no header
//! and no token. It answers 404 unless this is a spot instance about to be reclaimed; then the
//! body is the termination time as `2018-08-18 12:05:33`, with no zone. Tencent's
//! documentation ("Querying the Reclamation Status of a Spot Instance") says it is the OS time
//! of the termination in UTC+8, so nthd reads it as UTC+8 whatever the node's own time zone.
//!
//! The lead time of the notice is not stated in the pages we could read; see
//! [`Cloud::notice_lead_time`] for what nthd assumes.
//!
//! The default endpoint is the address 169.254.0.23, which `metadata.tencentyun.com` (the only
//! name Tencent documents) resolves to on CVM: nthd needs no DNS, and the packaged unit's
//! `IPAddressAllow=` lists it. The host name is accepted through `NTHD_IMDS_ENDPOINT`; it is
//! then resolved through the node's DNS on every new connection.

use std::time::Instant;

use super::identity;
use super::{
    cap_raw, Cloud, Identity, Notice, NoticeKind, NoticeStatus, Observation, Provider,
    TerminationTime, Timings,
};
use crate::imds::{ImdsClient, ImdsError};
use crate::notice::{Lifecycle, NoticeId, SourceId};
use crate::timefmt;

/// Path of the spot termination time.
pub const SPOT_PATH: &str = "/latest/meta-data/spot/termination-time";
/// Path of the instance id (`ins-...`).
pub const INSTANCE_ID_PATH: &str = "/latest/meta-data/instance-id";
/// Path of the instance type (`S5.MEDIUM4`).
pub const INSTANCE_TYPE_PATH: &str = "/latest/meta-data/instance/instance-type";
/// Path of the availability zone (`ap-guangzhou-3`).
pub const ZONE_PATH: &str = "/latest/meta-data/placement/zone";
/// Path of the billing method ("Instance billing plan"), listed with `instance-id` and
/// `placement/zone` in "Querying Instance Metadata",
/// <https://www.tencentcloud.com/document/product/213/4934>.
pub const CHARGE_TYPE_PATH: &str = "/latest/meta-data/payment/charge-type";

const SRC_SPOT: SourceId = SourceId::new("tencent/spot/termination-time");

/// Tencent documents the termination time as UTC+8.
pub const UTC_OFFSET_SECS: i64 = 8 * 3600;

/// The Tencent Cloud provider: its one source, read with no header and no token.
pub struct Tencent {
    spot: TerminationTime,
}

impl Tencent {
    /// A provider that reads through `client`. Nothing is read before the first `observe()`.
    pub fn new(client: ImdsClient, timings: &Timings) -> Tencent {
        let source = (SRC_SPOT, SPOT_PATH);
        Tencent {
            spot: TerminationTime::new(client, source, parse_termination_time, timings),
        }
    }
}

/// Parses a `spot/termination-time` answer: `YYYY-MM-DD HH:MM:SS` in UTC+8, surrounding
/// whitespace allowed. Anything else is a [`ImdsError::Malformed`] naming `url`: the daemon
/// logs it, keeps the last good answer and reads again at the next interval.
pub fn parse_termination_time(url: &str, body: &str) -> Result<Notice, ImdsError> {
    let text = body.trim();
    let Some(deadline) = timefmt::parse_local_datetime(text, UTC_OFFSET_SECS) else {
        return Err(ImdsError::malformed(
            url,
            "expected the spot termination time as YYYY-MM-DD HH:MM:SS (UTC+8), \
             e.g. 2018-08-18 12:05:33",
            body,
        ));
    };
    Ok(Notice {
        kind: NoticeKind::TencentSpot,
        source: SRC_SPOT,
        id: NoticeId::new(Cloud::Tencent, &["spot", "termination"]),
        event_id: None,
        deadline: Some(deadline),
        status: NoticeStatus::Active,
        detail: format!(
            "spot instance termination-time {text} UTC+8 ({})",
            timefmt::format_rfc3339(deadline)
        ),
        raw: cap_raw(body),
    })
}

/// The lifecycle a `payment/charge-type` value names. The metadata page
/// (<https://www.tencentcloud.com/document/product/213/4934>) lists the key but not its
/// values; nthd takes them to be the CVM API's `InstanceChargeType` names ("Data Types",
/// <https://www.tencentcloud.com/document/product/213/15753>): `SPOTPAID` is a spot instance,
/// `POSTPAID_BY_HOUR` (pay as you go) and `PREPAID` (subscription) are regular capacity.
/// Anything else (dedicated hosts and clusters, or another spelling) is unknown.
pub(crate) fn parse_charge_type(value: &str) -> Option<Lifecycle> {
    match value {
        "SPOTPAID" => Some(Lifecycle::Spot),
        "POSTPAID_BY_HOUR" | "PREPAID" => Some(Lifecycle::OnDemand),
        _ => None,
    }
}

/// The identity keys, read one after the other; the billing method through
/// [`parse_charge_type`].
const IDENTITY: identity::Paths = identity::Paths {
    instance_id: INSTANCE_ID_PATH,
    instance_type: INSTANCE_TYPE_PATH,
    zone: ZONE_PATH,
    lifecycle: Some((CHARGE_TYPE_PATH, parse_charge_type)),
};

impl Provider for Tencent {
    const CLOUD: Cloud = Cloud::Tencent;

    fn describe(&self) -> String {
        format!(
            "Tencent Cloud CVM metadata at {}: {}",
            self.spot.client().base(),
            self.spot.every(),
        )
    }

    fn observe(&mut self) -> Observation {
        self.spot.observe(|client, path| client.get(path, &[]))
    }

    fn next_due(&self) -> Instant {
        self.spot.next_due()
    }

    fn identity(&mut self) -> Result<Identity, ImdsError> {
        let c = self.spot.client();
        IDENTITY.read(c, |path| c.get(path, &[]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    const U: &str = "http://169.254.0.23/latest/meta-data/spot/termination-time";

    fn unix(n: &Notice) -> u64 {
        n.deadline
            .unwrap()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    #[test]
    fn charge_types() {
        assert_eq!(parse_charge_type("SPOTPAID"), Some(Lifecycle::Spot));
        assert_eq!(
            parse_charge_type("POSTPAID_BY_HOUR"),
            Some(Lifecycle::OnDemand)
        );
        assert_eq!(parse_charge_type("PREPAID"), Some(Lifecycle::OnDemand));
        assert_eq!(parse_charge_type("CDHPAID"), None);
        assert_eq!(parse_charge_type("spotpaid"), None);
    }

    #[test]
    fn termination_time_is_utc_plus_8() {
        let n = parse_termination_time(U, "2018-08-18 12:05:33").unwrap();
        assert_eq!(n.kind, NoticeKind::TencentSpot);
        assert_eq!(n.id, "tencent/spot/termination");
        assert_eq!(n.source, SRC_SPOT);
        assert_eq!(n.status, NoticeStatus::Active);
        assert_eq!(n.event_id, None);
        // 2018-08-18T04:05:33Z
        assert_eq!(unix(&n), 1_534_565_133);
        assert!(n.detail.contains("UTC+8"), "{}", n.detail);
        assert!(n.detail.contains("2018-08-18T04:05:33Z"), "{}", n.detail);
        assert_eq!(n.raw, "2018-08-18 12:05:33");
    }

    #[test]
    fn early_morning_is_the_previous_day_in_utc() {
        let n = parse_termination_time(U, "2018-08-18 04:05:33").unwrap();
        // 2018-08-17T20:05:33Z
        assert_eq!(unix(&n), 1_534_536_333);
        let n = parse_termination_time(U, "2019-01-01 00:00:00").unwrap();
        // 2018-12-31T16:00:00Z
        assert_eq!(unix(&n), 1_546_272_000);
    }

    #[test]
    fn surrounding_whitespace_is_accepted() {
        for body in [
            "2018-08-18 12:05:33\n",
            "  2018-08-18 12:05:33\r\n",
            "\t2018-08-18 12:05:33 ",
        ] {
            let n = parse_termination_time(U, body).unwrap();
            assert_eq!(unix(&n), 1_534_565_133, "{body:?}");
            assert_eq!(
                n.id, "tencent/spot/termination",
                "the id never holds the time"
            );
        }
    }

    #[test]
    fn malformed_bodies_are_errors_naming_the_url() {
        for body in [
            "",
            "   ",
            "soon",
            "2018-08-18T12:05:33Z",
            "2018-08-18 12:05:33 +0800",
            "2018-08-18 25:05:33",
            "2018-02-29 12:05:33",
            "1970-01-01 07:59:59",
            "<html><body>404 - Not Found</body></html>",
            "é",
            "2018-08-18 12:05:33\n2018-08-18 12:05:34",
            &"9".repeat(5000),
        ] {
            match parse_termination_time(U, body) {
                Err(e @ ImdsError::Malformed { .. }) => {
                    let s = e.to_string();
                    assert!(s.contains(U), "{body:?}: {s}");
                    assert!(s.contains("UTC+8"), "{body:?}: {s}");
                    assert!(s.len() < 400, "the body stays out of the message: {s}");
                }
                other => panic!("{body:?}: {other:?}"),
            }
        }
    }
}
