//! AWS IMDSv2 and Alibaba hardened-mode token emulation.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::Duration;

use common::{aws_token, get, req};
use nthd_testkit::imds::{
    Config, MockImds, Response, TokenMode, AWS_TOKEN_HEADER, EC2_NOT_FOUND, EC2_UNAUTHORIZED,
};

const IA: &str = "/latest/meta-data/spot/instance-action";
const NOTICE: &str = r#"{"action":"terminate","time":"2030-01-01T00:00:00Z"}"#;

#[tokio::test]
async fn aws_token_required_by_default() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(IA, Response::json(200, NOTICE));

    // EC2's answers carry their XHTML pages.
    let r = get(m.addr(), IA, &[]).await;
    assert_eq!((r.status, r.text().as_str()), (401, EC2_UNAUTHORIZED));

    let token = put_aws_token(m.addr()).await;

    let r = get(m.addr(), IA, &[(AWS_TOKEN_HEADER, &token)]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), NOTICE);
    assert_eq!(r.header("Content-Type"), Some("application/json"));

    // Unset path with a valid token: a 404 with EC2's page; with `error_bodies` off, empty.
    let nope = |m: &MockImds, token: &str| {
        let (addr, token) = (m.addr(), token.to_string());
        async move {
            get(
                addr,
                "/latest/meta-data/nope",
                &[(AWS_TOKEN_HEADER, &token)],
            )
            .await
        }
    };
    let r = nope(&m, &token).await;
    assert_eq!((r.status, r.text().as_str()), (404, EC2_NOT_FOUND));
    assert_eq!(r.header("Content-Type"), Some("text/html"));
    m.config(|c| c.error_bodies = false);
    let r = nope(&m, &token).await;
    assert_eq!((r.status, r.body.len()), (404, 0));
    m.config(|c| *c = Config::default());

    // A made-up token is rejected.
    let r = get(m.addr(), IA, &[(AWS_TOKEN_HEADER, "AQAEAbogus")]).await;
    assert_eq!(r.status, 401);

    // Two tokens are distinct and both valid.
    let t2 = aws_token(m.addr(), 60).await;
    assert_ne!(t2, token);
    assert_eq!(
        get(m.addr(), IA, &[(AWS_TOKEN_HEADER, &t2)]).await.status,
        200
    );

    assert_token_log(&m, &token);
}

/// `PUT /latest/api/token` asking for a token of `ttl` seconds.
async fn put_token(addr: std::net::SocketAddr, ttl: &str) -> common::HttpResp {
    let ttl_header = [("X-aws-ec2-metadata-token-ttl-seconds", ttl)];
    req(addr, "PUT", "/latest/api/token", &ttl_header, b"").await
}

/// `PUT /latest/api/token` for 6 h: 200, a 56-character AWS token, the TTL echoed.
async fn put_aws_token(addr: std::net::SocketAddr) -> String {
    let put = put_token(addr, "21600").await;
    assert_eq!(put.status, 200);
    assert_eq!(put.header("Content-Type"), Some("text/plain"));
    assert_eq!(
        put.header("X-aws-ec2-metadata-token-ttl-seconds"),
        Some("21600")
    );
    let token = put.text();
    assert_eq!(token.len(), 56);
    assert!(token.starts_with("AQAEA"));
    token
}

/// What [`aws_token_required_by_default`] leaves in the stats and the request log: two tokens,
/// the first request refused for want of one, the second made with `token`.
fn assert_token_log(m: &MockImds, token: &str) {
    assert_eq!(m.stats().tokens_issued, 2);
    assert_eq!(m.stats().aws_tokens_issued, 2);
    let log = m.requests_for(IA);
    assert_eq!(log.len(), 4);
    assert_eq!(log[0].note.as_deref(), Some("token required"));
    assert_eq!(log[0].status, Some(401));
    assert_eq!(log[1].header(AWS_TOKEN_HEADER), Some(token));
    let puts = m.requests_for("/latest/api/token");
    assert_eq!(puts.len(), 2);
    assert!(puts[0]
        .note
        .as_deref()
        .unwrap()
        .starts_with("issued Aws token"));
}

#[tokio::test]
async fn aws_token_ttl_validation() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    for ttl in ["0", "21601", "abc", "-1", ""] {
        let r = put_token(m.addr(), ttl).await;
        assert_eq!(r.status, 400, "ttl {ttl:?}");
    }
    let r = req(m.addr(), "PUT", "/latest/api/token", &[], b"").await;
    assert_eq!(r.status, 400, "missing TTL header");
    for ttl in ["1", "21600"] {
        let r = req(
            m.addr(),
            "PUT",
            "/latest/api/token",
            &[("x-aws-ec2-metadata-token-ttl-seconds", ttl)],
            b"",
        )
        .await;
        assert_eq!(r.status, 200, "ttl {ttl:?} (header name case-insensitive)");
    }
    assert_eq!(m.stats().tokens_issued, 2);
}

#[tokio::test]
async fn aws_token_expires() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(IA, Response::json(200, NOTICE));
    let token = aws_token(m.addr(), 1).await;
    assert_eq!(
        get(m.addr(), IA, &[(AWS_TOKEN_HEADER, &token)])
            .await
            .status,
        200
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = get(m.addr(), IA, &[(AWS_TOKEN_HEADER, &token)]).await;
    assert_eq!(r.status, 401);
    let last = m.requests_for(IA).pop().unwrap();
    assert_eq!(
        last.note.as_deref(),
        Some("X-aws-ec2-metadata-token: token expired")
    );
}

#[tokio::test]
async fn aws_token_optional_and_refused() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(IA, Response::json(200, NOTICE));

    m.config(|c| c.aws_token = TokenMode::Optional);
    assert_eq!(get(m.addr(), IA, &[]).await.status, 200, "IMDSv1 allowed");
    let t = aws_token(m.addr(), 60).await;
    assert_eq!(
        get(m.addr(), IA, &[(AWS_TOKEN_HEADER, &t)]).await.status,
        200
    );
    assert_eq!(
        get(m.addr(), IA, &[(AWS_TOKEN_HEADER, "junk")])
            .await
            .status,
        401,
        "a presented invalid token is still rejected"
    );

    m.config(|c| c.aws_token = TokenMode::Refused);
    let put = put_token(m.addr(), "60").await;
    assert_eq!(put.status, 403);
    m.config(|c| c.token_put_status = 405);
    let put = put_token(m.addr(), "60").await;
    assert_eq!(put.status, 405);
    assert_eq!(get(m.addr(), IA, &[]).await.status, 200);
    assert_eq!(
        get(m.addr(), IA, &[(AWS_TOKEN_HEADER, "junk")])
            .await
            .status,
        200,
        "token header ignored when tokens are refused"
    );
    assert_eq!(m.stats().tokens_issued, 1);
}

#[tokio::test]
async fn token_always_401() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(IA, Response::json(200, NOTICE));
    let t = aws_token(m.addr(), 60).await;
    m.config(|c| c.token_always_401 = true);
    assert_eq!(
        get(m.addr(), IA, &[(AWS_TOKEN_HEADER, &t)]).await.status,
        401
    );
    // The token endpoint itself still works.
    aws_token(m.addr(), 60).await;
    m.config(|c| c.token_always_401 = false);
    assert_eq!(
        get(m.addr(), IA, &[(AWS_TOKEN_HEADER, &t)]).await.status,
        200
    );
}

#[tokio::test]
async fn token_endpoint_can_be_scripted() {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set("/latest/api/token", Response::status(503));
    let put = put_token(m.addr(), "60").await;
    assert_eq!(put.status, 503);
    assert_eq!(m.stats().tokens_issued, 0);
    m.clear("/latest/api/token");
    aws_token(m.addr(), 60).await;
}

#[tokio::test]
async fn alibaba_hardened_mode() {
    const ALI_TTL: &str = "X-aliyun-ecs-metadata-token-ttl-seconds";
    const ALI_TOKEN: &str = "X-aliyun-ecs-metadata-token";
    const ALI_PATH: &str = "/latest/meta-data/instance/spot/termination-time";
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    m.set(ALI_PATH, Response::text(200, "2030-01-01T00:00:00Z"));

    // Default: AWS required -> an Alibaba-style client without token gets 401.
    assert_eq!(get(m.addr(), ALI_PATH, &[]).await.status, 401);
    // Alibaba normal mode (the usual Alibaba scenario): no tokens needed.
    m.config(|c| c.aws_token = TokenMode::Optional);
    assert_eq!(get(m.addr(), ALI_PATH, &[]).await.status, 200);

    // Hardened mode.
    m.config(|c| c.alibaba_token = TokenMode::Required);
    assert_eq!(get(m.addr(), ALI_PATH, &[]).await.status, 401);
    let put = req(
        m.addr(),
        "PUT",
        "/latest/api/token",
        &[(ALI_TTL, "300")],
        b"",
    )
    .await;
    assert_eq!(put.status, 200);
    assert_eq!(put.header(ALI_TTL), Some("300"));
    let tok = put.text();
    let r = get(m.addr(), ALI_PATH, &[(ALI_TOKEN, &tok)]).await;
    assert_eq!((r.status, r.text().as_str()), (200, "2030-01-01T00:00:00Z"));

    // Tokens are scheme-specific.
    let aws = aws_token(m.addr(), 60).await;
    assert_eq!(
        get(m.addr(), ALI_PATH, &[(ALI_TOKEN, &aws)]).await.status,
        401
    );
    assert_eq!(
        get(m.addr(), ALI_PATH, &[(AWS_TOKEN_HEADER, &tok)])
            .await
            .status,
        401
    );
    let s = m.stats();
    assert_eq!(
        (
            s.alibaba_tokens_issued,
            s.aws_tokens_issued,
            s.tokens_issued
        ),
        (1, 1, 2)
    );
}
