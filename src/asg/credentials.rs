//! What the instance metadata service tells about the instance for Auto Scaling: its id, its
//! region, and its role's temporary credentials (IMDSv2, through the shared client and token
//! handling of src/imds.rs). A credentials document is never logged nor quoted in an error,
//! not even at debug level: only its URL and what is wrong with it.

use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;

use super::sigv4::Credentials;
use super::AsgError;
use crate::imds::{get_with_token, ImdsClient, ImdsError};
use crate::provider::aws::{Imdsv2, TOKEN_TTL};
use crate::provider::{Request, TokenRead};

/// The instance id (`i-0123456789abcdef0`).
pub(crate) const INSTANCE_ID_PATH: &str = "/latest/meta-data/instance-id";
/// The region (`us-east-1`).
pub(crate) const REGION_PATH: &str = "/latest/meta-data/placement/region";
/// The instance profile's role name, one line.
pub(crate) const ROLE_PATH: &str = "/latest/meta-data/iam/security-credentials/";

/// Where the reads are made, always with an IMDSv2 token. The client blocks.
pub(crate) enum Metadata {
    /// A client and token of its own, read on tokio's blocking pool (`nthd check`, the tests).
    Own(Arc<Mutex<Imdsv2>>),
    /// The daemon's metadata reader thread, with AWS's provider's client and token: one owner
    /// of every read the daemon makes.
    Reader(std::sync::mpsc::Sender<Request>),
}

impl std::fmt::Debug for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Metadata::Own(_) => "Metadata::Own",
            Metadata::Reader(_) => "Metadata::Reader",
        })
    }
}

/// The error when a read could not be made at all.
fn not_read(why: impl std::fmt::Display) -> AsgError {
    AsgError::Imds(ImdsError::Client(format!(
        "the instance metadata read for Auto Scaling was not made: {why}"
    )))
}

impl Metadata {
    pub(crate) fn new(client: ImdsClient, allow_v1: bool) -> Metadata {
        Metadata::Own(Arc::new(Mutex::new(Imdsv2::new(
            client, allow_v1, TOKEN_TTL,
        ))))
    }

    /// `read` with the token source, on the blocking pool or the reader thread.
    async fn with<T: Send + 'static>(
        &self,
        read: impl FnOnce(&mut Imdsv2) -> Result<T, AsgError> + Send + 'static,
    ) -> Result<T, AsgError> {
        match self {
            Metadata::Own(imds) => {
                let imds = imds.clone();
                let read = move || read(&mut imds.lock().unwrap_or_else(PoisonError::into_inner));
                tokio::task::spawn_blocking(read).await.map_err(not_read)?
            }
            Metadata::Reader(reader) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let read: TokenRead = Box::new(move |imds| {
                    let _ = tx.send(imds.map(read));
                });
                reader
                    .send(Request::WithToken(read))
                    .map_err(|_| not_read("the metadata reader thread has stopped"))?;
                let answer = rx.await.map_err(not_read)?;
                answer.unwrap_or_else(|| {
                    Err(not_read(
                        "the metadata reader reads no AWS metadata service (is this EC2? \
                         NTHD_PROVIDER may name another cloud)",
                    ))
                })
            }
        }
    }

    pub(crate) async fn instance_id(&mut self) -> Result<String, AsgError> {
        self.with(|m| {
            word(m, INSTANCE_ID_PATH, |b| {
                b.is_ascii_alphanumeric() || b == b'-'
            })
        })
        .await
    }

    /// The region: lower-case letters, digits and `-` only, since it becomes part of a host name.
    pub(crate) async fn region(&mut self) -> Result<String, AsgError> {
        let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
        self.with(move |m| word(m, REGION_PATH, allowed)).await
    }

    /// The role's name, then its credentials and when they expire.
    pub(crate) async fn credentials(
        &mut self,
    ) -> Result<(String, Credentials, Option<jiff::Timestamp>), AsgError> {
        self.with(credentials).await
    }
}

/// The body at `path`, which must answer 200.
fn read(imds: &mut Imdsv2, path: &str) -> Result<String, AsgError> {
    let reply = get_with_token(imds, path).map_err(AsgError::Imds)?;
    match reply.status {
        200 => Ok(reply.body),
        _ => Err(AsgError::Imds(reply.status_error(imds.client().url(path)))),
    }
}

/// One word: the instance id, the region, a role name.
fn word(imds: &mut Imdsv2, path: &str, allowed: fn(u8) -> bool) -> Result<String, AsgError> {
    let body = read(imds, path)?;
    let w = body.trim();
    if w.is_empty() || w.len() > 128 || !w.bytes().all(allowed) {
        return Err(AsgError::Imds(ImdsError::malformed(
            &imds.client().url(path),
            "not one word of the expected characters",
            &body,
        )));
    }
    Ok(w.to_string())
}

/// The role's name, then its credentials and when they expire.
fn credentials(
    imds: &mut Imdsv2,
) -> Result<(String, Credentials, Option<jiff::Timestamp>), AsgError> {
    let role = match word(imds, ROLE_PATH, role_char) {
        Err(AsgError::Imds(ImdsError::Status { status: 404, .. })) => {
            return Err(AsgError::NoRole {
                url: imds.client().url(ROLE_PATH),
            })
        }
        r => r?,
    };
    let path = format!("{ROLE_PATH}{role}");
    let body = read(imds, &path)?;
    let (creds, expires) = parse_credentials(&imds.client().url(&path), &body)?;
    Ok((role, creds, expires))
}

/// IAM role names: letters, digits and `+=,.@_-`.
fn role_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b)
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Document {
    #[serde(default)]
    code: Option<String>,
    access_key_id: String,
    secret_access_key: String,
    token: String,
    #[serde(default)]
    expiration: Option<String>,
}

/// The credentials document. Its errors name the URL and the place, never a value.
pub(crate) fn parse_credentials(
    url: &str,
    body: &str,
) -> Result<(Credentials, Option<jiff::Timestamp>), AsgError> {
    let bad = |reason: String| AsgError::Credentials {
        url: url.to_string(),
        reason,
    };
    let doc: Document = serde_json::from_str(body).map_err(|e| {
        bad(format!(
            "not the JSON document nthd expects (line {}, column {}; {} bytes)",
            e.line(),
            e.column(),
            body.len()
        ))
    })?;
    if let Some(code) = doc.code.as_deref().filter(|c| *c != "Success") {
        return Err(bad(format!(
            "Code is {:?}, not Success",
            crate::logging::clean(code, 40)
        )));
    }
    let printable =
        |s: &str| !s.is_empty() && s.len() <= 4096 && s.bytes().all(|b| b.is_ascii_graphic());
    if !printable(&doc.access_key_id)
        || !printable(&doc.secret_access_key)
        || !printable(&doc.token)
    {
        return Err(bad(
            "AccessKeyId, SecretAccessKey or Token is empty or not printable ASCII".into(),
        ));
    }
    let expires = doc.expiration.as_deref().and_then(|e| e.parse().ok());
    Ok((
        Credentials {
            access_key_id: doc.access_key_id,
            secret_access_key: doc.secret_access_key,
            token: Some(doc.token),
        },
        expires,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://169.254.169.254/latest/meta-data/iam/security-credentials/r";

    #[test]
    fn a_credentials_document() {
        let body = r#"{"Code":"Success","LastUpdated":"2026-11-28T05:00:00Z","Type":"AWS-HMAC",
            "AccessKeyId":"ASIAFAKE","SecretAccessKey":"s3cr3t/key","Token":"tok==",
            "Expiration":"2026-11-28T11:00:00Z"}"#;
        let (c, exp) = parse_credentials(URL, body).unwrap();
        assert_eq!(c.access_key_id, "ASIAFAKE");
        assert_eq!(c.token.as_deref(), Some("tok=="));
        assert_eq!(exp.unwrap().to_string(), "2026-11-28T11:00:00Z");
    }

    #[test]
    fn hostile_documents_give_errors_without_their_values() {
        for body in [
            "",
            "{",
            r#"{"AccessKeyId":"ASIAFAKE","SecretAccessKey":{"x":"s3cr3t"},"Token":"t"}"#,
            r#"{"AccessKeyId":"ASIAFAKE","SecretAccessKey":"s3cr3t","Token":"t\n"}"#,
            r#"{"Code":"Failure","AccessKeyId":"ASIAFAKE","SecretAccessKey":"s3cr3t","Token":"t"}"#,
        ] {
            let e = parse_credentials(URL, body).unwrap_err().to_string();
            assert!(e.contains(URL), "{e}");
            assert!(!e.contains("s3cr3t") && !e.contains("ASIAFAKE"), "{e}");
        }
    }
}
