//! `parse_termination_time`: the body of Alibaba's `spot/termination-time`. Any answer is a
//! notice (the endpoint exists only while a termination is scheduled); the deadline is the
//! parsed time, or none ("now") when it does not parse.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::notice::{NoticeKind, NoticeStatus};
use nthd::testing::provider::alibaba::parse_termination_time;
use nthd::testing::timefmt;
use nthd_fuzz::{body, check_notice};

const URL: &str = "http://100.100.100.200/latest/meta-data/instance/spot/termination-time";

fuzz_target!(|data: &[u8]| {
    let Some(body) = body(data) else { return };
    let n = parse_termination_time(URL, body).expect("parse_termination_time never fails");
    check_notice(
        &n,
        "alibaba/spot/termination",
        "alibaba/spot/termination-time",
        body,
    );
    assert_eq!(n.id, "alibaba/spot/termination");
    assert_eq!(n.kind, NoticeKind::AlibabaSpot);
    assert_eq!(n.status, NoticeStatus::Active);
    assert_eq!(n.event_id, None);
    assert_eq!(n.deadline, timefmt::parse_any(body.trim()));
});
