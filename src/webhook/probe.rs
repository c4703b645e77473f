//! `nthd check`: can each webhook URL be reached? An HTTP OPTIONS request with
//! `WebHook-Request-Origin`, the CloudEvents HTTP webhook abuse-protection handshake.

use std::fmt;

use http::{HeaderValue, Method};

use super::client::{Client, Failure};
use super::event::hostname;
use super::{SecretHeaders, WebhookOptions, WebhookUrl};

/// What the probe found for one URL.
#[derive(Clone, Debug)]
pub struct ProbeResult {
    /// The URL (shown as `scheme://host[:port]`).
    pub url: WebhookUrl,
    /// What happened.
    pub outcome: ProbeOutcome,
}

/// The outcome of one probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The receiver answered, with any HTTP status.
    Reachable {
        /// The HTTP status of the OPTIONS answer.
        status: u16,
        /// Whether the answer had `WebHook-Allowed-Origin` (a CloudEvents-aware receiver).
        allowed_origin: bool,
    },
    /// No connection, because the IP access lists of the unit the probe runs in drop the
    /// receiver's address.
    Blocked {
        /// Which unit and which rule drop the address.
        cause: String,
        /// The drop-in that allows it.
        drop_in: String,
    },
    /// No HTTP answer.
    Unreachable {
        /// The cause, e.g. `connection refused` or `TLS error: …`.
        cause: String,
        /// What to do about it.
        hint: String,
    },
}

impl ProbeResult {
    /// Whether the receiver answered.
    pub fn reachable(&self) -> bool {
        matches!(self.outcome, ProbeOutcome::Reachable { .. })
    }
}

impl fmt::Display for ProbeResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            ProbeOutcome::Reachable {
                status,
                allowed_origin,
            } => write!(
                f,
                "webhook {}: reachable (OPTIONS answered HTTP {status}{})",
                self.url,
                if *allowed_origin {
                    ", WebHook-Allowed-Origin present"
                } else {
                    ""
                }
            ),
            ProbeOutcome::Unreachable { cause, hint } => {
                write!(f, "webhook {}: {cause}; {hint}", self.url)
            }
            ProbeOutcome::Blocked { cause, drop_in } => {
                write!(f, "webhook {}: no connection: {cause}; {drop_in}", self.url)
            }
        }
    }
}

/// Probes every URL of `opts`, with the headers file's headers (which must be owned by root).
pub async fn probe(opts: &WebhookOptions) -> Vec<ProbeResult> {
    let headers = match &opts.headers_file {
        Some(p) => SecretHeaders::load(p, 0),
        None => Ok(SecretHeaders::none()),
    };
    match headers {
        Ok(h) => probe_with_headers(opts, h).await,
        Err(e) => all_failed(opts, &e.to_string(), "fix the headers file first"),
    }
}

/// [`probe`] with headers already loaded (`opts.headers_file` is not read).
pub async fn probe_with_headers(opts: &WebhookOptions, headers: SecretHeaders) -> Vec<ProbeResult> {
    let client = match Client::new(opts, headers) {
        Ok(c) => c,
        Err(e) => return all_failed(opts, &e.to_string(), "see above"),
    };
    let origin =
        HeaderValue::from_str(&hostname()).unwrap_or(HeaderValue::from_static("localhost"));
    let mut set = tokio::task::JoinSet::new();
    for (i, url) in opts.urls.iter().enumerate() {
        let (client, url, origin) = (client.clone(), url.clone(), origin.clone());
        set.spawn(async move {
            let extra = [("webhook-request-origin", origin)];
            let outcome = match client.request(Method::OPTIONS, &url, &extra, None).await {
                Ok(a) => ProbeOutcome::Reachable {
                    status: a.status,
                    allowed_origin: a.allowed_origin,
                },
                Err(f) => unreachable(&f),
            };
            (i, ProbeResult { url, outcome })
        });
    }
    let mut results: Vec<(usize, ProbeResult)> = set.join_all().await;
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

fn unreachable(f: &Failure) -> ProbeOutcome {
    if let Failure::Blocked { cause, drop_in } = f {
        return ProbeOutcome::Blocked {
            cause: cause.clone(),
            drop_in: drop_in.clone(),
        };
    }
    ProbeOutcome::Unreachable {
        cause: f.to_string(),
        hint: f.hint(),
    }
}

fn all_failed(opts: &WebhookOptions, cause: &str, hint: &str) -> Vec<ProbeResult> {
    opts.urls
        .iter()
        .map(|url| ProbeResult {
            url: url.clone(),
            outcome: ProbeOutcome::Unreachable {
                cause: cause.to_string(),
                hint: hint.to_string(),
            },
        })
        .collect()
}
