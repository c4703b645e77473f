//! `parse_preempted` and `parse_maintenance_event`: the GCP metadata values, both on the same
//! body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::notice::{NoticeKind, NoticeStatus};
use nthd::testing::provider::gcp::{parse_maintenance_event, parse_preempted};
use nthd_fuzz::{body, check_notice};

const PREEMPTED: &str = "http://169.254.169.254/computeMetadata/v1/instance/preempted";
const MAINTENANCE: &str = "http://169.254.169.254/computeMetadata/v1/instance/maintenance-event";

fuzz_target!(|data: &[u8]| {
    let Some(body) = body(data) else { return };
    let v = body.trim();
    let token = !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic());

    match parse_preempted(PREEMPTED, body) {
        Err(e) => {
            assert!(
                !token || !(v.eq_ignore_ascii_case("TRUE") || v.eq_ignore_ascii_case("FALSE")),
                "{v:?} rejected: {e}"
            );
            assert!(e.to_string().contains(PREEMPTED), "{e}");
        }
        Ok(None) => assert!(v.eq_ignore_ascii_case("FALSE"), "{v:?} taken as FALSE"),
        Ok(Some(n)) => {
            assert!(v.eq_ignore_ascii_case("TRUE"), "{v:?} taken as TRUE");
            check_notice(&n, "gcp/preempted", "gcp/instance/preempted", body);
            assert_eq!(n.id, "gcp/preempted");
            assert_eq!(n.kind, NoticeKind::GcpPreempt);
            assert_eq!(
                (n.status, n.deadline, n.event_id),
                (NoticeStatus::Active, None, None)
            );
        }
    }

    match parse_maintenance_event(MAINTENANCE, body) {
        Err(e) => {
            assert!(!token, "{v:?} rejected: {e}");
            assert!(e.to_string().contains(MAINTENANCE), "{e}");
        }
        Ok(None) => assert_eq!(v, "NONE"),
        Ok(Some(n)) => {
            assert!(token && v != "NONE", "{v:?} accepted");
            check_notice(
                &n,
                "gcp/maintenance-event/",
                "gcp/instance/maintenance-event",
                body,
            );
            assert_eq!(n.id.as_str(), format!("gcp/maintenance-event/{v}"));
            let kind = match v {
                "TERMINATE_ON_HOST_MAINTENANCE" => NoticeKind::GcpTerminateMaintenance,
                "MIGRATE_ON_HOST_MAINTENANCE" => NoticeKind::GcpMigrate,
                _ => NoticeKind::Unknown,
            };
            assert_eq!(n.kind, kind);
            assert_eq!(
                (n.status, n.deadline, n.event_id),
                (NoticeStatus::Active, None, None)
            );
        }
    }
});
