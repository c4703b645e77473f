//! `nthd once`: the notice and the decision, printed, with the exit code telling whether the
//! metadata service answered.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};

fn once(url: &str, extra: &[&str]) -> std::process::Output {
    common::nthd_once("aws", url, extra)
}

#[test]
fn prints_the_spot_notice_and_the_decision() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(
        aws::SPOT_PATH,
        Response::json(
            200,
            r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#,
        ),
    );
    m.set(
        aws::REBALANCE_PATH,
        Response::json(200, r#"{"noticeTime":"2030-01-01T00:00:00Z"}"#),
    );
    let out = once(&m.url(), &[]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{s}");
    assert!(s.contains("cloud: aws (set by --provider"), "{s}");
    assert!(
        s.contains(
            "notice: spot-terminate — spot instance-action terminate at 2030-01-01T00:02:00Z"
        ),
        "{s}"
    );
    assert!(s.contains("decision: poweroff now"), "{s}");
    assert!(
        s.contains("notice: rebalance") && s.contains("decision: log now"),
        "{s}"
    );
    assert!(
        s.contains("using the fallback drain budget"),
        "logind is not reachable here: {s}"
    );

    let out = once(&m.url(), &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["cloud"], "aws");
    let spot = v["notices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "spot-terminate")
        .unwrap();
    assert_eq!(spot["action"], "poweroff");
    assert_eq!(spot["when"], "now");
    assert_eq!(spot["deadline"], "2030-01-01T00:02:00Z");
}

#[test]
fn no_notice_and_unreachable() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let out = once(&m.url(), &[]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("notices: none"));
    let out = once("http://127.0.0.1:9", &[]);
    assert!(
        !out.status.success(),
        "exit non-zero when the metadata service does not answer"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("error: aws/"));
}

/// Azure's first Scheduled Events call can take minutes; `nthd once` waits for it (past the
/// daemon's 10 s per-observation patience) instead of printing a timeout.
#[test]
fn waits_for_azures_slow_first_answer() {
    use nthd::testing::provider::azure::{EVENTS_PATH, NAME_PATH};
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(NAME_PATH, Response::text(200, "vm1"));
    let events = serde_json::json!({
        "DocumentIncarnation": 2,
        "Events": [{
            "EventId": "E1", "EventType": "Preempt", "ResourceType": "VirtualMachine",
            "Resources": ["vm1"], "EventStatus": "Scheduled",
            "NotBefore": "Mon, 01 Jan 2030 00:00:30 GMT", "Description": "spot eviction",
            "EventSource": "Platform", "DurationInSeconds": -1,
        }],
    });
    m.set(
        EVENTS_PATH,
        Response::json(200, events.to_string()).with_delay(11_500),
    );
    let t = std::time::Instant::now();
    let out = common::nthd_once("azure", &m.url(), &[]);
    let s = String::from_utf8_lossy(&out.stdout);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{s}\n{e}");
    assert!(t.elapsed() >= std::time::Duration::from_millis(11_000));
    assert!(
        e.contains("waiting for the metadata service's first answer"),
        "{e}"
    );
    assert!(s.contains("notice: azure-preempt"), "{s}");
    assert!(s.contains("decision: poweroff now"), "{s}");
    assert!(!s.contains("error:"), "{s}");
}

/// Nothing listening: no "notices: none" (nothing was read), exit 1, the shared error once,
/// and advice about the endpoint that was set rather than "set NTHD_IMDS_ENDPOINT".
#[test]
fn nothing_listening_is_unknown_not_none() {
    let port = common::free_port();
    let out = once(&format!("http://127.0.0.1:{port}"), &[]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{s}");
    assert!(!s.contains("notices: none"), "{s}");
    assert!(
        s.contains("notices: unknown: no source could be read"),
        "{s}"
    );
    let errors: Vec<&str> = s.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(
        errors.len(),
        1,
        "one line for the one failing token request: {s}"
    );
    assert!(
        errors[0].contains("aws/spot/instance-action, aws/autoscaling"),
        "{s}"
    );
    assert!(!s.contains("or set NTHD_IMDS_ENDPOINT"), "{s}");
    assert!(
        s.contains("listens at the address NTHD_IMDS_ENDPOINT names"),
        "{s}"
    );
}
