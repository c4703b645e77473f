//! `parse_termination_time`: the body of Tencent's `spot/termination-time`. A body that is
//! `YYYY-MM-DD HH:MM:SS` (surrounding whitespace allowed) is a notice whose deadline is that
//! time taken as UTC+8; anything else is a `Malformed` error naming the URL. Never a panic.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use nthd::testing::imds::ImdsError;
use nthd::testing::notice::{NoticeKind, NoticeStatus};
use nthd::testing::provider::tencent::{parse_termination_time, UTC_OFFSET_SECS};
use nthd::testing::timefmt;
use nthd_fuzz::{body, check_notice};

const URL: &str = "http://169.254.0.23/latest/meta-data/spot/termination-time";

fuzz_target!(|data: &[u8]| {
    let Some(body) = body(data) else { return };
    let expected = timefmt::parse_local_datetime(body, UTC_OFFSET_SECS);
    match parse_termination_time(URL, body) {
        Ok(n) => {
            check_notice(
                &n,
                "tencent/spot/termination",
                "tencent/spot/termination-time",
                body,
            );
            assert_eq!(n.id, "tencent/spot/termination");
            assert_eq!(n.kind, NoticeKind::TencentSpot);
            assert_eq!(n.status, NoticeStatus::Active);
            assert_eq!(n.event_id, None);
            let deadline = n.deadline.expect("a parsed notice has a deadline");
            assert_eq!(Some(deadline), expected);
            // The same wall-clock text read as UTC is exactly 8 hours later (unless that runs
            // past 9999-12-30T22:00:00Z, the end of jiff's range).
            if let Some(as_utc) = timefmt::parse_local_datetime(body, 0) {
                assert_eq!(as_utc, deadline + Duration::from_secs(8 * 3600), "{body:?}");
            }
        }
        Err(ImdsError::Malformed { url, .. }) => {
            assert_eq!(url, URL);
            assert_eq!(expected, None, "{body:?} parses but was refused");
        }
        Err(e) => panic!("{body:?}: unexpected error {e:?}"),
    }
});
