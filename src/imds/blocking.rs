//! Every metadata read: HTTP/1.1 over blocking sockets.
//!
//! An origin-form request with `Host` on a kept connection, a capped and bounded answer, one
//! total timeout, made with `std::net::TcpStream` and httparse: a read sleeps in `read(2)` and
//! wakes once with its answer, with no runtime, no epoll registration and no waker between.
//! Measured beside `bench/floor.c` in the same windows (docs/performance.md, "Idle CPU against
//! the floor in the same run"): the same reads through tokio and hyper cost 1.61 times the
//! floor, these 1.01. Every caller blocks its own thread: the reader thread, a command's
//! `spawn_blocking`, or the thread of a long wait (`ImdsClient::get_later`).
//!
//! Reads that fall due together go out together, each on its own connection, before any answer
//! is read, and every answer is read against one deadline (to within [`SLACK`]: a socket's read
//! timeout is set again only when it is that far off): a hung service costs one timeout per
//! poll, not one per source.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Answer, Failure, ImdsError, IDLE_TIMEOUT, MAX_IDLE};

/// The longest answer head nthd reads (IMDS heads are a few hundred bytes).
const MAX_HEAD: usize = 16 * 1024;
/// Headers parsed per answer; more is not an answer nthd expects.
const MAX_HEADERS: usize = 32;

/// Where to connect and the connections kept open between reads.
pub(super) struct Pool {
    host: String,
    port: u16,
    idle: Mutex<Vec<(Open, Instant)>>,
    /// What every request line is followed by: the version, `Host`, the user agent, `Accept`.
    fixed: Vec<u8>,
    /// The GETs made before: a poll sends the bytes of the last one again, not made anew.
    made: Mutex<Vec<Made>>,
}

/// A GET's method, path and headers, and its bytes.
struct Made {
    path: String,
    headers: Vec<(&'static str, String)>,
    bytes: Arc<[u8]>,
}

/// The most GETs remembered; past it they are all forgotten (a token renewed, a new path).
const MADE_MAX: usize = 16;

/// How far a socket's read timeout may lie beyond a read's deadline before it is set again.
const SLACK: Duration = Duration::from_millis(100);

/// One connection, the read timeout its socket has (set only when a read needs another: one
/// `setsockopt` a connection, not one a read), and the buffer its answers are read into.
struct Open {
    stream: TcpStream,
    wait: Duration,
    buf: Vec<u8>,
}

/// Answers are read into 1 KiB, doubled when full, and back to 1 KiB after a larger one.
const BUF: usize = 1024;

/// What one batch needs to know besides its requests.
pub(super) struct Limits {
    pub(super) timeout: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) max_body: usize,
}

/// How the body of an answer ends.
#[derive(Debug, PartialEq, Eq)]
enum Framing {
    Length(usize),
    Chunked,
    /// Read until the server closes the connection.
    Close,
}

/// An answer's head: status, ETag, how its body ends, whether the connection can be kept.
struct Head {
    status: u16,
    etag: Option<String>,
    retry_after: Option<Duration>,
    framing: Framing,
    keep: bool,
}

impl Pool {
    /// Connections to `host`:`port`; `authority` is the `Host` header.
    pub(super) fn new(host: String, port: u16, authority: &str) -> Pool {
        let fixed = format!(
            " HTTP/1.1\r\nhost: {authority}\r\nuser-agent: {}\r\naccept: */*\r\n",
            super::USER_AGENT
        );
        Pool {
            host,
            port,
            idle: Mutex::new(Vec::new()),
            fixed: fixed.into_bytes(),
            made: Mutex::new(Vec::new()),
        }
    }

    /// The host as written in the base URL (an IPv6 address in brackets).
    pub(super) fn host(&self) -> &str {
        &self.host
    }

    pub(super) fn port(&self) -> u16 {
        self.port
    }

    /// The requests' answers, in their order; each request on its own connection.
    pub(super) fn batch(
        &self,
        requests: &[Arc<[u8]>],
        limits: &Limits,
    ) -> Vec<Result<Answer, Failure>> {
        let deadline = Instant::now() + limits.timeout;
        let sent: Vec<_> = requests
            .iter()
            .map(|r| self.start(r, deadline, limits))
            .collect();
        requests
            .iter()
            .zip(sent)
            .map(|(r, s)| {
                let (stream, reused) = s?;
                self.finish(stream, reused, r, deadline, limits)
            })
            .collect()
    }

    /// A connection with `request` written on it: a kept one when there is one that takes it.
    fn start(
        &self,
        request: &[u8],
        deadline: Instant,
        limits: &Limits,
    ) -> Result<(Open, bool), Failure> {
        if let Some(mut c) = self.checkout() {
            if c.stream.write_all(request).is_ok() {
                return Ok((c, true));
            }
        }
        let mut c = self.connect(deadline, limits)?;
        c.stream
            .write_all(request)
            .map_err(|e| io_failure(e, false))?;
        Ok((c, false))
    }

    /// The answer on `stream`. A kept connection that the server closed before answering (its
    /// keep-alive ran out) gets the request once more, on a new connection, when sending it
    /// twice is harmless (a GET or PUT); any other request that was written is not sent again.
    fn finish(
        &self,
        mut conn: Open,
        reused: bool,
        request: &[u8],
        deadline: Instant,
        limits: &Limits,
    ) -> Result<Answer, Failure> {
        let answer = match read_answer(&mut conn, deadline, limits.max_body)? {
            Some(a) => a,
            None if reused && idempotent(request) => {
                conn = self.connect(deadline, limits)?;
                conn.stream
                    .write_all(request)
                    .map_err(|e| io_failure(e, false))?;
                read_answer(&mut conn, deadline, limits.max_body)?.ok_or_else(closed)?
            }
            None => return Err(closed()),
        };
        let (answer, keep) = answer;
        if keep {
            self.checkin(conn);
        }
        Ok(answer)
    }

    /// A kept connection that can take a request: open, not idle too long, and with nothing
    /// unread on it (bytes a server sent after its last answer would be read as the next one).
    fn checkout(&self) -> Option<Open> {
        let mut idle = self.idle.lock().ok()?;
        while let Some((c, since)) = idle.pop() {
            if since.elapsed() <= IDLE_TIMEOUT && quiet(&c.stream) {
                return Some(c);
            }
        }
        None
    }

    fn checkin(&self, conn: Open) {
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE {
                idle.push((conn, Instant::now()));
            }
        }
    }

    /// A new connection within the connect timeout (and the request's deadline): to the host's
    /// address, or to each address its name resolves to in turn.
    fn connect(&self, deadline: Instant, limits: &Limits) -> Result<Open, Failure> {
        let within = |d: Instant| {
            remaining(deadline.min(d))
                .map(|l| l.min(limits.connect_timeout))
                .ok_or(Failure::ConnectTimeout)
        };
        let until = Instant::now() + limits.connect_timeout;
        let mut last = Failure::ConnectTimeout;
        let mut stream = None;
        for addr in self.addresses(within(until)?)? {
            match TcpStream::connect_timeout(&addr, within(until)?) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) if e.kind() == ErrorKind::TimedOut => last = Failure::ConnectTimeout,
                Err(e) => last = Failure::Connect(e),
            }
        }
        let stream = stream.ok_or(last)?;
        let limit = within(until).unwrap_or(Duration::from_millis(1));
        // IMDS answers are small and each request is one write: no Nagle delay.
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(limit.max(Duration::from_millis(1))));
        let wait = limits.timeout.max(Duration::from_millis(1));
        stream.set_read_timeout(Some(wait)).map_err(Failure::Io)?;
        let buf = vec![0; BUF];
        Ok(Open { stream, wait, buf })
    }

    /// One request's bytes: a GET made before is sent again as it was.
    pub(super) fn request(
        &self,
        method: &http::Method,
        path: &str,
        headers: &[(&'static str, &str)],
        body: Option<&str>,
    ) -> Result<Arc<[u8]>, ImdsError> {
        let get = method == http::Method::GET && body.is_none();
        if !get {
            return self.make(method, path, headers, body).map(Arc::from);
        }
        let same = |m: &&Made| {
            equal(&m.path, path)
                && m.headers.len() == headers.len()
                && m.headers
                    .iter()
                    .zip(headers)
                    .all(|(a, b)| a.0 == b.0 && equal(&a.1, b.1))
        };
        if let Some(m) = self
            .made
            .lock()
            .ok()
            .as_ref()
            .and_then(|v| v.iter().find(same))
        {
            return Ok(m.bytes.clone());
        }
        let bytes: Arc<[u8]> = self.make(method, path, headers, body)?.into();
        if let Ok(mut made) = self.made.lock() {
            if made.len() >= MADE_MAX {
                made.clear();
            }
            made.push(Made {
                path: path.to_string(),
                headers: headers.iter().map(|(k, v)| (*k, v.to_string())).collect(),
                bytes: bytes.clone(),
            });
        }
        Ok(bytes)
    }

    /// A request's bytes: origin-form, `Host`, the user agent, the caller's headers, and a
    /// JSON body when there is one. A path or header value that cannot be sent is refused.
    /// Copied together, not formatted (bench/results/poll-cost.md).
    fn make(
        &self,
        method: &http::Method,
        path: &str,
        headers: &[(&'static str, &str)],
        body: Option<&str>,
    ) -> Result<Vec<u8>, ImdsError> {
        if !path.starts_with('/') || !path.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ImdsError::Client(format!(
                "cannot request {path:?}: not an absolute path of visible ASCII"
            )));
        }
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(method.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(&self.fixed);
        for (k, v) in headers {
            if !v.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)) {
                return Err(ImdsError::Client(format!(
                    "header {k} has a value that cannot be sent"
                )));
            }
            for part in [*k, ": ", v, "\r\n"] {
                out.extend_from_slice(part.as_bytes());
            }
        }
        match body {
            Some(b) => {
                out.extend_from_slice(b"content-type: application/json\r\ncontent-length: ");
                out.extend_from_slice(b.len().to_string().as_bytes());
                out.extend_from_slice(b"\r\n\r\n");
                out.extend_from_slice(b.as_bytes());
            }
            None if method == http::Method::GET => out.extend_from_slice(b"\r\n"),
            None => out.extend_from_slice(b"content-length: 0\r\n\r\n"),
        }
        Ok(out)
    }

    /// The host's address, or the addresses its name resolves to within `limit`. The lookup
    /// (`getaddrinfo`, which has no timeout of its own) runs on a thread of its own, left to
    /// finish alone when it takes too long. Every cloud's own endpoint is an address; a name
    /// is an `NTHD_IMDS_ENDPOINT` of the user's.
    pub(super) fn addresses(&self, limit: Duration) -> Result<Vec<SocketAddr>, Failure> {
        let literal = self.host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<std::net::IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, self.port)]);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let name = (literal.to_string(), self.port);
        std::thread::Builder::new()
            .name("nthd-resolve".into())
            .spawn(move || {
                use std::net::ToSocketAddrs;
                let _ = tx.send(name.to_socket_addrs().map(Iterator::collect::<Vec<_>>));
            })
            .map_err(Failure::Connect)?;
        match rx.recv_timeout(limit) {
            Ok(Ok(addrs)) if !addrs.is_empty() => Ok(addrs),
            Ok(Ok(_)) => Err(Failure::Connect(std::io::Error::new(
                ErrorKind::NotFound,
                format!("{} resolves to no address", self.host),
            ))),
            Ok(Err(e)) => Err(Failure::Connect(e)),
            Err(_) => Err(Failure::ConnectTimeout),
        }
    }
}

/// `a == b`, eight bytes at a time: slices' `==` is the C library's `memcmp`, which musl
/// compares byte by byte, and this runs for every read (a path and a 56-byte token).
fn equal(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]));
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tails = wa
        .remainder()
        .iter()
        .zip(wb.remainder())
        .all(|(x, y)| x == y);
    tails && wa.zip(wb).all(|(x, y)| word(x) == word(y))
}

/// Whether a request sent twice does no more than sent once: GET and PUT (AWS's token).
fn idempotent(request: &[u8]) -> bool {
    request.starts_with(b"GET ") || request.starts_with(b"PUT ")
}

/// Whether a kept connection has nothing to read: no stray bytes, and not closed by the
/// server (a read would see its end). Looked at without waiting and without taking anything.
fn quiet(stream: &TcpStream) -> bool {
    use rustix::net::{recv, RecvFlags};
    let mut byte = [0u8; 1];
    matches!(
        recv(stream, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT),
        Err(rustix::io::Errno::AGAIN)
    )
}

fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

fn closed() -> Failure {
    Failure::Io(std::io::Error::new(
        ErrorKind::UnexpectedEof,
        "the connection closed before the answer was complete",
    ))
}

/// A read or write error as a failure: a timeout, or a broken connection. `early`: nothing of
/// the answer had come yet, so a reset is a kept connection the server closed.
fn io_failure(e: std::io::Error, early: bool) -> Failure {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => Failure::Timeout,
        ErrorKind::ConnectionReset if early => Failure::Closed,
        _ => Failure::Io(e),
    }
}

/// Where an answer's bytes come from: a socket, waited on until the deadline ([`Sock`]), or,
/// for the fuzz target, bytes handed over in pieces.
pub(crate) trait Source {
    /// Reads what has arrived into `into`, waiting for it until `deadline`; 0 when the peer
    /// closed. A socket's error is returned as it is ([`Failure::Io`]): the reader tells a
    /// timeout and a reset before the answer began from a broken answer.
    fn fill(&mut self, into: &mut [u8], deadline: Instant) -> Result<usize, Failure>;
}

/// A kept connection's socket as a [`Source`]. Past the deadline it no longer waits: what has
/// already come is read (the answers of reads that went out together arrive while the first
/// is waited for), for [`LATE`] at most from this answer's first read past the deadline, and
/// then it is a timeout, however fast the server keeps sending. Counted per answer, not from
/// the deadline: a read due together with one that never answers is taken up only when that
/// one's wait has ended, which on a loaded machine can be well past the deadline, and its
/// answer, long arrived, must still be read.
struct Sock<'a> {
    stream: &'a TcpStream,
    /// The read timeout the socket has.
    wait: &'a mut Duration,
    /// When this answer was first read past the deadline (the socket is then non-blocking).
    late: Option<Instant>,
}

/// How long, from an answer's first read past its deadline, what has already come of it is
/// still read.
const LATE: Duration = Duration::from_millis(100);

impl Source for Sock<'_> {
    fn fill(&mut self, into: &mut [u8], deadline: Instant) -> Result<usize, Failure> {
        match remaining(deadline) {
            Some(wait) if *self.wait < wait || *self.wait > wait + SLACK => {
                *self.wait = wait;
                self.stream.set_read_timeout(Some(wait))
            }
            Some(_) => Ok(()),
            None => match self.late {
                Some(since) if since.elapsed() > LATE => return Err(Failure::Timeout),
                Some(_) => Ok(()),
                None => {
                    self.late = Some(Instant::now());
                    self.stream.set_nonblocking(true)
                }
            },
        }
        .map_err(Failure::Io)?;
        loop {
            match (&mut &*self.stream).read(into) {
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                other => return other.map_err(Failure::Io),
            }
        }
    }
}

/// The bytes of one answer as they arrive, against the request's deadline, and never more than
/// `limit` of them. Read straight into `buf` (1 KiB, doubled when full): a poll touches as
/// little memory as it can, since after a second asleep every line of it is a cache miss
/// (bench/results/poll-cost.md).
struct Incoming<'a> {
    src: &'a mut dyn Source,
    buf: &'a mut Vec<u8>,
    /// How much of the buffer has come.
    have: usize,
    /// The most bytes an answer may take: its head, its body up to the cap, and framing.
    limit: usize,
    deadline: Instant,
    /// Whether any byte of the answer came.
    started: bool,
}

impl Incoming<'_> {
    /// Reads what has arrived (waiting for it until the deadline); 0 when the server closed.
    fn fill(&mut self) -> Result<usize, Failure> {
        if self.have >= self.limit {
            return Err(Failure::TooLarge);
        }
        if self.have == self.buf.len() {
            let grown = (self.buf.len() * 2).clamp(BUF, self.limit);
            self.buf.resize(grown, 0);
        }
        let n = match self.src.fill(&mut self.buf[self.have..], self.deadline) {
            Err(Failure::Io(e)) => Err(io_failure(e, !self.started)),
            other => other,
        }?;
        self.have += n;
        self.started |= n > 0;
        Ok(n)
    }

    /// What has come so far.
    fn data(&self) -> &[u8] {
        &self.buf[..self.have]
    }

    /// At least `n` bytes in the buffer, or the connection closed first.
    fn need(&mut self, n: usize) -> Result<(), Failure> {
        while self.have < n {
            if self.fill()? == 0 {
                return Err(closed());
            }
        }
        Ok(())
    }

    /// More bytes, or the connection closed first; `what` may not grow past `max` bytes.
    fn more(&mut self, what: &str, len: usize, max: usize) -> Result<(), Failure> {
        if len > max {
            return Err(invalid(&format!("{what} is longer than {max} bytes")));
        }
        self.need(self.have + 1)
    }
}

/// Bytes handed over in the pieces given, then the end: the fuzz target's [`Source`].
pub(crate) struct Pieces<'a>(pub(crate) std::collections::VecDeque<&'a [u8]>);

impl Source for Pieces<'_> {
    fn fill(&mut self, into: &mut [u8], _deadline: Instant) -> Result<usize, Failure> {
        let Some(piece) = self.0.pop_front() else {
            return Ok(0);
        };
        let n = piece.len().min(into.len());
        into[..n].copy_from_slice(&piece[..n]);
        if n < piece.len() {
            self.0.push_front(&piece[n..]);
        }
        Ok(n)
    }
}

/// The most bytes an answer with a body of up to `cap` bytes takes: its head, the body, its
/// chunk framing (as long again, at most) and its trailers.
pub(super) fn answer_limit(cap: usize) -> usize {
    cap.saturating_mul(2).saturating_add(2 * MAX_HEAD)
}

/// One answer, and whether its connection can be kept; `None` when the connection closed
/// before a byte of it came.
fn read_answer(
    conn: &mut Open,
    deadline: Instant,
    cap: usize,
) -> Result<Option<(Answer, bool)>, Failure> {
    let Open { stream, wait, buf } = conn;
    let mut sock = Sock {
        stream,
        wait,
        late: None,
    };
    let answer = read_from(&mut sock, buf, deadline, cap);
    if buf.len() > BUF {
        *buf = vec![0; BUF];
    }
    if sock.late.is_some() {
        match stream.set_nonblocking(false) {
            Ok(()) => answer,
            // Kept, it would not wait for its next answer.
            Err(_) => answer.map(|a| a.map(|(a, _)| (a, false))),
        }
    } else {
        answer
    }
}

/// One answer from `src`, read into `buf`, as [`read_answer`] gives it.
pub(crate) fn read_from(
    src: &mut dyn Source,
    buf: &mut Vec<u8>,
    deadline: Instant,
    cap: usize,
) -> Result<Option<(Answer, bool)>, Failure> {
    let mut inc = Incoming {
        src,
        buf,
        have: 0,
        limit: answer_limit(cap),
        deadline,
        started: false,
    };
    let (head, len) = loop {
        match inc.fill() {
            Ok(0) | Err(Failure::Closed) if !inc.started => return Ok(None),
            Ok(0) => return Err(closed()),
            Ok(_) => {}
            Err(e) => return Err(e),
        }
        if let Some(parsed) = parse_head(inc.data())? {
            break parsed;
        }
        if inc.have > MAX_HEAD {
            return Err(invalid("the answer's head is larger than 16 KiB"));
        }
    };
    let (body, clean) = match head.framing {
        Framing::Length(n) if n > cap => return Err(Failure::TooLarge),
        Framing::Length(n) => {
            inc.need(len + n)?;
            (inc.data()[len..len + n].to_vec(), inc.have == len + n)
        }
        Framing::Chunked => dechunk(&mut inc, len, cap)?,
        Framing::Close => (to_close(&mut inc, len, cap)?, false),
    };
    let keep = head.keep && clean && head.framing != Framing::Close;
    let answer = Answer {
        status: head.status,
        etag: head.etag,
        retry_after: head.retry_after,
        body,
    };
    Ok(Some((answer, keep)))
}

/// The head, once all of it is in `buf`, and its length.
fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(invalid(&format!("the answer is not HTTP/1.1: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    if !(200..=599).contains(&status) {
        return Err(invalid(&format!("unexpected HTTP status {status}")));
    }
    let (mut chunked, mut length, mut close, mut etag) = (false, None, false, None);
    let mut retry_after = None;
    for h in resp.headers.iter() {
        let v = std::str::from_utf8(h.value).unwrap_or("").trim();
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let n: usize = v.parse().map_err(|_| invalid("a bad Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(invalid("the answer declares two different lengths"));
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked |= v.to_ascii_lowercase().contains("chunked");
        } else if name.eq_ignore_ascii_case("connection") {
            close |= v.eq_ignore_ascii_case("close");
        } else if name.eq_ignore_ascii_case("etag") && etag.is_none() {
            etag = Some(String::from_utf8_lossy(h.value).trim().to_string());
        } else if name.eq_ignore_ascii_case("retry-after") && retry_after.is_none() {
            retry_after = crate::timefmt::parse_retry_after(v, std::time::SystemTime::now());
        }
    }
    let framing = match (status, chunked, length) {
        (204 | 304, _, _) => Framing::Length(0),
        (_, true, _) => Framing::Chunked,
        (_, false, Some(n)) => Framing::Length(n),
        (_, false, None) => Framing::Close,
    };
    let head = Head {
        status,
        etag,
        retry_after,
        framing,
        keep: resp.version == Some(1) && !close,
    };
    Ok(Some((head, len)))
}

/// The longest chunk-size line nthd reads, extensions included (IMDS sends none).
const MAX_CHUNK_LINE: usize = 1024;

/// A chunked body starting at `pos`, up to `cap` bytes; whether nothing followed it. Each
/// chunk-size line is at most [`MAX_CHUNK_LINE`] bytes and the trailers [`MAX_HEAD`], so no
/// scan reads the same bytes more than a bounded number of times.
fn dechunk(inc: &mut Incoming<'_>, mut pos: usize, cap: usize) -> Result<(Vec<u8>, bool), Failure> {
    let mut body = Vec::new();
    loop {
        let (line, size) = loop {
            match httparse::parse_chunk_size(&inc.data()[pos..]) {
                Ok(httparse::Status::Complete((line, size))) => break (line, size),
                Ok(httparse::Status::Partial) => {
                    inc.more("a chunk-size line", inc.have - pos, MAX_CHUNK_LINE)?;
                }
                Err(_) => return Err(invalid("a bad chunk size")),
            }
        };
        pos += line;
        if size == 0 {
            let end = trailers_end(inc, pos)?;
            return Ok((body, inc.have == end));
        }
        let size = usize::try_from(size).map_err(|_| Failure::TooLarge)?;
        if body.len().saturating_add(size) > cap {
            return Err(Failure::TooLarge);
        }
        inc.need(pos + size + 2)?;
        if &inc.data()[pos + size..pos + size + 2] != b"\r\n" {
            return Err(invalid("a chunk does not end where its size says"));
        }
        body.extend_from_slice(&inc.data()[pos..pos + size]);
        pos += size + 2;
    }
}

/// After the last chunk: the trailers (if any), then an empty line; where they end.
fn trailers_end(inc: &mut Incoming<'_>, pos: usize) -> Result<usize, Failure> {
    let mut scanned: usize = 0;
    loop {
        let rest = &inc.data()[pos..];
        if rest.starts_with(b"\r\n") {
            return Ok(pos + 2);
        }
        // Only the bytes that came since the last look, and the three before them.
        let from = scanned.saturating_sub(3);
        if let Some(i) = rest[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(pos + from + i + 4);
        }
        scanned = rest.len();
        inc.more("the trailers", scanned, MAX_HEAD)?;
    }
}

/// A body from `pos` to when the server closes the connection, up to `cap` bytes.
fn to_close(inc: &mut Incoming<'_>, pos: usize, cap: usize) -> Result<Vec<u8>, Failure> {
    while inc.have - pos <= cap {
        if inc.fill()? == 0 {
            return Ok(inc.data()[pos..].to_vec());
        }
    }
    Err(Failure::TooLarge)
}

fn invalid(why: &str) -> Failure {
    Failure::Io(std::io::Error::new(ErrorKind::InvalidData, why.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Head {
        parse_head(text.as_bytes()).unwrap().unwrap().0
    }

    #[test]
    fn heads_say_how_the_body_ends_and_whether_to_keep_the_connection() {
        let h = head("HTTP/1.1 200 OK\r\ncontent-length: 3\r\netag: \"a\"\r\n\r\n");
        assert_eq!(
            (h.status, h.framing, h.keep),
            (200, Framing::Length(3), true)
        );
        assert_eq!(h.etag.as_deref(), Some("\"a\""));
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(h.framing, Framing::Chunked);
        let h = head("HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
        assert!(!h.keep);
        let h = head("HTTP/1.0 200 OK\r\n\r\n");
        assert_eq!((h.framing, h.keep), (Framing::Close, false));
        assert_eq!(
            head("HTTP/1.1 304 Not Modified\r\n\r\n").framing,
            Framing::Length(0)
        );
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-le")
            .unwrap()
            .is_none());
    }

    /// Serves each of `answers` as raw bytes on its own connection, then closes it; returns
    /// the pool for the server.
    fn serve(answers: Vec<Vec<u8>>) -> Pool {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for answer in answers {
                let (mut s, _) = listener.accept().unwrap();
                let mut head = [0u8; 1024];
                let _ = s.read(&mut head);
                let _ = s.write_all(&answer);
            }
        });
        Pool::new("127.0.0.1".into(), port, "h")
    }

    fn one(pool: &Pool, cap: usize) -> Result<Answer, Failure> {
        let limits = Limits {
            timeout: Duration::from_millis(500),
            connect_timeout: Duration::from_millis(500),
            max_body: cap,
        };
        let req = pool.request(&http::Method::GET, "/x", &[], None).unwrap();
        pool.batch(&[req], &limits).pop().unwrap()
    }

    #[test]
    fn hostile_answers_are_errors_within_the_cap_and_the_deadline() {
        let big_head = format!("HTTP/1.1 200 OK\r\nx: {}\r\n", "a".repeat(20_000));
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "cut short",
                b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc".to_vec(),
            ),
            (
                "chunk cut short",
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab".to_vec(),
            ),
            (
                "chunk size not hex",
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n".to_vec(),
            ),
            (
                "chunk over the cap",
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffff\r\n".to_vec(),
            ),
            (
                "declared over the cap",
                b"HTTP/1.1 200 OK\r\ncontent-length: 99999\r\n\r\n".to_vec(),
            ),
            (
                "until close, over the cap",
                [b"HTTP/1.0 200 OK\r\n\r\n".as_slice(), &[b'x'; 300]].concat(),
            ),
            ("a head without end", big_head.into_bytes()),
            ("not HTTP", b"\x00\x01\x02 hello\r\n\r\n".to_vec()),
            ("nothing", Vec::new()),
        ];
        let pool = serve(cases.iter().map(|(_, a)| a.clone()).collect());
        for (what, _) in &cases {
            let start = Instant::now();
            let r = one(&pool, 256);
            assert!(r.is_err(), "{what}: {r:?}");
            assert!(start.elapsed() < Duration::from_millis(800), "{what}");
        }
    }

    #[test]
    fn an_answer_ended_by_close_is_read_and_its_connection_not_kept() {
        let pool = serve(vec![b"HTTP/1.0 200 OK\r\netag: e\r\n\r\nall of it".to_vec()]);
        let Answer {
            status, etag, body, ..
        } = one(&pool, 256).unwrap();
        assert_eq!(
            (status, etag.as_deref(), body.as_slice()),
            (200, Some("e"), &b"all of it"[..])
        );
        assert!(pool.checkout().is_none());
    }

    #[test]
    fn heads_that_are_not_an_answer_are_refused() {
        for bad in [
            "SSH-2.0-OpenSSH_9.2\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            "HTTP/1.1 100 Continue\r\n\r\n",
        ] {
            assert!(
                matches!(parse_head(bad.as_bytes()), Err(Failure::Io(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn requests_are_origin_form_with_host_and_refuse_values_that_cannot_be_sent() {
        let pool = Pool::new("169.254.169.254".into(), 80, "169.254.169.254");
        let get = pool
            .request(&http::Method::GET, "/a?b=c", &[("x-t", "v")], None)
            .unwrap();
        assert_eq!(
            String::from_utf8(get.to_vec()).unwrap(),
            format!(
                "GET /a?b=c HTTP/1.1\r\nhost: 169.254.169.254\r\nuser-agent: nthd/{}\r\n\
                 accept: */*\r\nx-t: v\r\n\r\n",
                env!("CARGO_PKG_VERSION")
            )
        );
        let put = pool.request(&http::Method::PUT, "/t", &[], None).unwrap();
        assert!(String::from_utf8(put.to_vec())
            .unwrap()
            .ends_with("content-length: 0\r\n\r\n"));
        let post = pool
            .request(&http::Method::POST, "/p", &[], Some("{}"))
            .unwrap();
        assert!(String::from_utf8(post.to_vec())
            .unwrap()
            .ends_with("content-type: application/json\r\ncontent-length: 2\r\n\r\n{}"));
        // A GET made before is the same bytes; another token makes new ones.
        let again = |t: &str| pool.request(&http::Method::GET, "/a?b=c", &[("x-t", t)], None);
        assert!(Arc::ptr_eq(&again("v").unwrap(), &again("v").unwrap()));
        assert!(String::from_utf8(again("w").unwrap().to_vec())
            .unwrap()
            .contains("x-t: w\r\n"));
        for (x, y) in [
            ("", ""),
            ("abcdefgh", "abcdefgh"),
            ("abcdefghij", "abcdefghij"),
        ] {
            assert!(equal(x, y), "{x:?}");
        }
        for (x, y) in [
            ("a", ""),
            ("abcdefgh", "abcdefgX"),
            ("abcdefghij", "abcdefghiX"),
        ] {
            assert!(!equal(x, y) && !equal(y, x), "{x:?} {y:?}");
        }
        let bad = [("x-t", "a\r\nb")];
        assert!(pool.request(&http::Method::GET, "/a", &bad, None).is_err());
        assert!(pool.request(&http::Method::GET, "/a b", &[], None).is_err());
    }

    /// What a scripted server does on a connection.
    enum Step {
        /// Reads a request and sends these bytes.
        Answer(Vec<u8>),
        /// Sends these bytes 50 ms later, unasked.
        Stray(&'static str),
        /// Reads a request and closes the connection.
        Close,
    }

    /// Serves each connection with its script, keeping it open afterwards; the request lines
    /// read.
    fn scripted(conns: Vec<Vec<Step>>) -> (Pool, Arc<Mutex<Vec<String>>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            let mut open = Vec::new();
            for script in conns {
                let (mut s, _) = listener.accept().unwrap();
                for step in script {
                    if let Step::Stray(bytes) = step {
                        std::thread::sleep(Duration::from_millis(50));
                        s.write_all(bytes.as_bytes()).unwrap();
                        continue;
                    }
                    let mut req = [0u8; 1024];
                    let n = s.read(&mut req).unwrap_or(0);
                    let line = String::from_utf8_lossy(&req[..n]);
                    let line = line.lines().next().unwrap_or("").to_string();
                    log.lock().unwrap().push(line);
                    match step {
                        Step::Answer(bytes) => s.write_all(&bytes).unwrap(),
                        _ => {
                            let _ = s.shutdown(std::net::Shutdown::Both);
                            break;
                        }
                    }
                }
                open.push(s);
            }
            std::thread::sleep(Duration::from_secs(5));
        });
        (Pool::new("127.0.0.1".into(), port, "h"), seen)
    }

    fn ok(body: &str) -> Step {
        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
        Step::Answer([head.as_bytes(), body.as_bytes()].concat())
    }

    fn send(pool: &Pool, method: http::Method) -> Result<Answer, Failure> {
        let limits = Limits {
            timeout: Duration::from_millis(500),
            connect_timeout: Duration::from_millis(500),
            max_body: 256,
        };
        let body = (method == http::Method::POST).then_some("{}");
        let req = pool.request(&method, "/x", &[], body).unwrap();
        pool.batch(&[req], &limits).pop().unwrap()
    }

    #[test]
    fn a_kept_connection_closed_after_taking_a_request_resends_only_what_may_go_twice() {
        let (pool, seen) = scripted(vec![vec![ok("one"), Step::Close], vec![ok("two")]]);
        assert_eq!(send(&pool, http::Method::GET).unwrap().body, b"one");
        assert_eq!(send(&pool, http::Method::GET).unwrap().body, b"two");
        assert_eq!(seen.lock().unwrap().len(), 3);

        let (pool, seen) = scripted(vec![vec![ok("one"), Step::Close], vec![ok("never")]]);
        assert_eq!(send(&pool, http::Method::GET).unwrap().body, b"one");
        assert!(send(&pool, http::Method::POST).is_err());
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            ["GET /x HTTP/1.1", "POST /x HTTP/1.1"],
            "the POST went once"
        );
    }

    #[test]
    fn stray_bytes_after_an_answer_are_never_read_as_the_next_one() {
        let stray = "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstray";
        let (pool, seen) = scripted(vec![vec![ok("one"), Step::Stray(stray)], vec![ok("two")]]);
        assert_eq!(send(&pool, http::Method::GET).unwrap().body, b"one");
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(send(&pool, http::Method::GET).unwrap().body, b"two");
        assert_eq!(seen.lock().unwrap().len(), 2);
    }

    /// Streams `unit` without end (until the client goes), after `head`.
    fn flood(head: &'static str, unit: &'static [u8]) -> Pool {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut req = [0u8; 1024];
            let _ = s.read(&mut req);
            let block = unit.repeat(64 * 1024 / unit.len());
            let _ = s.write_all(head.as_bytes());
            while s.write_all(&block).is_ok() {}
        });
        Pool::new("127.0.0.1".into(), port, "h")
    }

    #[test]
    fn floods_are_errors_within_the_deadline_and_the_answer_limit() {
        let chunked = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        let cases: [(&str, &'static str, &'static [u8]); 4] = [
            (
                "a chunk extension without end",
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1;",
                b"a",
            ),
            (
                "trailers without end",
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n",
                b"x: y\r\n",
            ),
            ("one-byte chunks without end", chunked, b"1\r\nx\r\n"),
            (
                "a body until close without end",
                "HTTP/1.0 200 OK\r\n\r\n",
                b"x",
            ),
        ];
        for (what, head, unit) in cases {
            let pool = flood(head, unit);
            let start = Instant::now();
            let r = one(&pool, 64 * 1024 * 1024);
            assert!(r.is_err(), "{what}");
            let took = start.elapsed();
            // The deadline and what is read after it, with room for a loaded machine: without
            // the bounds, the first three never end (the fourth reads up to its cap).
            let bound = Duration::from_millis(500) + LATE + Duration::from_secs(2);
            assert!(took < bound, "{what}: {took:?}");
        }
    }

    /// One answer read from `bytes` handed over `piece` bytes at a time, into `buf`.
    fn from_pieces(
        bytes: &[u8],
        piece: usize,
        cap: usize,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(Answer, bool)>, Failure> {
        let mut pieces = Pieces(bytes.chunks(piece).collect());
        read_from(
            &mut pieces,
            buf,
            Instant::now() + Duration::from_secs(1),
            cap,
        )
    }

    #[test]
    fn an_answer_takes_at_most_its_limit_in_memory() {
        let head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        let answer = [head.as_slice(), &b"1\r\nx\r\n".repeat(200_000)].concat();
        for cap in [256, 4096, 256 * 1024] {
            let mut buf = vec![0; BUF];
            let r = from_pieces(&answer, 65536, cap, &mut buf);
            assert!(matches!(r, Err(Failure::TooLarge)), "{cap}: {r:?}");
            assert!(buf.len() <= answer_limit(cap), "{cap}: {}", buf.len());
        }
        assert!(answer_limit(256 * 1024) * 2 < 16 * 1024 * 1024);
    }

    #[test]
    fn chunks_are_read_with_extensions_and_trailers_and_must_end_where_their_size_says() {
        let bad = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n";
        let good = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nt: 1\r\n\r\n";
        assert!(from_pieces(bad, 7, 256, &mut vec![0; BUF]).is_err());
        for piece in [1, 3, 7, 100] {
            let (a, keep) = from_pieces(good, piece, 256, &mut vec![0; BUF])
                .unwrap()
                .unwrap();
            assert_eq!(
                (a.status, a.body.as_slice(), keep),
                (200, &b"abc"[..], true),
                "{piece}"
            );
        }
    }

    #[test]
    fn past_its_deadline_an_answer_is_read_only_for_late_and_then_never() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.write_all(&[b'x'; 4096]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut wait = Duration::from_secs(1);
        let mut into = [0u8; 1024];
        let mut sock = Sock {
            stream: &client,
            wait: &mut wait,
            late: None,
        };
        // Taken up long past the deadline (another read due with it waited it out): what has
        // come is read, without waiting.
        let long_past = Instant::now() - Duration::from_secs(5);
        assert_eq!(sock.fill(&mut into, long_past).unwrap(), 1024);
        assert!(sock.late.is_some());
        // Within LATE of that first late read, with nothing more there, it does not wait.
        let mut rest = [0u8; 8192];
        assert_eq!(sock.fill(&mut rest, long_past).unwrap(), 3072);
        let r = sock.fill(&mut rest, long_past);
        let would_block = matches!(&r, Err(Failure::Io(e)) if e.kind() == ErrorKind::WouldBlock);
        assert!(would_block, "{r:?}");
        // Which the reader tells as a timeout.
        let told = io_failure(ErrorKind::WouldBlock.into(), true);
        assert!(matches!(told, Failure::Timeout), "{told:?}");
        // LATE after the first late read, nothing more is read, though it is there.
        server.write_all(b"more").unwrap();
        std::thread::sleep(LATE + Duration::from_millis(20));
        assert!(matches!(
            sock.fill(&mut into, long_past),
            Err(Failure::Timeout)
        ));
    }
}
