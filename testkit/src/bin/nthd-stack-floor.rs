//! `nthd-stack-floor`: the floor of nthd's stack, with nothing of nthd in it.
//!
//! ```text
//! nthd-stack-floor SECS K [ADDRESS:PORT] [--raw | --blocking]
//! ```
//!
//! The same reads as `bench/floor.c` (one tick a second; per tick K GETs of
//! `spot/instance-action` on K kept connections, read concurrently), made the way nthd makes
//! them: a tokio current-thread runtime, the tick on nthd's own timerfd sleep
//! (`nthd::testing::timer`), hyper's HTTP/1 client connection driven by the requesting task (as
//! nthd's `imds/kept.rs` does), a 2 s tokio
//! timeout around each request, and on musl the same allocator (dlmalloc). `--raw`
//! keeps the runtime and drops hyper: the request written and one read of the answer on tokio's
//! `TcpStream`. `--blocking` drops the runtime too, as a metadata reader on a thread of its own
//! would: blocking sockets with a 2 s `SO_RCVTIMEO`/`SO_SNDTIMEO` set once, the tick an absolute
//! `clock_nanosleep` (floor.c's), each answer's head parsed with httparse and its body read to
//! its `Content-Length` into a `String`. `--ureq` makes the same reads with no runtime through
//! ureq 3 (one `Agent`, its pool keeping the connections; proxy, redirects and status errors
//! off; the body read to a `String` under a 256 KiB limit), one after the other, since a
//! synchronous client answers one call at a time per thread. Prints one JSON object like floor.c's: on-CPU microseconds per tick
//! (`/proc/self/schedstat`) over SECS ticks after three warm-up ticks.
//!
//! `bench/real-idle.sh --stack K` runs it in the container's network beside nthd and floor.c,
//! so nthd's cost splits into what the stack costs and what nthd adds (docs/performance.md,
//! "Idle CPU against the floor in the same run"). Exit: 0 measured, 1 a read failed, 2 bad usage.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

const PATH: &str = "/latest/meta-data/spot/instance-action";
const RAW: &[u8] = b"GET /latest/meta-data/spot/instance-action HTTP/1.1\r\n\
    Host: 169.254.169.254\r\nUser-Agent: nthd-stack-floor/1\r\nAccept: */*\r\n\r\n";
const TIMEOUT: Duration = Duration::from_secs(2);

type Error = Box<dyn std::error::Error>;

type Driver = Pin<Box<Connection<TokioIo<TcpStream>, Empty<Bytes>>>>;

/// One kept connection: hyper's (its request handle and the connection, which the request
/// drives) or a bare socket.
enum Conn {
    Hyper(SendRequest<Empty<Bytes>>, Driver),
    Raw(TcpStream),
}

impl Conn {
    async fn open(addr: &str, raw: bool) -> Result<Conn, Error> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        if raw {
            return Ok(Conn::Raw(stream));
        }
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        Ok(Conn::Hyper(sender, Box::pin(conn)))
    }

    /// One GET and its whole answer, within the timeout; the answer's length.
    async fn get(&mut self) -> Result<usize, Error> {
        let read = async {
            match self {
                Conn::Hyper(sender, conn) => {
                    let req = http::Request::get(PATH)
                        .header(http::header::HOST, "169.254.169.254")
                        .header(http::header::USER_AGENT, "nthd-stack-floor/1")
                        .header(http::header::ACCEPT, "*/*")
                        .body(Empty::new())?;
                    let answer = async {
                        let resp = sender.send_request(req).await?;
                        Ok::<usize, Error>(resp.into_body().collect().await?.to_bytes().len())
                    };
                    drive(conn, answer).await
                }
                Conn::Raw(stream) => {
                    stream.write_all(RAW).await?;
                    let mut buf = [0u8; 4096];
                    Ok(stream.read(&mut buf).await?)
                }
            }
        };
        tokio::time::timeout(TIMEOUT, read).await?
    }
}

/// Polls `fut` and the connection in turn until `fut` is done. The mock keeps connections
/// open: one that ends is a failed measurement.
async fn drive(
    conn: &mut Driver,
    fut: impl Future<Output = Result<usize, Error>>,
) -> Result<usize, Error> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        if conn.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err("the server closed the connection".into()));
        }
        fut.as_mut().poll(cx)
    })
    .await
}

fn on_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The design a metadata reader off the runtime would have: everything blocking, no runtime.
mod blocking {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::{on_cpu_ns, Error, RAW, TIMEOUT};

    /// One GET on a kept blocking connection and its whole answer: the head parsed with
    /// httparse, the body read to its length and checked as UTF-8, as nthd keeps it.
    fn get(stream: &mut TcpStream, buf: &mut [u8; 4096]) -> Result<String, Error> {
        let mut have = 0;
        loop {
            if have == buf.len() {
                return Err("the answer's head is larger than 4 KiB".into());
            }
            let n = stream.read(&mut buf[have..])?;
            if n == 0 {
                return Err("the server closed the connection".into());
            }
            have += n;
            let mut headers = [httparse::EMPTY_HEADER; 16];
            let mut resp = httparse::Response::new(&mut headers);
            let httparse::Status::Complete(head) = resp.parse(&buf[..have])? else {
                continue;
            };
            let len = resp
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| {
                    std::str::from_utf8(h.value)
                        .ok()?
                        .trim()
                        .parse::<usize>()
                        .ok()
                })
                .ok_or("the answer has no Content-Length")?;
            if head + len > buf.len() {
                return Err("the answer is larger than 4 KiB".into());
            }
            while have < head + len {
                let n = stream.read(&mut buf[have..head + len])?;
                if n == 0 {
                    return Err("the server closed the connection".into());
                }
                have += n;
            }
            return Ok(std::str::from_utf8(&buf[head..head + len])?.to_string());
        }
    }

    /// Sleeps until `at` on the monotonic clock (absolute, as floor.c).
    pub(super) fn sleep_until(at: &libc::timespec) {
        // SAFETY: `at` is a valid timespec and the remaining-time pointer may be null with
        // TIMER_ABSTIME; an interruption only ends the sleep early.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                at,
                std::ptr::null_mut(),
            );
        }
    }

    /// The monotonic clock now.
    pub(super) fn now() -> libc::timespec {
        let mut at = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `at` is a valid timespec to write the time into.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut at) };
        at
    }

    /// SECS ticks after three warm-up ticks; on-CPU microseconds per tick.
    pub(super) fn measure(secs: u64, k: usize, addr: &str) -> Result<f64, Error> {
        let mut conns = Vec::with_capacity(k);
        for _ in 0..k {
            let s = TcpStream::connect(addr)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(TIMEOUT))?;
            s.set_write_timeout(Some(TIMEOUT))?;
            conns.push(s);
        }
        let mut at = now();
        let (mut buf, mut start) = ([0u8; 4096], 0);
        for n in 0..secs + 3 {
            at.tv_sec += 1;
            sleep_until(&at);
            if n == 3 {
                start = on_cpu_ns();
            }
            for s in &mut conns {
                s.write_all(RAW)?;
            }
            for s in &mut conns {
                get(s, &mut buf)?;
            }
        }
        Ok((on_cpu_ns() - start) as f64 / 1000.0 / secs as f64)
    }
}

/// The maintained blocking client nthd could adopt instead of its own: ureq 3.
mod ureq_client {
    use super::{blocking::sleep_until, on_cpu_ns, Error, PATH, TIMEOUT};

    /// SECS ticks after three warm-up ticks; on-CPU microseconds per tick.
    pub(super) fn measure(secs: u64, k: usize, addr: &str) -> Result<f64, Error> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .timeout_global(Some(TIMEOUT))
            .max_idle_connections_per_host(k)
            .user_agent("nthd-stack-floor/1")
            .build()
            .into();
        let url = format!("http://{addr}{PATH}");
        let mut at = super::blocking::now();
        let mut start = 0;
        for n in 0..secs + 3 {
            at.tv_sec += 1;
            sleep_until(&at);
            if n == 3 {
                start = on_cpu_ns();
            }
            for _ in 0..k {
                let mut answer = agent.get(&url).header("Host", "169.254.169.254").call()?;
                answer
                    .body_mut()
                    .with_config()
                    .limit(256 * 1024)
                    .read_to_string()?;
            }
        }
        Ok((on_cpu_ns() - start) as f64 / 1000.0 / secs as f64)
    }
}

/// SECS ticks after three warm-up ticks; on-CPU microseconds per tick.
async fn measure(secs: u64, k: usize, addr: &str, raw: bool) -> Result<f64, Error> {
    let mut conns = Vec::with_capacity(k);
    for _ in 0..k {
        conns.push(Conn::open(addr, raw).await?);
    }
    let mut tick = nthd::testing::timer::Tick::new();
    let mut next = tokio::time::Instant::now();
    let mut start = 0;
    for n in 0..secs + 3 {
        next += Duration::from_secs(1);
        tick.sleep_until(next).await;
        if n == 3 {
            start = on_cpu_ns();
        }
        let reads = conns.iter_mut().map(Conn::get);
        for answer in futures_util::future::join_all(reads).await {
            answer?;
        }
    }
    Ok((on_cpu_ns() - start) as f64 / 1000.0 / secs as f64)
}

/// The stack to measure: the flag that names it, and its name in the JSON.
const MODES: [(&str, &str); 4] = [
    ("", "tokio+hyper"),
    ("--raw", "tokio"),
    ("--blocking", "blocking"),
    ("--ureq", "ureq"),
];

/// The stack's name, SECS and K from the command line; `None` for bad usage.
fn parse(args: &[String]) -> Option<(&'static str, u64, usize, Option<&str>)> {
    let flags: Vec<&String> = args.iter().filter(|a| a.starts_with("--")).collect();
    let pos: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let flag = match flags.as_slice() {
        [] => "",
        [one] => one.as_str(),
        _ => return None,
    };
    let (_, stack) = MODES.iter().find(|(f, _)| *f == flag)?;
    let secs = pos.first()?.parse::<u64>().ok().filter(|&s| s > 0)?;
    let k = pos.get(1)?.parse::<usize>().ok().filter(|&k| k > 0)?;
    Some((stack, secs, k, pos.get(2).map(|a| a.as_str())))
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((stack, secs, k, addr)) = parse(&args) else {
        eprintln!(
            "usage: nthd-stack-floor SECS K [ADDRESS:PORT] [--raw | --blocking | --ureq]  \
             (SECS, K > 0; one of the flags at most)"
        );
        return std::process::ExitCode::from(2);
    };
    let addr = addr.unwrap_or("169.254.169.254:80");
    let result = match stack {
        "blocking" => blocking::measure(secs, k, addr),
        "ureq" => ureq_client::measure(secs, k, addr),
        _ => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::from)
            .and_then(|rt| rt.block_on(measure(secs, k, addr, stack == "tokio"))),
    };
    match result {
        Ok(us) => {
            println!(
                r#"{{"stack":"{stack}","k":{k},"ticks":{secs},"us_per_tick":{us:.1},"us_per_request":{:.1}}}"#,
                us / k as f64
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("nthd-stack-floor: a read of http://{addr}{PATH} failed: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
