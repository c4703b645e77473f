//! The Auto Scaling Query API over HTTPS: one signed POST per call (`Action=…&Version=2011-01-01`
//! form-encoded), its XML answer read into at most [`MAX_BODY`] bytes and picked apart with a
//! few string searches (the answers nthd reads are flat and small; a hostile body gives an
//! error, never a panic). Its own client, apart from the metadata one (which must never speak
//! TLS) and the webhooks' (which never reads an answer's body).

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;

use super::sigv4::{self, Credentials, Scope};
use super::AsgError;
use crate::https::HttpsClient;
use crate::sandbox::IpPolicy;

/// The API version every call names.
pub(crate) const VERSION: &str = "2011-01-01";
/// The largest answer read; Auto Scaling's answers to nthd's calls are a few KiB.
pub(crate) const MAX_BODY: usize = 64 * 1024;
/// Time allowed to connect (TCP and TLS are both inside the call's own timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One endpoint, one region.
#[derive(Clone)]
pub(crate) struct Api {
    /// `scheme://host[:port]`, as shown in messages.
    pub(crate) endpoint: String,
    authority: String,
    host: String,
    port: u16,
    region: String,
    http: HttpsClient,
    sandbox: Option<Arc<IpPolicy>>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// The regional endpoint as the SDKs resolve it (`.amazonaws.com.cn` in the China regions).
pub(crate) fn default_endpoint(region: &str) -> String {
    match region.starts_with("cn-") {
        true => format!("https://autoscaling.{region}.amazonaws.com.cn"),
        false => format!("https://autoscaling.{region}.amazonaws.com"),
    }
}

impl Api {
    /// A client for `endpoint` (checked by the settings: https, or http to loopback).
    pub(crate) fn new(
        endpoint: &str,
        region: &str,
        sandbox: Option<Arc<IpPolicy>>,
    ) -> Result<Api, AsgError> {
        let endpoint = endpoint.trim().trim_end_matches('/').to_string();
        let uri: http::Uri = endpoint
            .parse()
            .map_err(|e| AsgError::Client(format!("the endpoint {endpoint} is not a URL: {e}")))?;
        let https = uri.scheme_str() == Some("https");
        let authority = uri.authority().map(|a| a.as_str().to_string());
        let (Some(authority), Some(host)) = (authority, uri.host()) else {
            return Err(AsgError::Client(format!(
                "the endpoint {endpoint} has no host"
            )));
        };
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Ok(Api {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            http: client(https)?,
            endpoint,
            authority,
            port,
            region: region.to_string(),
            sandbox,
        })
    }

    /// Calls `action` with `params`, signed with `creds`; the answer's body on HTTP 200. The
    /// whole call, connection included, takes at most `timeout`.
    pub(crate) async fn call(
        &self,
        creds: &Credentials,
        action: &'static str,
        params: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<String, AsgError> {
        let req = self.request(creds, action, params)?;
        let at = || (self.endpoint.clone(), action);
        let (status, retry_after, body) =
            match tokio::time::timeout(timeout, self.exchange(req)).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(reason)) => return Err(self.no_answer(action, reason).await),
                Err(_) => {
                    let reason = format!(
                        "no answer within {}",
                        crate::timefmt::format_duration(timeout)
                    );
                    return Err(self.no_answer(action, reason).await);
                }
            };
        if status == 200 {
            return Ok(body);
        }
        let (url, action) = at();
        // Scrubbed whole, before anything is cut: a secret cut in half would escape.
        let body = creds.scrub(&body);
        Err(match (element(&body, "Code"), element(&body, "Message")) {
            (Some(code), message) => AsgError::Refused {
                url,
                action,
                status,
                message: first_line(message.as_deref().unwrap_or("")),
                fix: fix_for(&code, action),
                code,
                retry_after,
            },
            (None, _) => AsgError::Http {
                url,
                action,
                status,
                retry_after,
            },
        })
    }

    /// The signed POST.
    fn request(
        &self,
        creds: &Credentials,
        action: &str,
        params: &[(&str, &str)],
    ) -> Result<Request<Full<Bytes>>, AsgError> {
        let mut body = format!("Action={action}&Version={VERSION}");
        for (k, v) in params {
            body.push('&');
            body.push_str(&sigv4::uri_encode(k));
            body.push('=');
            body.push_str(&sigv4::uri_encode(v));
        }
        let amz_date = jiff::Timestamp::now()
            .strftime("%Y%m%dT%H%M%SZ")
            .to_string();
        let ctype = "application/x-www-form-urlencoded; charset=utf-8";
        let mut headers = vec![
            ("content-type", ctype),
            ("host", self.authority.as_str()),
            ("x-amz-date", amz_date.as_str()),
        ];
        if let Some(t) = creds.token.as_deref() {
            headers.push(("x-amz-security-token", t));
        }
        let scope = Scope {
            amz_date: &amz_date,
            region: &self.region,
            service: "autoscaling",
        };
        let signable = sigv4::Request {
            method: "POST",
            path: "/",
            query: &[],
            headers: &headers,
            body: body.as_bytes(),
        };
        let signed = sigv4::sign(&signable, &scope, creds);
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(format!("{}/", self.endpoint))
            .header(
                http::header::USER_AGENT,
                concat!("nthd/", env!("CARGO_PKG_VERSION")),
            )
            .header(http::header::AUTHORIZATION, signed.authorization);
        for (k, v) in &headers {
            req = req.header(*k, *v);
        }
        req.body(Full::new(Bytes::from(body)))
            .map_err(|_| AsgError::Client("a header value cannot be sent (not ASCII?)".into()))
    }

    /// Sends the request and reads the answer, up to [`MAX_BODY`]: its status, the wait it
    /// asked for (`Retry-After`) and its body.
    async fn exchange(&self, req: Request<Full<Bytes>>) -> Result<Answer, String> {
        let resp = self.http.request(req).await.map_err(|e| chain(&e))?;
        let status = resp.status().as_u16();
        let retry_after = crate::https::retry_after(resp.headers())
            .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX));
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| chain(&e))?;
            if let Some(d) = frame.data_ref() {
                if buf.len() + d.len() > MAX_BODY {
                    return Err(format!(
                        "the answer is larger than {MAX_BODY} bytes; nthd refuses to read it"
                    ));
                }
                buf.extend_from_slice(d);
            }
        }
        Ok((
            status,
            retry_after,
            String::from_utf8_lossy(&buf).into_owned(),
        ))
    }

    /// No answer: blamed on the unit's IP access lists when they drop the endpoint.
    async fn no_answer(&self, action: &'static str, reason: String) -> AsgError {
        let url = self.endpoint.clone();
        if let Some(policy) = &self.sandbox {
            if let Some(b) = policy.blocked_host(&self.host, self.port).await {
                return AsgError::Blocked {
                    url,
                    action,
                    cause: b.cause,
                    drop_in: b.drop_in,
                };
            }
        }
        let reason = match reason.contains("certificate") || reason.contains("HandshakeFailure") {
            true => format!(
                "{reason} (TLS: the endpoint's CA must be in the system store, /etc/ssl/certs, \
                 or in SSL_CERT_FILE)"
            ),
            false => reason,
        };
        AsgError::Connect {
            url,
            action,
            reason,
        }
    }
}

/// The HTTPS client, with the system's CA roots when the endpoint is https.
fn client(https: bool) -> Result<HttpsClient, AsgError> {
    crate::https::client(https, CONNECT_TIMEOUT).map_err(AsgError::Client)
}

/// An error and its causes, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        text = format!("{text}: {s}");
        src = s.source();
    }
    text
}

/// What to do about an error code Auto Scaling answered.
fn fix_for(code: &str, action: &str) -> String {
    match code {
        "AccessDenied" | "AccessDeniedException" | "UnauthorizedOperation" => format!(
            "allow autoscaling:{action} on the group's ARN in the instance role's policy \
             (docs/clouds.md, \"Completing the lifecycle action\")"
        ),
        "SignatureDoesNotMatch"
        | "InvalidClientTokenId"
        | "ExpiredToken"
        | "IncompleteSignature" => {
            "the instance role's credentials were not accepted: check the node's clock (SigV4 \
             allows 5 minutes of skew) and that NTHD_ASG_ENDPOINT is in the instance's region"
                .into()
        }
        "ValidationError" => "check that NTHD_ASG_LIFECYCLE_HOOK names the group's termination \
             hook and NTHD_ASG_GROUP (if set) the instance's group"
            .into(),
        "Throttling" | "RequestLimitExceeded" => {
            "Auto Scaling is throttling; nthd retries until its deadline".into()
        }
        _ => String::new(),
    }
}

fn first_line(s: &str) -> String {
    crate::logging::clean(s.lines().next().unwrap_or(""), 300)
}

/// An answer: status, `Retry-After` in seconds, and body.
type Answer = (u16, Option<u32>, String);

/// The text of the first `<tag>…</tag>` in `body`, entities decoded, at most 1024 characters
/// and cleaned for a log line. `None` when there is none.
pub(crate) fn element(body: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = body.find(&open)? + open.len();
    let len = body[start..].find(&close)?;
    let raw = &body[start..start + len];
    let text = raw
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&");
    Some(crate::logging::clean(text.trim(), 1024))
}

/// Each `<member>…</member>` of `body`, at most 100.
pub(crate) fn members(body: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find("<member>") {
        let after = &rest[i + "<member>".len()..];
        let Some(j) = after.find("</member>") else {
            break;
        };
        out.push(&after[..j]);
        rest = &after[j..];
        if out.len() == 100 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_by_region() {
        assert_eq!(
            default_endpoint("eu-west-1"),
            "https://autoscaling.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            default_endpoint("cn-north-1"),
            "https://autoscaling.cn-north-1.amazonaws.com.cn"
        );
    }

    #[test]
    fn elements_of_real_and_hostile_answers() {
        let err = r#"<ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">
          <Error><Type>Sender</Type><Code>ValidationError</Code>
          <Message>No active Lifecycle Action found with instance ID i-0123 &amp; more</Message>
          </Error><RequestId>x</RequestId></ErrorResponse>"#;
        assert_eq!(element(err, "Code").as_deref(), Some("ValidationError"));
        assert_eq!(
            element(err, "Message").as_deref(),
            Some("No active Lifecycle Action found with instance ID i-0123 & more")
        );
        for hostile in ["", "<Code>", "</Code><Code>", "<Code>\u{1b}[2J", "<<<>>>"] {
            assert_eq!(element(hostile, "Code"), None, "{hostile:?}");
        }
        let long = format!("<Code>{}</Code>", "x".repeat(100_000));
        assert!(element(&long, "Code").unwrap().len() < 1100);
        let m = "<member><A>1</A></member><member><A>2</A></member><member><A>3";
        assert_eq!(members(m), ["<A>1</A>", "<A>2</A>"]);
    }

    #[tokio::test]
    async fn a_connection_the_units_allow_list_drops_names_the_drop_in() {
        // Accepts nothing and answers nothing, as a dropped SYN looks to the client.
        let silent = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
        let url = format!("http://{}", silent.local_addr().unwrap());
        let policy = IpPolicy::parse("nthd.service", "any", "169.254.169.254").unwrap();
        let api = Api::new(&url, "us-east-1", Some(Arc::new(policy))).unwrap();
        let creds = Credentials {
            access_key_id: "ASIAFAKE".into(),
            secret_access_key: "s3cr3t".into(),
            token: Some("tok".into()),
        };
        let action = "CompleteLifecycleAction";
        let err = api
            .call(&creds, action, &[], Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(matches!(err, AsgError::Blocked { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(&url) && text.contains(action), "{text}");
        assert!(text.contains("IPAddressAllow=127.0.0.2"), "{text}");
    }

    #[test]
    fn fixes_name_the_permission() {
        assert!(fix_for("AccessDenied", "CompleteLifecycleAction")
            .contains("autoscaling:CompleteLifecycleAction"));
        assert!(fix_for("SignatureDoesNotMatch", "X").contains("clock"));
    }
}
