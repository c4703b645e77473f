//! A scriptable webhook receiver for tests/webhook*.rs: a real HTTP/1.1 server on 127.0.0.1
//! that records every request and answers with the statuses it is given, or never answers.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as received.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the whole request had arrived.
    pub at: std::time::SystemTime,
}

impl Received {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// How the receiver answers.
#[derive(Clone, Debug)]
pub(crate) enum Script {
    /// These statuses in turn, then the last one for ever.
    Statuses(Vec<u16>),
    /// Reads the request and never answers.
    Hang,
    /// Answers the status line and headers of this status with `content-length: 100`, then
    /// never sends the body.
    StallBody(u16),
}

type Wrap = Arc<
    dyn Fn(TcpStream) -> Pin<Box<dyn Future<Output = Option<Box<dyn Stream>>> + Send>>
        + Send
        + Sync,
>;

pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

pub(crate) struct Receiver {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    pub(crate) async fn start(script: Script) -> Receiver {
        Receiver::start_wrapped(
            script,
            Arc::new(|s| Box::pin(async move { Some(Box::new(s) as Box<dyn Stream>) })),
        )
        .await
    }

    /// With every connection passed through `wrap` first (a TLS acceptor, say).
    pub(crate) async fn start_wrapped(script: Script, wrap: Wrap) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let reqs = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (reqs, script, wrap) = (reqs.clone(), script.clone(), wrap.clone());
                tokio::spawn(async move {
                    if let Some(stream) = wrap(tcp).await {
                        serve(stream, reqs, script).await;
                    }
                });
            }
        });
        Receiver {
            port,
            requests,
            task,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub(crate) fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    pub(crate) fn all(&self) -> Vec<Received> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits up to `within` for at least `n` requests.
    pub(crate) async fn wait_for(&self, n: usize, within: Duration) -> bool {
        let end = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < end {
            if self.count() >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.count() >= n
    }
}

async fn serve(mut s: Box<dyn Stream>, reqs: Arc<Mutex<Vec<Received>>>, script: Script) {
    loop {
        let Some(req) = read_request(&mut s).await else {
            return;
        };
        let n = {
            let mut r = reqs.lock().unwrap();
            r.push(req);
            r.len()
        };
        let status = match &script {
            Script::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return;
            }
            Script::StallBody(status) => {
                let head = format!("HTTP/1.1 {status} X\r\ncontent-length: 100\r\n\r\n");
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.flush().await;
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return;
            }
            Script::Statuses(list) => list[(n - 1).min(list.len() - 1)],
        };
        let extra = "webhook-allowed-origin: *\r\n";
        let resp = format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\n{extra}\r\nok");
        if s.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn read_request(s: &mut Box<dyn Stream>) -> Option<Received> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Received {
        method,
        path,
        headers,
        body,
        at: std::time::SystemTime::now(),
    })
}
