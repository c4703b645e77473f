//! The webhook HTTP client: the shared HTTPS client (`https.rs`: hyper, rustls with ring, the
//! system's CA roots) with the secret headers and the attempt timeout. Separate from the metadata
//! client on purpose: that one must never speak TLS nor use a proxy.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Method, Request};
use http_body_util::Full;
use hyper::body::Bytes;

use super::{SecretHeaders, WebhookError, WebhookOptions, WebhookUrl};
use crate::https::HttpsClient;

/// One HTTP(S) client for every webhook URL.
#[derive(Clone)]
pub(crate) struct Client {
    http: HttpsClient,
    headers: SecretHeaders,
    timeout: Duration,
    sandbox: Option<Arc<crate::sandbox::IpPolicy>>,
}

/// The answer to one request: its status and the headers nthd looks at.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) allowed_origin: bool,
    /// The wait the receiver asked for (`Retry-After`), if it did.
    pub(crate) retry_after: Option<Duration>,
}

/// Why a request got no HTTP answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The host name did not resolve.
    Dns(String),
    /// Nothing listens, or a firewall rejected the connection.
    Refused,
    /// No connection within the connect timeout (often a firewall that drops).
    ConnectTimeout,
    /// The TLS handshake failed (often: the server's CA is not trusted).
    Tls(String),
    /// No status line and headers within the attempt timeout.
    Timeout,
    /// Anything else (connection reset, protocol error).
    Other(String),
    /// No connection because the unit's `IPAddressDeny=` drops packets to the receiver's
    /// address: which unit and rule (`cause`), and the drop-in that allows it.
    Blocked {
        /// Which unit and which rule drop the address.
        cause: String,
        /// The drop-in that allows it.
        drop_in: String,
    },
}

impl Failure {
    /// What the user can do about it.
    pub(crate) fn hint(&self) -> String {
        self.static_hint().map_or_else(
            || match self {
                Failure::Blocked { drop_in, .. } => drop_in.clone(),
                _ => String::new(),
            },
            str::to_string,
        )
    }

    fn static_hint(&self) -> Option<&'static str> {
        Some(match self {
            Failure::Dns(_) => "check the host name and the node's DNS",
            Failure::Refused | Failure::ConnectTimeout => {
                "check the receiver and any firewall; the packaged unit allows only the metadata \
                 service's addresses (IPAddressDeny=any), so add a drop-in with \
                 IPAddressAllow= for the receiver (and its DNS server)"
            }
            Failure::Tls(_) => {
                "check the receiver's certificate; its CA must be in the system store \
                 (/etc/ssl/certs, update-ca-certificates) or in SSL_CERT_FILE"
            }
            Failure::Timeout => "the receiver is slow; nthd retries",
            Failure::Other(_) => "nthd retries",
            Failure::Blocked { .. } => return None,
        })
    }

    /// Whether the failure is one a blocked address causes: no connection, or no answer.
    fn could_be_blocked(&self) -> bool {
        matches!(
            self,
            Failure::Refused | Failure::ConnectTimeout | Failure::Timeout
        )
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Dns(e) => write!(f, "cannot resolve the host: {e}"),
            Failure::Refused => f.write_str("connection refused"),
            Failure::ConnectTimeout => f.write_str("no connection within the connect timeout"),
            Failure::Tls(e) => write!(f, "TLS error: {e}"),
            Failure::Timeout => f.write_str("no answer within the attempt timeout"),
            Failure::Other(e) => write!(f, "{e}"),
            Failure::Blocked { cause, .. } => write!(f, "no connection: {cause}"),
        }
    }
}

impl Client {
    /// Builds the client; reads the CA roots only if a URL is `https`.
    pub(crate) fn new(
        opts: &WebhookOptions,
        headers: SecretHeaders,
    ) -> Result<Client, WebhookError> {
        let https = opts.urls.iter().any(WebhookUrl::is_https);
        let http = crate::https::client(https, opts.connect_timeout).map_err(WebhookError::Tls)?;
        Ok(Client {
            http,
            headers,
            timeout: opts.attempt_timeout,
            sandbox: opts.sandbox.clone(),
        })
    }

    /// Sends one request and returns as soon as the answer's status line and headers are in;
    /// its body is read (for at most [`BODY_WAIT`] and 64 KiB) and dropped.
    pub(crate) async fn request(
        &self,
        method: Method,
        url: &WebhookUrl,
        extra: &[(&'static str, HeaderValue)],
        body: Option<(&'static str, Bytes)>,
    ) -> Result<Answer, Failure> {
        let mut req = Request::builder()
            .method(method)
            .uri(url.uri().clone())
            .header(
                http::header::USER_AGENT,
                concat!("nthd/", env!("CARGO_PKG_VERSION")),
            );
        for (k, v) in extra {
            req = req.header(*k, v.clone());
        }
        let (body, ctype) = match body {
            Some((ctype, b)) => (b, Some(ctype)),
            None => (Bytes::new(), None),
        };
        if let Some(ctype) = ctype {
            req = req.header(http::header::CONTENT_TYPE, ctype);
        }
        let mut req = req
            .body(Full::new(body))
            .map_err(|e| Failure::Other(e.to_string()))?;
        for (k, v) in self.headers.map() {
            req.headers_mut().append(k.clone(), v.clone());
        }
        // The attempt timeout covers the request and the answer's status line and headers, not
        // its body: once the status is known the outcome is, and a 2xx whose body is slow must
        // not be retried (the receiver would get the event twice).
        let resp = match tokio::time::timeout(self.timeout, self.http.request(req)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => return Err(self.blame_sandbox(url, classify(&e)).await),
            Err(_) => return Err(self.blame_sandbox(url, Failure::Timeout).await),
        };
        let status = resp.status().as_u16();
        let allowed_origin = resp.headers().contains_key("webhook-allowed-origin");
        let retry_after = crate::https::retry_after(resp.headers());
        let _ =
            tokio::time::timeout(BODY_WAIT.min(self.timeout), drain_body(resp.into_body())).await;
        Ok(Answer {
            status,
            allowed_origin,
            retry_after,
        })
    }
}

impl Client {
    /// A failure to connect to (or hear from) an address the unit's IP access lists drop is
    /// their doing: say so, with the drop-in. Anything else is returned as it is.
    async fn blame_sandbox(&self, url: &WebhookUrl, f: Failure) -> Failure {
        let (Some(policy), Some(host)) = (&self.sandbox, url.uri().host()) else {
            return f;
        };
        if !f.could_be_blocked() {
            return f;
        }
        match policy.blocked_host(host, url.port()).await {
            Some(b) => Failure::Blocked {
                cause: b.cause,
                drop_in: b.drop_in,
            },
            None => f,
        }
    }
}

/// How long the body of an answer is read, after its status line, before it is dropped. The
/// status alone decides the outcome; reading the body only lets the connection be reused.
const BODY_WAIT: Duration = Duration::from_secs(1);

/// Reads and drops at most 64 KiB of the answer, so the connection can be reused.
async fn drain_body(mut body: hyper::body::Incoming) {
    use http_body_util::BodyExt;
    let mut left: usize = 64 * 1024;
    while let Some(Ok(frame)) = body.frame().await {
        let n = frame.data_ref().map_or(0, hyper::body::Bytes::len);
        match left.checked_sub(n) {
            Some(l) => left = l,
            None => return,
        }
    }
}

/// Names the cause of a failed request from the error's chain.
fn classify(e: &hyper_util::client::legacy::Error) -> Failure {
    let mut cur: Option<&(dyn StdError + 'static)> = e.source();
    let mut text = e.to_string();
    while let Some(err) = cur {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Failure::Tls(tls.to_string());
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return Failure::Refused,
                std::io::ErrorKind::TimedOut => return Failure::ConnectTimeout,
                _ => {}
            }
            if let Some(tls) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return Failure::Tls(tls.to_string());
            }
        }
        let s = err.to_string();
        // rustls errors can arrive behind an io::Error whose source chain skips them.
        if [
            "peer certificate",
            "fatal alert",
            "corrupt message",
            "HandshakeFailure",
        ]
        .iter()
        .any(|m| s.contains(m))
        {
            return Failure::Tls(s);
        }
        if s.starts_with("dns error") {
            let detail = err
                .source()
                .map(std::string::ToString::to_string)
                .unwrap_or(s);
            return Failure::Dns(detail);
        }
        text = format!("{text}: {s}");
        cur = err.source();
    }
    Failure::Other(text)
}
