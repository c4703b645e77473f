//! Azure Scheduled Events: `parse_vm_name`, `parse_document` and `parse_events`.
//!
//! Input: the first line is this VM's name as the metadata service would return it (empty
//! line: the name is not known), the rest is the Scheduled Events document.
//!
//! Besides the usual notice checks: nthd acts only on events that list this VM among their
//! `Resources`; with the name unknown it acts on none.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::notice::{NoticeKind, NoticeStatus};
use nthd::testing::provider::azure::{parse_document, parse_events, parse_vm_name};
use nthd::testing::timefmt;
use nthd_fuzz::{body, check_notice, clean_id};
use serde_json::Value;

const URL: &str = "http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01";
const NAME_URL: &str =
    "http://169.254.169.254/metadata/instance/compute/name?api-version=2021-02-01&format=text";

/// Whether an event (as plain JSON) lists `vm`, the way the Azure documentation describes it.
fn lists(ev: &serde_json::Map<String, Value>, vm: &str) -> bool {
    match ev.get("Resources") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .any(|r| r.trim().eq_ignore_ascii_case(vm)),
        Some(Value::String(s)) => s.trim().eq_ignore_ascii_case(vm),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = body(data) else { return };
    let (line, doc) = input.split_once('\n').unwrap_or(("", input));

    let vm = match parse_vm_name(NAME_URL, line) {
        Ok(name) => {
            assert_eq!(name, line.trim());
            assert!(!name.is_empty() && name.len() <= 256);
            assert!(!name.chars().any(|c| c.is_control() || c.is_whitespace()));
            Some(name)
        }
        Err(e) => {
            assert!(e.to_string().contains(NAME_URL), "{e}");
            None
        }
    };

    let parsed = parse_document(URL, doc);
    let notices = match parse_events(URL, doc, vm.as_deref()) {
        Ok(n) => n,
        Err(e) => {
            assert!(
                parsed.is_err(),
                "parse_events failed where parse_document did not: {e}"
            );
            assert!(e.to_string().contains(URL), "{e}");
            return;
        }
    };
    let document = parsed.expect("parse_events succeeded, so parse_document does");
    for ev in &document.events {
        if let Some(id) = &ev.event_id {
            assert!(!id.is_empty() && id.len() <= 256, "{id:?}");
            assert!(id.bytes().all(|b| b.is_ascii_graphic()), "{id:?}");
        }
        assert!(ev.resources.iter().all(|r| !r.is_empty() && r.trim() == r));
    }
    let Some(vm) = vm else {
        assert!(
            notices.is_empty(),
            "acted on events with the VM name unknown"
        );
        return;
    };

    // Independent reading of the same document.
    let v: Value = serde_json::from_str(doc).expect("parse_document accepted invalid JSON");
    let events = v["Events"].as_array().expect("an Events array");
    let mine: Vec<&serde_json::Map<String, Value>> = events
        .iter()
        .map(|e| e.as_object().expect("every event is an object"))
        .filter(|e| lists(e, &vm))
        .collect();
    assert_eq!(
        notices.len(),
        mine.len(),
        "notices for {vm:?}: {notices:?} from {doc:?}"
    );
    for (n, ev) in notices.iter().zip(mine) {
        check_notice(n, "azure/", "azure/scheduledevents", "");
        assert_eq!(n.status, NoticeStatus::Active);
        let text = |k: &str| ev.get(k).and_then(Value::as_str).map(str::trim);
        let kind = match text("EventType")
            .unwrap_or("")
            .to_ascii_lowercase()
            .as_str()
        {
            "preempt" => NoticeKind::AzurePreempt,
            "terminate" => NoticeKind::AzureTerminate,
            "reboot" => NoticeKind::AzureReboot,
            "redeploy" => NoticeKind::AzureRedeploy,
            "freeze" => NoticeKind::AzureFreeze,
            _ => NoticeKind::Unknown,
        };
        assert_eq!(n.kind, kind);
        let not_before = text("NotBefore").unwrap_or("");
        let deadline = if not_before.is_empty() {
            None
        } else {
            timefmt::parse_any(not_before)
        };
        assert_eq!(n.deadline, deadline, "NotBefore {not_before:?}");
        let event_id = text("EventId")
            .filter(|s| !s.is_empty() && s.len() <= 256 && s.bytes().all(|b| b.is_ascii_graphic()));
        assert_eq!(n.event_id.as_deref(), event_id);
        if let Some(e) = event_id {
            assert_eq!(n.id.as_str(), format!("azure/{}", clean_id(e)));
        } else {
            assert!(n.id.as_str().starts_with("azure/noid/"), "{}", n.id);
        }
    }
});
