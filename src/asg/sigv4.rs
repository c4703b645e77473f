//! AWS Signature Version 4, as much of it as one Query API call needs: HMAC-SHA256 and SHA-256
//! from `ring`, hex by hand. Pure: no I/O, no clock (the caller passes the time), so it is
//! tested against AWS's published test vectors (tests/fixtures/sigv4/) and, in tests/asg.rs,
//! against botocore's independent signer.
//!
//! Nothing here logs, and no value it returns but [`Signed::authorization`] holds anything
//! derived from the secret key; the signature in that header is useless without the request.

use ring::{digest, hmac};

/// The instance role's credentials. `Debug` shows the key id's first four characters only.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub(crate) access_key_id: String,
    pub(crate) secret_access_key: String,
    /// The session token (`X-Amz-Security-Token`); `None` for long-term keys (tests only).
    pub(crate) token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id: String = self.access_key_id.chars().take(4).collect();
        f.debug_struct("Credentials")
            .field("access_key_id", &format!("{id}…"))
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// `text` with every secret of these credentials replaced, for text that came back from
    /// the service (an error message may quote the canonical request, token included).
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        let secrets = [
            Some(self.access_key_id.as_str()),
            Some(self.secret_access_key.as_str()),
            self.token.as_deref(),
        ];
        for s in secrets.into_iter().flatten().filter(|s| s.len() >= 4) {
            out = out.replace(s, "<redacted>");
        }
        out
    }
}

/// One request to sign. Header names may be in any case; values are trimmed and inner runs of
/// spaces folded, as SigV4 canonicalises them. Every header given is signed.
#[derive(Debug, Clone)]
pub(crate) struct Request<'a> {
    pub(crate) method: &'a str,
    /// The absolute path, already URI-encoded (`/` for the Query API).
    pub(crate) path: &'a str,
    /// Query parameters, not encoded.
    pub(crate) query: &'a [(&'a str, &'a str)],
    /// Every header to sign, `host` and `x-amz-date` included.
    pub(crate) headers: &'a [(&'a str, &'a str)],
    pub(crate) body: &'a [u8],
}

/// Where and when: the scope of the signature.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'a> {
    /// `YYYYMMDD'T'HHMMSS'Z'`, the value of `X-Amz-Date`.
    pub(crate) amz_date: &'a str,
    pub(crate) region: &'a str,
    pub(crate) service: &'a str,
}

/// The steps' results, for tests and for the `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signed {
    pub(crate) canonical_request: String,
    pub(crate) string_to_sign: String,
    pub(crate) signature: String,
    pub(crate) authorization: String,
}

/// Signs `req` for `scope` with `creds`.
pub(crate) fn sign(req: &Request<'_>, scope: &Scope<'_>, creds: &Credentials) -> Signed {
    let (canonical_request, signed_headers) = canonical_request(req);
    let date = &scope.amz_date[..scope.amz_date.len().min(8)];
    let credential_scope = format!("{date}/{}/{}/aws4_request", scope.region, scope.service);
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{credential_scope}\n{}",
        scope.amz_date,
        hex_sha256(canonical_request.as_bytes())
    );
    let mut key = hmac_sha256(
        format!("AWS4{}", creds.secret_access_key).as_bytes(),
        date.as_bytes(),
    );
    for part in [scope.region, scope.service, "aws4_request"] {
        key = hmac_sha256(&key, part.as_bytes());
    }
    let signature = hex(&hmac_sha256(&key, string_to_sign.as_bytes()));
    let authorization = format!(
        "AWS4-HMAC-SHA256 Credential={}/{credential_scope}, SignedHeaders={signed_headers}, \
         Signature={signature}",
        creds.access_key_id
    );
    Signed {
        canonical_request,
        string_to_sign,
        signature,
        authorization,
    }
}

/// The canonical request and the `SignedHeaders` list.
fn canonical_request(req: &Request<'_>) -> (String, String) {
    let mut query: Vec<(String, String)> = req
        .query
        .iter()
        .map(|(k, v)| (uri_encode(k), uri_encode(v)))
        .collect();
    query.sort();
    let query: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), fold_spaces(v)))
        .collect();
    headers.sort();
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let text = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed}\n{}",
        req.method,
        req.path,
        query.join("&"),
        hex_sha256(req.body)
    );
    (text, signed)
}

/// A header value as SigV4 signs it: trimmed, runs of spaces folded to one.
fn fold_spaces(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// RFC 3986 encoding as SigV4 wants it: unreserved characters kept, every other byte `%XX`
/// in upper case. Also how the Query API's form body is encoded here.
pub(crate) fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn hex_sha256(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    hmac::sign(&key, data).as_ref().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A case of AWS's SigV4 test suite (tests/fixtures/sigv4/README.md): the expected
    /// canonical request, string to sign and signature.
    fn vector(name: &str) -> (String, String, String, Credentials) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sigv4")
            .join(name);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let ctx: serde_json::Value = serde_json::from_str(&read("context.json")).unwrap();
        let c = &ctx["credentials"];
        let creds = Credentials {
            access_key_id: c["access_key_id"].as_str().unwrap().into(),
            secret_access_key: c["secret_access_key"].as_str().unwrap().into(),
            token: c["token"].as_str().map(str::to_string),
        };
        assert_eq!(ctx["region"], "us-east-1");
        assert_eq!(ctx["timestamp"], "2015-08-30T12:36:00Z");
        let sig = read("header-signature.txt").trim().to_string();
        (
            read("header-canonical-request.txt"),
            read("header-string-to-sign.txt"),
            sig,
            creds,
        )
    }

    const SCOPE: Scope<'static> = Scope {
        amz_date: "20150830T123600Z",
        region: "us-east-1",
        service: "service",
    };

    fn check(name: &str, req: &Request<'_>) {
        let (canonical, sts, signature, creds) = vector(name);
        let s = sign(req, &SCOPE, &creds);
        assert_eq!(s.canonical_request, canonical, "{name}: canonical request");
        assert_eq!(s.string_to_sign, sts, "{name}: string to sign");
        assert_eq!(s.signature, signature, "{name}: signature");
        assert!(s.authorization.ends_with(&signature));
    }

    /// The vector `name`: a bodiless `method` of `/` with `query`, signed with the vector's
    /// two headers.
    fn check_plain(name: &str, method: &str, query: &[(&str, &str)]) {
        let headers = [
            ("Host", "example.amazonaws.com"),
            ("X-Amz-Date", "20150830T123600Z"),
        ];
        let req = Request {
            method,
            path: "/",
            query,
            headers: &headers,
            body: b"",
        };
        check(name, &req);
    }

    #[test]
    fn get_vanilla() {
        check_plain("get-vanilla", "GET", &[]);
    }

    #[test]
    fn post_vanilla_query() {
        check_plain("post-vanilla-query", "POST", &[("Param1", "value1")]);
    }

    #[test]
    fn post_x_www_form_urlencoded() {
        let body = b"Param1=value1";
        let hash = hex_sha256(body);
        let headers = [
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Host", "example.amazonaws.com"),
            ("Content-Length", "13"),
            ("X-Amz-Date", "20150830T123600Z"),
            ("x-amz-content-sha256", hash.as_str()),
        ];
        let req = Request {
            method: "POST",
            path: "/",
            query: &[],
            headers: &headers,
            body,
        };
        check("post-x-www-form-urlencoded", &req);
    }

    #[test]
    fn get_vanilla_with_session_token() {
        let (_, _, _, creds) = vector("get-vanilla-with-session-token");
        let token = creds.token.clone().unwrap();
        let headers = [
            ("Host", "example.amazonaws.com"),
            ("X-Amz-Date", "20150830T123600Z"),
            ("X-Amz-Security-Token", token.as_str()),
        ];
        let req = Request {
            method: "GET",
            path: "/",
            query: &[],
            headers: &headers,
            body: b"",
        };
        check("get-vanilla-with-session-token", &req);
    }

    #[test]
    fn encoding_and_secrets() {
        assert_eq!(uri_encode("a b/c~d=é"), "a%20b%2Fc~d%3D%C3%A9");
        assert_eq!(fold_spaces("  a   b "), "a b");
        let creds = Credentials {
            access_key_id: "ASIAEXAMPLEKEY".into(),
            secret_access_key: "secretsecret".into(),
            token: Some("tokentoken".into()),
        };
        let debug = format!("{creds:?}");
        assert!(
            !debug.contains("EXAMPLEKEY")
                && !debug.contains("secret")
                && !debug.contains("tokentoken")
        );
        assert_eq!(
            creds.scrub("x ASIAEXAMPLEKEY y tokentoken z"),
            "x <redacted> y <redacted> z"
        );
    }
}
