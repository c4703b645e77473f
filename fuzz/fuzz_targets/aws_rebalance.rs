//! `parse_rebalance`: the body of `meta-data/events/recommendations/rebalance`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::notice::{NoticeKind, NoticeStatus};
use nthd::testing::provider::aws;
use nthd_fuzz::{body, check_notice};
use serde_json::Value;

const URL: &str = "http://169.254.169.254/latest/meta-data/events/recommendations/rebalance";

fuzz_target!(|data: &[u8]| {
    let Some(body) = body(data) else { return };
    let n = match aws::parse_rebalance(URL, body) {
        Ok(n) => n,
        Err(e) => {
            assert!(e.to_string().contains(URL), "{e}");
            return;
        }
    };
    check_notice(
        &n,
        "aws/rebalance",
        "aws/events/recommendations/rebalance",
        body,
    );
    assert_eq!(n.id, "aws/rebalance");
    assert_eq!(n.kind, NoticeKind::Rebalance);
    assert_eq!(n.status, NoticeStatus::Active);
    assert_eq!(n.deadline, None, "a recommendation has no deadline");
    assert_eq!(n.event_id, None);
    if let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(body) {
        match obj.get("noticeTime") {
            None | Some(Value::Null) => assert!(n.detail.ends_with("(no time)")),
            Some(Value::String(t)) => assert!(n.detail.ends_with(t.as_str()), "{}", n.detail),
            Some(other) => panic!("accepted a non-string noticeTime {other}"),
        }
    }
});
