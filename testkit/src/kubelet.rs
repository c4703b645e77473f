//! A stand-in for kubelet's Graceful Node Shutdown manager, as seen from logind.
//!
//! Like kubelet it takes a `delay` inhibitor on `shutdown` with kubelet's exact who/why strings,
//! holds the returned fd, and on `PrepareForShutdown(true)` "drains" and then closes the fd to
//! release the lock. Unlike kubelet it subscribes to the signal *before* taking the lock, so a
//! signal sent right after the lock is taken cannot be missed.
//!
//! Every step is appended to a JSON-lines record file and fsynced, so a test can read the
//! timeline even if the machine is powered off right after.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::logind::{login1_proxy, Login1ManagerProxy};
use crate::now_ms;

/// kubelet's inhibitor "who".
pub const WHO: &str = "kubelet";
/// kubelet's inhibitor "why".
pub const WHY: &str = "Kubelet needs time to handle node shutdown";

/// Options of [`run`].
#[derive(Clone, Debug)]
pub struct KubeletOptions {
    /// JSON-lines record file (appended to, created if missing).
    pub record: PathBuf,
    /// How long to "drain" after `PrepareForShutdown(true)`.
    pub drain: Duration,
    /// Interval of `draining` progress records.
    pub progress_every: Duration,
    /// Bus address; `None` means the system bus (`DBUS_SYSTEM_BUS_ADDRESS` or the default
    /// socket).
    pub address: Option<String>,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        KubeletOptions {
            record: PathBuf::from("kubelet-record.jsonl"),
            drain: Duration::from_secs(5),
            progress_every: Duration::from_secs(1),
            address: None,
        }
    }
}

/// Appends fsynced JSON lines.
pub struct Recorder {
    file: File,
}

impl Recorder {
    /// Open `path` for appending.
    pub fn open(path: &std::path::Path) -> Result<Recorder, String> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open record file {}: {e}", path.display()))?;
        Ok(Recorder { file })
    }

    /// Append `{"event": event, "t_ms": now, ...fields}` and fsync.
    pub fn event(&mut self, event: &str, fields: Value) -> Result<(), String> {
        let mut obj = serde_json::Map::new();
        obj.insert("event".into(), json!(event));
        obj.insert("t_ms".into(), json!(now_ms()));
        if let Value::Object(m) = fields {
            obj.extend(m);
        }
        let mut line = Value::Object(obj).to_string();
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_all())
            .map_err(|e| format!("cannot write record file: {e}"))
    }
}

async fn take_lock(
    proxy: &Login1ManagerProxy<'_>,
    rec: &mut Recorder,
) -> Result<zbus::OwnedFd, String> {
    let fd = proxy
        .inhibit("shutdown", WHO, WHY, "delay")
        .await
        .map_err(|e| format!("Inhibit(shutdown, {WHO}, delay) failed: {e}"))?;
    let delay_max = proxy.inhibit_delay_max_usec().await.ok();
    rec.event(
        "locked",
        json!({ "pid": std::process::id(), "inhibit_delay_max_usec": delay_max }),
    )?;
    Ok(fd)
}

/// Run until killed. Returns an error (for a non-zero exit) if the bus cannot be reached, the
/// lock cannot be taken, the record file cannot be written, or the bus connection is lost.
pub async fn run(opts: KubeletOptions) -> Result<(), String> {
    let mut rec = Recorder::open(&opts.record)?;
    let conn = match &opts.address {
        Some(a) => zbus::connection::Builder::address(a.as_str()).build().await,
        None => zbus::Connection::system().await,
    }
    .map_err(|e| format!("cannot connect to the system bus: {e}"))?;
    let proxy = login1_proxy(&conn)
        .await
        .map_err(|e| format!("cannot create login1 proxy: {e}"))?;
    // Match rule first, lock second: no PrepareForShutdown can slip between the two.
    let mut signals = proxy
        .receive_prepare_for_shutdown()
        .await
        .map_err(|e| format!("cannot subscribe to PrepareForShutdown: {e}"))?;
    let mut lock = Some(take_lock(&proxy, &mut rec).await?);

    while let Some(sig) = signals.next().await {
        let start = match sig.args() {
            Ok(a) => *a.start(),
            Err(e) => {
                eprintln!("nthd-fake-kubelet: malformed PrepareForShutdown: {e}");
                continue;
            }
        };
        if start {
            rec.event("prepare", json!({ "locked": lock.is_some() }))?;
            let Some(fd) = lock.take() else {
                continue;
            };
            let began = tokio::time::Instant::now();
            let end = began + opts.drain;
            loop {
                let now = tokio::time::Instant::now();
                if now >= end {
                    break;
                }
                let step = opts.progress_every.max(Duration::from_millis(1));
                tokio::time::sleep((end - now).min(step)).await;
                let now = tokio::time::Instant::now();
                if now < end {
                    rec.event(
                        "draining",
                        json!({
                            "elapsed_ms": (now - began).as_millis() as u64,
                            "remaining_ms": (end - now).as_millis() as u64,
                        }),
                    )?;
                }
            }
            rec.event(
                "drained",
                json!({ "elapsed_ms": began.elapsed().as_millis() as u64 }),
            )?;
            drop(fd);
            rec.event("released", json!({}))?;
        } else {
            rec.event("prepare_cancelled", json!({ "locked": lock.is_some() }))?;
            if lock.is_none() {
                lock = Some(take_lock(&proxy, &mut rec).await?);
            }
        }
    }
    Err("lost the bus connection (PrepareForShutdown stream ended)".into())
}
