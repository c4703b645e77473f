//! The Azure provider against the in-process mock IMDS: Scheduled Events for this VM and
//! others, the VM name, acknowledgement, faults. What every provider does (no notice, identity,
//! hostile values, nothing answering) is in tests/provider_contract.rs.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, Instant};

use common::provider::{client, kinds, observe_until};
use nthd::testing::imds::ImdsError;
use nthd::testing::notice::{NoticeKind, NoticeStatus};
use nthd::testing::provider::azure::{Azure, EVENTS_PATH, NAME_PATH};
use nthd::testing::provider::Provider;
use nthd_testkit::imds::{Fault, MockImds, Response};

fn provider(m: &MockImds) -> Azure {
    common::provider::azure(client(&m.url()), Duration::from_millis(50))
}

fn event(id: &str, kind: &str, resources: &[&str], status: &str, not_before: &str) -> String {
    serde_json::json!({
        "EventId": id,
        "EventType": kind,
        "ResourceType": "VirtualMachine",
        "Resources": resources,
        "EventStatus": status,
        "NotBefore": not_before,
        "Description": "test event",
        "EventSource": "Platform",
        "DurationInSeconds": -1,
    })
    .to_string()
}

fn doc(events: &[String]) -> Response {
    Response::json(
        200,
        format!(
            r#"{{"DocumentIncarnation": 2, "Events": [{}]}}"#,
            events.join(",")
        ),
    )
}

fn mock(name: &str, events: &[String]) -> MockImds {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(NAME_PATH, Response::text(200, name));
    m.set(EVENTS_PATH, doc(events));
    m
}

#[test]
fn event_for_this_vm_is_a_notice() {
    let m = mock(
        "vm1",
        &[event(
            "E-PREEMPT",
            "Preempt",
            &["vm1"],
            "Scheduled",
            "Mon, 19 Sep 2016 18:29:47 GMT",
        )],
    );
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(o.fresh, ["azure/scheduledevents"]);
    assert_eq!(kinds(&o), vec![NoticeKind::AzurePreempt]);
    let n = &o.notices[0];
    assert_eq!(n.id, "azure/E-PREEMPT");
    assert_eq!(n.event_id.as_deref(), Some("E-PREEMPT"));
    assert_eq!(n.status, NoticeStatus::Active);
    assert!(n.deadline.is_some());
    assert!(n.detail.contains("Scheduled"), "{}", n.detail);
    assert_eq!(p.vm_name(), Some("vm1"));
    // Headers and API versions; the name is read once and cached.
    for _ in 0..3 {
        observe_until(&mut p, |o| o.fresh.len() == 1);
    }
    assert_eq!(m.count(NAME_PATH), 1);
    let name_req = &m.requests_for(NAME_PATH)[0];
    assert_eq!(name_req.header("Metadata"), Some("true"));
    assert_eq!(
        name_req.query_param("api-version").as_deref(),
        Some("2021-02-01")
    );
    assert_eq!(name_req.query_param("format").as_deref(), Some("text"));
    let ev = m.requests_for(EVENTS_PATH);
    assert_eq!(ev.len(), 4);
    for r in &ev {
        assert_eq!(r.method, "GET");
        assert_eq!(r.header("Metadata"), Some("true"));
        assert_eq!(r.query_param("api-version").as_deref(), Some("2020-07-01"));
        assert_eq!(r.status, Some(200), "{r:?}");
    }
}

#[test]
fn every_event_type() {
    let events: Vec<String> = [
        ("P", "Preempt"),
        ("T", "Terminate"),
        ("R", "Reboot"),
        ("D", "Redeploy"),
        ("F", "Freeze"),
        ("X", "Hibernate"),
    ]
    .iter()
    .map(|(id, t)| event(id, t, &["vm1"], "Scheduled", ""))
    .collect();
    let m = mock("vm1", &events);
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(
        kinds(&o),
        vec![
            NoticeKind::AzurePreempt,
            NoticeKind::AzureTerminate,
            NoticeKind::AzureReboot,
            NoticeKind::AzureRedeploy,
            NoticeKind::AzureFreeze,
            NoticeKind::Unknown,
        ]
    );
    for n in &o.notices {
        assert!(n.deadline.is_none(), "empty NotBefore means now");
        assert!(n.id.as_str().starts_with("azure/"));
    }
}

#[test]
fn events_for_other_vms_are_ignored() {
    let m = mock(
        "vm1",
        &[
            event("A", "Preempt", &["vm2"], "Scheduled", ""),
            event("B", "Terminate", &["vm3", "vm4"], "Started", ""),
            event("C", "Reboot", &[], "Scheduled", ""),
            event("D", "Redeploy", &["vm10"], "Scheduled", ""),
        ],
    );
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert!(o.notices.is_empty(), "{:?}", o.notices);
    assert_eq!(o.fresh, ["azure/scheduledevents"]);
}

#[test]
fn vm_names_compare_case_insensitively() {
    let m = mock(
        "MyVm-01",
        &[
            event("A", "Preempt", &["other", "myvm-01"], "Scheduled", ""),
            event("B", "Freeze", &["MYVM-01"], "Scheduled", ""),
        ],
    );
    let mut p = provider(&m);
    let o = p.observe();
    assert_eq!(
        kinds(&o),
        vec![NoticeKind::AzurePreempt, NoticeKind::AzureFreeze]
    );
}

#[test]
fn no_document_events_means_none_and_gone() {
    let m = mock("vm1", &[event("A", "Reboot", &["vm1"], "Scheduled", "")]);
    let mut p = provider(&m);
    assert_eq!(kinds(&p.observe()), vec![NoticeKind::AzureReboot]);
    // Started: NotBefore becomes empty; same fingerprint.
    m.set(
        EVENTS_PATH,
        doc(&[event("A", "Reboot", &["vm1"], "Started", "")]),
    );
    let o = observe_until(&mut p, |o| {
        o.notices.iter().any(|n| n.detail.contains("Started"))
    });
    assert_eq!(o.notices[0].id, "azure/A");
    assert!(o.notices[0].deadline.is_none());
    // Finished: no events.
    m.set(EVENTS_PATH, doc(&[]));
    let o = observe_until(&mut p, |o| o.notices.is_empty());
    assert_eq!(
        o.fresh,
        ["azure/scheduledevents"],
        "an empty document is a fresh 'none'"
    );
}

#[test]
fn unknown_vm_name_never_acts_and_recovers() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.set(NAME_PATH, Response::text(500, "busy"));
    m.set(
        EVENTS_PATH,
        doc(&[event("A", "Preempt", &["vm1"], "Scheduled", "")]),
    );
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.notices.is_empty(), "never act while the name is unknown");
    assert_eq!(o.fresh, ["azure/scheduledevents"]);
    assert_eq!(o.errors.len(), 1, "{o:?}");
    assert_eq!(o.errors[0].source, "azure/instance/compute/name");
    assert!(matches!(
        o.errors[0].error,
        ImdsError::Status { status: 500, .. }
    ));
    assert_eq!(p.vm_name(), None);
    // A malformed name is not taken either.
    m.set(NAME_PATH, Response::text(200, "two words"));
    observe_until(&mut p, |o| {
        o.errors
            .iter()
            .any(|e| matches!(e.error, ImdsError::Malformed { .. }))
    });
    assert!(p.acknowledge(&["A".to_string()]).unwrap() == 0);
    // Once the name can be read, the same event is acted on.
    m.set(NAME_PATH, Response::text(200, "vm1"));
    let o = observe_until(&mut p, |o| !o.notices.is_empty());
    assert_eq!(kinds(&o), vec![NoticeKind::AzurePreempt]);
    assert_eq!(p.vm_name(), Some("vm1"));
}

#[test]
fn acknowledge_posts_exactly_the_acted_ids() {
    let m = mock(
        "vm1",
        &[
            event("A", "Preempt", &["vm1"], "Scheduled", ""),
            event("B", "Terminate", &["vm2", "vm1"], "Scheduled", ""),
            event("C", "Reboot", &["vm2"], "Scheduled", ""),
        ],
    );
    let mut p = provider(&m);
    let o = p.observe();
    assert_eq!(o.notices.len(), 2);
    let posts = || {
        m.requests_for(EVENTS_PATH)
            .into_iter()
            .filter(|r| r.method == "POST")
            .collect::<Vec<_>>()
    };
    // Only A: C is another VM's event, Z was never seen.
    let n = p
        .acknowledge(&["A".into(), "C".into(), "Z".into(), "A".into()])
        .unwrap();
    assert_eq!(n, 1);
    let sent = posts();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("Metadata"), Some("true"));
    assert_eq!(
        sent[0].query_param("api-version").as_deref(),
        Some("2020-07-01")
    );
    assert_eq!(sent[0].status, Some(200));
    let body: serde_json::Value = serde_json::from_str(&sent[0].body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"StartRequests": [{"EventId": "A"}]})
    );
    // Refused entirely: nothing is posted.
    assert_eq!(p.acknowledge(&["C".into(), "Z".into()]).unwrap(), 0);
    assert_eq!(p.acknowledge(&[]).unwrap(), 0);
    assert_eq!(posts().len(), 1);
    // Both of this VM's events.
    assert_eq!(p.acknowledge(&["B".into(), "A".into()]).unwrap(), 2);
    let sent = posts();
    assert_eq!(sent.len(), 2);
    let body: serde_json::Value = serde_json::from_str(&sent[1].body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"StartRequests": [{"EventId": "B"}, {"EventId": "A"}]})
    );
    // Events no longer listed are not acknowledged.
    m.set(EVENTS_PATH, doc(&[]));
    observe_until(&mut p, |o| o.notices.is_empty());
    assert_eq!(p.acknowledge(&["A".into()]).unwrap(), 0);
    assert_eq!(posts().len(), 2);
}

#[test]
fn acknowledge_before_any_read_refuses() {
    let m = mock("vm1", &[event("A", "Preempt", &["vm1"], "Scheduled", "")]);
    let mut p = provider(&m);
    assert_eq!(p.acknowledge(&["A".into()]).unwrap(), 0);
    assert!(m.requests().is_empty());
}

#[test]
fn acknowledge_reports_errors() {
    let m = mock("vm1", &[event("A", "Preempt", &["vm1"], "Scheduled", "")]);
    let mut p = provider(&m);
    p.observe();
    drop(m);
    let e = p.acknowledge(&["A".into()]).unwrap_err();
    assert!(
        matches!(e, ImdsError::Connect { .. } | ImdsError::Timeout { .. }),
        "{e:?}"
    );
}

#[test]
fn server_errors_keep_the_last_document() {
    let m = mock("vm1", &[event("A", "Terminate", &["vm1"], "Scheduled", "")]);
    let mut p = provider(&m);
    assert_eq!(kinds(&p.observe()), vec![NoticeKind::AzureTerminate]);
    for status in [500, 503, 410, 404, 400] {
        m.set(EVENTS_PATH, Response::json(status, "{}"));
        let o = observe_until(&mut p, |o| !o.ok());
        assert!(
            matches!(o.errors[0].error, ImdsError::Status { status: s, .. } if s == status),
            "{status}: {:?}",
            o.errors
        );
        assert!(o.fresh.is_empty());
        assert_eq!(kinds(&o), vec![NoticeKind::AzureTerminate], "{status}");
    }
    // Backing off, but still polling.
    assert!(p.next_due() > Instant::now());
    m.set(EVENTS_PATH, doc(&[]));
    observe_until(&mut p, |o| o.ok() && o.notices.is_empty());
}

#[test]
fn malformed_and_oversized_documents_are_errors() {
    let m = mock("vm1", &[event("A", "Preempt", &["vm1"], "Scheduled", "")]);
    let mut p = provider(&m);
    assert_eq!(kinds(&p.observe()), vec![NoticeKind::AzurePreempt]);
    for (what, resp) in [
        (
            "broken JSON",
            Response::json(200, r#"{"Events":[{"EventId":"#),
        ),
        ("wrong shape", Response::json(200, r#"[1,2,3]"#)),
        (
            "no Events",
            Response::json(200, r#"{"DocumentIncarnation":1}"#),
        ),
        ("html", Response::text(200, "<html>hi</html>")),
        ("huge", Response::huge(32 * 1024 * 1024)),
        ("garbage", Response::fault(Fault::Garbage)),
        (
            "truncated",
            doc(&[event("A", "Preempt", &["vm1"], "Scheduled", "")]).with_fault(Fault::Truncate),
        ),
    ] {
        m.set(EVENTS_PATH, resp);
        let o = observe_until(&mut p, |o| !o.ok());
        if what == "huge" {
            assert!(
                matches!(o.errors[0].error, ImdsError::TooLarge { .. }),
                "{:?}",
                o.errors
            );
        }
        assert!(o.fresh.is_empty(), "{what}");
        assert_eq!(
            kinds(&o),
            vec![NoticeKind::AzurePreempt],
            "{what}: last state kept"
        );
    }
}

#[test]
fn slow_first_call_gets_a_long_timeout_later_ones_do_not() {
    let m = mock("vm1", &[event("A", "Preempt", &["vm1"], "Scheduled", "")]);
    // 1.5 s is three times the client's request timeout; the first call is still waited for.
    m.set(
        EVENTS_PATH,
        doc(&[event("A", "Preempt", &["vm1"], "Scheduled", "")]).with_delay(1500),
    );
    let mut p = provider(&m);
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::AzurePreempt]);
    // After that, the ordinary timeout applies.
    let o = observe_until(&mut p, |o| !o.ok());
    assert!(
        matches!(o.errors[0].error, ImdsError::Timeout { .. }),
        "{:?}",
        o.errors
    );
    assert_eq!(kinds(&o), vec![NoticeKind::AzurePreempt]);
}

#[test]
fn hang_after_the_first_answer_times_out() {
    let m = mock("vm1", &[]);
    let mut p = provider(&m);
    assert!(p.observe().ok());
    m.set(EVENTS_PATH, Response::fault(Fault::Hang));
    let t = Instant::now();
    let o = observe_until(&mut p, |o| !o.ok());
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(matches!(o.errors[0].error, ImdsError::Timeout { .. }));
}

/// The first call may take up to two minutes; `observe()` must not block that long (the
/// daemon's watchdog would fire), and the slow answer must not be lost.
#[test]
fn very_slow_first_call_spans_observations() {
    let m = mock("vm1", &[]);
    m.set(
        EVENTS_PATH,
        doc(&[event("A", "Preempt", &["vm1"], "Scheduled", "")]).with_delay(11_500),
    );
    let mut p = provider(&m);
    let t = Instant::now();
    let o = p.observe();
    let first = t.elapsed();
    assert!(
        first >= Duration::from_secs(9) && first < Duration::from_secs(11),
        "{first:?}"
    );
    assert!(o.fresh.is_empty() && o.notices.is_empty());
    assert!(
        matches!(o.errors[0].error, ImdsError::Timeout { .. }),
        "{o:?}"
    );
    assert!(
        p.next_due() <= Instant::now(),
        "still waiting on the request"
    );
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), vec![NoticeKind::AzurePreempt]);
    assert_eq!(m.count(EVENTS_PATH), 1, "the same request was waited on");
}

// ------------------------------------------------------------------------------------ identity

mod identity {
    use super::*;
    use common::provider::mock_imds;
    use nthd::testing::notice::Lifecycle;
    use nthd::testing::provider::azure::COMPUTE_PATH;
    use nthd_testkit::imds::identity::{self as mock, azure_compute};
    use nthd_testkit::imds::Config;

    fn compute(zone: &str, priority: &str) -> Response {
        let doc = azure_compute(
            mock::AZURE_VM_ID,
            "Standard_D2s_v5",
            "northeurope",
            zone,
            priority,
        );
        Response::json(200, doc)
    }

    #[test]
    fn one_read_of_the_compute_document() {
        // The values read: the contract's `identity_is_read`.
        let m = mock_imds(Config::default(), Some("azure"));
        let mut p = provider(&m);
        p.identity().unwrap();
        let r = m.requests_for(COMPUTE_PATH);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].header("Metadata"), Some("true"));
        assert_eq!(
            r[0].query_param("api-version").as_deref(),
            Some("2021-02-01")
        );
    }

    #[test]
    fn no_zone_is_the_location_and_no_priority_is_unknown() {
        let m = mock_imds(Config::default(), Some("azure"));
        let mut p = provider(&m);
        m.set(COMPUTE_PATH, compute("", "Regular"));
        let id = p.identity().unwrap();
        assert_eq!(id.zone.as_deref(), Some("northeurope"));
        assert_eq!(id.lifecycle, Some(Lifecycle::OnDemand));
        m.set(COMPUTE_PATH, compute("3", ""));
        let id = p.identity().unwrap();
        assert_eq!(id.zone.as_deref(), Some("northeurope-3"));
        assert_eq!(id.lifecycle, None);
        assert_eq!(id.instance_type.as_deref(), Some("Standard_D2s_v5"));
    }

    #[test]
    fn no_usable_document_is_an_error() {
        let m = mock_imds(Config::default(), Some("azure"));
        let mut p = provider(&m);
        // No document at all (404): the contract's `nothing_answering_is_an_error`.
        m.set(COMPUTE_PATH, Response::text(200, "<html>gateway</html>"));
        let e = p.identity().unwrap_err();
        assert!(matches!(e, ImdsError::Malformed { .. }), "{e:?}");
        m.set(COMPUTE_PATH, Response::huge(1 << 20));
        let e = p.identity().unwrap_err();
        assert!(matches!(e, ImdsError::TooLarge { .. }), "{e:?}");
        m.set(COMPUTE_PATH, Response::json(200, r#"{"name":"vm"}"#));
        assert!(p.identity().is_err(), "a document without any field");
        m.set(COMPUTE_PATH, Response::fault(Fault::Reset));
        let e = p.identity().unwrap_err();
        assert!(matches!(e, ImdsError::Connect { .. }), "{e:?}");
    }
}
