//! A scriptable mock of the cloud instance-metadata services (AWS, GCP, Azure, Alibaba at once).
//!
//! The server is a hand-written HTTP/1.1 implementation on tokio so that faults can be injected
//! at the byte level (hang, reset, truncated body, slow body, garbage). It supports keep-alive,
//! pipelining, `Content-Length` request bodies and any number of concurrent connections.
//!
//! Request handling, in order:
//! 1. `/_mock/...` — the control API (see the crate README section in [`MockImds`]); never
//!    logged in the request log.
//! 2. `PUT /latest/api/token` — token issuance (AWS `X-aws-ec2-metadata-token-ttl-seconds`, or
//!    Alibaba `X-aliyun-ecs-metadata-token-ttl-seconds`), unless a route is scripted for
//!    `/latest/api/token`, in which case that route answers (to inject faults on the token call).
//! 3. `/latest/...` — token checks per [`Config`].
//! 4. `/computeMetadata/...` — needs `Metadata-Flavor: Google` (else 403); answers carry
//!    `Metadata-Flavor: Google` and an `ETag`; `?wait_for_change=true` long-polls.
//! 5. `/metadata/...` — needs `Metadata: true` (else 400) and, by default, `api-version` (else
//!    400); `POST /metadata/scheduledevents` (the event acknowledgement) answers 200 and is
//!    logged with its body.
//! 6. The route table (exact path, query ignored); unset paths answer 404, under `/latest/`
//!    with EC2's XHTML page (as do token failures, with EC2's 401 page) unless the config's
//!    `error_bodies` is off; elsewhere with an empty body.
//!
//! Identity keys (instance id, type, zone, lifecycle) are ordinary routes, installed per cloud
//! with realistic values only when asked for (see [`identity`]).

mod http;
pub mod identity;
mod model;

pub use http::percent_encode;
pub use model::{
    Config, Event, Fault, LoggedRequest, Response, Stats, TokenMode, DEFAULT_SLOW_MS,
    EC2_NOT_FOUND, EC2_UNAUTHORIZED,
};

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::{lock, now_ms};
use http::Request;

/// AWS / Alibaba token endpoint.
pub const TOKEN_PATH: &str = "/latest/api/token";
/// Header carrying the requested AWS token TTL on the token `PUT`.
pub const AWS_TTL_HEADER: &str = "X-aws-ec2-metadata-token-ttl-seconds";
/// Header carrying an AWS token on GETs.
pub const AWS_TOKEN_HEADER: &str = "X-aws-ec2-metadata-token";
/// Header carrying the requested Alibaba token TTL on the token `PUT`.
pub const ALIBABA_TTL_HEADER: &str = "X-aliyun-ecs-metadata-token-ttl-seconds";
/// Header carrying an Alibaba token on GETs.
pub const ALIBABA_TOKEN_HEADER: &str = "X-aliyun-ecs-metadata-token";
/// Longest token TTL both clouds accept, in seconds.
pub const MAX_TOKEN_TTL_SECS: u64 = 21600;
/// Logged request bodies are cut to this many bytes.
pub const LOG_BODY_MAX: usize = 4096;

/// Bytes sent by [`Fault::Garbage`].
pub const GARBAGE: &[u8] = b"\x00\xff\xfeSSH-2.0-OpenSSH_9.2 not-http\r\n\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x8b\x00";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TokenKind {
    Aws,
    Alibaba,
}

struct Route {
    resp: Response,
    served: usize,
}

impl Route {
    fn peek(&self) -> &Response {
        match &self.resp.sequence {
            Some(seq) => &seq[self.served.min(seq.len() - 1)],
            None => &self.resp,
        }
    }

    fn take(&mut self) -> Response {
        let r = self.peek().clone();
        self.served = self.served.saturating_add(1);
        r
    }
}

struct Inner {
    routes: HashMap<String, Route>,
    config: Config,
    log: Vec<LoggedRequest>,
    events: Vec<Event>,
    tokens: HashMap<String, (TokenKind, Instant)>,
    stats: Stats,
    next_request_id: u64,
    next_event_seq: u64,
    rng: u64,
}

impl Inner {
    fn push_event(&mut self, kind: &str, action: &str) -> &mut Event {
        self.next_event_seq += 1;
        self.events.push(Event {
            seq: self.next_event_seq,
            t_ms: now_ms(),
            kind: kind.into(),
            action: action.into(),
            path: None,
            response: None,
            config: None,
        });
        self.events.last_mut().expect("just pushed")
    }

    fn next_rand(&mut self) -> u64 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn new_token(&mut self) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut t = String::from("AQAEA");
        while t.len() < 56 {
            let r = self.next_rand();
            for i in 0..8 {
                if t.len() < 56 {
                    t.push(ALPHABET[((r >> (i * 6)) & 63) as usize] as char);
                }
            }
        }
        t
    }

    fn token_put(&mut self, req: &Request) -> Plan {
        let (kind, ttl) = match (req.header(AWS_TTL_HEADER), req.header(ALIBABA_TTL_HEADER)) {
            (Some(t), _) => (TokenKind::Aws, Some(t)),
            (None, Some(t)) => (TokenKind::Alibaba, Some(t)),
            (None, None) => (TokenKind::Aws, None),
        };
        let (mode, ttl_header) = match kind {
            TokenKind::Aws => (self.config.aws_token, AWS_TTL_HEADER),
            TokenKind::Alibaba => (self.config.alibaba_token, ALIBABA_TTL_HEADER),
        };
        if mode == TokenMode::Refused {
            return Plan::fixed(
                Response::status(self.config.token_put_status),
                format!("{kind:?} token PUT refused by config"),
            );
        }
        let ttl = match ttl.map(str::parse::<u64>) {
            Some(Ok(t)) if (1..=MAX_TOKEN_TTL_SECS).contains(&t) => t,
            Some(_) => return Plan::fixed(Response::status(400), "token TTL out of range"),
            None => return Plan::fixed(Response::status(400), "token TTL header missing"),
        };
        let now = Instant::now();
        // Forget tokens that expired long ago (recently expired ones stay, for the log note).
        self.tokens
            .retain(|_, (_, exp)| now.saturating_duration_since(*exp) < Duration::from_secs(600));
        let token = self.new_token();
        self.tokens
            .insert(token.clone(), (kind, now + Duration::from_secs(ttl)));
        self.stats.tokens_issued += 1;
        match kind {
            TokenKind::Aws => self.stats.aws_tokens_issued += 1,
            TokenKind::Alibaba => self.stats.alibaba_tokens_issued += 1,
        }
        Plan::fixed(
            Response::text(200, token).with_header(ttl_header, ttl.to_string()),
            format!("issued {kind:?} token, ttl {ttl}s"),
        )
    }

    /// Token checks for a request under `/latest/`; `Some` means "answer this instead".
    fn check_token(&self, req: &Request) -> Option<Plan> {
        let cfg = &self.config;
        if cfg.token_always_401 {
            return Some(Plan::fixed(unauthorized(req, cfg), "token_always_401"));
        }
        let now = Instant::now();
        let mut authed = false;
        for (kind, header, mode) in [
            (TokenKind::Aws, AWS_TOKEN_HEADER, cfg.aws_token),
            (TokenKind::Alibaba, ALIBABA_TOKEN_HEADER, cfg.alibaba_token),
        ] {
            if mode == TokenMode::Refused {
                continue;
            }
            let Some(tok) = req.header(header) else {
                continue;
            };
            let why = match self.tokens.get(tok) {
                Some((k, exp)) if *k == kind && *exp > now => {
                    authed = true;
                    continue;
                }
                Some((k, _)) if *k != kind => format!("{header}: token was issued for {k:?}"),
                Some(_) => format!("{header}: token expired"),
                None => format!("{header}: unknown token"),
            };
            return Some(Plan::fixed(unauthorized(req, cfg), why));
        }
        if !authed
            && (cfg.aws_token == TokenMode::Required || cfg.alibaba_token == TokenMode::Required)
        {
            return Some(Plan::fixed(unauthorized(req, cfg), "token required"));
        }
        None
    }
}

/// The 401 for a token problem, with EC2's body when the config asks for error bodies.
fn unauthorized(req: &Request, cfg: &Config) -> Response {
    Response::error_for(401, &req.path, cfg.error_bodies)
}

/// What to do with a non-control request, decided before any waiting.
enum Plan {
    /// A built-in answer (token issuance, auth failure, Azure acknowledgement).
    Fixed { resp: Response, note: String },
    /// Serve the route table entry.
    Route {
        gcp: bool,
        long_poll: Option<LongPoll>,
    },
}

impl Plan {
    fn fixed(resp: Response, note: impl Into<String>) -> Plan {
        Plan::Fixed {
            resp,
            note: note.into(),
        }
    }
}

struct LongPoll {
    last_etag: Option<String>,
    timeout: Option<Duration>,
}

enum Waited {
    Immediate,
    Changed,
    Timeout,
    ClientGone,
}

struct Shared {
    inner: Mutex<Inner>,
    /// Bumped on every route-table change (wakes GCP long polls).
    routes_changed: watch::Sender<u64>,
    /// Bumped on every log append.
    log_changed: watch::Sender<u64>,
    /// Set to true to stop every task of this server.
    shutdown: watch::Sender<bool>,
    log_stderr: bool,
    /// What `reset` goes back to.
    initial: (Config, Vec<(String, Response)>),
}

impl Shared {
    fn new(config: Config, routes: Vec<(String, Response)>, log_stderr: bool) -> Arc<Shared> {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32);
        Arc::new(Shared {
            inner: Mutex::new(Inner {
                routes: HashMap::new(),
                config: config.clone(),
                log: Vec::new(),
                events: Vec::new(),
                tokens: HashMap::new(),
                stats: Stats::default(),
                next_request_id: 0,
                next_event_seq: 0,
                rng: seed,
            }),
            routes_changed: watch::Sender::new(0),
            log_changed: watch::Sender::new(0),
            shutdown: watch::Sender::new(false),
            log_stderr,
            initial: (config, routes),
        })
    }

    fn check_path(path: &str) -> Result<(), String> {
        if !path.starts_with('/') || path.contains('?') || path.contains('#') {
            return Err(format!(
                "route path must start with '/' and have no query: {path:?}"
            ));
        }
        if path == "/_mock" || path.starts_with("/_mock/") {
            return Err("routes under /_mock/ are reserved for the control API".into());
        }
        Ok(())
    }

    fn set_routes(&self, routes: Vec<(String, Response)>) -> Result<(), String> {
        for (p, r) in &routes {
            Self::check_path(p)?;
            r.validate().map_err(|e| format!("{p}: {e}"))?;
        }
        {
            let mut inner = lock(&self.inner);
            for (path, resp) in routes {
                let ev = inner.push_event("route", "set");
                ev.path = Some(path.clone());
                ev.response = Some(resp.clone());
                inner.routes.insert(path, Route { resp, served: 0 });
            }
        }
        self.routes_changed.send_modify(|v| *v += 1);
        Ok(())
    }

    /// Installs the default identity routes of `cloud`.
    fn set_identity(&self, cloud: &str) -> Result<(), String> {
        self.set_routes(identity::routes_or_err(cloud)?)
    }

    /// Unsets the identity paths of `cloud` (whatever set them); how many were set.
    fn clear_identity(&self, cloud: &str) -> Result<usize, String> {
        let routes = identity::routes_or_err(cloud)?;
        Ok(routes.iter().filter(|(p, _)| self.clear_route(p)).count())
    }

    fn clear_route(&self, path: &str) -> bool {
        let existed = {
            let mut inner = lock(&self.inner);
            let existed = inner.routes.remove(path).is_some();
            inner.push_event("route", "clear").path = Some(path.to_string());
            existed
        };
        self.routes_changed.send_modify(|v| *v += 1);
        existed
    }

    fn update_config(
        &self,
        f: impl FnOnce(&mut Config) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut inner = lock(&self.inner);
        let mut cfg = inner.config.clone();
        f(&mut cfg)?;
        // Round-trip through the JSON validator so both paths enforce the same rules.
        let mut checked = Config::default();
        checked.merge_json(&serde_json::to_value(&cfg).map_err(|e| e.to_string())?)?;
        inner.config = checked.clone();
        inner.push_event("config", "set").config = Some(checked);
        Ok(())
    }

    /// Back to the state the server started in (its initial routes and config), with an empty
    /// log, no events but the reset itself, and no tokens.
    fn reset(&self) {
        {
            let mut inner = lock(&self.inner);
            inner.routes = self
                .initial
                .1
                .iter()
                .map(|(p, r)| {
                    (
                        p.clone(),
                        Route {
                            resp: r.clone(),
                            served: 0,
                        },
                    )
                })
                .collect();
            inner.config = self.initial.0.clone();
            inner.log.clear();
            inner.events.clear();
            inner.tokens.clear();
            inner.push_event("reset", "set");
        }
        self.routes_changed.send_modify(|v| *v += 1);
        self.log_changed.send_modify(|v| *v += 1);
    }

    /// (status, etag) of what the route would serve next: the "value" for GCP long polls.
    fn content_key(&self, path: &str) -> (u16, String) {
        let inner = lock(&self.inner);
        match inner.routes.get(path) {
            Some(r) => {
                let p = r.peek();
                (p.status, p.etag())
            }
            None => (404, Response::status(404).etag()),
        }
    }

    fn take_route(&self, path: &str) -> Response {
        let mut inner = lock(&self.inner);
        let error_bodies = inner.config.error_bodies;
        match inner.routes.get_mut(path) {
            Some(r) => r.take(),
            None => Response::error_for(404, path, error_bodies),
        }
    }

    fn log_arrival(&self, req: &Request, conn: u64, peer: SocketAddr, local: SocketAddr) -> u64 {
        let truncated = req.body.len() > LOG_BODY_MAX;
        let body =
            String::from_utf8_lossy(&req.body[..req.body.len().min(LOG_BODY_MAX)]).into_owned();
        let id = {
            let mut inner = lock(&self.inner);
            inner.next_request_id += 1;
            inner.stats.requests += 1;
            let id = inner.next_request_id;
            inner.log.push(LoggedRequest {
                id,
                t_ms: now_ms(),
                conn,
                peer: peer.to_string(),
                local: local.to_string(),
                method: req.method.clone(),
                path: req.path.clone(),
                query: req.query.clone(),
                headers: req.headers.clone(),
                body,
                body_len: req.body.len(),
                body_truncated: truncated,
                status: None,
                fault: None,
                note: None,
            });
            id
        };
        self.log_changed.send_modify(|v| *v += 1);
        id
    }

    fn log_outcome(
        &self,
        id: u64,
        status: Option<u16>,
        fault: Option<Fault>,
        note: Option<String>,
    ) {
        let line = {
            let mut inner = lock(&self.inner);
            let Some(e) = inner.log.iter_mut().rev().find(|e| e.id == id) else {
                return;
            };
            e.status = status;
            e.fault = fault;
            e.note = note;
            self.log_stderr.then(|| {
                format!(
                    "{} {} {} {}{}{} -> {}{}{}",
                    now_ms(),
                    e.local,
                    e.method,
                    e.path,
                    if e.query.is_empty() { "" } else { "?" },
                    e.query,
                    e.status.map_or("-".to_string(), |s| s.to_string()),
                    e.fault.map_or(String::new(), |f| format!(" fault={f:?}")),
                    e.note
                        .as_deref()
                        .map_or(String::new(), |n| format!(" ({n})")),
                )
            })
        };
        self.log_changed.send_modify(|v| *v += 1);
        if let Some(line) = line {
            eprintln!("{line}");
        }
    }

    /// Decide how to answer a (non-control) request. May issue a token.
    fn plan(&self, req: &Request) -> Plan {
        let mut inner = lock(&self.inner);
        let path = req.path.as_str();
        if req.method == "PUT" && path == TOKEN_PATH {
            if inner.routes.contains_key(TOKEN_PATH) {
                // Scripted token endpoint (to inject faults): no token logic at all.
                return Plan::Route {
                    gcp: false,
                    long_poll: None,
                };
            }
            return inner.token_put(req);
        }
        if path.starts_with("/latest/") {
            if let Some(p) = inner.check_token(req) {
                return p;
            }
        }
        if path.starts_with("/computeMetadata/") {
            return plan_gcp(req);
        }
        if path.starts_with("/metadata/") {
            if let Some(p) = plan_azure(req, inner.config.azure_require_api_version) {
                return p;
            }
        }
        Plan::Route {
            gcp: false,
            long_poll: None,
        }
    }
}

/// [`Shared::plan`] for GCP's `/computeMetadata/`: the `Metadata-Flavor: Google` header is
/// required; `wait_for_change=true` makes it a long poll.
fn plan_gcp(req: &Request) -> Plan {
    if req.header("Metadata-Flavor") != Some("Google") {
        return Plan::fixed(
            Response::text(403, "Missing required header: Metadata-Flavor: Google\n")
                .with_header("Metadata-Flavor", "Google"),
            "missing Metadata-Flavor: Google",
        );
    }
    let long_poll = match req.query_param("wait_for_change") {
        Some(v) if v.eq_ignore_ascii_case("true") => {
            let timeout = match req.query_param("timeout_sec") {
                None => None,
                Some(t) => match t.parse::<u64>() {
                    Ok(t) => Some(Duration::from_secs(t)),
                    Err(_) => {
                        return Plan::fixed(
                            Response::text(400, "invalid timeout_sec\n")
                                .with_header("Metadata-Flavor", "Google"),
                            "invalid timeout_sec",
                        )
                    }
                },
            };
            Some(LongPoll {
                last_etag: req.query_param("last_etag"),
                timeout,
            })
        }
        _ => None,
    };
    Plan::Route {
        gcp: true,
        long_poll,
    }
}

/// [`Shared::plan`] for Azure's `/metadata/`: the `Metadata: true` header (and, if so configured,
/// `api-version`) is required; a POST to `scheduledevents` is acknowledged. `None`: answer from
/// the routes.
fn plan_azure(req: &Request, require_api_version: bool) -> Option<Plan> {
    let has_flag = req
        .header("Metadata")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !has_flag {
        return Some(Plan::fixed(
            Response::json(
                400,
                r#"{"error":"Bad request. Required metadata header not specified"}"#,
            ),
            "missing Metadata: true",
        ));
    }
    if require_api_version && req.query_param("api-version").is_none() {
        return Some(Plan::fixed(
            Response::json(
                400,
                r#"{"error":"Bad request. api-version was not specified in the request. For more information refer to aka.ms/azureimds","newest-versions":["2021-01-01"]}"#,
            ),
            "missing api-version",
        ));
    }
    if req.method == "POST" && req.path == "/metadata/scheduledevents" {
        return Some(Plan::fixed(
            Response::status(200),
            "azure scheduled-event acknowledgement",
        ));
    }
    None
}

fn invalid_input(e: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}

// ---------------------------------------------------------------------------------------------
// Connection handling

async fn wait_shutdown(mut rx: watch::Receiver<bool>) {
    // An error means the sender is gone, which also means "stop".
    let _stop = rx.wait_for(|v| *v).await.is_ok();
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let local = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // E.g. EMFILE: back off instead of spinning.
                eprintln!("mock-imds: accept on {local}: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = {
            let mut inner = lock(&shared.inner);
            inner.stats.connections += 1;
            inner.stats.connections
        };
        let shared = shared.clone();
        let stop = shared.shutdown.subscribe();
        tokio::spawn(async move {
            tokio::select! {
                _ = serve_conn(&shared, stream, peer, local, conn) => {}
                _ = wait_shutdown(stop) => {}
            }
        });
    }
}

enum Next {
    KeepAlive,
    /// Close gracefully (FIN).
    Close,
    /// Drop the socket as is (after `SO_LINGER` 0 this sends an RST).
    Abort,
}

async fn serve_conn(
    shared: &Shared,
    mut stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    conn: u64,
) {
    let mut buf = Vec::new();
    loop {
        let req = match http::read_request(&mut stream, &mut buf).await {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                if shared.log_stderr {
                    eprintln!(
                        "{} {local} bad request from {peer}: {}",
                        now_ms(),
                        e.message
                    );
                }
                if let Some(status) = e.status {
                    let body = format!("{}\n", e.message);
                    let mut out = http::head(
                        status,
                        &[("Content-Type".into(), "text/plain".into())],
                        body.len() as u64,
                        true,
                    );
                    out.extend_from_slice(body.as_bytes());
                    let _ = stream.write_all(&out).await;
                    let _ = stream.shutdown().await;
                }
                return;
            }
        };
        let next = if req.path == "/_mock" || req.path.starts_with("/_mock/") {
            control(shared, &req, &mut stream).await
        } else {
            serve_request(shared, req, conn, peer, local, &mut stream, &mut buf).await
        };
        match next {
            Next::KeepAlive => {}
            Next::Close => {
                let _ = stream.shutdown().await;
                return;
            }
            Next::Abort => return,
        }
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn wait_long_poll(
    shared: &Shared,
    path: &str,
    lp: &LongPoll,
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Waited {
    // Subscribe before reading the baseline so no change can slip in between.
    let mut changes = shared.routes_changed.subscribe();
    let baseline = shared.content_key(path);
    if let Some(e) = &lp.last_etag {
        if *e != baseline.1 {
            return Waited::Immediate;
        }
    }
    let deadline = lp.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut tmp = vec![0u8; 4096];
    loop {
        tokio::select! {
            r = changes.changed() => {
                if r.is_err() {
                    return Waited::ClientGone;
                }
                if shared.content_key(path) != baseline {
                    return Waited::Changed;
                }
            }
            _ = sleep_until_opt(deadline) => return Waited::Timeout,
            r = stream.read(&mut tmp) => match r {
                Ok(0) | Err(_) => return Waited::ClientGone,
                // A pipelined request: keep it for later.
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            },
        }
    }
}

async fn serve_request(
    shared: &Shared,
    req: Request,
    conn: u64,
    peer: SocketAddr,
    local: SocketAddr,
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Next {
    let id = shared.log_arrival(&req, conn, peer, local);
    let (resp, note, extra) = match shared.plan(&req) {
        Plan::Fixed { resp, note } => (resp, Some(note), Vec::new()),
        Plan::Route { gcp, long_poll } => {
            let mut note = None;
            if let Some(lp) = long_poll {
                note = Some(
                    match wait_long_poll(shared, &req.path, &lp, stream, buf).await {
                        Waited::Immediate => "long poll: etag differs, answered at once",
                        Waited::Changed => "long poll: value changed",
                        Waited::Timeout => "long poll: timeout",
                        Waited::ClientGone => {
                            shared.log_outcome(
                                id,
                                None,
                                None,
                                Some("long poll: client went away".into()),
                            );
                            return Next::Close;
                        }
                    }
                    .to_string(),
                );
            }
            let resp = shared.take_route(&req.path);
            let extra = if gcp {
                vec![
                    ("Metadata-Flavor".to_string(), "Google".to_string()),
                    ("ETag".to_string(), resp.etag()),
                ]
            } else {
                Vec::new()
            };
            (resp, note, extra)
        }
    };
    let status = match resp.fault {
        Some(Fault::Hang | Fault::Reset | Fault::Garbage) => None,
        _ => Some(resp.status),
    };
    shared.log_outcome(id, status, resp.fault, note);
    if resp.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(resp.delay_ms)).await;
    }
    write_response(&resp, extra, req.method == "HEAD", req.keep_alive(), stream).await
}

/// A chunk of the generated body that starts at pattern offset 0 and whose length is a
/// multiple of the pattern length, so chunks can be sent back to back.
fn fill_chunk(fill: &[u8]) -> Vec<u8> {
    let reps = (64 * 1024 / fill.len()).max(1);
    fill.repeat(reps)
}

/// Send the first `limit` bytes of the body.
async fn write_body(resp: &Response, limit: u64, stream: &mut TcpStream) -> io::Result<()> {
    match resp.body_len {
        None => {
            let end = (limit as usize).min(resp.body.len());
            stream.write_all(&resp.body.as_bytes()[..end]).await
        }
        Some(_) => {
            let chunk = fill_chunk(resp.body_fill.as_deref().unwrap_or("x").as_bytes());
            let mut left = limit;
            while left > 0 {
                let n = (chunk.len() as u64).min(left) as usize;
                stream.write_all(&chunk[..n]).await?;
                left -= n as u64;
            }
            Ok(())
        }
    }
}

fn body_byte(resp: &Response, i: u64) -> u8 {
    match resp.body_len {
        None => resp.body.as_bytes()[i as usize],
        Some(_) => {
            let fill = resp.body_fill.as_deref().unwrap_or("x").as_bytes();
            fill[(i % fill.len() as u64) as usize]
        }
    }
}

/// `KeepAlive` if `keep_alive`, else `Close`.
fn keep_or_close(keep_alive: bool) -> Next {
    if keep_alive {
        Next::KeepAlive
    } else {
        Next::Close
    }
}

/// The scripted headers of `resp`, then those of `extra` it does not set itself.
fn merged_headers(resp: &Response, extra: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = resp
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in extra {
        if !headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(&k)) {
            headers.push((k, v));
        }
    }
    headers
}

async fn write_response(
    resp: &Response,
    extra: Vec<(String, String)>,
    head_only: bool,
    keep_alive: bool,
    stream: &mut TcpStream,
) -> Next {
    let headers = merged_headers(resp, extra);
    let result = write_with_fault(resp, &headers, head_only, keep_alive, stream).await;
    // A write error means the client went away (e.g. it dropped a huge body midway).
    result.unwrap_or(Next::Close)
}

/// Answer with `resp` (and `headers`), or with its fault.
async fn write_with_fault(
    resp: &Response,
    headers: &[(String, String)],
    head_only: bool,
    keep_alive: bool,
    stream: &mut TcpStream,
) -> io::Result<Next> {
    let len = resp.content_length();
    match resp.fault {
        Some(Fault::Hang) => {
            // Keep the socket open and unanswered; drain whatever the client sends until
            // it gives up (or the server shuts down).
            let mut tmp = vec![0u8; 4096];
            while stream.read(&mut tmp).await? > 0 {}
            Ok(Next::Close)
        }
        Some(Fault::Reset) => {
            // SO_LINGER 0 turns the close into an RST.
            stream.set_zero_linger()?;
            Ok(Next::Abort)
        }
        Some(Fault::Garbage) => {
            stream.write_all(GARBAGE).await?;
            Ok(Next::Close)
        }
        Some(Fault::Truncate) => {
            write_truncated(resp, headers, head_only, stream).await?;
            Ok(Next::Close)
        }
        // The head at once; the body at once, or (Slow) a byte at a time.
        Some(Fault::Slow) | None => {
            stream
                .write_all(&http::head(resp.status, headers, len, !keep_alive))
                .await?;
            match (head_only, resp.fault) {
                (true, _) => {}
                (false, Some(_)) => write_slowly(resp, len, stream).await?,
                (false, None) => write_body(resp, len, stream).await?,
            }
            Ok(keep_or_close(keep_alive))
        }
    }
}

/// [`Fault::Truncate`]: declare a longer body than is sent (half of it).
async fn write_truncated(
    resp: &Response,
    headers: &[(String, String)],
    head_only: bool,
    stream: &mut TcpStream,
) -> io::Result<()> {
    let len = resp.content_length();
    let declared = if len >= 2 { len } else { 64 };
    let mut hdrs = headers.to_vec();
    hdrs.retain(|(k, _)| !k.eq_ignore_ascii_case("Content-Length"));
    hdrs.push(("Content-Length".into(), declared.to_string()));
    stream
        .write_all(&http::head(resp.status, &hdrs, declared, true))
        .await?;
    if !head_only {
        write_body(resp, len / 2, stream).await?;
    }
    Ok(())
}

/// [`Fault::Slow`]: send the `len` body bytes one at a time, `slow_ms` apart.
async fn write_slowly(resp: &Response, len: u64, stream: &mut TcpStream) -> io::Result<()> {
    let every = Duration::from_millis(resp.slow_ms.unwrap_or(DEFAULT_SLOW_MS));
    for i in 0..len {
        if i > 0 {
            tokio::time::sleep(every).await;
        }
        stream.write_all(&[body_byte(resp, i)]).await?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Control API

async fn control(shared: &Shared, req: &Request, stream: &mut TcpStream) -> Next {
    let (status, content_type, body) = control_answer(shared, req);
    if shared.log_stderr {
        eprintln!(
            "{} control {} {}{}{} -> {status}",
            now_ms(),
            req.method,
            req.path,
            if req.query.is_empty() { "" } else { "?" },
            req.query
        );
    }
    let keep = req.keep_alive();
    let mut out = http::head(
        status,
        &[("Content-Type".into(), content_type.into())],
        body.len() as u64,
        !keep,
    );
    out.extend_from_slice(body.as_bytes());
    match stream.write_all(&out).await {
        Ok(()) if keep => Next::KeepAlive,
        _ => Next::Close,
    }
}

/// A control API answer: status, content type, body.
type Answer = (u16, &'static str, String);

fn json_error(status: u16, msg: impl std::fmt::Display) -> Answer {
    (
        status,
        "application/json",
        serde_json::json!({ "error": msg.to_string() }).to_string(),
    )
}

fn json_ok(v: impl serde::Serialize) -> Answer {
    match serde_json::to_string(&v) {
        Ok(s) => (200, "application/json", s),
        Err(e) => json_error(500, e),
    }
}

/// `{"ok": true}`.
fn ok() -> Answer {
    json_ok(serde_json::json!({ "ok": true }))
}

fn control_answer(shared: &Shared, req: &Request) -> Answer {
    let what = req.path.trim_start_matches("/_mock").trim_matches('/');
    let method = req.method.as_str();
    // `None`: the endpoint exists but not with this method.
    let answer = match what {
        "health" => (method == "GET").then(|| (200, "text/plain", "ok".into())),
        "route" => route_answer(shared, req),
        "routes" => routes_answer(shared, req),
        "identity" => matches!(method, "PUT" | "POST" | "DELETE" | "GET")
            .then(|| identity_answer(shared, req)),
        "config" => config_answer(shared, req),
        "log" => log_answer(shared, req),
        "events" => events_answer(shared, req),
        "stats" => (method == "GET").then(|| json_ok(&lock(&shared.inner).stats)),
        "reset" => matches!(method, "POST" | "PUT").then(|| {
            shared.reset();
            ok()
        }),
        _ => return json_error(404, format!("unknown control endpoint /_mock/{what}")),
    };
    answer.unwrap_or_else(|| json_error(405, format!("{method} not supported on /_mock/{what}")))
}

/// `/_mock/route?path=P`: `PUT`/`POST` sets P, `DELETE` unsets it, `GET` shows it.
fn route_answer(shared: &Shared, req: &Request) -> Option<Answer> {
    let method = req.method.as_str();
    if !matches!(method, "PUT" | "POST" | "DELETE" | "GET") {
        return None;
    }
    let Some(path) = req.query_param("path") else {
        return Some(json_error(400, "missing ?path= query parameter"));
    };
    Some(match method {
        "DELETE" => {
            json_ok(serde_json::json!({ "ok": true, "existed": shared.clear_route(&path) }))
        }
        "GET" => match lock(&shared.inner).routes.get(&path) {
            Some(r) => json_ok(&r.resp),
            None => json_error(404, format!("no route for {path}")),
        },
        _ => {
            let resp: Response = match serde_json::from_slice(&req.body) {
                Ok(r) => r,
                Err(e) => return Some(json_error(400, format!("bad Response JSON: {e}"))),
            };
            match shared.set_routes(vec![(path, resp)]) {
                Ok(()) => ok(),
                Err(e) => json_error(400, e),
            }
        }
    })
}

/// `/_mock/routes`: `GET` shows all routes, `PUT`/`POST` sets many.
fn routes_answer(shared: &Shared, req: &Request) -> Option<Answer> {
    match req.method.as_str() {
        "GET" => {
            let inner = lock(&shared.inner);
            let map: BTreeMap<&String, &Response> =
                inner.routes.iter().map(|(k, v)| (k, &v.resp)).collect();
            Some(json_ok(map))
        }
        "PUT" | "POST" => {
            let map: BTreeMap<String, Response> = match serde_json::from_slice(&req.body) {
                Ok(m) => m,
                Err(e) => return Some(json_error(400, format!("bad routes JSON: {e}"))),
            };
            Some(match shared.set_routes(map.into_iter().collect()) {
                Ok(()) => ok(),
                Err(e) => json_error(400, e),
            })
        }
        _ => None,
    }
}

/// `/_mock/config`: `GET` shows it, `PUT`/`POST`/`PATCH` merges a partial config into it.
fn config_answer(shared: &Shared, req: &Request) -> Option<Answer> {
    match req.method.as_str() {
        "GET" => Some(json_ok(&lock(&shared.inner).config)),
        "PUT" | "POST" | "PATCH" => {
            let patch: serde_json::Value = match serde_json::from_slice(&req.body) {
                Ok(v) => v,
                Err(e) => return Some(json_error(400, format!("bad config JSON: {e}"))),
            };
            Some(match shared.update_config(|c| c.merge_json(&patch)) {
                Ok(()) => json_ok(&lock(&shared.inner).config),
                Err(e) => json_error(400, e),
            })
        }
        _ => None,
    }
}

/// `/_mock/log[?path=P]`: `GET` shows the request log (of P), `DELETE` clears it.
fn log_answer(shared: &Shared, req: &Request) -> Option<Answer> {
    match req.method.as_str() {
        "GET" => {
            let inner = lock(&shared.inner);
            Some(match req.query_param("path") {
                Some(p) => json_ok(inner.log.iter().filter(|e| e.path == p).collect::<Vec<_>>()),
                None => json_ok(&inner.log),
            })
        }
        "DELETE" => {
            lock(&shared.inner).log.clear();
            shared.log_changed.send_modify(|v| *v += 1);
            Some(ok())
        }
        _ => None,
    }
}

/// `/_mock/events`: `GET` shows them, `DELETE` clears them.
fn events_answer(shared: &Shared, req: &Request) -> Option<Answer> {
    match req.method.as_str() {
        "GET" => Some(json_ok(&lock(&shared.inner).events)),
        "DELETE" => {
            lock(&shared.inner).events.clear();
            Some(ok())
        }
        _ => None,
    }
}

/// `/_mock/identity?cloud=C`: `PUT`/`POST` installs C's default identity routes, `DELETE`
/// unsets C's identity paths, `GET` shows C's default identity routes (without installing).
fn identity_answer(shared: &Shared, req: &Request) -> Answer {
    let Some(cloud) = req.query_param("cloud") else {
        return json_error(
            400,
            format!(
                "missing ?cloud= query parameter (one of {})",
                identity::CLOUDS.join(", ")
            ),
        );
    };
    let result = match req.method.as_str() {
        "GET" => identity::routes_or_err(&cloud).map(|r| {
            let map: BTreeMap<String, Response> = r.into_iter().collect();
            serde_json::json!(map)
        }),
        "DELETE" => shared
            .clear_identity(&cloud)
            .map(|n| serde_json::json!({ "ok": true, "cleared": n })),
        _ => shared
            .set_identity(&cloud)
            .map(|()| serde_json::json!({ "ok": true })),
    };
    match result {
        Ok(v) => json_ok(v),
        Err(e) => json_error(400, e),
    }
}

// ---------------------------------------------------------------------------------------------
// Public handle

/// A running mock IMDS. Dropping it stops the server (all listeners and connections).
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use nthd_testkit::imds::{MockImds, Response};
/// let m = MockImds::start("127.0.0.1:0").await?;
/// m.set("/latest/meta-data/spot/instance-action",
///       Response::json(200, r#"{"action":"terminate","time":"2030-01-01T00:00:00Z"}"#));
/// // ... point the daemon at m.url() ...
/// assert!(m.count("/latest/meta-data/spot/instance-action") > 0);
/// # Ok(()) }
/// ```
///
/// Control API (same listener, no headers needed, never in the request log):
///
/// | request | effect |
/// |---|---|
/// | `GET /_mock/health` | `200 ok` |
/// | `PUT /_mock/route?path=P` + Response JSON | set route P |
/// | `DELETE /_mock/route?path=P` | unset P (→ 404) |
/// | `GET /_mock/route?path=P` | the scripted Response |
/// | `GET /_mock/routes`, `PUT /_mock/routes` + `{path: Response}` | all routes / set many |
/// | `PUT /_mock/identity?cloud=C` | set C's identity routes to the defaults ([`identity`]) |
/// | `DELETE /_mock/identity?cloud=C` | unset C's identity paths (→ 404) |
/// | `GET /_mock/identity?cloud=C` | C's default identity routes, not installed |
/// | `GET /_mock/config`, `PUT /_mock/config` + partial Config JSON | read / merge config |
/// | `GET /_mock/log[?path=P]`, `DELETE /_mock/log` | request log / clear it |
/// | `GET /_mock/events`, `DELETE /_mock/events` | route/config change events |
/// | `GET /_mock/stats` | counters (connections, requests, tokens issued) |
/// | `POST /_mock/reset` | initial routes and config again; log, events, tokens emptied |
pub struct MockImds {
    shared: Arc<Shared>,
    addrs: Vec<SocketAddr>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Builder for a [`MockImds`] with several listeners, initial routes or config.
#[derive(Default)]
pub struct MockImdsBuilder {
    listen: Vec<String>,
    routes: Vec<(String, Response)>,
    config: Config,
    log_stderr: bool,
}

impl MockImdsBuilder {
    /// Add a listen address (`"127.0.0.1:0"` picks a free port). Repeatable.
    pub fn listen(mut self, addr: impl Into<String>) -> Self {
        self.listen.push(addr.into());
        self
    }

    /// Initial route.
    pub fn route(mut self, path: impl Into<String>, resp: Response) -> Self {
        self.routes.push((path.into(), resp));
        self
    }

    /// Initial routes.
    pub fn routes(mut self, routes: impl IntoIterator<Item = (String, Response)>) -> Self {
        self.routes.extend(routes);
        self
    }

    /// Initial identity routes of `cloud` (`aws`, `gcp`, `azure`, `alibaba` or `tencent`) with
    /// their default values ([`identity::routes`]). Repeatable; on shared paths the last cloud
    /// wins. Panics on another name.
    pub fn identity(self, cloud: &str) -> Self {
        match identity::routes_or_err(cloud) {
            Ok(r) => self.routes(r),
            Err(e) => panic!("MockImdsBuilder::identity: {e}"),
        }
    }

    /// Initial config.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Print one line per request to stderr.
    pub fn log_to_stderr(mut self, on: bool) -> Self {
        self.log_stderr = on;
        self
    }

    /// Bind every listener, then spawn the server on the current tokio runtime (which must keep
    /// running for the server to answer).
    pub async fn start(self) -> io::Result<MockImds> {
        let (shared, addrs) = self.launch().await?;
        Ok(MockImds {
            shared,
            addrs,
            thread: None,
        })
    }

    /// Run the server on a dedicated thread with its own runtime, for tests that block their
    /// own thread (e.g. waiting for a child process) or use another runtime.
    pub fn start_blocking(self) -> io::Result<MockImds> {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("nthd-mock-imds".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    match self.launch().await {
                        Ok((shared, addrs)) => {
                            let stop = shared.shutdown.subscribe();
                            let _ = tx.send(Ok((shared, addrs)));
                            wait_shutdown(stop).await;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                });
                // Dropping the runtime cancels every connection task.
            })?;
        match rx.recv() {
            Ok(Ok((shared, addrs))) => Ok(MockImds {
                shared,
                addrs,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(io::Error::other("mock IMDS thread died during start"))
            }
        }
    }

    async fn launch(self) -> io::Result<(Arc<Shared>, Vec<SocketAddr>)> {
        if self.listen.is_empty() {
            return Err(invalid_input("no listen address".into()));
        }
        for (p, r) in &self.routes {
            Shared::check_path(p)
                .and_then(|()| r.validate())
                .map_err(|e| invalid_input(format!("{p}: {e}")))?;
        }
        let mut checked = Config::default();
        checked
            .merge_json(&serde_json::to_value(&self.config).map_err(io::Error::other)?)
            .map_err(invalid_input)?;
        let shared = Shared::new(checked, self.routes.clone(), self.log_stderr);
        shared.set_routes(self.routes).map_err(invalid_input)?;
        // Bind everything first so a failure leaves nothing running.
        let mut listeners = Vec::new();
        for a in &self.listen {
            let l = TcpListener::bind(a.as_str())
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("bind {a}: {e}")))?;
            listeners.push(l);
        }
        let mut addrs = Vec::new();
        for l in listeners {
            addrs.push(l.local_addr()?);
            let shared2 = shared.clone();
            let stop = shared.shutdown.subscribe();
            tokio::spawn(async move {
                tokio::select! {
                    _ = accept_loop(shared2, l) => {}
                    _ = wait_shutdown(stop) => {}
                }
            });
        }
        Ok((shared, addrs))
    }
}

impl MockImds {
    /// A builder (several listeners, initial routes/config, stderr logging).
    pub fn builder() -> MockImdsBuilder {
        MockImdsBuilder::default()
    }

    /// Start on `addr` (e.g. `"127.0.0.1:0"`) on the current tokio runtime.
    pub async fn start(addr: &str) -> io::Result<MockImds> {
        MockImds::builder().listen(addr).start().await
    }

    /// Start on `addr` on a dedicated thread with its own runtime.
    pub fn start_blocking(addr: &str) -> io::Result<MockImds> {
        MockImds::builder().listen(addr).start_blocking()
    }

    /// `http://IP:PORT` of the first listener.
    pub fn url(&self) -> String {
        format!("http://{}", self.addrs[0])
    }

    /// First listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    /// All listening addresses, in the order given.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Script `path` (exact, no query). Panics on an invalid response or path (see
    /// [`MockImds::try_set`]).
    pub fn set(&self, path: &str, resp: Response) {
        if let Err(e) = self.try_set(path, resp) {
            panic!("MockImds::set({path:?}): {e}");
        }
    }

    /// Script `path`, reporting an invalid response or path as an error.
    pub fn try_set(&self, path: &str, resp: Response) -> Result<(), String> {
        self.shared.set_routes(vec![(path.to_string(), resp)])
    }

    /// Set the identity routes of `cloud` to their default values ([`identity::routes`]).
    /// Panics on an unknown cloud.
    pub fn set_identity(&self, cloud: &str) {
        if let Err(e) = self.shared.set_identity(cloud) {
            panic!("MockImds::set_identity: {e}");
        }
    }

    /// Unset the identity paths of `cloud` (they answer 404 again). Returns how many were set.
    /// Panics on an unknown cloud.
    pub fn clear_identity(&self, cloud: &str) -> usize {
        match self.shared.clear_identity(cloud) {
            Ok(n) => n,
            Err(e) => panic!("MockImds::clear_identity: {e}"),
        }
    }

    /// Unset `path` (it answers 404 again). Returns whether it was set.
    pub fn clear(&self, path: &str) -> bool {
        self.shared.clear_route(path)
    }

    /// The response scripted for `path`, if any.
    pub fn route(&self, path: &str) -> Option<Response> {
        lock(&self.shared.inner)
            .routes
            .get(path)
            .map(|r| r.resp.clone())
    }

    /// Change the config. Panics if the result is invalid (e.g. a non-3-digit
    /// `token_put_status`).
    pub fn config(&self, f: impl FnOnce(&mut Config)) {
        if let Err(e) = self.shared.update_config(|c| {
            f(c);
            Ok(())
        }) {
            panic!("MockImds::config: {e}");
        }
    }

    /// Current config.
    pub fn current_config(&self) -> Config {
        lock(&self.shared.inner).config.clone()
    }

    /// Every logged request, oldest first.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        lock(&self.shared.inner).log.clone()
    }

    /// Logged requests for one path.
    pub fn requests_for(&self, path: &str) -> Vec<LoggedRequest> {
        lock(&self.shared.inner)
            .log
            .iter()
            .filter(|e| e.path == path)
            .cloned()
            .collect()
    }

    /// Number of logged requests for `path` (any method, any outcome, including ones still
    /// being answered).
    pub fn count(&self, path: &str) -> usize {
        lock(&self.shared.inner)
            .log
            .iter()
            .filter(|e| e.path == path)
            .count()
    }

    /// Empty the request log.
    pub fn clear_log(&self) {
        lock(&self.shared.inner).log.clear();
        self.shared.log_changed.send_modify(|v| *v += 1);
    }

    /// Route and config change events, oldest first.
    pub fn events(&self) -> Vec<Event> {
        lock(&self.shared.inner).events.clone()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        lock(&self.shared.inner).stats.clone()
    }

    /// Back to the starting state: the initial routes (from the builder) and config, empty log
    /// and events, no tokens.
    pub fn reset(&self) {
        self.shared.reset();
    }

    /// Wait until at least `n` requests for `path` are in the log. Returns false on timeout.
    pub async fn wait_for_count(&self, path: &str, n: usize, timeout: Duration) -> bool {
        let mut rx = self.shared.log_changed.subscribe();
        tokio::time::timeout(timeout, async {
            loop {
                if self.count(path) >= n {
                    return;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
        .await
        .is_ok()
    }
}

impl Drop for MockImds {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for MockImds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockImds")
            .field("addrs", &self.addrs)
            .finish_non_exhaustive()
    }
}
