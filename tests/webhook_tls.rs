//! HTTPS webhooks: a receiver with a certificate from a CA made at test time, trusted through
//! SSL_CERT_FILE (as an operator would point nthd at a private CA bundle). Its own test binary:
//! it sets SSL_CERT_FILE before any thread starts.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod webhook_support;

use std::sync::Arc;
use std::time::Duration;

use nthd::testing::notice::{Notice, NoticeId, NoticeKind, NoticeStatus, SourceId};
use nthd::testing::policy::{Action, Decision, When};
use nthd::testing::webhook::{
    parse_url, probe, Context, Event, ProbeOutcome, WebhookOptions, Webhooks,
};
use tokio_rustls::rustls;
use webhook_support::{Receiver, Script, Stream};

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

async fn tls_receiver(p: &Pki) -> Receiver {
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![p.cert.clone()], p.key.clone_key())
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    Receiver::start_wrapped(
        Script::Statuses(vec![200]),
        Arc::new(move |tcp| {
            let acceptor = acceptor.clone();
            Box::pin(async move {
                let s = acceptor.accept(tcp).await.ok()?;
                Some(Box::new(s) as Box<dyn Stream>)
            })
        }),
    )
    .await
}

#[test]
fn https_with_a_ca_from_ssl_cert_file() {
    let p = pki();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("ca.pem");
    std::fs::write(&bundle, &p.ca_pem).unwrap();
    // SAFETY (set_var): no other thread exists yet in this test binary.
    std::env::set_var("SSL_CERT_FILE", &bundle);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let r = tls_receiver(&p).await;
        let url = format!("https://localhost:{}/hook", r.port);
        let opts = WebhookOptions {
            urls: vec![parse_url(&url).unwrap()],
            ..WebhookOptions::default()
        };
        let results = probe(&opts).await;
        assert!(results[0].reachable(), "{}", results[0]);
        let w = Webhooks::start(&opts, Context::for_this_host()).unwrap();
        let n = Notice {
            kind: NoticeKind::GcpPreempt,
            source: SourceId::new("gcp/preempted"),
            id: NoticeId::from_parts(&["gcp", "preempted"]),
            event_id: None,
            deadline: None,
            status: NoticeStatus::Active,
            detail: "preempted".into(),
            raw: String::new(),
        };
        let d = Decision {
            action: Action::PowerOff,
            when: When::Now,
            reason: "x".into(),
        };
        w.send(Event::notice(&n, &d));
        w.drain(Duration::from_secs(20)).await;
        let got = r.all();
        assert_eq!(got.len(), 2, "the probe and the event");
        assert_eq!(got[1].json()["type"], "io.nthd.notice");

        // A CA that is not trusted: the probe names TLS and the CA store.
        std::fs::write(&bundle, pki().ca_pem).unwrap();
        let results = probe(&opts).await;
        let ProbeOutcome::Unreachable { cause, hint } = &results[0].outcome else {
            panic!("{}", results[0]);
        };
        assert!(cause.starts_with("TLS error"), "{cause}");
        assert!(hint.contains("SSL_CERT_FILE"), "{hint}");
    });
}
