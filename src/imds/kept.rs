//! A kept HTTP/1 connection that the task making the request drives itself.
//!
//! hyper's client connection is a future that does the socket's reading and writing. Spawned as
//! a task of its own (hyper's usual shape), every answer is read by that task and handed to the
//! requesting one through a channel: two tasks polled, and a wake between them, per request.
//! Here the requesting task polls the connection beside its request, so one poll reads the
//! answer and takes it. Measured with the testkit's `nthd-stack-floor` beside `bench/floor.c`
//! (docs/performance.md, "Idle CPU against the floor in the same run"). Between requests nobody
//! polls the connection: a connection the server closed meanwhile is found out when it is next
//! checked out ([`Kept::ready`]), before a request is given to it.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;

type Driver = Pin<Box<Connection<TokioIo<tokio::net::TcpStream>, Full<Bytes>>>>;

/// One connection: its request handle, the connection itself (`None` once it has ended) and
/// when it was last put back.
pub(super) struct Kept {
    pub(super) sender: SendRequest<Full<Bytes>>,
    conn: Option<Driver>,
    pub(super) since: Instant,
}

impl Kept {
    /// HTTP/1 over `stream`; nothing is spawned.
    pub(super) async fn handshake(stream: tokio::net::TcpStream) -> Result<Kept, hyper::Error> {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        Ok(Kept {
            sender,
            conn: Some(Box::pin(conn)),
            since: Instant::now(),
        })
    }

    /// Whether the connection is still open (as far as its last poll knows).
    pub(super) fn is_open(&self) -> bool {
        self.conn.is_some() && !self.sender.is_closed()
    }

    /// Ready for a request: the last answer finished and the server has not closed it.
    pub(super) async fn ready(&mut self) -> bool {
        let Kept { sender, conn, .. } = self;
        conn.is_some() && drive(conn, sender.ready()).await.is_ok()
    }

    /// Runs `fut` (a request on this connection, or the reading of its body) while driving the
    /// connection.
    pub(super) async fn drive<F: Future>(&mut self, fut: F) -> F::Output {
        drive(&mut self.conn, fut).await
    }
}

/// Polls `fut` and the connection in turn until `fut` is done. A connection that ends is
/// dropped at once, so a request still waiting on it fails instead of waiting.
async fn drive<F: Future>(conn: &mut Option<Driver>, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        let Some(c) = conn.as_mut() else {
            return Poll::Pending;
        };
        if c.as_mut().poll(cx).is_ready() {
            *conn = None;
        }
        // The connection may just have read the answer, or ended: look again before waiting.
        fut.as_mut().poll(cx)
    })
    .await
}
