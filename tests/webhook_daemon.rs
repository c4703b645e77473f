//! Webhooks from the real daemon: a spot interruption sends a notice event, the PowerOff call,
//! then an action event, and an unreachable or hanging webhook never delays the PowerOff.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;
mod webhook_support;

use std::time::{Duration, SystemTime};

use common::Nthd;
use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};
use nthd_testkit::logind::{FakeLogind, PrivateBus};
use webhook_support::{Received, Receiver, Script};

const SPOT: &str = r#"{"action":"terminate","time":"2099-01-01T00:00:00Z"}"#;

async fn setup() -> (PrivateBus, FakeLogind, MockImds, tempfile::TempDir) {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    imds.set_identity("aws");
    (bus, logind, imds, tempfile::tempdir().unwrap())
}

async fn wait_poweroff(l: &FakeLogind, n: &Nthd) {
    for _ in 0..200 {
        if l.power_off_count() > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no PowerOff:\n{}", n.log());
}

/// What every event of the spot interruption says of the host and the notice.
fn same_host_and_notice(e: &Received) {
    assert_eq!(e.method, "POST");
    assert_eq!(
        e.header("content-type"),
        Some("application/cloudevents+json")
    );
    let v = e.json();
    assert_eq!(v["specversion"], "1.0");
    assert_eq!(v["subject"], "i-0123456789abcdef0");
    assert_eq!(v["data"]["cloud"], "aws");
    assert_eq!(v["data"]["instance_type"], "m5.large");
    assert_eq!(v["data"]["zone"], "us-east-1a");
    assert_eq!(v["data"]["notice"]["kind"], "spot-terminate");
    assert!(v["data"]["notice"]["deadline"].is_string());
}

/// The drain report (no other delay lock here: released at once) reached the receiver before
/// nthd released its own lock and logind went ahead.
async fn drained_before_the_shutdown_went_ahead(logind: &FakeLogind, drained: &Received) {
    let d = &drained.json()["data"];
    assert_eq!(d["outcome"], "released", "{d}");
    assert_eq!(d["holders"], serde_json::json!([]), "{d}");
    assert!(d["notice"]["seconds_left"].as_f64().unwrap() > 0.0, "{d}");
    let s = logind.wait_for_shutdown(Duration::from_secs(5)).await;
    let s = s.expect("logind went ahead once nthd released its lock");
    assert!(
        s.proceeded_at >= drained.at,
        "the report came after logind went ahead"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_interruption_sends_notice_then_action_around_the_poweroff() {
    let (bus, logind, imds, state) = setup().await;
    let r = Receiver::start(Script::Statuses(vec![200])).await;
    let url = r.url("/events?token=secret-in-query");
    let n = Nthd::start(
        bus.address(),
        &imds.url(),
        state.path(),
        &[("NTHD_WEBHOOK", &url)],
    );
    assert!(
        n.wait_log("instance: i-0123456789abcdef0", Duration::from_secs(10))
            .await,
        "{}",
        n.log()
    );
    imds.set(aws::SPOT_PATH, Response::json(200, SPOT));
    wait_poweroff(&logind, &n).await;
    assert!(r.wait_for(3, Duration::from_secs(10)).await, "{}", n.log());
    let poweroff_at = logind.calls_of("PowerOff")[0].at;
    let events = r.all();
    let types: Vec<String> = events
        .iter()
        .map(|e| e.json()["type"].as_str().unwrap().to_string())
        .collect();
    // Up to 4 deliveries per URL are in flight at once: with no other delay lock the drain is
    // over at once, and its report may overtake the action event. The notice comes first.
    let mut sorted = types.clone();
    sorted.sort();
    let want = ["io.nthd.action", "io.nthd.drained", "io.nthd.notice"];
    assert_eq!(sorted, want, "{events:?}");
    assert_eq!(types[0], "io.nthd.notice", "{events:?}");
    let of = |t: &str| &events[types.iter().position(|x| x == t).unwrap()];
    let (notice, action) = (of("io.nthd.notice"), of("io.nthd.action"));
    for e in &events {
        same_host_and_notice(e);
    }
    drained_before_the_shutdown_went_ahead(&logind, of("io.nthd.drained")).await;
    assert_eq!(notice.json()["data"]["decision"]["action"], "poweroff");
    assert_eq!(action.json()["data"]["result"]["action"], "poweroff");
    assert_eq!(action.json()["data"]["result"]["outcome"], "accepted");
    // The action event reports the logind call: it arrives after it.
    assert!(
        action.at >= poweroff_at,
        "action event before the PowerOff call"
    );
    let ms = |a: SystemTime, b: SystemTime| match a.duration_since(b) {
        Ok(d) => d.as_millis() as i128,
        Err(e) => -(e.duration().as_millis() as i128),
    };
    eprintln!(
        "notice event {} ms, action event {} ms, relative to the PowerOff call",
        ms(notice.at, poweroff_at),
        ms(action.at, poweroff_at)
    );
    // The URL's path and query (which can hold a secret) never reach the log.
    assert!(!n.log().contains("secret-in-query"), "{}", n.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_or_dead_webhook_does_not_delay_the_poweroff() {
    let (bus, logind, imds, state) = setup().await;
    let hang = Receiver::start(Script::Hang).await;
    let dead = format!("http://127.0.0.1:{}/", common::free_port());
    let urls = format!("{},{dead}", hang.url("/"));
    let n = Nthd::start(
        bus.address(),
        &imds.url(),
        state.path(),
        &[("NTHD_WEBHOOK", &urls)],
    );
    assert!(
        n.wait_log("cloud: aws", Duration::from_secs(10)).await,
        "{}",
        n.log()
    );
    imds.set(aws::SPOT_PATH, Response::json(200, SPOT));
    let set = SystemTime::now();
    wait_poweroff(&logind, &n).await;
    let took = logind.calls_of("PowerOff")[0]
        .at
        .duration_since(set)
        .unwrap();
    // Polling is every 200 ms; the hanging receiver holds each attempt for 10 s.
    assert!(
        took < Duration::from_secs(3),
        "PowerOff {took:?} after the notice"
    );
    assert!(hang.wait_for(1, Duration::from_secs(5)).await);
}

// A world-readable headers file used to stop nthd as a bad setting (exit 2), which left the node
// unprotected: it now disables webhooks only. tests/secrets.rs
// `a_bad_headers_file_disables_webhooks_not_the_power_off` shows it, with a spot notice.

/// `nthd simulate --yes` is visible like a real action and marked as a drill: its notice and
/// action events reach the daemon's webhook (naming the instance from the daemon's status
/// file), the daemon's status file lists the action as a drill, and the log line says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_drill_sends_its_events_and_is_listed_as_one() {
    let (bus, logind, dir) = common::logind_world().await;
    let status = dir.path().join("status.json");
    std::fs::write(
        &status,
        r#"{"schema": 1, "cloud": "aws", "instance": {"id": "i-0drill"}, "actions": [],
            "field_of_a_newer_nthd": 1}"#,
    )
    .unwrap();
    let r = Receiver::start(Script::Statuses(vec![200])).await;
    let mut c = common::nthd_command(bus.address());
    c.args(["simulate", "spot-terminate", "--yes"])
        .env("NTHD_STATE_DIR", dir.path())
        .env("NTHD_STATUS_FILE", &status)
        .env("NTHD_WEBHOOK", r.url("/events"));
    let out = tokio::task::spawn_blocking(move || c.output().unwrap())
        .await
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(logind.power_off_count(), 1);
    assert!(
        stderr.contains("fire drill: action poweroff for spot-terminate: called"),
        "{stderr}"
    );
    assert!(r.wait_for(2, Duration::from_secs(5)).await, "{stderr}");
    let events: Vec<serde_json::Value> = r
        .all()
        .iter()
        .map(webhook_support::Received::json)
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["io.nthd.notice", "io.nthd.action"], "{events:?}");
    for e in &events {
        assert_eq!(e["nthddrill"], true, "{e}");
        assert_eq!(e["data"]["drill"], true, "{e}");
        assert_eq!(e["subject"], "i-0drill", "{e}");
    }
    assert_eq!(events[1]["data"]["result"]["outcome"], "accepted");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&status).unwrap()).unwrap();
    let a = &v["actions"][0];
    assert_eq!(
        (&a["drill"], &a["result"]),
        (&true.into(), &"accepted".into()),
        "{v}"
    );
    assert!(a["notice_id"]
        .as_str()
        .unwrap()
        .starts_with("simulate/spot-terminate/"));
    assert_eq!(
        v["field_of_a_newer_nthd"], 1,
        "a field the drill does not know was lost"
    );
}
