//! What every provider's [`Provider::identity`](super::Provider::identity) shares: turning
//! metadata answers into clean [`Identity`] values, and the rule for when the read as a whole
//! failed.
//!
//! Identity values end up in `nthd status`, metric labels and webhook bodies, so a value is
//! kept only when it looks like what a metadata service gives for these keys: one token of
//! printable ASCII, at most [`MAX_IDENTITY`] characters. Anything else (an HTML error page from
//! a proxy, a huge body, control characters, an empty answer) is dropped rather than cut down:
//! a truncated or escaped instance id is garbage that looks real.

use crate::imds::{ImdsClient, ImdsError, Reply};
use crate::notice::{Identity, Lifecycle, MAX_IDENTITY};

/// The value as nthd keeps it, or `None`: trimmed, 1 to [`MAX_IDENTITY`] characters of
/// printable ASCII with no space and no `<`, `>` or `"` (nothing HTML, nothing that needs
/// quoting in a label or a log line).
pub(crate) fn clean_value(raw: &str) -> Option<String> {
    let v = raw.trim();
    let ok = !v.is_empty()
        && v.len() <= MAX_IDENTITY
        && v.bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'<' | b'>' | b'"'));
    ok.then(|| v.to_string())
}

/// The last `/`-separated segment: GCP answers `projects/123/zones/us-central1-a`.
pub(crate) fn last_segment(s: &str) -> &str {
    let s = s.trim();
    s.rsplit('/').next().unwrap_or(s)
}

/// Where a cloud keeps the identity values as plain text, one key each.
pub(crate) struct Paths {
    pub(crate) instance_id: &'static str,
    pub(crate) instance_type: &'static str,
    pub(crate) zone: &'static str,
    pub(crate) lifecycle: Option<LifecycleKey>,
}

/// The key that names the billing model, and how its value reads.
pub(crate) type LifecycleKey = (&'static str, fn(&str) -> Option<Lifecycle>);

impl Paths {
    /// Reads each key one after the other through `get` (the cloud's own GET, with its token
    /// or headers); [`Reads::finish`] decides whether the read as a whole failed.
    pub(crate) fn read(
        &self,
        client: &ImdsClient,
        mut get: impl FnMut(&str) -> Result<Reply, ImdsError>,
    ) -> Result<Identity, ImdsError> {
        let mut reads = Reads::default();
        let mut value = |path: &str| {
            let r = get(path);
            reads.value(&client.url(path), r)
        };
        let id = Identity {
            instance_id: value(self.instance_id),
            instance_type: value(self.instance_type),
            zone: value(self.zone),
            lifecycle: self
                .lifecycle
                .and_then(|(path, parse)| parse(&value(path)?)),
        };
        reads.finish(id, client)
    }
}

/// The outcome of one identity read session: the first reason a value is missing, kept so
/// that a read where nothing at all came back can say why.
#[derive(Debug, Default)]
pub(crate) struct Reads {
    first_error: Option<ImdsError>,
}

impl Reads {
    /// Remembers why a value is missing (only the first reason is kept), logged at debug.
    pub(crate) fn note(&mut self, e: ImdsError) {
        tracing::debug!("identity: {e}");
        self.first_error.get_or_insert(e);
    }

    /// The body of a 200 answer; `None` for anything else (a 404 is a key the service does
    /// not have), with the reason noted.
    pub(crate) fn body(&mut self, url: &str, r: Result<Reply, ImdsError>) -> Option<String> {
        match r {
            Ok(reply) if reply.status == 200 => Some(reply.body),
            Ok(reply) => {
                self.note(reply.status_error(url.to_string()));
                None
            }
            Err(e) => {
                self.note(e);
                None
            }
        }
    }

    /// `raw` as [`clean_value`] keeps it, or `None` with the reason noted.
    pub(crate) fn check(&mut self, url: &str, raw: &str) -> Option<String> {
        let v = clean_value(raw);
        if v.is_none() {
            self.note(ImdsError::malformed(
                url,
                format!("expected a short printable value (at most {MAX_IDENTITY} characters)"),
                raw,
            ));
        }
        v
    }

    /// The clean value of a plain-text answer.
    pub(crate) fn value(&mut self, url: &str, r: Result<Reply, ImdsError>) -> Option<String> {
        let body = self.body(url, r)?;
        self.check(url, &body)
    }

    /// GET `path` with `headers` and keep its clean value (for services read without a token).
    pub(crate) fn get(
        &mut self,
        client: &ImdsClient,
        path: &str,
        headers: &[(&'static str, &str)],
    ) -> Option<String> {
        let r = client.get(path, headers);
        self.value(&client.url(path), r)
    }

    /// The identity, or the first error when nothing at all could be read.
    pub(crate) fn finish(self, id: Identity, client: &ImdsClient) -> Result<Identity, ImdsError> {
        if !id.is_empty() {
            return Ok(id);
        }
        Err(self.first_error.unwrap_or_else(|| ImdsError::Malformed {
            url: client.base().to_string(),
            reason: "the metadata service gave no identity value".into(),
            bytes: 0,
            secret: false,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_trimmed_tokens_or_nothing() {
        assert_eq!(clean_value(" m5.large\n").as_deref(), Some("m5.large"));
        assert_eq!(
            clean_value("i-0123456789abcdef0").as_deref(),
            Some("i-0123456789abcdef0")
        );
        let max = "x".repeat(MAX_IDENTITY);
        assert_eq!(clean_value(&max).as_deref(), Some(max.as_str()));
        for bad in [
            "",
            "  \n",
            "<html><body>404</body></html>",
            "two words",
            "a\x1b[31mb",
            "a\nb",
            "id\u{202e}x",
            "é",
            "\"quoted\"",
            &"x".repeat(MAX_IDENTITY + 1),
        ] {
            assert_eq!(clean_value(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn last_segments() {
        assert_eq!(
            last_segment("projects/123/machineTypes/e2-medium"),
            "e2-medium"
        );
        assert_eq!(last_segment("us-central1-a\n"), "us-central1-a");
        assert_eq!(last_segment("projects/123/zones/"), "");
    }
}
