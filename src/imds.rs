//! The one HTTP client for metadata services.
//!
//! It sets connect and total timeouts, caps every body (a hostile or broken endpoint cannot make
//! nthd read gigabytes), never uses a proxy (IMDS is link-local; an `http_proxy` in the
//! environment must not capture it), never follows a redirect, never speaks TLS (metadata
//! services speak plain HTTP), and keeps connections alive for the next request.
//!
//! It is synchronous: every call blocks its thread until the answer or the timeout, and every
//! read is made by [`blocking`]: the request written on a kept connection with `write(2)` and
//! the answer read with `read(2)`, with httparse for the head and a bound on every part of the
//! answer. On the daemon's metadata reader thread a poll is one wakeup with no runtime between,
//! which costs what the least possible client costs (docs/performance.md). A command on a tokio
//! runtime calls it through `spawn_blocking`. One transport, one retry rule, one set of limits.
//!
//! systemd-imdsd's Varlink service ([`imdsd`]) is the other route, when a prohibit route locks
//! IMDS or `NTHD_IMDS_VIA` says so.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode, Uri};

mod blocking;
pub(crate) mod imdsd;
pub(crate) use imdsd::{Imdsd, Refusal};

/// How nthd reaches the metadata service (`NTHD_IMDS_VIA`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    /// Directly, and through systemd-imdsd once a prohibit route refuses the connection.
    #[default]
    Auto,
    /// Directly only.
    Direct,
    /// Through systemd-imdsd's Varlink service only.
    #[value(name = "systemd-imdsd")]
    SystemdImdsd,
}

/// Settings for the client, from the command line.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Time allowed to set up the connection.
    pub connect_timeout: Duration,
    /// Total time for one ordinary request, body included.
    pub request_timeout: Duration,
    /// The largest body nthd reads; anything longer is an error and is not read to the end.
    pub max_body: usize,
    /// The endpoint was given by the user (`NTHD_IMDS_ENDPOINT`), so the advice on a failed
    /// connection is about that endpoint, not "set NTHD_IMDS_ENDPOINT".
    pub endpoint_set: bool,
    /// The IP access lists of the unit nthd runs in: a failed request to an address they
    /// block is blamed on them ([`ImdsError::BlockedBySandbox`]). `None`: blame nothing on them.
    pub sandbox: Option<Arc<crate::sandbox::IpPolicy>>,
    /// Directly, through systemd-imdsd, or directly until IMDS turns out to be locked.
    pub via: Via,
    /// systemd-imdsd's Varlink socket.
    pub imdsd_socket: std::path::PathBuf,
    /// Where the polkit files that explain a refusal are read (`/`; a directory in tests).
    pub imdsd_root: std::path::PathBuf,
}

impl ClientOptions {
    /// The systemd-imdsd route these options allow (`None` with `Via::Direct`), its polkit
    /// files read under `root`.
    pub(crate) fn imdsd_route(&self, root: &std::path::Path) -> Option<Imdsd> {
        (self.via != Via::Direct).then(|| Imdsd::new(self.imdsd_socket.clone(), root.into()))
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: crate::timings::CONNECT_TIMEOUT_MAX,
            request_timeout: crate::timings::REQUEST_TIMEOUT,
            max_body: 256 * 1024,
            endpoint_set: false,
            sandbox: None,
            via: Via::Auto,
            imdsd_socket: imdsd::SOCKET.into(),
            imdsd_root: "/".into(),
        }
    }
}

/// Why a metadata request failed. Every message names the URL and what the user can do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImdsError {
    /// No HTTP answer: the connection could not be made, or it broke off.
    #[error("cannot reach {url}: {reason}. {advice}")]
    Connect {
        /// The URL requested.
        url: String,
        /// The HTTP client's error, with its causes.
        reason: String,
        /// What to check; it differs when the user set the endpoint.
        advice: &'static str,
    },
    /// No complete answer within the timeout.
    #[error(
        "no answer from {url} within {}; the metadata service is slow or throttling \
         (IMDS limits packets per second per interface); nthd keeps retrying",
        crate::timefmt::format_duration(*timeout)
    )]
    Timeout {
        /// The URL requested.
        url: String,
        /// The timeout that ran out.
        timeout: Duration,
    },
    /// No answer because the unit's `IPAddressDeny=` drops packets to the address (a TCP
    /// connect to it just times out).
    #[error("no answer from {url}: {cause}; {drop_in}")]
    BlockedBySandbox {
        /// The URL requested.
        url: String,
        /// The address the unit drops.
        addr: std::net::IpAddr,
        /// Which unit and which rule drop it.
        cause: String,
        /// The drop-in that allows it.
        drop_in: String,
    },
    /// An HTTP status the reader does not handle.
    #[error("{url} answered HTTP {status}{}", hint_suffix(hint))]
    Status {
        /// The URL requested.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// What the status usually means, for the message; empty when nothing useful can be said.
        hint: &'static str,
        /// The wait the service asked for (`Retry-After`), if it did.
        retry_after: Option<Duration>,
    },
    /// The answer is longer than [`ClientOptions::max_body`].
    #[error(
        "the answer from {url} is larger than {limit} bytes; nthd refuses to read it \
         (is something other than the metadata service answering on that address?)"
    )]
    TooLarge {
        /// The URL requested.
        url: String,
        /// The cap it went over, in bytes.
        limit: usize,
    },
    /// The body itself is logged at debug level only (metadata bodies stay out of info logs),
    /// and never when it is a secret.
    #[error(
        "the answer from {url} is not what nthd expects: {reason} ({bytes} bytes; {})",
        body_note(*secret)
    )]
    Malformed {
        /// The URL requested.
        url: String,
        /// What is wrong with the answer.
        reason: String,
        /// The body's length, in bytes.
        bytes: usize,
        /// The body is a secret (a token, the role's credentials): never logged.
        secret: bool,
    },
    /// The AWS IMDSv2 token request was refused, and IMDSv1 is not allowed.
    #[error(
        "IMDSv2 token request PUT {url} was refused with HTTP {status}. nthd needs IMDSv2: \
         enable it (aws ec2 modify-instance-metadata-options --http-endpoint enabled), raise \
         the hop limit if nthd runs in a container, or set NTHD_AWS_IMDSV1=true to allow \
         IMDSv1 on old setups"
    )]
    TokenRefused {
        /// The token URL.
        url: String,
        /// The HTTP status of the refusal.
        status: u16,
    },
    /// The metadata endpoint is not a plain `http://HOST[:PORT]`.
    #[error("invalid metadata endpoint {url:?}: {reason}; set NTHD_IMDS_ENDPOINT to e.g. http://169.254.169.254")]
    BadEndpoint {
        /// The endpoint as shown ([`crate::redact::shown`]: scheme, host and port at most).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built, or a header value cannot be sent.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// `connect()` was refused with `EACCES`: a prohibit route (systemd-imdsd's locked mode),
    /// and nthd cannot or may not read through systemd-imdsd.
    #[error(
        "cannot reach {url}: connect() was refused with EACCES, which is what a prohibit route \
         answers: IMDS is locked (systemd-imdsd's systemd.imds.network=locked does this). {fix}"
    )]
    Locked {
        /// The URL requested.
        url: String,
        /// What to do.
        fix: String,
    },
    /// Reading through systemd-imdsd failed.
    #[error(
        "IMDS is locked; reading {url} through systemd-imdsd ({socket}) failed: {reason}. {fix}"
    )]
    Imdsd {
        /// The URL nthd would have read directly.
        url: String,
        /// imdsd's socket.
        socket: String,
        /// What failed.
        reason: String,
        /// What to do.
        fix: String,
    },
    /// systemd-imdsd reached the metadata service, but cannot pass its answer on (an HTTP error
    /// with a body, on systemd 261-262): reads work, and this one is hidden.
    #[error("IMDS is locked; reading {url} through systemd-imdsd ({socket}): {reason}. {fix}")]
    ImdsdLimit {
        /// The URL nthd would have read directly.
        url: String,
        /// imdsd's socket.
        socket: String,
        /// What failed.
        reason: String,
        /// What to do.
        fix: String,
    },
    /// systemd-imdsd refused user nthd: the polkit grant is missing or cannot work.
    #[error(
        "IMDS is locked, and systemd-imdsd refused to read {url} for nthd ({answer}): {diagnosis}"
    )]
    ImdsdDenied {
        /// The URL nthd would have read directly.
        url: String,
        /// imdsd's error name.
        answer: String,
        /// Which grant is missing and how to add it.
        diagnosis: String,
    },
}

fn hint_suffix(hint: &str) -> String {
    if hint.is_empty() {
        String::new()
    } else {
        format!("; {hint}")
    }
}

impl ImdsError {
    /// A short label for metrics and STATUS=.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            ImdsError::Connect { .. } => "unreachable",
            ImdsError::Timeout { .. } => "timeout",
            ImdsError::BlockedBySandbox { .. } => "blocked",
            ImdsError::Status { .. } => "http_error",
            ImdsError::TooLarge { .. } => "too_large",
            ImdsError::Malformed { .. } => "malformed",
            ImdsError::TokenRefused { .. } => "token_refused",
            ImdsError::BadEndpoint { .. } | ImdsError::Client(_) => "config",
            ImdsError::Locked { .. } => "locked",
            ImdsError::Imdsd { .. } | ImdsError::ImdsdLimit { .. } => "imdsd",
            ImdsError::ImdsdDenied { .. } => "imdsd_denied",
        }
    }

    /// Whether the service said it is throttling this client (HTTP 429): the one failure
    /// after which even an urgent source backs off (`provider::Pace`).
    pub(crate) fn is_throttled(&self) -> bool {
        matches!(self, ImdsError::Status { status: 429, .. })
    }

    /// The wait the service asked for with `Retry-After` (on a 429 or a 503).
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            ImdsError::Status {
                retry_after,
                status: 429 | 503,
                ..
            } => *retry_after,
            _ => None,
        }
    }

    pub(crate) fn malformed(url: &str, reason: impl Into<String>, body: &str) -> ImdsError {
        let shown = shown_body(url, body);
        match &shown {
            Some(shown) => tracing::debug!(
                "unexpected answer from {url} ({} bytes): {shown}",
                body.len()
            ),
            None => tracing::debug!(
                "unexpected answer from {url} ({} bytes; a secret, not shown)",
                body.len()
            ),
        }
        ImdsError::Malformed {
            url: url.to_string(),
            reason: reason.into(),
            bytes: body.len(),
            secret: shown.is_none(),
        }
    }
}

/// Where an unexpected answer's body can be read: the debug log, or nowhere for a secret.
fn body_note(secret: bool) -> &'static str {
    match secret {
        true => "a secret, never logged",
        false => "NTHD_LOG_LEVEL=debug logs the body",
    }
}

/// What of an unexpected answer's body the debug log may show: up to 2 KiB, quoted; nothing
/// when the URL's answer is a secret (a session token, the instance role's credentials).
fn shown_body(url: &str, body: &str) -> Option<String> {
    const SECRET: [&str; 2] = ["/api/token", "/iam/security-credentials/"];
    let path = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = path.find('/').map_or("", |i| &path[i..]);
    if SECRET.iter().any(|s| path.contains(s)) {
        return None;
    }
    let mut end = body.len().min(2048);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    let cut = if end < body.len() { " (cut)" } else { "" };
    Some(format!("{:?}{cut}", &body[..end]))
}

/// A complete, size-checked answer.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub status: u16,
    pub body: String,
    pub etag: Option<String>,
    /// How long the service asked the client to wait (`Retry-After`), if it did.
    pub retry_after: Option<Duration>,
}

impl Reply {
    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// This answer's status as an error for `url`, with the wait the service asked for.
    pub(crate) fn status_error(&self, url: String) -> ImdsError {
        match status_error(url, self.status) {
            ImdsError::Status {
                url, status, hint, ..
            } => ImdsError::Status {
                url,
                status,
                hint,
                retry_after: self.retry_after,
            },
            other => other,
        }
    }
}

/// The most connections kept open between requests. Concurrent requests each need one: a GCP
/// long-poll and a read beside it, or the four AWS sources when they fall due together.
const MAX_IDLE: usize = 4;
/// A connection idle for longer is closed rather than reused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
const USER_AGENT: &str = concat!("nthd/", env!("CARGO_PKG_VERSION"));

/// One answer as the reader took it off the wire.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) etag: Option<String>,
    /// `Retry-After`, as a delay from when the answer came.
    pub(crate) retry_after: Option<Duration>,
    pub(crate) body: Vec<u8>,
}

/// One HTTP client bound to one metadata base URL. Clones share the connections.
#[derive(Clone)]
pub struct ImdsClient {
    base: String,
    opts: ClientOptions,
    /// Where to connect, and the connections kept open.
    pool: Arc<blocking::Pool>,
    route: Arc<Route>,
}

/// Whether reads go through systemd-imdsd: from the start (`NTHD_IMDS_VIA=systemd-imdsd`), or
/// since a prohibit route refused a direct connection (`auto`). Shared by the clones.
#[derive(Debug)]
struct Route {
    imdsd: Imdsd,
    through: std::sync::atomic::AtomicBool,
}

/// How the reads reach the metadata service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Over HTTP to the metadata address.
    Direct,
    /// Through systemd-imdsd's Varlink service (IMDS is locked, or the setting says so).
    Imdsd,
}

impl std::fmt::Debug for ImdsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImdsClient")
            .field("base", &self.base)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// Why an exchange got no usable answer, before it is told as an [`ImdsError`].
#[derive(Debug)]
enum Failure {
    /// No TCP connection (refused, unreachable, DNS).
    Connect(std::io::Error),
    /// No TCP connection within the connect timeout.
    ConnectTimeout,
    /// The connection broke, or what came back is not HTTP.
    Io(std::io::Error),
    /// A kept connection was reset before any of the answer came, and no new one took over.
    Closed,
    /// No whole answer within the request's timeout.
    Timeout,
    /// The body is longer than the cap.
    TooLarge,
}

impl ImdsClient {
    /// `base` is e.g. `http://169.254.169.254` or `http://[fd00:ec2::254]`.
    pub fn new(base: &str, opts: ClientOptions) -> Result<ImdsClient, ImdsError> {
        let base = normalize_base(base)?;
        let (host, port) = host_port(&base).ok_or_else(|| ImdsError::BadEndpoint {
            url: base.clone(),
            reason: "no host".into(),
        })?;
        let authority = &base["http://".len()..];
        if !authority.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ImdsError::BadEndpoint {
                url: crate::redact::shown(&base),
                reason: "the host is not printable ASCII".into(),
            });
        }
        let pool = Arc::new(blocking::Pool::new(host, port, authority));
        let route = Arc::new(Route {
            imdsd: Imdsd::new(opts.imdsd_socket.clone(), opts.imdsd_root.clone()),
            through: (opts.via == Via::SystemdImdsd).into(),
        });
        Ok(ImdsClient {
            base,
            opts,
            pool,
            route,
        })
    }

    /// How the reads reach the metadata service now.
    pub(crate) fn access(&self) -> Access {
        if self
            .route
            .through
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            Access::Imdsd
        } else {
            Access::Direct
        }
    }

    /// systemd-imdsd's socket.
    pub(crate) fn imdsd_socket(&self) -> &std::path::Path {
        self.route.imdsd.socket()
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    pub(crate) fn options(&self) -> &ClientOptions {
        &self.opts
    }

    /// The full URL of `path` on this service.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Sends one request and reads the body up to the cap. Non-2xx answers are returned as
    /// replies, not errors; callers decide what a 404 means. `timeout` (default: the client's
    /// request timeout) covers everything: the connection, the request and the whole body.
    pub(crate) fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&'static str, &str)],
        body: Option<String>,
        timeout: Option<Duration>,
    ) -> Result<Reply, ImdsError> {
        let timeout = timeout.unwrap_or(self.opts.request_timeout);
        if self.access() == Access::Imdsd {
            return self
                .route
                .imdsd
                .send(&method, path, &self.url(path), timeout);
        }
        let req = self.pool.request(&method, path, headers, body.as_deref())?;
        let mut answers = self.pool.batch(&[req], &self.limits(timeout));
        let answer = answers.pop().unwrap_or(Err(Failure::Closed));
        self.answer(&method, path, timeout, answer)
    }

    /// GETs every path at once, each on its own kept connection, so that their answers share a
    /// wakeup; the answers in the order of `paths`.
    pub(crate) fn get_all(
        &self,
        paths: &[&str],
        headers: &[(&'static str, &str)],
    ) -> Vec<Result<Reply, ImdsError>> {
        if self.access() == Access::Imdsd {
            return paths.iter().map(|path| self.get(path, headers)).collect();
        }
        let requests: Result<Vec<_>, _> = paths
            .iter()
            .map(|p| self.pool.request(&Method::GET, p, headers, None))
            .collect();
        let requests = match requests {
            Ok(r) => r,
            Err(e) => return vec![Err(e); paths.len()],
        };
        let timeout = self.opts.request_timeout;
        let answers = self.pool.batch(&requests, &self.limits(timeout));
        paths
            .iter()
            .zip(answers)
            .map(|(path, answer)| self.answer(&Method::GET, path, timeout, answer))
            .collect()
    }

    fn limits(&self, timeout: Duration) -> blocking::Limits {
        blocking::Limits {
            timeout,
            connect_timeout: self.opts.connect_timeout,
            max_body: self.opts.max_body,
        }
    }

    /// A whole answer as a reply: its body must be UTF-8.
    fn reply(&self, path: &str, a: Answer) -> Result<Reply, ImdsError> {
        let body = String::from_utf8(a.body).map_err(|e| {
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            ImdsError::malformed(&self.url(path), "the body is not UTF-8", &lossy)
        })?;
        Ok(Reply {
            status: a.status,
            body,
            etag: a.etag,
            retry_after: a.retry_after,
        })
    }

    /// An exchange's answer as a reply, or its failure told as an [`ImdsError`]: blamed on the
    /// unit's sandbox when that is the cause, or read through systemd-imdsd when a prohibit
    /// route refused the connection.
    fn answer(
        &self,
        method: &Method,
        path: &str,
        timeout: Duration,
        answer: Result<Answer, Failure>,
    ) -> Result<Reply, ImdsError> {
        let failure = match answer {
            Ok(a) => return self.reply(path, a),
            Err(f) => f,
        };
        let url = self.url(path);
        let err = match failure {
            Failure::TooLarge => {
                return Err(ImdsError::TooLarge {
                    url,
                    limit: self.opts.max_body,
                })
            }
            Failure::Timeout => ImdsError::Timeout { url, timeout },
            Failure::ConnectTimeout => ImdsError::Timeout {
                url,
                timeout: self.opts.connect_timeout,
            },
            Failure::Connect(e) if e.raw_os_error() == Some(libc::EACCES) => {
                return self.locked(method, path, url, timeout);
            }
            Failure::Connect(e) | Failure::Io(e) => connect_error(url, &e, self.opts.endpoint_set),
            Failure::Closed => {
                let e = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
                connect_error(url, &e, self.opts.endpoint_set)
            }
        };
        Err(self.blame_sandbox(err))
    }

    /// A prohibit route refused the connection: read through systemd-imdsd from now on, when
    /// the setting allows it and its socket is there (and say so, once), else say what is
    /// missing.
    fn locked(
        &self,
        method: &Method,
        path: &str,
        url: String,
        timeout: Duration,
    ) -> Result<Reply, ImdsError> {
        let imdsd = &self.route.imdsd;
        let fix = match self.opts.via {
            Via::Direct => "NTHD_IMDS_VIA=direct keeps nthd from reading through systemd-imdsd; \
                            set it to auto (the default)"
                .to_string(),
            _ if !imdsd.present() => format!(
                "systemd-imdsd's socket {} is missing: install the systemd-imds package \
                 (systemd 261+) and start systemd-imdsd.socket, or unlock IMDS for nthd",
                imdsd.socket().display()
            ),
            _ => {
                if !self
                    .route
                    .through
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    tracing::warn!(
                        "IMDS is locked by systemd-imdsd (prohibit route: connect() to {}:{} \
                         was refused with EACCES); reading through its Varlink service {}",
                        self.pool.host(),
                        self.pool.port(),
                        imdsd.socket().display()
                    );
                }
                return imdsd.send(method, path, &url, timeout);
            }
        };
        Err(ImdsError::Locked { url, fix })
    }

    /// A connection that failed or timed out, to an address the unit's IP access lists drop,
    /// is their doing: say so, with the drop-in. Anything else is returned as it is.
    fn blame_sandbox(&self, err: ImdsError) -> ImdsError {
        let (ImdsError::Timeout { url, .. } | ImdsError::Connect { url, .. }) = &err else {
            return err;
        };
        let Some(policy) = &self.opts.sandbox else {
            return err;
        };
        let addrs = self
            .pool
            .addresses(self.opts.connect_timeout)
            .unwrap_or_default();
        let ips: Vec<_> = addrs.iter().map(std::net::SocketAddr::ip).collect();
        match policy.all_blocked(&ips) {
            Some(b) => ImdsError::BlockedBySandbox {
                url: url.clone(),
                addr: b.addr,
                cause: b.cause,
                drop_in: b.drop_in,
            },
            None => err,
        }
    }

    pub(crate) fn get(
        &self,
        path: &str,
        headers: &[(&'static str, &str)],
    ) -> Result<Reply, ImdsError> {
        self.send(Method::GET, path, headers, None, None)
    }

    /// GETs `path` on a thread of its own, not before `not_before`, and hands `done` the
    /// moment it was sent and its answer, there: for a wait the caller must not sit through
    /// (GCP's long-polls, Azure's first call, up to minutes). A thread per request in flight:
    /// at most two at a time, each for seconds to minutes (docs/architecture.md). `Err` when
    /// no thread could be started.
    pub(crate) fn get_later(
        &self,
        path: String,
        headers: &'static [(&'static str, &'static str)],
        timeout: Option<Duration>,
        not_before: Instant,
        done: impl FnOnce(Instant, Result<Reply, ImdsError>) + Send + 'static,
    ) -> Result<(), ImdsError> {
        let client = self.clone();
        let wait = move || {
            std::thread::sleep(not_before.saturating_duration_since(Instant::now()));
            let issued = Instant::now();
            done(
                issued,
                client.send(Method::GET, &path, headers, None, timeout),
            );
        };
        match std::thread::Builder::new()
            .name("nthd-wait".into())
            .spawn(wait)
        {
            Ok(_) => Ok(()),
            Err(e) => Err(ImdsError::Client(format!(
                "cannot start a thread for a metadata read: {e}"
            ))),
        }
    }
}

/// An answer as the fuzz target sees it: status, ETag, body, whether the connection would be
/// kept; `None` when nothing came; a failure as text.
pub(crate) type PiecesAnswer = Result<Option<(u16, Option<String>, Vec<u8>, bool)>, String>;

/// The answer reader over `pieces` (each what one read(2) returns), for the fuzz target: the
/// answer, the size its buffer grew to, and the most it may grow to.
pub(crate) fn read_pieces(pieces: &[&[u8]], cap: usize) -> (PiecesAnswer, usize, usize) {
    let mut source = blocking::Pieces(pieces.iter().copied().collect());
    let mut buf = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = blocking::read_from(&mut source, &mut buf, deadline, cap)
        .map(|a| a.map(|(a, keep)| (a.status, a.etag, a.body, keep)))
        .map_err(|f| format!("{f:?}"));
    (answer, buf.len(), blocking::answer_limit(cap))
}

/// Checks a metadata base URL (`http://host[:port]`) and returns it without a trailing slash.
pub(crate) fn normalize_base(base: &str) -> Result<String, ImdsError> {
    let trimmed = base.trim().trim_end_matches('/');
    let bad = |reason: &str| ImdsError::BadEndpoint {
        url: crate::redact::shown(base),
        reason: reason.to_string(),
    };
    let rest = trimmed
        .strip_prefix("http://")
        .ok_or_else(|| bad("only http:// is supported (metadata services do not speak TLS)"))?;
    if rest.is_empty() {
        return Err(bad("no host"));
    }
    if rest.contains('/') || rest.contains('?') || rest.contains('#') {
        return Err(bad("give only scheme, host and port, without a path"));
    }
    let uri = Uri::try_from(trimmed).map_err(|e| bad(&e.to_string()))?;
    let authority = uri.authority().ok_or_else(|| bad("no host"))?;
    if authority.host().is_empty() || authority.as_str().contains('@') {
        return Err(bad("give only a host and a port"));
    }
    if let Some((_, port)) = authority.as_str().rsplit_once(':').filter(|_| {
        // An IPv6 address without a port has colons only inside its brackets.
        !authority.as_str().ends_with(']')
    }) {
        if port.parse::<u16>().is_err() {
            return Err(bad("invalid port number"));
        }
    }
    Ok(trimmed.to_string())
}

/// The host (an IPv6 address in brackets, as in the URL) and port of an `http://` base URL.
pub(crate) fn host_port(base: &str) -> Option<(String, u16)> {
    let uri = Uri::try_from(base).ok()?;
    let authority = uri.authority()?;
    Some((
        authority.host().to_string(),
        authority.port_u16().unwrap_or(80),
    ))
}

/// What to check when the default endpoint cannot be reached.
const ADVICE_DEFAULT: &str = "Check that the metadata service is enabled for this instance and \
     reachable from the host (link-local route, firewall, the unit's IPAddressAllow=), or set \
     NTHD_IMDS_ENDPOINT";
/// What to check when the endpoint the user set cannot be reached.
const ADVICE_SET: &str = "Check that a metadata service listens at the address NTHD_IMDS_ENDPOINT \
     names, and that the unit's IPAddressAllow= admits it";

/// No HTTP answer: the error and its causes, and what to check.
fn connect_error(url: String, e: &dyn std::error::Error, endpoint_set: bool) -> ImdsError {
    let mut reason = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        reason = format!("{reason}: {s}");
        src = s.source();
    }
    ImdsError::Connect {
        url,
        reason,
        advice: if endpoint_set {
            ADVICE_SET
        } else {
            ADVICE_DEFAULT
        },
    }
}

/// The hint attached to an unexpected HTTP status.
pub(crate) fn status_error(url: String, status: u16) -> ImdsError {
    let hint = match StatusCode::from_u16(status).ok() {
        Some(StatusCode::UNAUTHORIZED) => "the token was rejected; nthd fetches a new one",
        Some(StatusCode::FORBIDDEN) => {
            "access denied; the metadata service may be disabled for this instance, or a \
             required header is missing"
        }
        Some(StatusCode::TOO_MANY_REQUESTS) => {
            "throttled; lower the poll rate (NTHD_POLL_INTERVAL) if this persists"
        }
        Some(s) if s.is_server_error() => "the metadata service is having trouble; nthd retries",
        _ => "",
    };
    ImdsError::Status {
        url,
        status,
        hint,
        retry_after: None,
    }
}

/// What a token request got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenAnswer {
    Token(String),
    /// A 4xx other than 429: the service does not issue tokens here. What that means is the
    /// provider's call (AWS: an error unless IMDSv1 is allowed; Alibaba: normal mode).
    Refused {
        url: String,
        status: u16,
    },
}

/// A metadata service that issues session tokens (AWS IMDSv2, Alibaba hardened mode), as
/// [`get_with_token`] needs it.
pub(crate) trait TokenSource {
    /// The header the token goes in.
    const HEADER: &'static str;
    /// The client reads go through.
    fn client(&self) -> &ImdsClient;
    /// The token to send, `None` when the service is read without one.
    fn token(&mut self) -> Result<Option<String>, ImdsError>;
    /// Whether `status` on a read says the token was not accepted.
    fn rejects(&self, status: u16) -> bool;
    /// Forgets the token (and anything learned from it) so the next read fetches a new one.
    fn drop_token(&mut self);
}

/// GET `path` with the service's token; when the answer rejects the token, drop it and try
/// once more with a new one (a token can expire or be revoked between reads).
pub(crate) fn get_with_token<T: TokenSource>(src: &mut T, path: &str) -> Result<Reply, ImdsError> {
    let mut replies = get_all_with_token(src, &[path])?;
    replies
        .pop()
        .unwrap_or_else(|| Err(ImdsError::Client("no answer".into())))
}

/// GET every path with the service's token, all at once, each on its own kept connection (so
/// their answers share a wakeup). A read whose answer rejects the token is made once more with
/// a new one, fetched once for all of them. The one copy of this dance for every provider that
/// uses tokens. `Err` only when no token could be had for the first round; the answers are in
/// the order of `paths`.
pub(crate) fn get_all_with_token<T: TokenSource>(
    src: &mut T,
    paths: &[&str],
) -> Result<Vec<Result<Reply, ImdsError>>, ImdsError> {
    // Through systemd-imdsd the token is imdsd's business (and the token's PUT may be what
    // found IMDS locked).
    let token = match src.client().access() {
        Access::Direct => match src.token() {
            Err(_) if src.client().access() == Access::Imdsd => None,
            r => r?,
        },
        Access::Imdsd => None,
    };
    let client = src.client();
    let headers = token_header::<T>(token.as_deref());
    let mut replies = client.get_all(paths, &headers);
    let mut renewed = false;
    for (path, reply) in paths.iter().zip(replies.iter_mut()) {
        let status = match reply {
            Ok(r) if src.rejects(r.status) => r.status,
            _ => continue,
        };
        tracing::debug!(
            "{} answered {status}; fetching a new metadata token",
            src.client().url(path)
        );
        if !renewed {
            src.drop_token();
            renewed = true;
        }
        *reply = match src.token() {
            Ok(token) => {
                let headers = token_header::<T>(token.as_deref());
                src.client().get(path, &headers)
            }
            Err(e) => Err(e),
        };
    }
    Ok(replies)
}

/// The header that carries the token, when there is one.
fn token_header<T: TokenSource>(token: Option<&str>) -> Vec<(&'static str, &str)> {
    token.map(|t| vec![(T::HEADER, t)]).unwrap_or_default()
}

/// A session token for metadata services that issue one (AWS IMDSv2, Alibaba hardened mode):
/// fetched with a `PUT`, cached, and refreshed a minute before it expires (at 80% of the
/// lifetime for short ones).
#[derive(Debug)]
pub(crate) struct TokenCache {
    path: &'static str,
    ttl_header: &'static str,
    ttl: Duration,
    token: Option<(String, std::time::Instant)>,
    fetched: u64,
}

impl TokenCache {
    pub(crate) fn new(path: &'static str, ttl_header: &'static str, ttl: Duration) -> TokenCache {
        TokenCache {
            path,
            ttl_header,
            ttl: ttl.clamp(Duration::from_secs(1), Duration::from_secs(21600)),
            token: None,
            fetched: 0,
        }
    }

    /// Drops the cached token (after a 401).
    pub(crate) fn clear(&mut self) {
        self.token = None;
    }

    pub(crate) fn is_cached(&self) -> bool {
        self.token.is_some()
    }

    /// Tokens fetched so far.
    pub(crate) fn fetched(&self) -> u64 {
        self.fetched
    }

    /// The cached token if it is still fresh, else a new one.
    pub(crate) fn get(&mut self, client: &ImdsClient) -> Result<TokenAnswer, ImdsError> {
        if let Some((value, refresh_at)) = &self.token {
            if std::time::Instant::now() < *refresh_at {
                return Ok(TokenAnswer::Token(value.clone()));
            }
        }
        self.token = None;
        let ttl = self.ttl.as_secs().to_string();
        let ttl_header = [(self.ttl_header, ttl.as_str())];
        let reply = client.send(Method::PUT, self.path, &ttl_header, None, None)?;
        let url = client.url(self.path);
        match reply.status {
            200 => {
                let value = reply.body.trim().to_string();
                if value.is_empty()
                    || value.len() > 1024
                    || !value.bytes().all(|b| b.is_ascii_graphic())
                {
                    return Err(ImdsError::malformed(
                        &url,
                        "the token is empty or invalid",
                        &reply.body,
                    ));
                }
                let early = (self.ttl / 5).min(Duration::from_secs(60));
                self.token = Some((value.clone(), std::time::Instant::now() + self.ttl - early));
                self.fetched += 1;
                Ok(TokenAnswer::Token(value))
            }
            s @ 400..=499 if s != 429 => Ok(TokenAnswer::Refused { url, status: s }),
            _ => Err(reply.status_error(url)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn base_urls() {
        assert_eq!(
            normalize_base("http://169.254.169.254/").unwrap(),
            "http://169.254.169.254"
        );
        assert_eq!(
            normalize_base("http://[fd00:ec2::254]").unwrap(),
            "http://[fd00:ec2::254]"
        );
        assert_eq!(
            normalize_base("http://127.0.0.1:8080").unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            host_port("http://[fd00:ec2::254]:8080"),
            Some(("[fd00:ec2::254]".to_string(), 8080))
        );
        assert_eq!(
            host_port("http://169.254.169.254"),
            Some(("169.254.169.254".to_string(), 80))
        );
        for bad in [
            "https://169.254.169.254",
            "169.254.169.254",
            "http://",
            "http://host/latest",
            "http://a b",
            "http://host:99999",
            "http://user@host",
        ] {
            let e = normalize_base(bad).unwrap_err().to_string();
            assert!(e.contains("NTHD_IMDS_ENDPOINT"), "{bad}: {e}");
        }
        // A user name and password, and a path, never show: scheme, host and port at most.
        for (bad, shown) in [
            ("http://zq:s3/cr3t@169.254.169.254/x?t=k#f", "\"http://…\""),
            (
                "http://zq:yv@169.254.169.254:81",
                "\"http://169.254.169.254:81\"",
            ),
            (
                "http://169.254.169.254/latest?t=k",
                "\"http://169.254.169.254\"",
            ),
        ] {
            let e = normalize_base(bad).unwrap_err().to_string();
            let rest = e
                .strip_prefix("invalid metadata endpoint ")
                .unwrap_or_default();
            assert!(rest.starts_with(&format!("{shown}: ")), "{bad}: {e}");
            for secret in ["zq", "s3", "cr3t", "yv", "latest", "t=k", "#f"] {
                assert!(!e.contains(secret), "{secret:?} of {bad} in: {e}");
            }
        }
    }

    /// A one-port HTTP server: answers each request with `answer(n, request head)`, `n`
    /// counting requests from 0, and closes the connection after the answer when `close` says
    /// so. Returns its base URL and the number of connections it accepted.
    async fn server(
        answer: impl Fn(usize, &str) -> (String, bool) + Send + Sync + 'static,
    ) -> (
        String,
        Arc<std::sync::atomic::AtomicUsize>,
        Arc<Mutex<Vec<String>>>,
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let conns = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let answer = Arc::new(answer);
        let (c, h) = (conns.clone(), heads.clone());
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                c.fetch_add(1, Ordering::SeqCst);
                let (answer, heads) = (answer.clone(), h.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        let mut chunk = [0u8; 1024];
                        let n = s.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                        buf.drain(..end + 4);
                        let n = {
                            let mut heads = heads.lock().unwrap();
                            heads.push(head.clone());
                            heads.len() - 1
                        };
                        let (text, close) = answer(n, &head);
                        s.write_all(text.as_bytes()).await.unwrap();
                        if close {
                            return;
                        }
                    }
                });
            }
        });
        (base, conns, heads)
    }

    fn ok(body: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    /// The client's default options. The client blocks the test's own thread; the server
    /// answers from the runtime's workers.
    fn opts() -> ClientOptions {
        ClientOptions::default()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keeps_the_connection_and_sends_origin_form_with_host() {
        let (base, conns, heads) = server(|n, _| (ok(&format!("answer {n}")), false)).await;
        let c = ImdsClient::new(&base, opts()).unwrap();
        for n in 0..3 {
            let r = c.get("/latest/x", &[("x-token", "t")]).unwrap();
            assert_eq!(
                (r.status, r.body.as_str()),
                (200, format!("answer {n}").as_str())
            );
        }
        assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 1);
        let head = heads.lock().unwrap()[0].to_ascii_lowercase();
        let authority = base.strip_prefix("http://").unwrap();
        assert!(head.starts_with("get /latest/x http/1.1\r\n"), "{head}");
        assert!(head.contains(&format!("host: {authority}\r\n")), "{head}");
        assert!(
            head.contains("user-agent: nthd/") && head.contains("x-token: t"),
            "{head}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_kept_connection_is_replaced() {
        // The server closes after every answer, as one with a short keep-alive timeout would.
        let (base, conns, _) = server(|_, _| (ok("fine"), true)).await;
        let c = ImdsClient::new(&base, opts()).unwrap();
        for _ in 0..3 {
            assert_eq!(c.get("/x", &[]).unwrap().body, "fine");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redirects_are_answers_not_followed() {
        let (base, _, heads) = server(|_, _| {
            let text = "HTTP/1.1 302 Found\r\nlocation: http://192.0.2.1/elsewhere\r\n\
                        content-length: 0\r\n\r\n";
            (text.to_string(), false)
        })
        .await;
        let c = ImdsClient::new(&base, opts()).unwrap();
        assert_eq!(c.get("/x", &[]).unwrap().status, 302);
        assert_eq!(heads.lock().unwrap().len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn caps_the_body_declared_or_not() {
        let opts = ClientOptions {
            max_body: 10,
            ..opts()
        };
        let (base, _, _) = server(|n, _| match n {
            // Declared too long.
            0 => (ok("0123456789A"), false),
            // Chunked, no length declared, too long in total.
            _ => (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                 6\r\n012345\r\n6\r\n6789AB\r\n0\r\n\r\n"
                    .to_string(),
                false,
            ),
        })
        .await;
        let c = ImdsClient::new(&base, opts).unwrap();
        for _ in 0..2 {
            let e = c.get("/big", &[]).unwrap_err();
            assert!(matches!(e, ImdsError::TooLarge { limit: 10, .. }), "{e:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn times_out_and_refuses_to_connect_with_the_url() {
        // Head sent, body never: the request timeout covers the body.
        let (base, _, _) = server(|_, _| {
            (
                "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nab".to_string(),
                false,
            )
        })
        .await;
        let short = ClientOptions {
            request_timeout: Duration::from_millis(200),
            ..opts()
        };
        let c = ImdsClient::new(&base, short).unwrap();
        let e = c.get("/slow", &[]).unwrap_err();
        assert!(matches!(e, ImdsError::Timeout { .. }), "{e:?}");
        assert!(e.to_string().contains(&format!("{base}/slow")), "{e}");

        // Nothing listens: a connection error, with the advice for a user-set endpoint.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let set = ClientOptions {
            endpoint_set: true,
            ..opts()
        };
        let c = ImdsClient::new(&format!("http://127.0.0.1:{port}"), set).unwrap();
        let e = c.get("/x", &[]).unwrap_err();
        assert!(
            matches!(
                e,
                ImdsError::Connect {
                    advice: ADVICE_SET,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_due_together_cost_one_timeout_and_keep_their_order() {
        // `/slow…` is never answered; the others at once.
        let (base, _, _) = server(|_, head| match head.contains("/slow") {
            true => (String::new(), false),
            false => (ok(head.split(' ').nth(1).unwrap_or("")), false),
        })
        .await;
        // Time enough for the answered reads under qemu-user's emulation on a loaded machine;
        // two reads that never answer tell one shared deadline (about one timeout in all) from
        // a timeout each (two or more).
        let timeout = Duration::from_secs(4);
        let c = ImdsClient::new(
            &base,
            ClientOptions {
                request_timeout: timeout,
                ..opts()
            },
        )
        .unwrap();
        let start = Instant::now();
        let replies = c.get_all(&["/a", "/slow1", "/b", "/slow2"], &[]);
        let took = start.elapsed();
        assert!(took < timeout * 7 / 4, "one deadline for all: {took:?}");
        assert_eq!(replies[0].as_ref().unwrap().body, "/a");
        assert_eq!(replies[2].as_ref().unwrap().body, "/b");
        for slow in [&replies[1], &replies[3]] {
            assert!(matches!(slow, Err(ImdsError::Timeout { .. })), "{slow:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_chunked_bodies_and_etags_on_a_kept_connection() {
        let (base, conns, _) = server(|_, _| {
            let text = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\netag: \"e1\"\r\n\r\n\
                        3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
            (text.to_string(), false)
        })
        .await;
        let c = ImdsClient::new(&base, opts()).unwrap();
        for _ in 0..2 {
            let r = c.get("/x", &[]).unwrap();
            assert_eq!(
                (r.body.as_str(), r.etag.as_deref()),
                ("abcde", Some("\"e1\""))
            );
        }
        assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// A name is resolved on a helper thread, its addresses tried in turn (`localhost` has
    /// ::1, where nothing listens, and 127.0.0.1), and a name that does not resolve in time is
    /// an error within the connect timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_name_resolves_within_the_connect_timeout() {
        let (base, _, _) = server(|_, _| (ok("named"), false)).await;
        let port = base.rsplit(':').next().unwrap().to_string();
        let named = format!("http://localhost:{port}");
        let c = ImdsClient::new(&named, opts()).unwrap();
        assert_eq!(c.get("/", &[]).unwrap().body, "named");
        let quick = ClientOptions {
            connect_timeout: Duration::from_millis(300),
            ..opts()
        };
        let c = ImdsClient::new("http://nthd-test.invalid", quick).unwrap();
        let start = Instant::now();
        assert!(c.get("/", &[]).is_err());
        assert!(start.elapsed() < Duration::from_secs(3));
    }

    /// A token or the role's credentials are never quoted, whatever is wrong with them; any
    /// other body is, up to 2 KiB.
    #[test]
    fn a_secret_body_is_never_shown() {
        for url in [
            "http://169.254.169.254/latest/api/token",
            "http://169.254.169.254/latest/meta-data/iam/security-credentials/role",
            "http://100.100.100.200/latest/api/token",
        ] {
            assert_eq!(shown_body(url, "AKIAxyz-secret"), None, "{url}");
            // Nor does the error send anyone to the debug log for it.
            let e = ImdsError::malformed(url, "the body is not UTF-8", "AKIAxyz-secret");
            assert!(
                e.to_string()
                    .ends_with("(14 bytes; a secret, never logged)"),
                "{e}"
            );
        }
        let url = "http://169.254.169.254/latest/meta-data/spot/instance-action";
        let e = ImdsError::malformed(url, "invalid JSON", "x");
        assert!(
            e.to_string()
                .ends_with("(1 bytes; NTHD_LOG_LEVEL=debug logs the body)"),
            "{e}"
        );
        assert_eq!(shown_body(url, "x").as_deref(), Some("\"x\""));
        let long = shown_body(url, &"é".repeat(2000)).unwrap();
        assert!(long.ends_with(" (cut)") && long.len() < 2100, "{long}");
    }

    #[test]
    fn the_connect_timeout_is_at_most_a_second() {
        assert!(ClientOptions::default().connect_timeout <= Duration::from_secs(1));
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = ImdsError::TokenRefused {
            url: "http://x/latest/api/token".into(),
            status: 403,
        };
        let s = e.to_string();
        assert!(s.contains("http://x/latest/api/token") && s.contains("NTHD_AWS_IMDSV1"));
        let s = status_error("http://x/y".into(), 503).to_string();
        assert!(s.contains("http://x/y") && s.contains("503") && s.contains("retries"));
    }
}
