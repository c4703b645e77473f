//! Route table, sequences, control API, keep-alive and concurrency of the mock IMDS.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, Instant};

use common::{get, req, Client};
use nthd_testkit::imds::{percent_encode, Config, MockImds, Response, TokenMode};

const IA: &str = "/latest/meta-data/spot/instance-action";

async fn v1_mock() -> MockImds {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.config(|c| c.aws_token = TokenMode::Optional);
    m
}

#[tokio::test]
async fn set_and_clear_route() {
    let m = v1_mock().await;
    assert_eq!(get(m.addr(), IA, &[]).await.status, 404);
    m.set(IA, Response::json(200, "{}"));
    let r = get(m.addr(), IA, &[]).await;
    assert_eq!((r.status, r.text().as_str()), (200, "{}"));
    // The query string is not part of the route key.
    assert_eq!(get(m.addr(), &format!("{IA}?x=1"), &[]).await.status, 200);
    assert!(m.clear(IA));
    assert!(!m.clear(IA));
    let r = get(m.addr(), IA, &[]).await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (404, nthd_testkit::imds::EC2_NOT_FOUND)
    );

    let ev = m.events();
    let route_ev: Vec<_> = ev.iter().filter(|e| e.kind == "route").collect();
    assert_eq!(route_ev.len(), 3);
    assert_eq!(route_ev[0].action, "set");
    assert_eq!(route_ev[0].path.as_deref(), Some(IA));
    assert_eq!(route_ev[0].response.as_ref().unwrap().status, 200);
    assert_eq!(route_ev[1].action, "clear");
    assert!(route_ev
        .windows(2)
        .all(|w| w[0].t_ms <= w[1].t_ms && w[0].seq < w[1].seq));

    assert_eq!(m.count(IA), 4);
    let log = m.requests_for(IA);
    assert_eq!(log[1].query, "");
    assert_eq!(log[2].query, "x=1");
    assert_eq!(log[2].query_param("x").as_deref(), Some("1"));
}

#[tokio::test]
async fn invalid_responses_are_rejected() {
    let m = v1_mock().await;
    assert!(m.try_set("no-slash", Response::status(200)).is_err());
    assert!(m.try_set("/a?b", Response::status(200)).is_err());
    assert!(m.try_set("/_mock/x", Response::status(200)).is_err());
    assert!(m.try_set("/a", Response::status(42)).is_err());
    assert!(m.try_set("/a", Response::sequence(vec![])).is_err());
    assert!(m
        .try_set(
            "/a",
            Response::sequence(vec![Response::sequence(vec![Response::status(200)])])
        )
        .is_err());
    assert!(m
        .try_set(
            "/a",
            Response::text(200, "x").with_header("X-Bad", "a\r\nb")
        )
        .is_err());
    assert!(m.try_set("/a", Response::huge(10).with_body("x")).is_err());
    assert!(m
        .try_set("/a", Response::status(200).with_slow_ms(5))
        .is_err());
    assert!(m.route("/a").is_none());
    // JSON with an unknown (misspelled) field fails loudly.
    assert!(serde_json::from_str::<Response>(r#"{"stauts":200}"#).is_err());
}

#[tokio::test]
async fn sequence_last_entry_sticks() {
    let m = v1_mock().await;
    m.set(
        IA,
        Response::sequence(vec![
            Response::status(503),
            Response::status(500),
            Response::json(200, "ok"),
        ]),
    );
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(get(m.addr(), IA, &[]).await.status);
    }
    assert_eq!(got, [503, 500, 200, 200, 200]);
    // Re-setting restarts the sequence.
    m.set(
        IA,
        Response::sequence(vec![Response::status(404), Response::json(200, "x")]),
    );
    assert_eq!(get(m.addr(), IA, &[]).await.status, 404);
    assert_eq!(get(m.addr(), IA, &[]).await.status, 200);
}

#[tokio::test]
async fn response_json_roundtrip() {
    let r: Response = serde_json::from_str(
        r#"{"status":200,"body":"text","headers":{"Content-Type":"application/json"},"delay_ms":0,"fault":null}"#,
    )
    .unwrap();
    assert_eq!(r, Response::json(200, "text"));
    let r: Response = serde_json::from_str(r#"{"body_len":1073741824,"body_fill":"x"}"#).unwrap();
    assert_eq!(r, Response::huge(1 << 30).with_fill("x"));
    let r: Response = serde_json::from_str(
        r#"{"sequence":[{"status":503},{"fault":"reset"},{"status":200,"body":"y"}]}"#,
    )
    .unwrap();
    assert_eq!(r.sequence.as_ref().unwrap().len(), 3);
    r.validate().unwrap();
    let back: Response = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
}

#[tokio::test]
async fn control_api_over_http() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    let a = m.addr();
    let r = get(a, "/_mock/health", &[]).await;
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));

    let target = format!("/_mock/route?path={}", percent_encode(IA));
    control_routes(&m, &target).await;
    control_config(&m).await;
    control_log(&m).await;
    control_events_clearing_and_reset(&m, &target).await;

    // Bulk routes.
    let r = req(
        a,
        "PUT",
        "/_mock/routes",
        &[],
        br#"{"/a":{"body":"A"},"/b":{"status":204}}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    m.config(|c| c.aws_token = TokenMode::Optional);
    assert_eq!(get(a, "/a", &[]).await.text(), "A");
    assert_eq!(get(a, "/b", &[]).await.status, 204);
}

/// The control API's `route` and `routes`: IA set at `target` (with `hello`) and the GCP
/// preempted path; bad bodies refused.
async fn control_routes(m: &MockImds, target: &str) {
    let a = m.addr();
    let r = req(
        a,
        "PUT",
        target,
        &[],
        br#"{"status":200,"body":"hello","headers":{"Content-Type":"text/plain"}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Unencoded path works as well.
    let r = req(
        a,
        "PUT",
        "/_mock/route?path=/computeMetadata/v1/instance/preempted",
        &[],
        br#"{"body":"FALSE"}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(m.route(IA).unwrap().body, "hello");
    let r = get(a, target, &[]).await;
    assert_eq!(r.json()["body"], "hello");
    let r = get(a, "/_mock/routes", &[]).await;
    assert_eq!(r.json().as_object().unwrap().len(), 2);

    // Bad bodies are 400 and change nothing.
    for body in [&b"{"[..], br#"{"stauts":1}"#, br#"{"status":7}"#] {
        let r = req(a, "PUT", target, &[], body).await;
        assert_eq!(r.status, 400);
        assert!(r.json()["error"].is_string());
    }
    assert_eq!(
        req(a, "PUT", "/_mock/route", &[], b"{}").await.status,
        400,
        "missing path"
    );
    assert_eq!(m.route(IA).unwrap().body, "hello");
}

/// The control API's `config`: read, merged, bad patches refused.
async fn control_config(m: &MockImds) {
    let a = m.addr();
    // Config.
    let r = get(a, "/_mock/config", &[]).await;
    let cfg: Config = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(cfg, Config::default());
    let r = req(
        a,
        "PUT",
        "/_mock/config",
        &[],
        br#"{"aws_token":"optional","token_put_status":405}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(m.current_config().aws_token, TokenMode::Optional);
    assert_eq!(m.current_config().token_put_status, 405);
    assert_eq!(
        req(
            a,
            "PUT",
            "/_mock/config",
            &[],
            br#"{"aws_tokn":"optional"}"#
        )
        .await
        .status,
        400
    );
    assert_eq!(
        req(a, "PUT", "/_mock/config", &[], br#"{"aws_token":"maybe"}"#)
            .await
            .status,
        400
    );
    assert_eq!(m.current_config().token_put_status, 405);
}

/// A data request to IA, then the control API's `log`.
async fn control_log(m: &MockImds) {
    let a = m.addr();
    // Data request, then the log.
    let r = get(a, IA, &[("X-Test", "1")]).await;
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    let log = get(a, "/_mock/log", &[]).await.json();
    let arr = log.as_array().unwrap();
    assert_eq!(arr.len(), 1, "control requests are not logged: {log}");
    assert_eq!(arr[0]["path"], IA);
    assert_eq!(arr[0]["method"], "GET");
    assert_eq!(arr[0]["status"], 200);
    assert!(arr[0]["t_ms"].as_u64().unwrap() > 1_600_000_000_000);
    assert!(arr[0]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h[0] == "X-Test" && h[1] == "1"));
    let filtered = get(
        a,
        &format!("/_mock/log?path={}", percent_encode("/other")),
        &[],
    )
    .await
    .json();
    assert_eq!(filtered.as_array().unwrap().len(), 0);
}

/// The control API's `events` and `stats`, `DELETE`s, unknown endpoints and methods, `reset`.
async fn control_events_clearing_and_reset(m: &MockImds, target: &str) {
    let a = m.addr();
    // Events and stats.
    let ev = get(a, "/_mock/events", &[]).await.json();
    let kinds: Vec<_> = ev
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["route", "route", "config"]);
    let stats = get(a, "/_mock/stats", &[]).await.json();
    assert_eq!(stats["requests"], 1);

    // Clearing.
    let r = req(a, "DELETE", target, &[], b"").await;
    assert_eq!(r.json()["existed"], true);
    assert_eq!(get(a, IA, &[]).await.status, 404);
    assert_eq!(req(a, "DELETE", "/_mock/log", &[], b"").await.status, 200);
    assert_eq!(m.requests().len(), 0);
    assert_eq!(get(a, "/_mock/nope", &[]).await.status, 404);
    assert_eq!(req(a, "PATCH", "/_mock/health", &[], b"").await.status, 405);

    // Reset.
    assert_eq!(req(a, "POST", "/_mock/reset", &[], b"").await.status, 200);
    assert_eq!(m.current_config(), Config::default());
    assert!(m.route("/computeMetadata/v1/instance/preempted").is_none());
    assert_eq!(m.events().len(), 1);
}

#[tokio::test]
async fn builder_initial_state_and_reset() {
    let cfg = Config {
        aws_token: TokenMode::Refused,
        ..Config::default()
    };
    let m = MockImds::builder()
        .listen("127.0.0.1:0")
        .listen("127.0.0.1:0")
        .route(IA, Response::text(200, "initial"))
        .config(cfg.clone())
        .start()
        .await
        .unwrap();
    assert_eq!(m.addrs().len(), 2);
    for a in m.addrs() {
        assert_eq!(get(*a, IA, &[]).await.text(), "initial");
    }
    let log = m.requests();
    assert_ne!(log[0].local, log[1].local, "log tells listeners apart");
    m.set(IA, Response::status(500));
    m.config(|c| c.token_always_401 = true);
    m.reset();
    assert_eq!(m.current_config(), cfg);
    assert_eq!(get(m.addr(), IA, &[]).await.text(), "initial");
    assert_eq!(m.requests().len(), 1);

    // A bad initial route or an unbindable address fails the start.
    assert!(MockImds::builder()
        .listen("127.0.0.1:0")
        .route("bad", Response::status(200))
        .start()
        .await
        .is_err());
    assert!(MockImds::builder().start().await.is_err());
    let taken = m.addr().to_string();
    assert!(MockImds::start(&taken).await.is_err());
}

#[tokio::test]
async fn keep_alive_and_pipelining() {
    let m = v1_mock().await;
    m.set("/a", Response::text(200, "A"));
    m.set("/b", Response::json(200, "{\"b\":1}"));
    let mut c = Client::connect(m.addr()).await;
    for i in 0..20 {
        let p = if i % 2 == 0 { "/a" } else { "/b" };
        let r = c.send("GET", p, &[], b"").await.unwrap();
        assert_eq!(r.status, 200);
    }
    // A PUT with a body in the middle of the stream doesn't desync framing.
    let r = c.send("PUT", "/a", &[], b"some body").await.unwrap();
    assert_eq!(r.text(), "A");
    // HEAD: headers with the real Content-Length, no body.
    let r = c.send("HEAD", "/a", &[], b"").await.unwrap();
    assert_eq!(r.header("Content-Length"), Some("1"));
    assert!(r.body.is_empty());
    let r = c.send("GET", "/b", &[], b"").await.unwrap();
    assert_eq!(r.text(), "{\"b\":1}");

    // Pipelining: three requests in one write.
    use tokio::io::AsyncWriteExt;
    let mut raw = Vec::new();
    for p in ["/a", "/b", "/a"] {
        raw.extend(common::build_request("GET", p, &[], b""));
    }
    c.stream.write_all(&raw).await.unwrap();
    let bodies: Vec<String> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(c.read_response(false).await.unwrap().text());
        }
        v
    };
    assert_eq!(bodies, ["A", "{\"b\":1}", "A"]);

    let log = m.requests();
    assert_eq!(log.len(), 26);
    assert!(log.iter().all(|e| e.conn == log[0].conn), "one connection");
    assert_eq!(log[20].body, "some body");
    assert_eq!(m.stats().connections, 1);

    // Connection: close is honoured.
    let r = c
        .send("GET", "/a", &[("Connection", "close")], b"")
        .await
        .unwrap();
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(c.read_to_eof().await.unwrap().is_empty());
}

#[tokio::test]
async fn reqwest_client_with_pooling() {
    let m = v1_mock().await;
    m.set(IA, Response::json(200, "{}"));
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    for _ in 0..10 {
        let r = client.get(format!("{}{IA}", m.url())).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.text().await.unwrap(), "{}");
    }
    assert_eq!(m.stats().connections, 1, "reqwest reused the connection");
}

#[tokio::test]
async fn concurrent_connections_are_served_in_parallel() {
    let m = v1_mock().await;
    m.set("/slow", Response::text(200, "done").with_delay(300));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let a = m.addr();
        tasks.push(tokio::spawn(
            async move { get(a, "/slow", &[]).await.text() },
        ));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), "done");
    }
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_millis(2000), "not parallel: {took:?}");
    assert_eq!(m.stats().connections, 20);
}

#[tokio::test]
async fn request_body_logging_is_truncated() {
    let m = v1_mock().await;
    let big = vec![b'z'; 10_000];
    req(m.addr(), "POST", "/x", &[], &big).await;
    let e = &m.requests()[0];
    assert_eq!(e.body_len, 10_000);
    assert!(e.body_truncated);
    assert_eq!(e.body.len(), 4096);
}

#[tokio::test]
async fn malformed_requests_get_4xx_and_close() {
    let m = v1_mock().await;
    use tokio::io::AsyncWriteExt;
    let mut c = Client::connect(m.addr()).await;
    c.stream.write_all(b"HELLO\r\n\r\n").await.unwrap();
    let r = c.read_response(false).await.unwrap();
    assert_eq!(r.status, 400);
    assert!(c.read_to_eof().await.unwrap().is_empty());

    let mut c = Client::connect(m.addr()).await;
    c.stream
        .write_all(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(c.read_response(false).await.unwrap().status, 501);

    // Expect: 100-continue gets an interim response.
    let mut c = Client::connect(m.addr()).await;
    c.stream
        .write_all(b"PUT /x HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
        .await
        .unwrap();
    let (s, _) = c.read_head().await.unwrap();
    assert_eq!(s, 100);
    c.stream.write_all(b"abc").await.unwrap();
    assert_eq!(c.read_response(false).await.unwrap().status, 404);
    assert_eq!(m.requests()[0].body, "abc");
}

#[tokio::test]
async fn wait_for_count() {
    let m = v1_mock().await;
    assert!(!m.wait_for_count(IA, 1, Duration::from_millis(50)).await);
    let a = m.addr();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        get(a, IA, &[]).await;
    });
    assert!(m.wait_for_count(IA, 1, Duration::from_secs(5)).await);
}

#[test]
fn start_blocking_serves_from_its_own_thread() {
    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    m.config(|c| c.aws_token = TokenMode::Optional);
    m.set(IA, Response::text(200, "sync"));
    // Plain blocking std client: the test thread blocks, the mock keeps answering.
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(m.addr()).unwrap();
    s.write_all(format!("GET {IA} HTTP/1.1\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.ends_with("\r\n\r\nsync"), "{out}");
    let addr = m.addr();
    drop(m);
    // Dropped: the port no longer answers.
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[tokio::test]
async fn identity_routes_over_http_and_on_the_handle() {
    use nthd_testkit::imds::identity;
    const ID: &str = "/latest/meta-data/instance-id";
    const ZONE: &str = "/latest/meta-data/placement/availability-zone";
    let m = v1_mock().await;
    let a = m.addr();
    // Off by default: nothing of the old behaviour changes.
    assert_eq!(get(a, ID, &[]).await.status, 404);
    assert!(get(a, "/_mock/routes", &[])
        .await
        .json()
        .as_object()
        .unwrap()
        .is_empty());

    // GET shows the defaults without installing them.
    let r = get(a, "/_mock/identity?cloud=aws", &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()[ID]["body"], identity::AWS_INSTANCE_ID);
    assert_eq!(get(a, ID, &[]).await.status, 404);

    assert_eq!(
        req(a, "PUT", "/_mock/identity?cloud=aws", &[], b"")
            .await
            .status,
        200
    );
    let r = get(a, ZONE, &[]).await;
    assert_eq!((r.status, r.text().as_str()), (200, identity::AWS_ZONE));
    // One value changed and one removed through the ordinary route API.
    m.set(ID, Response::text(200, "i-fedcba9876543210f"));
    assert_eq!(get(a, ID, &[]).await.text(), "i-fedcba9876543210f");
    assert_eq!(
        req(a, "DELETE", &format!("/_mock/route?path={ZONE}"), &[], b"")
            .await
            .status,
        200
    );
    assert_eq!(get(a, ZONE, &[]).await.status, 404);

    // DELETE unsets the cloud's paths, whatever set them.
    let r = req(a, "DELETE", "/_mock/identity?cloud=aws", &[], b"").await;
    assert_eq!((r.status, r.json()["cleared"].as_u64()), (200, Some(3)));
    assert_eq!(get(a, ID, &[]).await.status, 404);

    // Shared paths: the cloud installed last wins.
    m.set_identity("aws");
    m.set_identity("tencent");
    assert_eq!(get(a, ID, &[]).await.text(), identity::TENCENT_INSTANCE_ID);
    assert_eq!(get(a, ZONE, &[]).await.text(), identity::AWS_ZONE);
    assert_eq!(m.clear_identity("tencent"), 4);

    identity_without_a_known_cloud_is_400(a).await;
}

/// `PUT /_mock/identity` without a cloud or with an unknown one: 400 naming the clouds.
async fn identity_without_a_known_cloud_is_400(a: std::net::SocketAddr) {
    for bad in ["/_mock/identity", "/_mock/identity?cloud=ibm"] {
        let r = req(a, "PUT", bad, &[], b"").await;
        assert_eq!(r.status, 400, "{bad}");
        assert!(
            r.json()["error"].as_str().unwrap().contains("aws, gcp"),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn identity_from_the_builder_survives_reset() {
    use nthd_testkit::imds::identity;
    let m = MockImds::builder()
        .listen("127.0.0.1:0")
        .identity("azure")
        .start()
        .await
        .unwrap();
    let path = format!("{}?api-version=2021-02-01", identity::AZURE_COMPUTE_PATH);
    let hdr = [("Metadata", "true")];
    let doc = get(m.addr(), &path, &hdr).await.json();
    assert_eq!(doc["vmId"], identity::AZURE_VM_ID);
    assert_eq!(doc["zone"], identity::AZURE_ZONE);
    m.clear_identity("azure");
    assert_eq!(get(m.addr(), &path, &hdr).await.status, 404);
    m.reset();
    assert_eq!(get(m.addr(), &path, &hdr).await.json()["priority"], "Spot");
}
