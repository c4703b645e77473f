//! `parse_spot`: the body of `meta-data/spot/instance-action`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::provider::{aws, NoticeKind, NoticeStatus};
use nthd::timefmt;
use nthd_fuzz::{body, check_notice, sanitize};
use serde_json::Value;

const URL: &str = "http://169.254.169.254/latest/meta-data/spot/instance-action";

fuzz_target!(|data: &[u8]| {
    let Some(body) = body(data) else { return };
    let n = match aws::parse_spot(URL, body) {
        Ok(n) => n,
        Err(e) => {
            assert!(e.to_string().contains(URL), "{e}");
            return;
        }
    };
    check_notice(&n, "aws/spot/", "aws/spot/instance-action", body);
    assert_eq!(n.status, NoticeStatus::Active);
    assert_eq!(n.event_id, None);
    // The fingerprint is the action, never the time (mocks recompute `time` on every read).
    let expected_kind = match n.id.as_str() {
        "aws/spot/terminate" => NoticeKind::SpotTerminate,
        "aws/spot/stop" => NoticeKind::SpotStop,
        "aws/spot/hibernate" => NoticeKind::SpotHibernate,
        _ => NoticeKind::Unknown,
    };
    assert!(
        matches!(
            n.kind,
            NoticeKind::SpotTerminate
                | NoticeKind::SpotStop
                | NoticeKind::SpotHibernate
                | NoticeKind::Unknown
        ),
        "{:?}",
        n.kind
    );
    // Differential check against a plain JSON parse, for the usual object form. (serde also
    // accepts a struct as an array, and the JSON `Value` parser has a depth limit that skipped
    // unknown fields do not: both are left out.)
    if let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(body) {
        let action = obj
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("accepted without a string action: {body:?}"));
        let lower = action.trim().to_ascii_lowercase();
        let kind = match lower.as_str() {
            "terminate" => NoticeKind::SpotTerminate,
            "stop" => NoticeKind::SpotStop,
            "hibernate" => NoticeKind::SpotHibernate,
            _ => NoticeKind::Unknown,
        };
        assert_eq!(n.kind, kind, "action {action:?}");
        assert_eq!(n.id, format!("aws/spot/{}", sanitize(&lower)));
        match obj.get("time") {
            None | Some(Value::Null) => assert_eq!(n.deadline, None),
            Some(Value::String(t)) => assert_eq!(n.deadline, timefmt::parse_any(t), "time {t:?}"),
            Some(other) => panic!("accepted a non-string time {other}"),
        }
    }
    // One id, one kind: an unrecognised action must not take the id of a recognised one.
    if n.kind != expected_kind && (nthd_fuzz::strict() || n.kind != NoticeKind::Unknown) {
        panic!(
            "id {:?} belongs to {expected_kind:?} but the notice is {:?}",
            n.id, n.kind
        );
    }
});
