//! The JSON-facing data model of the mock IMDS: scripted responses, configuration, the request
//! log and route-change events.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Byte-level misbehaviour to inject instead of (or while) answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// Read the request, never answer, keep the socket open (until the client closes it or the
    /// mock shuts down).
    Hang,
    /// Close the connection without answering, with a TCP RST (`SO_LINGER` 0).
    Reset,
    /// Send the status line and headers with a `Content-Length` larger than the bytes that
    /// follow, send the first half of the body, then close (FIN).
    Truncate,
    /// Send the headers at once, then the body one byte every `slow_ms` milliseconds
    /// (default 100).
    Slow,
    /// Send bytes that are not HTTP, then close.
    Garbage,
}

/// Default for [`Response::slow_ms`].
pub const DEFAULT_SLOW_MS: u64 = 100;

/// A scripted answer for a route.
///
/// JSON form: `{"status":200, "body":"text", "headers":{"Content-Type":"application/json"},
/// "delay_ms":0, "fault":null}` plus the optional `slow_ms`, `body_len` + `body_fill` and
/// `sequence` fields. Unknown fields are rejected, so a typo in a scripted scenario fails loudly
/// instead of being ignored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// Response body (ignored when `body_len` is set).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub body: String,
    /// Extra response headers. `Content-Length` is computed unless given here (giving it here
    /// is a way to lie about the length).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Wait this long (after reading the request) before answering or applying the fault.
    #[serde(skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// Fault to inject, if any.
    pub fault: Option<Fault>,
    /// Per-byte interval for [`Fault::Slow`]; [`DEFAULT_SLOW_MS`] when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_ms: Option<u64>,
    /// Stream a generated body of exactly this many bytes instead of `body` (never allocated
    /// whole, so 1 GiB is fine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_len: Option<u64>,
    /// Pattern repeated to fill a `body_len` body (default `"x"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_fill: Option<String>,
    /// Successive requests to the route get successive entries; the last one sticks. When set,
    /// every other field of the outer object must be left at its default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<Vec<Response>>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Default for Response {
    fn default() -> Self {
        Response {
            status: 200,
            body: String::new(),
            headers: BTreeMap::new(),
            delay_ms: 0,
            fault: None,
            slow_ms: None,
            body_len: None,
            body_fill: None,
            sequence: None,
        }
    }
}

/// What EC2's metadata service sends with a 404 (a path with nothing there, such as the spot
/// `instance-action` when no notice is pending): an XHTML page, as the amazon-ec2-metadata-mock
/// project records it (`pkg/server/httpserver.go`).
pub const EC2_NOT_FOUND: &str = "<?xml version=\"1.0\" encoding=\"iso-8859-1\"?>\n\
<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\"\n\
\t\"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n\
<html xmlns=\"http://www.w3.org/1999/xhtml\" xml:lang=\"en\" lang=\"en\">\n \
<head>\n  <title>404 - Not Found</title>\n </head>\n <body>\n  <h1>404 - Not Found</h1>\n \
</body>\n</html>\n";

/// What EC2's metadata service sends with a 401 (a missing, unknown or expired IMDSv2 token).
pub const EC2_UNAUTHORIZED: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\" \
\"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n\
<html xmlns=\"http://www.w3.org/1999/xhtml\" xml:lang=\"en\" lang=\"en\">\n   <head>\n      \
<title>401 - Unauthorized</title>\n   </head>\n   <body>\n      <h1>401 - Unauthorized</h1>\n   \
</body>\n</html>\n";

impl Response {
    /// An error as the real service sends it when `error_bodies` is on: EC2's page under
    /// `/latest/`, an empty body elsewhere (what the other clouds send was not recorded).
    pub fn error_for(status: u16, path: &str, error_bodies: bool) -> Self {
        let page = match status {
            404 => EC2_NOT_FOUND,
            401 => EC2_UNAUTHORIZED,
            _ => "",
        };
        match error_bodies && !page.is_empty() && path.starts_with("/latest/") {
            true => Response::status(status)
                .with_body(page)
                .with_header("Content-Type", "text/html"),
            false => Response::status(status),
        }
    }

    /// A response with this status and an empty body.
    pub fn status(status: u16) -> Self {
        Response {
            status,
            ..Response::default()
        }
    }

    /// A `text/plain` response.
    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Response::status(status)
            .with_body(body)
            .with_header("Content-Type", "text/plain")
    }

    /// An `application/json` response; `body` is sent verbatim (it is not validated, so broken
    /// JSON can be scripted on purpose).
    pub fn json(status: u16, body: impl Into<String>) -> Self {
        Response::status(status)
            .with_body(body)
            .with_header("Content-Type", "application/json")
    }

    /// A 200 response whose body is `len` bytes of `x`, streamed without being allocated.
    pub fn huge(len: u64) -> Self {
        Response {
            body_len: Some(len),
            ..Response::status(200)
        }
    }

    /// A 200 response that injects `fault`.
    pub fn fault(fault: Fault) -> Self {
        Response::status(200).with_fault(fault)
    }

    /// Successive requests get successive entries; the last one sticks.
    pub fn sequence(entries: Vec<Response>) -> Self {
        Response {
            sequence: Some(entries),
            ..Response::default()
        }
    }

    /// Replace the body.
    pub fn with_body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self
    }

    /// Add (or replace) a response header.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Answer only after `ms` milliseconds.
    pub fn with_delay(mut self, ms: u64) -> Self {
        self.delay_ms = ms;
        self
    }

    /// Inject `fault`.
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// Per-byte interval for [`Fault::Slow`].
    pub fn with_slow_ms(mut self, ms: u64) -> Self {
        self.slow_ms = Some(ms);
        self
    }

    /// Fill pattern for a [`Response::huge`] body.
    pub fn with_fill(mut self, fill: impl Into<String>) -> Self {
        self.body_fill = Some(fill.into());
        self
    }

    /// Check that the response can be served as scripted.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(seq) = &self.sequence {
            let outer = Response {
                sequence: None,
                ..self.clone()
            };
            if outer != Response::default() {
                return Err("a response with \"sequence\" must not set any other field".into());
            }
            if seq.is_empty() {
                return Err("\"sequence\" must not be empty".into());
            }
            for (i, e) in seq.iter().enumerate() {
                if e.sequence.is_some() {
                    return Err(format!("sequence[{i}]: nested sequences are not supported"));
                }
                e.validate().map_err(|m| format!("sequence[{i}]: {m}"))?;
            }
            return Ok(());
        }
        if !(100..=999).contains(&self.status) {
            return Err(format!("status {} is not a 3-digit code", self.status));
        }
        if self.body_len.is_some() && !self.body.is_empty() {
            return Err("set either \"body\" or \"body_len\", not both".into());
        }
        if self.body_fill.is_some() && self.body_len.is_none() {
            return Err("\"body_fill\" needs \"body_len\"".into());
        }
        if self.body_fill.as_deref() == Some("") {
            return Err("\"body_fill\" must not be empty".into());
        }
        for (k, v) in &self.headers {
            let bad_name = k.is_empty() || k.bytes().any(|b| b <= b' ' || b == b':' || b >= 0x7f);
            if bad_name {
                return Err(format!("invalid header name {k:?}"));
            }
            if v.bytes().any(|b| b == b'\r' || b == b'\n') {
                return Err(format!("header {k}: value must not contain CR or LF"));
            }
        }
        if self.slow_ms.is_some() && self.fault != Some(Fault::Slow) {
            return Err("\"slow_ms\" only applies to \"fault\":\"slow\"".into());
        }
        Ok(())
    }

    /// Length of the body this response sends (when not faulted).
    pub fn content_length(&self) -> u64 {
        self.body_len.unwrap_or(self.body.len() as u64)
    }

    /// The `ETag` the mock sends for this response: 16 hex digits of FNV-1a 64 over the body.
    /// For a generated (`body_len`) body it hashes the fill pattern and the length instead of
    /// the bytes, so a 1 GiB body costs nothing; it is still stable for the same body.
    pub fn etag(&self) -> String {
        let h = match self.body_len {
            Some(len) => {
                let mut h = fnv1a(FNV_OFFSET, b"generated:");
                h = fnv1a(h, self.body_fill.as_deref().unwrap_or("x").as_bytes());
                fnv1a(h, &len.to_le_bytes())
            }
            None => fnv1a(FNV_OFFSET, self.body.as_bytes()),
        };
        format!("{h:016x}")
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// How a token scheme is enforced on `/latest/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenMode {
    /// GETs under `/latest/` without a valid token of this scheme get 401 (IMDSv2-only).
    Required,
    /// Tokens are issued and checked when presented, but not needed (IMDSv1 allowed too).
    Optional,
    /// The token `PUT` answers `token_put_status`; the token header is ignored on GETs.
    Refused,
}

/// Server-wide behaviour knobs. JSON field names are the Rust field names.
///
/// Token rules for requests under `/latest/` (other than the token `PUT`), in order:
/// 1. `token_always_401` → 401.
/// 2. A presented `X-aws-ec2-metadata-token` (when `aws_token` is not `refused`) or
///    `X-aliyun-ecs-metadata-token` (when `alibaba_token` is not `refused`) that is unknown,
///    expired, or issued for the other scheme → 401.
/// 3. No valid token presented while `aws_token` or `alibaba_token` is `required` → 401.
///
/// So an Alibaba scenario that sends no token needs `aws_token` set to `optional` or `refused`
/// (the default, `required`, models IMDSv2-only AWS).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// AWS IMDSv2 token enforcement (default `required`).
    pub aws_token: TokenMode,
    /// Status of the token `PUT` for a scheme in `refused` mode (default 403; 405 models an
    /// IMDSv1-only endpoint).
    pub token_put_status: u16,
    /// Every request under `/latest/` (other than the token `PUT`) answers 401, token or not.
    pub token_always_401: bool,
    /// Alibaba hardened-mode token enforcement (default `optional`).
    pub alibaba_token: TokenMode,
    /// Azure: requests under `/metadata/` without an `api-version` query parameter get 400, as
    /// the real service does (default true).
    pub azure_require_api_version: bool,
    /// Errors carry the bodies the real service sends: EC2's XHTML pages with a 404 for a path
    /// nothing is set at, and with a 401 for a token missing, unknown or expired (default
    /// true). Off: empty bodies.
    pub error_bodies: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            aws_token: TokenMode::Required,
            token_put_status: 403,
            token_always_401: false,
            alibaba_token: TokenMode::Optional,
            azure_require_api_version: true,
            error_bodies: true,
        }
    }
}

impl Config {
    /// Merge the fields present in a JSON object into this config. Unknown fields or wrong
    /// types are an error and leave the config unchanged.
    pub fn merge_json(&mut self, patch: &serde_json::Value) -> Result<(), String> {
        let obj = patch
            .as_object()
            .ok_or_else(|| "config patch must be a JSON object".to_string())?;
        let mut cur = serde_json::to_value(&*self).map_err(|e| e.to_string())?;
        let cur_obj = cur.as_object_mut().expect("Config serializes to an object");
        for (k, v) in obj {
            cur_obj.insert(k.clone(), v.clone());
        }
        let next: Config = serde_json::from_value(cur).map_err(|e| e.to_string())?;
        if !(100..=999).contains(&next.token_put_status) {
            return Err(format!(
                "token_put_status {} is not a 3-digit code",
                next.token_put_status
            ));
        }
        *self = next;
        Ok(())
    }
}

/// One request as the mock saw it. Control-API (`/_mock/`) requests are not logged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// Increasing id (never reused, also across `DELETE /_mock/log`).
    pub id: u64,
    /// Wall-clock arrival time (headers and body fully read), Unix milliseconds.
    pub t_ms: u64,
    /// Connection number (requests on one keep-alive connection share it).
    pub conn: u64,
    /// Client address.
    pub peer: String,
    /// The listening address the request came in on.
    pub local: String,
    /// Request method.
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// Raw query string (without `?`), empty if none.
    pub query: String,
    /// Headers in arrival order, names as sent.
    pub headers: Vec<(String, String)>,
    /// Body as (lossy) UTF-8, at most 4 KiB.
    pub body: String,
    /// Real body length in bytes.
    pub body_len: usize,
    /// `body` was cut at 4 KiB.
    pub body_truncated: bool,
    /// Status the mock chose (None while a long poll is pending, or for faults that send no
    /// status line).
    pub status: Option<u16>,
    /// Fault the mock injected.
    pub fault: Option<Fault>,
    /// Why the mock answered as it did when that was not a plain route lookup (token issued,
    /// token missing, wrong header, long-poll outcome...).
    pub note: Option<String>,
}

impl LoggedRequest {
    /// First header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// First query parameter with this name, percent-decoded.
    pub fn query_param(&self, name: &str) -> Option<String> {
        super::http::query_pairs(&self.query)
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
}

/// A change made through the control API or the library handle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Increasing sequence number.
    pub seq: u64,
    /// Wall-clock time of the change, Unix milliseconds.
    pub t_ms: u64,
    /// `"route"`, `"config"` or `"reset"`.
    pub kind: String,
    /// `"set"` or `"clear"` for routes, `"set"` for config.
    pub action: String,
    /// Route path (route events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// New response (route `set` events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<Response>,
    /// Config after the change (config events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Config>,
}

/// Counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Accepted TCP connections.
    pub connections: u64,
    /// Non-control requests (also those later removed from the log).
    pub requests: u64,
    /// Tokens issued, both schemes.
    pub tokens_issued: u64,
    /// AWS tokens issued.
    pub aws_tokens_issued: u64,
    /// Alibaba tokens issued.
    pub alibaba_tokens_issued: u64,
}
