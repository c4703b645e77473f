//! A tiny HTTP/1.1 client that reports exactly what came over the wire, for checking the mock's
//! byte-level behaviour (reqwest would hide most of it).
#![allow(dead_code)]

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Debug)]
pub(crate) struct HttpResp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResp {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text()))
    }
}

pub(crate) struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

pub(crate) fn build_request(
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\nHost: 169.254.169.254\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "PUT" || method == "POST" {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

impl Client {
    pub(crate) async fn connect(addr: SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(addr).await.expect("connect to mock"),
            buf: Vec::new(),
        }
    }

    pub(crate) async fn send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<HttpResp> {
        self.stream
            .write_all(&build_request(method, target, headers, body))
            .await?;
        self.read_response(method == "HEAD").await
    }

    async fn fill(&mut self) -> io::Result<()> {
        let mut tmp = vec![0u8; 65536];
        let n = self.stream.read(&mut tmp).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            ));
        }
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(())
    }

    /// Read the status line and headers only.
    pub(crate) async fn read_head(&mut self) -> io::Result<(u16, Vec<(String, String)>)> {
        let end = loop {
            if let Some(p) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            self.fill().await?;
        };
        let head = String::from_utf8(self.buf[..end - 4].to_vec())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        self.buf.drain(..end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, status_line.to_string()))?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect();
        Ok((status, headers))
    }

    pub(crate) async fn read_response(&mut self, head_only: bool) -> io::Result<HttpResp> {
        let (status, headers) = self.read_head().await?;
        let len: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("Content-Length"))
            .map(|(_, v)| v.parse().expect("numeric Content-Length"))
            .expect("mock always sends Content-Length");
        let len = if head_only { 0 } else { len };
        while self.buf.len() < len {
            self.fill().await?;
        }
        let body = self.buf.drain(..len).collect();
        Ok(HttpResp {
            status,
            headers,
            body,
        })
    }

    /// Everything until EOF (plus what was already buffered).
    pub(crate) async fn read_to_eof(&mut self) -> io::Result<Vec<u8>> {
        let mut out = std::mem::take(&mut self.buf);
        self.stream.read_to_end(&mut out).await?;
        Ok(out)
    }

    /// Exactly `n` body bytes (after `read_head`).
    pub(crate) async fn read_response_body_raw(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            self.fill().await?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Bytes already received but not consumed.
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// One request on a fresh connection.
pub(crate) async fn req(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResp {
    let mut c = Client::connect(addr).await;
    tokio::time::timeout(
        Duration::from_secs(30),
        c.send(method, target, headers, body),
    )
    .await
    .expect("request timed out")
    .expect("request failed")
}

pub(crate) async fn get(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> HttpResp {
    req(addr, "GET", target, headers, b"").await
}

/// Fetch a fresh AWS token.
pub(crate) async fn aws_token(addr: SocketAddr, ttl: u32) -> String {
    let r = req(
        addr,
        "PUT",
        "/latest/api/token",
        &[("X-aws-ec2-metadata-token-ttl-seconds", &ttl.to_string())],
        b"",
    )
    .await;
    assert_eq!(r.status, 200, "token PUT: {}", r.text());
    r.text()
}
