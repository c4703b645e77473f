//! GCP metadata-server and Azure IMDS emulation.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, Instant};

use common::{get, req, Client};
use nthd_testkit::imds::{MockImds, Response};

const PREEMPTED: &str = "/computeMetadata/v1/instance/preempted";
const GOOGLE: (&str, &str) = ("Metadata-Flavor", "Google");
const SE: &str = "/metadata/scheduledevents";

#[tokio::test]
async fn gcp_requires_flavor_header_and_sends_etag() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(PREEMPTED, Response::text(200, "FALSE"));

    let r = get(m.addr(), PREEMPTED, &[]).await;
    assert_eq!(r.status, 403);
    let r = get(m.addr(), PREEMPTED, &[("Metadata-Flavor", "google")]).await;
    assert_eq!(r.status, 403, "value is case-sensitive, as on GCP");

    let r1 = get(m.addr(), PREEMPTED, &[GOOGLE]).await;
    assert_eq!((r1.status, r1.text().as_str()), (200, "FALSE"));
    assert_eq!(r1.header("Metadata-Flavor"), Some("Google"));
    let e1 = r1.header("ETag").unwrap().to_string();
    assert_eq!(e1.len(), 16);
    assert_eq!(e1, Response::text(200, "FALSE").etag());

    // Stable for the same body, even across re-sets and other headers.
    let r2 = get(m.addr(), PREEMPTED, &[GOOGLE]).await;
    assert_eq!(r2.header("ETag"), Some(e1.as_str()));
    m.set(
        PREEMPTED,
        Response::status(200)
            .with_body("FALSE")
            .with_header("X-Other", "1"),
    );
    assert_eq!(
        get(m.addr(), PREEMPTED, &[GOOGLE]).await.header("ETag"),
        Some(e1.as_str())
    );
    m.set(PREEMPTED, Response::text(200, "TRUE"));
    let e3 = get(m.addr(), PREEMPTED, &[GOOGLE])
        .await
        .header("ETag")
        .unwrap()
        .to_string();
    assert_ne!(e3, e1);

    // Unset GCP path: 404, still with the flavor header.
    let r = get(m.addr(), "/computeMetadata/v1/nope", &[GOOGLE]).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.header("Metadata-Flavor"), Some("Google"));

    // No token needed on GCP paths even though AWS tokens are required by default.
    assert_eq!(
        m.current_config().aws_token,
        nthd_testkit::imds::TokenMode::Required
    );
}

async fn etag_of(m: &MockImds) -> String {
    get(m.addr(), PREEMPTED, &[GOOGLE])
        .await
        .header("ETag")
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn gcp_long_poll_wakes_promptly_on_change() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(PREEMPTED, Response::text(200, "FALSE"));
    let etag = etag_of(&m).await;
    let a = m.addr();
    let target = format!("{PREEMPTED}?wait_for_change=true&last_etag={etag}&timeout_sec=30");
    let poll = tokio::spawn(async move {
        let r = get(a, &target, &[GOOGLE]).await;
        (Instant::now(), r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!poll.is_finished(), "answered before any change");
    let changed_at = Instant::now();
    m.set(PREEMPTED, Response::text(200, "TRUE"));
    let (answered_at, r) = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("long poll did not wake")
        .unwrap();
    let lag = answered_at.duration_since(changed_at);
    assert!(lag < Duration::from_millis(100), "woke after {lag:?}");
    assert_eq!((r.status, r.text().as_str()), (200, "TRUE"));
    assert_ne!(r.header("ETag").unwrap(), etag);
    let e = m.requests_for(PREEMPTED).pop().unwrap();
    assert_eq!(e.note.as_deref(), Some("long poll: value changed"));

    // The route-change event carries the time the notice appeared.
    let ev = m.events().into_iter().rfind(|e| e.kind == "route").unwrap();
    assert_eq!(ev.response.unwrap().body, "TRUE");
}

#[tokio::test]
async fn gcp_long_poll_stale_etag_answers_at_once() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(PREEMPTED, Response::text(200, "TRUE"));
    let t0 = Instant::now();
    let r = get(
        m.addr(),
        &format!("{PREEMPTED}?wait_for_change=true&last_etag=0&timeout_sec=30"),
        &[GOOGLE],
    )
    .await;
    assert!(t0.elapsed() < Duration::from_millis(500));
    assert_eq!(r.text(), "TRUE");
}

#[tokio::test]
async fn gcp_long_poll_times_out_with_current_value() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(PREEMPTED, Response::text(200, "FALSE"));
    let etag = etag_of(&m).await;
    let a = m.addr();
    let target = format!("{PREEMPTED}?wait_for_change=true&last_etag={etag}&timeout_sec=1");
    let t0 = Instant::now();
    let poll = tokio::spawn(async move { get(a, &target, &[GOOGLE]).await });
    // Re-setting the same value is not a change.
    tokio::time::sleep(Duration::from_millis(200)).await;
    m.set(PREEMPTED, Response::text(200, "FALSE").with_delay(0));
    let r = poll.await.unwrap();
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(1000), "{took:?}");
    assert!(took < Duration::from_millis(1600), "{took:?}");
    assert_eq!((r.status, r.text().as_str()), (200, "FALSE"));
    assert_eq!(r.header("ETag"), Some(etag.as_str()));
    let e = m.requests_for(PREEMPTED).pop().unwrap();
    assert_eq!(e.note.as_deref(), Some("long poll: timeout"));
}

#[tokio::test]
async fn gcp_wait_for_change_without_etag_waits_for_next_change() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(PREEMPTED, Response::text(200, "FALSE"));
    let a = m.addr();
    let poll = tokio::spawn(async move {
        get(a, &format!("{PREEMPTED}?wait_for_change=true"), &[GOOGLE]).await
    });
    assert!(m.wait_for_count(PREEMPTED, 1, Duration::from_secs(5)).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!poll.is_finished());
    // Clearing the route is a change too (value becomes 404).
    m.clear(PREEMPTED);
    let r = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn gcp_long_poll_client_disconnect_is_noticed() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(PREEMPTED, Response::text(200, "FALSE"));
    let mut c = Client::connect(m.addr()).await;
    use tokio::io::AsyncWriteExt;
    c.stream
        .write_all(&common::build_request(
            "GET",
            &format!("{PREEMPTED}?wait_for_change=true"),
            &[GOOGLE],
            b"",
        ))
        .await
        .unwrap();
    assert!(m.wait_for_count(PREEMPTED, 1, Duration::from_secs(5)).await);
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let e = m.requests_for(PREEMPTED).pop().unwrap();
        if e.note.is_some() {
            assert_eq!(e.note.as_deref(), Some("long poll: client went away"));
            assert_eq!(e.status, None);
            break;
        }
        assert!(Instant::now() < deadline, "disconnect not noticed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn gcp_bad_timeout_sec_is_400() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    let r = get(
        m.addr(),
        &format!("{PREEMPTED}?wait_for_change=true&timeout_sec=soon"),
        &[GOOGLE],
    )
    .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn azure_header_and_api_version_checks() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    let doc = r#"{"DocumentIncarnation":2,"Events":[{"EventId":"A","EventType":"Preempt"}]}"#;
    m.set(SE, Response::json(200, doc));
    let q = format!("{SE}?api-version=2020-07-01");

    let r = get(m.addr(), &q, &[]).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Required metadata header"));
    let r = get(m.addr(), SE, &[("Metadata", "true")]).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("api-version"));
    let r = get(m.addr(), &q, &[("Metadata", "true")]).await;
    assert_eq!((r.status, r.text().as_str()), (200, doc));

    m.config(|c| c.azure_require_api_version = false);
    assert_eq!(get(m.addr(), SE, &[("Metadata", "true")]).await.status, 200);
}

#[tokio::test]
async fn azure_ack_post_is_recorded() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    let ack = br#"{"StartRequests":[{"EventId":"A"}]}"#;
    let q = format!("{SE}?api-version=2020-07-01");
    let r = req(
        m.addr(),
        "POST",
        &q,
        &[("Metadata", "true"), ("Content-Type", "application/json")],
        ack,
    )
    .await;
    assert_eq!(r.status, 200);
    let r = req(m.addr(), "POST", &q, &[], ack).await;
    assert_eq!(r.status, 400, "the ack needs the header too");
    let posts: Vec<_> = m
        .requests_for(SE)
        .into_iter()
        .filter(|e| e.method == "POST" && e.status == Some(200))
        .collect();
    assert_eq!(posts.len(), 1);
    let body: serde_json::Value = serde_json::from_str(&posts[0].body).unwrap();
    assert_eq!(body["StartRequests"][0]["EventId"], "A");
    assert_eq!(
        posts[0].query_param("api-version").as_deref(),
        Some("2020-07-01")
    );
}
