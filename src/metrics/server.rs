//! The `/metrics` endpoint, served by hyper (HTTP/1.1). It is bounded in connections, bytes and
//! time, so no client, slow or hostile, can hold the daemon's loop, its watchdog or its memory:
//!
//! - at most [`MAX_CONNECTIONS`] are served at once; more wait in the kernel's accept queue;
//! - a request head must arrive within [`HEADER_TIMEOUT`] and fit in [`MAX_HEAD`] bytes;
//! - a connection lives at most [`CONNECTION_LIMIT`] and serves one request;
//! - an `accept` error (out of file descriptors, say) backs off instead of spinning.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections served at once. A scrape takes well under a millisecond, so this only matters
/// when clients misbehave; then the rest wait in the listen backlog.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send its request head.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// The most a connection may live, however it behaves.
pub(crate) const CONNECTION_LIMIT: Duration = Duration::from_secs(10);
/// The read buffer, and so the largest request head (hyper's minimum); a larger head is
/// refused with 431.
const MAX_HEAD: usize = 8 * 1024;
/// The pause after a failed `accept`, and the shortest interval between its warnings.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(60);

/// Binds `addr` for `/metrics`; the caller reports a failure (it disables only the server).
pub(super) fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    listen(addr).map_err(|e| {
        format!(
            "cannot listen on {addr} for /metrics: {e}; free the port or change --metrics-listen \
             (NTHD_METRICS_LISTEN), then: systemctl restart nthd"
        )
    })
}

/// Serves the text in `shared` on the bound `listener` until the runtime stops.
pub(super) async fn serve(listener: TcpListener, shared: Arc<Mutex<String>>) {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "?".into(), |a| a.to_string());
    tracing::info!("serving metrics on http://{addr}/metrics");
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut last_warning: Option<Instant> = None;
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((sock, _)) => {
                tokio::spawn(connection(sock, shared.clone(), permit));
            }
            Err(e) => {
                if last_warning.is_none_or(|t| t.elapsed() >= ACCEPT_WARN_EVERY) {
                    tracing::warn!(
                        "the /metrics server cannot accept a connection on {addr}: {e}; \
                         retrying every {ACCEPT_BACKOFF:?} (warned at most once a minute)"
                    );
                    last_warning = Some(Instant::now());
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// Where clients wait for a slot. The std default (128) is too short: a burst past it gets its
/// handshakes dropped, and a client that sends nothing then waits on a connection the server
/// never sees.
const BACKLOG: u32 = 1024;

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// One connection: one request, within the time and size bounds. The permit is its slot.
async fn connection(sock: TcpStream, shared: Arc<Mutex<String>>, _slot: OwnedSemaphorePermit) {
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        std::future::ready(Ok::<_, Infallible>(respond(&req, &shared)))
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(false)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(sock), service);
    // A client that stops reading the response is cut off here; errors are the client's.
    let _ = tokio::time::timeout(CONNECTION_LIMIT, conn).await;
}

/// `GET` or `HEAD /metrics` gets the text; another method there gets 405; any other path 404.
fn respond(req: &Request<Incoming>, shared: &Mutex<String>) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return status(StatusCode::NOT_FOUND);
    }
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        let mut r = status(StatusCode::METHOD_NOT_ALLOWED);
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let text = shared.lock().map(|g| g.clone()).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(text)));
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = code;
    r
}
