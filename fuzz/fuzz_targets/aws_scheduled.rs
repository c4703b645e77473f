//! `parse_scheduled`: the body of `meta-data/events/maintenance/scheduled`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::notice::{NoticeKind, NoticeStatus, RAW_CAP};
use nthd::testing::provider::aws;
use nthd::testing::timefmt;
use nthd_fuzz::{body, check_notice, clean_id};
use serde_json::Value;

const URL: &str = "http://169.254.169.254/latest/meta-data/events/maintenance/scheduled";

fn text<'a>(obj: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a str> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => panic!("accepted a non-string {key}: {other}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(body) = body(data) else { return };
    let notices = match aws::parse_scheduled(URL, body) {
        Ok(v) => v,
        Err(e) => {
            assert!(e.to_string().contains(URL), "{e}");
            return;
        }
    };
    for n in &notices {
        // `raw` is the event re-serialised, not the body: pass "" so it is not compared.
        check_notice(n, "aws/scheduled/", "aws/events/maintenance/scheduled", "");
        if n.raw.len() <= RAW_CAP {
            let raw: Value = serde_json::from_str(&n.raw)
                .unwrap_or_else(|e| panic!("raw {:?} is not JSON: {e}", n.raw));
            assert!(raw.is_object());
        }
    }
    let Ok(Value::Array(events)) = serde_json::from_str::<Value>(body) else {
        return;
    };
    assert_eq!(events.len(), notices.len());
    for (ev, n) in events.iter().zip(&notices) {
        let Value::Object(obj) = ev else { continue };
        let code = text(obj, "Code").unwrap_or("").trim().to_ascii_lowercase();
        let kind = match code.as_str() {
            "instance-stop" | "instance-retirement" => NoticeKind::ScheduledStop,
            "instance-reboot" | "system-reboot" => NoticeKind::ScheduledReboot,
            "system-maintenance" => NoticeKind::ScheduledMaintenance,
            _ => NoticeKind::Unknown,
        };
        assert_eq!(n.kind, kind, "Code {code:?}");
        let status = match text(obj, "State")
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
            .as_str()
        {
            "canceled" | "cancelled" => NoticeStatus::Canceled,
            "completed" => NoticeStatus::Completed,
            _ => NoticeStatus::Active,
        };
        assert_eq!(n.status, status);
        let not_before = text(obj, "NotBefore");
        assert_eq!(n.deadline, not_before.and_then(timefmt::parse_any));
        let event_id = text(obj, "EventId")
            .map(str::trim)
            .filter(|s| !s.is_empty());
        assert_eq!(n.event_id.as_deref(), event_id);
        let id = match event_id {
            Some(e) => format!("aws/scheduled/{}", clean_id(e)),
            None => format!(
                "aws/scheduled/{}/{}",
                clean_id(&code),
                clean_id(not_before.unwrap_or(""))
            ),
        };
        assert_eq!(n.id.as_str(), id);
        for key in ["Description", "NotAfter", "NotBeforeDeadline"] {
            let _ = text(obj, key);
        }
    }
});
