//! A Varlink client: one call at a time on a kept `AF_UNIX` connection.
//!
//! Varlink (<https://varlink.org>) is JSON over a stream socket, each message ended by one NUL
//! byte. A call is `{"method":"iface.Method","parameters":{…}}`; the answer is
//! `{"parameters":{…}}` or `{"error":"iface.Error","parameters":{…}}`. nthd needs exactly that:
//! one method on one socket (systemd-imdsd's `io.systemd.InstanceMetadata`), no `more`, no
//! `oneway`, no file descriptors, no upgrade. Hand-written rather than a crate because the whole
//! protocol nthd uses is the ~40 lines of [`decode`] and [`Connection::call`] (zlink, the
//! maintained crate, brings a proc-macro stack and still changes its API between minor
//! versions; `varlink` is blocking); docs/architecture.md says so.
//!
//! Depends on nothing else in nthd.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// The largest message nthd reads. systemd-imdsd caps its data at 4 MiB before base64.
pub(crate) const MAX_MESSAGE: usize = 8 * 1024 * 1024;

/// Why a call got no answer, or an answer that is not Varlink.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VarlinkError {
    /// The socket could not be connected to.
    #[error("cannot connect to {}: {source}", socket.display())]
    Connect {
        /// The socket's path.
        socket: PathBuf,
        /// What connect() said.
        source: std::io::Error,
    },
    /// The connection broke or closed before the answer was complete.
    #[error("{} closed the connection or failed while {method} was pending: {reason}", socket.display())]
    Io {
        /// The socket's path.
        socket: PathBuf,
        /// The method called.
        method: String,
        /// What went wrong.
        reason: String,
    },
    /// No answer within the timeout.
    #[error("no answer from {} to {method} within {timeout:?}", socket.display())]
    Timeout {
        /// The socket's path.
        socket: PathBuf,
        /// The method called.
        method: String,
        /// The timeout that ran out.
        timeout: Duration,
    },
    /// The answer is not a Varlink message.
    #[error("{} answered {method} with something that is not Varlink: {reason}", socket.display())]
    Protocol {
        /// The socket's path.
        socket: PathBuf,
        /// The method called.
        method: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// One answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The method's out-parameters.
    Reply(Map<String, Value>),
    /// A Varlink error: its qualified name and parameters (often empty).
    Error {
        /// e.g. `io.systemd.InstanceMetadata.KeyNotFound`.
        name: String,
        /// The error's parameters.
        parameters: Map<String, Value>,
    },
}

/// Parses one message (without its NUL). Unknown fields are ignored, as the protocol asks; a
/// missing `parameters` is an empty map. Anything else is a description of what is wrong.
pub fn decode(message: &[u8]) -> Result<Answer, String> {
    let v: Value = serde_json::from_slice(message).map_err(|e| format!("not JSON ({e})"))?;
    let Value::Object(mut obj) = v else {
        return Err("not a JSON object".into());
    };
    let parameters = match obj.remove("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err("\"parameters\" is not an object".into()),
    };
    match obj.remove("error") {
        None | Some(Value::Null) => {}
        Some(Value::String(name)) if !name.is_empty() => {
            return Ok(Answer::Error { name, parameters })
        }
        Some(_) => return Err("\"error\" is not a non-empty string".into()),
    }
    if obj.get("continues").and_then(Value::as_bool) == Some(true) {
        return Err("a streamed answer (\"continues\") to a call that did not ask for one".into());
    }
    Ok(Answer::Reply(parameters))
}

/// A call as sent: the JSON and its NUL.
fn encode(method: &str, parameters: &Map<String, Value>) -> Vec<u8> {
    let call = serde_json::json!({ "method": method, "parameters": parameters });
    let mut out = serde_json::to_vec(&call).unwrap_or_default();
    out.push(0);
    out
}

/// A connection to one Varlink service, kept between calls. A call blocks the calling thread
/// until its answer, within the call's timeout.
#[derive(Debug)]
pub(crate) struct Connection {
    socket: PathBuf,
    stream: BufReader<UnixStream>,
}

impl Connection {
    /// Connects to the service's socket.
    pub(crate) fn connect(socket: &Path) -> Result<Connection, VarlinkError> {
        let stream = UnixStream::connect(socket).map_err(|source| VarlinkError::Connect {
            socket: socket.to_path_buf(),
            source,
        })?;
        Ok(Connection {
            socket: socket.to_path_buf(),
            stream: BufReader::new(stream),
        })
    }

    /// Whether nothing is waiting to be read: no bytes after the last answer's NUL, in the
    /// buffer or on the socket, and not the end of the stream. Looked at without waiting.
    pub(crate) fn is_idle(&self) -> bool {
        use rustix::net::{recv, RecvFlags};
        let mut byte = [0u8; 1];
        self.stream.buffer().is_empty()
            && matches!(
                recv(
                    self.stream.get_ref(),
                    &mut byte,
                    RecvFlags::PEEK | RecvFlags::DONTWAIT
                ),
                Err(rustix::io::Errno::AGAIN)
            )
    }

    /// Calls `method` and reads its one answer within `timeout`. After an error the connection
    /// is in an unknown state: drop it.
    pub(crate) fn call(
        &mut self,
        method: &str,
        parameters: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<Answer, VarlinkError> {
        let deadline = Instant::now() + timeout;
        let message = self.exchange(&encode(method, parameters), deadline);
        let failed = |e: std::io::Error| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => VarlinkError::Timeout {
                socket: self.socket.clone(),
                method: method.to_string(),
                timeout,
            },
            _ => VarlinkError::Io {
                socket: self.socket.clone(),
                method: method.to_string(),
                reason: e.to_string(),
            },
        };
        let message = message.map_err(failed)?;
        decode(&message).map_err(|reason| VarlinkError::Protocol {
            socket: self.socket.clone(),
            method: method.to_string(),
            reason,
        })
    }

    /// Writes `call` and reads the answer up to its NUL (not included), by `deadline`.
    fn exchange(&mut self, call: &[u8], deadline: Instant) -> std::io::Result<Vec<u8>> {
        let left = || {
            deadline
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| std::io::Error::from(ErrorKind::TimedOut))
        };
        self.stream.get_ref().set_write_timeout(Some(left()?))?;
        self.stream.get_mut().write_all(call)?;
        let mut message = Vec::new();
        loop {
            self.stream.get_ref().set_read_timeout(Some(left()?))?;
            let chunk = self.stream.fill_buf()?;
            if chunk.is_empty() {
                let why = "end of stream before the answer was complete";
                return Err(std::io::Error::new(ErrorKind::UnexpectedEof, why));
            }
            let (take, done) = match chunk.iter().position(|&b| b == 0) {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            message.extend_from_slice(&chunk[..take]);
            self.stream.consume(take + usize::from(done));
            if message.len() > MAX_MESSAGE {
                let why = format!("an answer longer than {MAX_MESSAGE} bytes");
                return Err(std::io::Error::new(ErrorKind::InvalidData, why));
            }
            if done {
                return Ok(message);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_errors_and_garbage() {
        let r = decode(br#"{"parameters":{"data":"eA==","interface":2},"extra":1}"#).unwrap();
        let Answer::Reply(p) = r else { panic!("{r:?}") };
        assert_eq!(p["data"], "eA==");
        let e = decode(br#"{"error":"io.systemd.InstanceMetadata.KeyNotFound"}"#).unwrap();
        assert_eq!(
            e,
            Answer::Error {
                name: "io.systemd.InstanceMetadata.KeyNotFound".into(),
                parameters: Map::new()
            }
        );
        assert_eq!(decode(b"{}").unwrap(), Answer::Reply(Map::new()));
        for bad in [
            &b"[]"[..],
            b"nul",
            br#"{"error":5}"#,
            br#"{"parameters":[]}"#,
        ] {
            assert!(decode(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(decode(br#"{"continues":true,"parameters":{}}"#).is_err());
    }

    #[test]
    fn a_call_is_json_and_one_nul() {
        let mut p = Map::new();
        p.insert("key".into(), "/x".into());
        let out = encode("a.B", &p);
        assert_eq!(out.last(), Some(&0));
        assert_eq!(out.iter().filter(|b| **b == 0).count(), 1);
        let v: Value = serde_json::from_slice(&out[..out.len() - 1]).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"method": "a.B", "parameters": {"key": "/x"}})
        );
    }

    /// A server on a socket's far end: reads one call, writes `answer` raw.
    fn serve_once(
        answer: Vec<u8>,
    ) -> (tempfile::TempDir, PathBuf, std::thread::JoinHandle<Vec<u8>>) {
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let task = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut call = vec![0u8; 4096];
            let n = s.read(&mut call).unwrap();
            call.truncate(n);
            s.write_all(&answer).unwrap();
            call
        });
        (dir, path, task)
    }

    #[test]
    fn one_call_over_a_socket() {
        let (_d, path, task) = serve_once(b"{\"parameters\":{\"ok\":true}}\0".to_vec());
        let mut c = Connection::connect(&path).unwrap();
        let a = c.call("x.Y", &Map::new(), Duration::from_secs(5)).unwrap();
        assert_eq!(
            a,
            Answer::Reply(serde_json::from_str(r#"{"ok":true}"#).unwrap())
        );
        assert!(task.join().unwrap().ends_with(b"}\0"));
    }

    #[test]
    fn a_cut_answer_and_a_silent_server_are_errors() {
        let (_d, path, _t) = serve_once(b"{\"parameters\":{}".to_vec());
        let mut c = Connection::connect(&path).unwrap();
        let e = c
            .call("x.Y", &Map::new(), Duration::from_secs(5))
            .unwrap_err();
        assert!(e.to_string().contains("end of stream"), "{e}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut c = Connection::connect(&path).unwrap();
        let e = c
            .call("x.Y", &Map::new(), Duration::from_millis(50))
            .unwrap_err();
        assert!(matches!(e, VarlinkError::Timeout { .. }), "{e}");
        let e = Connection::connect(&dir.path().join("none")).unwrap_err();
        assert!(e.to_string().contains("none"), "{e}");
    }

    #[test]
    fn a_connection_with_bytes_after_the_answer_is_not_idle() {
        let answer = b"{\"parameters\":{}}\0{\"parameters\":{\"stray\":1}}\0".to_vec();
        let (_d, path, task) = serve_once(answer);
        let mut c = Connection::connect(&path).unwrap();
        assert!(c.is_idle());
        let a = c.call("x.Y", &Map::new(), Duration::from_secs(5));
        assert_eq!(a.unwrap(), Answer::Reply(Map::new()));
        task.join().unwrap();
        assert!(!c.is_idle(), "the stray answer is still there");

        // Bytes that come later, unasked, and the end of the stream are seen the same way.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let c = Connection::connect(&path).unwrap();
        let (mut s, _) = listener.accept().unwrap();
        assert!(c.is_idle());
        s.write_all(b"{}\0").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!c.is_idle());
        let c = Connection::connect(&path).unwrap();
        drop(listener.accept().unwrap());
        std::thread::sleep(Duration::from_millis(20));
        assert!(!c.is_idle(), "closed by the service");
    }
}
