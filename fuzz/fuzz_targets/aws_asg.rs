//! `parse_asg`: the body of `meta-data/autoscaling/target-lifecycle-state`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::notice::{NoticeKind, NoticeStatus};
use nthd::testing::provider::aws;
use nthd_fuzz::{body, check_notice};

const URL: &str = "http://169.254.169.254/latest/meta-data/autoscaling/target-lifecycle-state";

fuzz_target!(|data: &[u8]| {
    let Some(body) = body(data) else { return };
    let state = body.trim();
    let valid =
        !state.is_empty() && state.len() <= 64 && state.bytes().all(|b| b.is_ascii_graphic());
    match aws::parse_asg(URL, body) {
        Err(e) => {
            assert!(!valid, "{state:?} rejected: {e}");
            assert!(e.to_string().contains(URL), "{e}");
        }
        Ok(None) => assert_eq!(state, "InService"),
        Ok(Some(n)) => {
            assert!(valid && state != "InService", "{state:?} accepted");
            check_notice(
                &n,
                "aws/asg/",
                "aws/autoscaling/target-lifecycle-state",
                body,
            );
            assert_eq!(n.id.as_str(), format!("aws/asg/{state}"));
            let kind = match state {
                "Terminated" | "Warmed:Terminated" => NoticeKind::AsgTerminate,
                _ => NoticeKind::AsgOther,
            };
            assert_eq!(n.kind, kind);
            assert_eq!(n.status, NoticeStatus::Active);
            assert_eq!(n.deadline, None);
        }
    }
});
