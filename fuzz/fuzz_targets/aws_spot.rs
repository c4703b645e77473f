//! `parse_spot`: the body of `meta-data/spot/instance-action`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::notice::{NoticeKind, NoticeStatus};
use nthd::testing::provider::aws;
use nthd::testing::timefmt;
use nthd_fuzz::{body, check_notice, clean_id};
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
        let id = match kind {
            NoticeKind::Unknown => format!("aws/spot/unknown/{}", clean_id(&lower)),
            _ => format!("aws/spot/{lower}"),
        };
        assert_eq!(n.id.as_str(), id);
        match obj.get("time") {
            None | Some(Value::Null) => assert_eq!(n.deadline, None),
            Some(Value::String(t)) => assert_eq!(n.deadline, timefmt::parse_any(t), "time {t:?}"),
            Some(other) => panic!("accepted a non-string time {other}"),
        }
    }
    // The fingerprint is the action, never the time (mocks recompute `time` on every read),
    // and one id means one kind: an unrecognised action never takes a recognised one's id.
    let kind_of_id = match n.id.as_str() {
        "aws/spot/terminate" => NoticeKind::SpotTerminate,
        "aws/spot/stop" => NoticeKind::SpotStop,
        "aws/spot/hibernate" => NoticeKind::SpotHibernate,
        id => {
            assert!(id.starts_with("aws/spot/unknown/"), "{id:?}");
            NoticeKind::Unknown
        }
    };
    assert_eq!(n.kind, kind_of_id, "{:?}", n.id);
});
