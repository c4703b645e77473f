//! The exact formats of amazon-ec2-metadata-mock (AEMM), the mock AWS publishes for testing
//! termination handlers, as its documentation shows them (written from the documentation, not
//! its code): tab-indented JSON with no trailing newline, scheduled events as a one-element
//! array with `NotBeforeDeadline` and dates whose day is not zero-padded, an ASG state that
//! stays `Terminated`, and XHTML error pages served as `text/plain`.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::UNIX_EPOCH;

use nthd::testing::notice::NoticeKind;
use nthd::testing::provider::aws::{self, Aws, AwsOptions};
use nthd::testing::provider::{Observation, Provider};
use nthd_testkit::imds::{MockImds, Response};

const SPOT: &str = "{\n\t\"action\": \"terminate\",\n\t\"time\": \"2026-01-07T01:05:47Z\"\n}";
const REBALANCE: &str = "{\n\t\"noticeTime\": \"2026-01-07T01:03:47Z\"\n}";
const SCHEDULED: &str = "[\n\t{\n\t\t\"Code\": \"system-reboot\",\n\t\t\"Description\": \"The \
instance is scheduled for system-reboot\",\n\t\t\"State\": \"active\",\n\t\t\"EventId\": \
\"instance-event-1234567890abcdef0\",\n\t\t\"NotBefore\": \"7 Jan 2026 01:03:47 GMT\",\n\t\t\
\"NotAfter\": \"14 Jan 2026 01:03:47 GMT\",\n\t\t\"NotBeforeDeadline\": \"16 Jan 2026 01:03:47 \
GMT\"\n\t}\n]";

fn xhtml(status: u16, title: &str) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"iso-8859-1\"?>\n<!DOCTYPE html PUBLIC \"-//W3C//DTD \
         XHTML 1.0 Transitional//EN\"\n\t\"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.\
         dtd\">\n<html xmlns=\"http://www.w3.org/1999/xhtml\" xml:lang=\"en\" lang=\"en\">\n \
         <head>\n  <title>{status} - {title}</title>\n </head>\n <body>\n  <h1>{status} - \
         {title}</h1>\n </body>\n</html>"
    );
    Response::status(status)
        .with_body(body)
        .with_header("Content-Type", "text/plain; charset=utf-8")
}

fn provider(m: &MockImds) -> Aws {
    common::provider::aws(common::provider::client(&m.url()), AwsOptions::default())
}

fn unix(o: &Observation, kind: NoticeKind) -> Option<u64> {
    o.notices
        .iter()
        .find(|n| n.kind == kind)
        .and_then(|n| n.deadline)
        .map(|d| d.duration_since(UNIX_EPOCH).unwrap().as_secs())
}

#[test]
fn every_aemm_notice_format_is_read() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(aws::SPOT_PATH, Response::json(200, SPOT));
    m.set(aws::REBALANCE_PATH, Response::json(200, REBALANCE));
    m.set(aws::SCHEDULED_PATH, Response::json(200, SCHEDULED));
    m.set(aws::ASG_PATH, Response::text(200, "Terminated"));
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    // 2026-01-07T01:05:47Z.
    assert_eq!(unix(&o, NoticeKind::SpotTerminate), Some(1_767_747_947));
    // A recommendation, not a deadline: its noticeTime is when it was issued.
    assert!(o.notices.iter().any(|n| n.kind == NoticeKind::Rebalance));
    // "7 Jan 2026 01:03:47 GMT", the day not zero-padded.
    assert_eq!(unix(&o, NoticeKind::ScheduledReboot), Some(1_767_747_827));
    let ev = o
        .notices
        .iter()
        .find(|n| n.kind == NoticeKind::ScheduledReboot)
        .unwrap();
    assert_eq!(
        ev.event_id.as_deref(),
        Some("instance-event-1234567890abcdef0")
    );
    assert!(o.notices.iter().any(|n| n.kind == NoticeKind::AsgTerminate));
}

/// AEMM answers an unset path with an XHTML page as text/plain: that is "no notice", not a
/// malformed answer.
#[test]
fn its_xhtml_404_is_no_notice() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    for path in aws::SOURCE_PATHS {
        m.set(path, xhtml(404, "Not Found"));
    }
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert!(o.notices.is_empty());
    assert_eq!(o.fresh.len(), 4);
}

/// Its 401 (token rejected) uses the same skeleton: nthd fetches a new token and reads again.
#[test]
fn its_xhtml_401_gets_a_new_token() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(
        aws::SPOT_PATH,
        Response::sequence(vec![xhtml(401, "Unauthorized"), Response::json(200, SPOT)]),
    );
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(unix(&o, NoticeKind::SpotTerminate), Some(1_767_747_947));
    assert_eq!(p.tokens_fetched(), 2);
}

/// The ASG state stays `Terminated` once triggered: one notice, read again and again.
#[tokio::test]
async fn a_terminated_asg_state_that_stays_is_one_notice() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(aws::ASG_PATH, Response::text(200, "Terminated"));
    let mut p = provider(&m);
    let mut ids = std::collections::HashSet::new();
    for _ in 0..4 {
        tokio::time::sleep_until(p.next_due().into()).await;
        let o = p.observe();
        for n in &o.notices {
            ids.insert(n.id.clone());
        }
    }
    assert!(m.count(aws::ASG_PATH) >= 2);
    assert_eq!(ids.len(), 1, "{ids:?}");
}
