//! The one HTTPS client builder: hyper over rustls (ring) with the system's CA roots, HTTP/1
//! only, one kept connection per host. The webhook deliveries and the Auto Scaling API use it;
//! the metadata service, which is plain HTTP on a link-local address, has its own reader
//! (`imds/blocking.rs`).
//!
//! Depends on nothing else in nthd.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;

/// A client for `http://` and `https://` URLs.
pub(crate) type HttpsClient = HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Builds the client. The CA roots are read only when `https` (some URL it will reach is
/// `https`): an error says what to install when there are none. `connect_timeout` bounds each
/// TCP connection.
pub(crate) fn client(https: bool, connect_timeout: Duration) -> Result<HttpsClient, String> {
    let roots = if https {
        system_roots()?
    } else {
        rustls::RootCertStore::empty()
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_connect_timeout(Some(connect_timeout));
    tcp.set_nodelay(true);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp);
    Ok(HyperClient::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1)
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector))
}

/// The system's CA roots (`SSL_CERT_FILE` / `SSL_CERT_DIR` when set). Unreadable certificates
/// are skipped; no usable root at all is an error, as every HTTPS request would fail.
fn system_roots() -> Result<rustls::RootCertStore, String> {
    roots_from(rustls_native_certs::load_native_certs())
}

/// The usable roots of what was loaded, or what to install when there is none.
fn roots_from(
    found: rustls_native_certs::CertificateResult,
) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    let (_, ignored) = roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .first()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        return Err(format!(
            "no CA certificate found in the system store{why}; install ca-certificates, or \
             point SSL_CERT_FILE at a PEM bundle"
        ));
    }
    if ignored > 0 || !found.errors.is_empty() {
        tracing::debug!(
            "{} CA roots loaded, {ignored} unusable, {} read errors",
            roots.len(),
            found.errors.len()
        );
    }
    Ok(roots)
}

/// The wait an answer asks for with `Retry-After`, if it does (and says it legibly).
pub(crate) fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    crate::timefmt::parse_retry_after(value.trim(), std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_roots_are_read_for_plain_http_and_none_found_says_what_to_install() {
        assert!(client(false, Duration::from_secs(1)).is_ok());
        let none = roots_from(rustls_native_certs::CertificateResult::default());
        let e = none.err().unwrap_or_default();
        assert!(e.contains("install ca-certificates"), "{e}");
        assert!(e.contains("SSL_CERT_FILE"), "{e}");
    }
}
