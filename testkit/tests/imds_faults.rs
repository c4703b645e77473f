//! Byte-level fault injection.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use common::{build_request, get, Client};
use nthd_testkit::imds::{Fault, MockImds, Response, TokenMode, GARBAGE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn v1_mock() -> MockImds {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.config(|c| c.aws_token = TokenMode::Optional);
    m
}

#[tokio::test]
async fn hang_keeps_socket_open_without_answering() {
    let m = v1_mock().await;
    m.set("/h", Response::fault(Fault::Hang));
    let mut c = Client::connect(m.addr()).await;
    c.stream
        .write_all(&build_request("GET", "/h", &[], b""))
        .await
        .unwrap();
    // Neither an answer nor EOF: the client's own timeout is what fires.
    let mut one = [0u8; 1];
    let r = tokio::time::timeout(Duration::from_millis(500), c.stream.read(&mut one)).await;
    assert!(r.is_err(), "expected a client timeout, got {r:?}");
    let e = &m.requests_for("/h")[0];
    assert_eq!((e.status, e.fault), (None, Some(Fault::Hang)));

    // reqwest with a timeout sees a timeout too.
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let err = client
        .get(format!("{}/h", m.url()))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");

    // Other connections are unaffected while one hangs.
    m.set("/ok", Response::text(200, "fine"));
    assert_eq!(get(m.addr(), "/ok", &[]).await.text(), "fine");
}

#[tokio::test]
async fn reset_sends_rst() {
    let m = v1_mock().await;
    m.set("/r", Response::fault(Fault::Reset));
    let mut c = Client::connect(m.addr()).await;
    c.stream
        .write_all(&build_request("GET", "/r", &[], b""))
        .await
        .unwrap();
    let mut buf = Vec::new();
    let r = tokio::time::timeout(Duration::from_secs(5), c.stream.read_to_end(&mut buf))
        .await
        .expect("no answer within 5s");
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert!(buf.is_empty());

    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    assert!(client.get(format!("{}/r", m.url())).send().await.is_err());
}

#[tokio::test]
async fn truncate_declares_more_than_it_sends() {
    let m = v1_mock().await;
    let body = "0123456789".repeat(10);
    m.set(
        "/t",
        Response::json(200, body.clone()).with_fault(Fault::Truncate),
    );
    let mut c = Client::connect(m.addr()).await;
    c.stream
        .write_all(&build_request("GET", "/t", &[], b""))
        .await
        .unwrap();
    let (status, headers) = c.read_head().await.unwrap();
    assert_eq!(status, 200);
    let cl = headers.iter().find(|(k, _)| k == "Content-Length").unwrap();
    assert_eq!(cl.1, "100");
    let rest = c.read_to_eof().await.unwrap();
    assert_eq!(rest, body.as_bytes()[..50]);

    // reqwest reports the short body as an error, not as a value.
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let r = client.get(format!("{}/t", m.url())).send().await.unwrap();
    assert!(r.text().await.is_err());

    // Empty body: still a lie (64 declared, 0 sent).
    m.set("/t0", Response::status(200).with_fault(Fault::Truncate));
    let mut c = Client::connect(m.addr()).await;
    c.stream
        .write_all(&build_request("GET", "/t0", &[], b""))
        .await
        .unwrap();
    let (_, headers) = c.read_head().await.unwrap();
    assert!(headers.contains(&("Content-Length".into(), "64".into())));
    assert!(c.read_to_eof().await.unwrap().is_empty());
}

#[tokio::test]
async fn slow_body_trickles() {
    let m = v1_mock().await;
    m.set(
        "/s",
        Response::text(200, "abcd")
            .with_fault(Fault::Slow)
            .with_slow_ms(80),
    );
    let t0 = Instant::now();
    let mut c = Client::connect(m.addr()).await;
    c.stream
        .write_all(&build_request("GET", "/s", &[], b""))
        .await
        .unwrap();
    let (status, _) = tokio::time::timeout(Duration::from_millis(200), c.read_head())
        .await
        .expect("headers come at once")
        .unwrap();
    assert_eq!(status, 200);
    let body = c.read_response_body_raw(4).await.unwrap();
    assert_eq!(body, b"abcd");
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(240), "{took:?}");
    // Keep-alive still works after a slow body.
    let r = c.send("GET", "/s", &[], b"").await.unwrap();
    assert_eq!(r.text(), "abcd");
}

#[tokio::test]
async fn garbage_is_not_http() {
    let m = v1_mock().await;
    m.set("/g", Response::fault(Fault::Garbage));
    let mut c = Client::connect(m.addr()).await;
    c.stream
        .write_all(&build_request("GET", "/g", &[], b""))
        .await
        .unwrap();
    assert_eq!(c.read_to_eof().await.unwrap(), GARBAGE);
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    assert!(client.get(format!("{}/g", m.url())).send().await.is_err());
}

#[tokio::test]
async fn delay_then_fault_in_sequence() {
    let m = v1_mock().await;
    m.set(
        "/seq",
        Response::sequence(vec![
            Response::fault(Fault::Reset),
            Response::status(503).with_delay(200),
            Response::text(200, "ok"),
        ]),
    );
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("{}/seq", m.url());
    assert!(client.get(&url).send().await.is_err());
    let t0 = Instant::now();
    assert_eq!(client.get(&url).send().await.unwrap().status(), 503);
    assert!(t0.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        client.get(&url).send().await.unwrap().text().await.unwrap(),
        "ok"
    );
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[tokio::test]
async fn huge_body_streams_without_allocating() {
    let m = v1_mock().await;
    m.set("/big", Response::huge(1 << 30));
    let before = rss_kib();
    for _ in 0..3 {
        let mut c = Client::connect(m.addr()).await;
        c.stream
            .write_all(&build_request("GET", "/big", &[], b""))
            .await
            .unwrap();
        let (status, headers) = c.read_head().await.unwrap();
        assert_eq!(status, 200);
        assert!(headers.contains(&("Content-Length".into(), "1073741824".into())));
        let mut got = c.buffered();
        let mut buf = vec![0u8; 8192];
        while got < 64 * 1024 {
            let n = c.stream.read(&mut buf).await.unwrap();
            assert!(n > 0);
            assert!(buf[..n].iter().all(|b| *b == b'x'));
            got += n;
        }
        drop(c);
    }
    // The server noticed the drops and is still healthy.
    assert_eq!(get(m.addr(), "/_mock/health", &[]).await.status, 200);
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "RSS grew by {grown} KiB");
}

#[tokio::test]
async fn generated_body_is_exact() {
    let m = v1_mock().await;
    let len = 3 * 65536 + 7;
    m.set("/gen", Response::huge(len).with_fill("abc"));
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let body = client
        .get(format!("{}/gen", m.url()))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(body.len() as u64, len);
    assert!(body.iter().enumerate().all(|(i, b)| *b == b"abc"[i % 3]));
}
