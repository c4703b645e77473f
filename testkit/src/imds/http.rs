//! Minimal HTTP/1.1 framing: just enough to read requests (with `Content-Length` bodies and
//! keep-alive) and to write responses byte by byte, so faults can be injected anywhere.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest request head (request line + headers) accepted.
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// Largest request body accepted.
pub(super) const MAX_BODY: usize = 16 * 1024 * 1024;

/// A parsed request.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub version_minor: u8,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the connection may stay open after answering this request.
    pub(super) fn keep_alive(&self) -> bool {
        let conn = self.header("Connection").map(str::to_ascii_lowercase);
        let has = |tok: &str| {
            conn.as_deref()
                .is_some_and(|c| c.split(',').any(|t| t.trim() == tok))
        };
        if self.version_minor == 0 {
            has("keep-alive")
        } else {
            !has("close")
        }
    }

    pub(super) fn query_param(&self, name: &str) -> Option<String> {
        query_pairs(&self.query)
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
}

/// Why a request could not be read. `status` is what to answer before closing (None: just
/// close).
#[derive(Debug)]
pub(super) struct ReadError {
    pub status: Option<u16>,
    pub message: String,
}

fn bad(status: u16, message: impl Into<String>) -> ReadError {
    ReadError {
        status: Some(status),
        message: message.into(),
    }
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// A read or write error of the connection itself (no response is possible).
fn io_error(e: &std::io::Error) -> ReadError {
    ReadError {
        status: None,
        message: e.to_string(),
    }
}

/// Read into `buf` until it holds a whole request head; returns the head's end (past the blank
/// line). `Ok(None)`: the peer closed cleanly between requests.
async fn read_head<S>(
    io: &mut S,
    buf: &mut Vec<u8>,
    tmp: &mut [u8],
) -> Result<Option<usize>, ReadError>
where
    S: AsyncRead + Unpin,
{
    let head_end = loop {
        if let Some(end) = find_head_end(buf) {
            break end;
        }
        if buf.len() > MAX_HEAD {
            return Err(bad(431, "request head too large"));
        }
        let n = io.read(tmp).await.map_err(|e| io_error(&e))?;
        if n == 0 {
            if buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(None);
            }
            return Err(ReadError {
                status: None,
                message: "connection closed mid-request".into(),
            });
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    if head_end > MAX_HEAD {
        return Err(bad(431, "request head too large"));
    }
    Ok(Some(head_end))
}

/// The method, target and minor version of a request line.
fn parse_request_line(request_line: &str) -> Result<(&str, &str, u8), ReadError> {
    let mut parts = request_line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) if !m.is_empty() && !t.is_empty() => (m, t, v),
        _ => return Err(bad(400, format!("malformed request line {request_line:?}"))),
    };
    let version_minor = match version {
        "HTTP/1.1" => 1,
        "HTTP/1.0" => 0,
        _ => return Err(bad(505, format!("unsupported version {version:?}"))),
    };
    Ok((method, target, version_minor))
}

/// The header lines after the request line, as (name, trimmed value).
fn parse_headers<'a>(
    lines: impl Iterator<Item = &'a str>,
) -> Result<Vec<(String, String)>, ReadError> {
    let mut headers = Vec::new();
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            return Err(bad(400, format!("malformed header line {line:?}")));
        };
        if k.is_empty() || k.bytes().any(|b| b <= b' ') {
            return Err(bad(400, format!("malformed header name {k:?}")));
        }
        headers.push((k.to_string(), v.trim().to_string()));
    }
    Ok(headers)
}

/// The path and query of a request target in origin form (what clients send) or absolute form.
fn split_target(target: &str) -> (String, String) {
    let target = match target.strip_prefix("http://") {
        Some(rest) => match rest.find('/') {
            Some(i) => &rest[i..],
            None => "/",
        },
        None => target,
    };
    match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.to_string(), String::new()),
    }
}

/// The request a head (without its blank line) describes, with an empty body.
fn parse_head(head: &[u8]) -> Result<Request, ReadError> {
    let head = std::str::from_utf8(head).map_err(|_| bad(400, "request head is not UTF-8"))?;
    // Tolerate stray CRLFs between pipelined requests (RFC 9112 §2.2).
    let head = head.trim_start_matches("\r\n");
    let mut lines = head.split("\r\n");
    let (method, target, version_minor) = parse_request_line(lines.next().unwrap_or(""))?;
    let headers = parse_headers(lines)?;
    let (path, query) = split_target(target);
    Ok(Request {
        method: method.to_string(),
        path,
        query,
        version_minor,
        headers,
        body: Vec::new(),
    })
}

/// The body length `req` announces (Content-Length; no Transfer-Encoding).
fn body_length(req: &Request) -> Result<usize, ReadError> {
    if req.header("Transfer-Encoding").is_some() {
        return Err(bad(
            501,
            "Transfer-Encoding is not supported; send Content-Length",
        ));
    }
    let len = match req.header("Content-Length") {
        None => 0,
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| bad(400, format!("bad Content-Length {v:?}")))?,
    };
    if len > MAX_BODY {
        return Err(bad(413, "request body too large"));
    }
    Ok(len)
}

/// Read into `buf` until it holds `want` bytes.
async fn read_to<S>(
    io: &mut S,
    buf: &mut Vec<u8>,
    tmp: &mut [u8],
    want: usize,
) -> Result<(), ReadError>
where
    S: AsyncRead + Unpin,
{
    while buf.len() < want {
        let n = io.read(tmp).await.map_err(|e| io_error(&e))?;
        if n == 0 {
            return Err(ReadError {
                status: None,
                message: "connection closed mid-body".into(),
            });
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    Ok(())
}

/// Read one request from `io`, using and refilling `buf` (bytes past the request stay in `buf`
/// for the next one). `Ok(None)`: the peer closed cleanly between requests.
pub(super) async fn read_request<S>(
    io: &mut S,
    buf: &mut Vec<u8>,
) -> Result<Option<Request>, ReadError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut tmp = vec![0u8; 16 * 1024];
    let Some(head_end) = read_head(io, buf, &mut tmp).await? else {
        return Ok(None);
    };
    let mut req = parse_head(&buf[..head_end - 4])?;
    let want = head_end + body_length(&req)?;
    if buf.len() < want
        && req
            .header("Expect")
            .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        io.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .map_err(|e| io_error(&e))?;
    }
    read_to(io, buf, &mut tmp, want).await?;
    req.body = buf[head_end..want].to_vec();
    buf.drain(..want);
    Ok(Some(req))
}

/// Standard reason phrase (or a generic one).
pub(super) fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

/// Serialize a status line and headers. `content_length` is added unless a `Content-Length`
/// header is already present.
pub(super) fn head(
    status: u16,
    headers: &[(String, String)],
    content_length: u64,
    close: bool,
) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    let mut has_len = false;
    for (k, v) in headers {
        if k.eq_ignore_ascii_case("Content-Length") {
            has_len = true;
        }
        out.push_str(k);
        out.push_str(": ");
        out.push_str(v);
        out.push_str("\r\n");
    }
    if !has_len {
        out.push_str(&format!("Content-Length: {content_length}\r\n"));
    }
    if close {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// Split a query string into percent-decoded pairs (`+` is kept literally).
pub(super) fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

/// Decode `%XX` escapes; malformed escapes are kept as they are.
pub(super) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encode everything but unreserved characters and `/` (for building control URLs).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_roundtrip() {
        assert_eq!(percent_decode("%2Flatest%2fx"), "/latest/x");
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("a%zz"), "a%zz");
        assert_eq!(percent_decode("%41"), "A");
        let p = "/computeMetadata/v1/instance/preempted?x=1&y";
        assert_eq!(percent_decode(&percent_encode(p)), p);
    }

    #[test]
    fn query_parsing() {
        let q = query_pairs("wait_for_change=true&last_etag=abc&flag&timeout_sec=5");
        assert_eq!(q[0], ("wait_for_change".into(), "true".into()));
        assert_eq!(q[2], ("flag".into(), String::new()));
        assert_eq!(q.len(), 4);
    }

    /// A stream that yields `raw` and then EOF.
    async fn fed(raw: &[u8]) -> tokio::io::DuplexStream {
        let (mut a, b) = tokio::io::duplex(64 * 1024);
        a.write_all(raw).await.unwrap();
        drop(a);
        b
    }

    #[tokio::test]
    async fn parses_pipelined_requests() {
        let raw = b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\nPUT /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /c HTTP/1.0\r\n\r\n";
        let mut rd = fed(raw).await;
        let mut buf = Vec::new();
        let a = read_request(&mut rd, &mut buf).await.unwrap().unwrap();
        assert_eq!(
            (a.method.as_str(), a.path.as_str(), a.query.as_str()),
            ("GET", "/a", "x=1")
        );
        assert!(a.keep_alive());
        let b = read_request(&mut rd, &mut buf).await.unwrap().unwrap();
        assert_eq!(b.body, b"abc");
        let c = read_request(&mut rd, &mut buf).await.unwrap().unwrap();
        assert_eq!(c.path, "/c");
        assert!(!c.keep_alive());
        assert!(read_request(&mut rd, &mut buf).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn rejects_malformed() {
        for (raw, want) in [
            (&b"GARBAGE\r\n\r\n"[..], Some(400)),
            (b"GET / HTTP/2.0\r\n\r\n", Some(505)),
            (b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", Some(400)),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                Some(501),
            ),
            (b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", None),
            (b"GET / HTTP/1.1\r\nHost", None),
        ] {
            let mut rd = fed(raw).await;
            let mut buf = Vec::new();
            let e = read_request(&mut rd, &mut buf).await.unwrap_err();
            assert_eq!(e.status, want, "{:?}", String::from_utf8_lossy(raw));
        }
    }
}
