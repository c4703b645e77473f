//! The Auto Scaling client over real TLS: an endpoint with a certificate from a CA made at test
//! time, trusted through SSL_CERT_FILE (as with a private CA in front of a VPC endpoint), and
//! refused with a TLS error when the CA is not trusted. Its own test binary: it sets
//! SSL_CERT_FILE before any thread starts.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use nthd::testing::asg;
use nthd::testing::config::Cli;
use nthd_testkit::imds::{MockImds, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

struct Pki {
    ca_pem: String,
    cert: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
}

fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "nthd test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        cert: cert.der().clone(),
        key: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    }
}

/// An HTTPS endpoint that answers every call with success; the requests' heads, as received.
async fn endpoint(p: &Pki) -> (u16, Arc<Mutex<Vec<String>>>) {
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![p.cert.clone()], p.key.clone_key())
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, log) = (acceptor.clone(), log.clone());
            tokio::spawn(async move {
                let Ok(mut s) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !String::from_utf8_lossy(&buf).contains("Version=2011-01-01") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    }
                }
                log.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buf).into_owned());
                let body = "<R><LifecycleHooks><member><LifecycleHookName>h</LifecycleHookName>\
                            <HeartbeatTimeout>300</HeartbeatTimeout></member></LifecycleHooks></R>";
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    (port, seen)
}

async fn imds() -> MockImds {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    let md = "/latest/meta-data";
    m.set(&format!("{md}/instance-id"), Response::text(200, "i-1"));
    m.set(
        &format!("{md}/placement/region"),
        Response::text(200, "us-east-1"),
    );
    m.set(
        &format!("{md}/iam/security-credentials/"),
        Response::text(200, "r"),
    );
    m.set(
        &format!("{md}/iam/security-credentials/r"),
        Response::json(
            200,
            r#"{"AccessKeyId":"ASIATLS","SecretAccessKey":"tls-secret","Token":"tls-token"}"#,
        ),
    );
    m
}

/// The two requests the endpoint saw; the last one the signed CompleteLifecycleAction.
fn check_signed_completion(heads: &[String], port: u16) {
    assert_eq!(
        heads.len(),
        2,
        "DescribeLifecycleHooks, CompleteLifecycleAction"
    );
    let last = heads[1].to_ascii_lowercase();
    assert!(last.starts_with("post / http/1.1"), "{last}");
    assert!(last.contains(&format!("host: localhost:{port}")), "{last}");
    assert!(last.contains("x-amz-security-token: tls-token"), "{last}");
    assert!(
        last.contains("authorization: aws4-hmac-sha256 credential=asiatls/")
            && last.contains("/us-east-1/autoscaling/aws4_request")
            && last.contains("signedheaders=content-type;host;x-amz-date;x-amz-security-token"),
        "{last}"
    );
    assert!(last.contains("lifecycleactionresult=abandon"), "{last}");
}

#[test]
fn https_to_an_endpoint_whose_ca_is_in_ssl_cert_file() {
    let p = pki();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("ca.pem");
    std::fs::write(&bundle, &p.ca_pem).unwrap();
    // SAFETY (set_var): no other thread exists yet in this test binary.
    std::env::set_var("SSL_CERT_FILE", &bundle);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (port, seen) = endpoint(&p).await;
        let m = imds().await;
        let url = format!("https://localhost:{port}");
        let cli = Cli::try_parse_from([
            "nthd".to_string(),
            format!("--imds-endpoint={}", m.url()),
            "--asg-complete=ABANDON".into(),
            "--asg-lifecycle-hook=h".into(),
            "--asg-group=g".into(),
            format!("--asg-endpoint={url}"),
            "--settings-file=none".into(),
        ])
        .unwrap();
        let done = asg::complete(&cli.opts, Duration::from_secs(5)).await;
        assert_eq!(
            done.unwrap().unwrap(),
            (1, "g".into(), "h".into(), "ABANDON")
        );
        check_signed_completion(&seen.lock().unwrap(), port);
        // A CA that is not trusted: a connection error naming the endpoint and the action.
        std::fs::write(&bundle, pki().ca_pem).unwrap();
        let err = asg::complete(&cli.opts, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap_err();
        assert!(
            err.contains(&url) && err.contains("DescribeLifecycleHooks"),
            "{err}"
        );
        assert!(
            err.to_ascii_lowercase().contains("certificate") && err.contains("SSL_CERT_FILE"),
            "{err}"
        );
        assert!(
            !err.contains("tls-secret") && !err.contains("tls-token"),
            "{err}"
        );
    });
}
