//! Prometheus metrics, written atomically for node_exporter's textfile collector
//! (`--metrics-textfile`) and optionally served on `/metrics` (`--metrics-listen`).
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `nthd_info{provider,version}` | gauge | always 1; the cloud watched |
//! | `nthd_notice{provider,kind}` | gauge | 1 while a notice of that kind is listed, else 0 |
//! | `nthd_notice_deadline_seconds{provider,kind}` | gauge | seconds until the platform acts (negative once past) |
//! | `nthd_termination_imminent{provider}` | gauge | 1 while a notice set to poweroff/reboot is listed (like Hollowtrees' `aws_instance_termination_imminent`) |
//! | `nthd_termination_in_seconds{provider}` | gauge | seconds until the earliest such deadline (like `aws_instance_termination_in`) |
//! | `nthd_actions_total{kind,action,result}` | counter | power actions attempted: result ok, error, dry_run, already_shutting_down |
//! | `nthd_imds_reads_total{source,outcome}` | counter | metadata reads: ok, unreachable, timeout, http_error, malformed, too_large, token_refused |
//! | `nthd_last_successful_poll_timestamp_seconds` | gauge | unix time of the last read that succeeded |

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::notice::{Cloud, NoticeKind, KINDS};
use crate::policy::{Planner, PowerAction};
use crate::provider::Observation;

#[derive(Debug, Clone, Default)]
pub struct MetricsOptions {
    pub textfile: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
}

#[derive(Debug, Default)]
pub struct Metrics {
    opts: MetricsOptions,
    provider: Option<Cloud>,
    notices: BTreeMap<NoticeKind, Option<f64>>,
    power_deadline: Option<f64>,
    power_imminent: bool,
    actions: BTreeMap<(NoticeKind, PowerAction, &'static str), u64>,
    reads: BTreeMap<(&'static str, &'static str), u64>,
    last_ok: Option<f64>,
    shared: Option<Arc<Mutex<String>>>,
    write_error: Option<String>,
    /// What the textfile holds now: when it was written and what, for deciding the next write.
    written: Option<(Instant, String)>,
}

/// How often the textfile is rewritten when only counters, timestamps and "seconds until"
/// gauges moved. Anything else (a notice, an action, a new series) is written at once.
pub const TEXTFILE_REFRESH: Duration = Duration::from_secs(10);

/// Series whose values move on every poll: rewriting the file for them alone waits for
/// [`TEXTFILE_REFRESH`].
const FAST_MOVING: [&str; 4] = [
    "nthd_imds_reads_total",
    "nthd_last_successful_poll_timestamp_seconds",
    "nthd_notice_deadline_seconds",
    "nthd_termination_in_seconds",
];

/// Whether the textfile must be rewritten now: the series changed, a value other than the fast
/// moving ones changed, or the last write is older than [`TEXTFILE_REFRESH`].
fn textfile_due(old: Option<&(Instant, String)>, new: &str) -> bool {
    let Some((at, old)) = old else {
        return true;
    };
    if old == new {
        return false;
    }
    if at.elapsed() >= TEXTFILE_REFRESH {
        return true;
    }
    let series = |t: &str| -> Vec<String> {
        t.lines()
            .map(|l| {
                if FAST_MOVING.iter().any(|m| l.starts_with(m)) {
                    l.rsplit_once(' ').map_or(l, |(k, _)| k).to_string()
                } else {
                    l.to_string()
                }
            })
            .collect()
    };
    series(old) != series(new)
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Escapes a label value per the exposition format.
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    pub fn new(opts: MetricsOptions) -> Metrics {
        let mut m = Metrics {
            opts,
            ..Metrics::default()
        };
        if let Some(addr) = m.opts.listen {
            let shared = Arc::new(Mutex::new(String::new()));
            m.shared = Some(shared.clone());
            tokio::spawn(serve(addr, shared));
        }
        m
    }

    pub fn set_provider(&mut self, c: Cloud) {
        self.provider = Some(c);
        self.flush();
    }

    pub fn observation(&mut self, obs: &Observation) {
        for s in &obs.fresh {
            *self.reads.entry((s, "ok")).or_default() += 1;
        }
        for e in &obs.errors {
            *self.reads.entry((e.source, e.error.outcome())).or_default() += 1;
        }
        if !obs.fresh.is_empty() {
            self.last_ok = Some(unix(SystemTime::now()));
        }
    }

    pub fn action(&mut self, kind: NoticeKind, action: PowerAction, result: &'static str) {
        *self.actions.entry((kind, action, result)).or_default() += 1;
        self.flush();
    }

    /// Takes the current notices from the planner and writes the metrics out.
    pub fn notices(&mut self, planner: &Planner, now: SystemTime) {
        self.notices.clear();
        self.power_deadline = None;
        self.power_imminent = false;
        let now_s = unix(now);
        for n in planner.current() {
            if n.status != crate::notice::NoticeStatus::Active {
                continue;
            }
            let left = n.deadline.map(|d| unix(d) - now_s);
            let e = self.notices.entry(n.kind).or_insert(left);
            if let (Some(a), Some(b)) = (*e, left) {
                *e = Some(a.min(b));
            }
            if planner.config().action(n.kind).is_power() {
                self.power_imminent = true;
                if let Some(l) = left {
                    self.power_deadline = Some(self.power_deadline.map_or(l, |p: f64| p.min(l)));
                }
            }
        }
        self.flush();
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let p = self.provider.map(|c| c.name()).unwrap_or("unknown");
        let mut o = String::new();
        let _ = writeln!(o, "# HELP nthd_info nthd build and the cloud it watches.");
        let _ = writeln!(o, "# TYPE nthd_info gauge");
        let _ = writeln!(
            o,
            "nthd_info{{provider=\"{p}\",version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        let _ = writeln!(
            o,
            "# HELP nthd_notice Whether a notice of this kind is listed now."
        );
        let _ = writeln!(o, "# TYPE nthd_notice gauge");
        for k in KINDS {
            let v = u8::from(self.notices.contains_key(&k.kind));
            let _ = writeln!(o, "nthd_notice{{provider=\"{p}\",kind=\"{}\"}} {v}", k.name);
        }
        let _ = writeln!(
            o,
            "# HELP nthd_notice_deadline_seconds Seconds until the platform acts on the notice."
        );
        let _ = writeln!(o, "# TYPE nthd_notice_deadline_seconds gauge");
        for (k, left) in &self.notices {
            if let Some(l) = left {
                let _ = writeln!(
                    o,
                    "nthd_notice_deadline_seconds{{provider=\"{p}\",kind=\"{}\"}} {l:.3}",
                    k.name()
                );
            }
        }
        let _ = writeln!(o, "# HELP nthd_termination_imminent Whether a notice set to poweroff or reboot is listed.");
        let _ = writeln!(o, "# TYPE nthd_termination_imminent gauge");
        let _ = writeln!(
            o,
            "nthd_termination_imminent{{provider=\"{p}\"}} {}",
            u8::from(self.power_imminent)
        );
        if let Some(l) = self.power_deadline {
            let _ = writeln!(
                o,
                "# HELP nthd_termination_in_seconds Seconds until the earliest such deadline."
            );
            let _ = writeln!(o, "# TYPE nthd_termination_in_seconds gauge");
            let _ = writeln!(o, "nthd_termination_in_seconds{{provider=\"{p}\"}} {l:.3}");
        }
        let _ = writeln!(
            o,
            "# HELP nthd_actions_total Power actions attempted, by result."
        );
        let _ = writeln!(o, "# TYPE nthd_actions_total counter");
        for ((k, a, r), n) in &self.actions {
            let _ = writeln!(
                o,
                "nthd_actions_total{{kind=\"{}\",action=\"{a}\",result=\"{r}\"}} {n}",
                k.name()
            );
        }
        let _ = writeln!(
            o,
            "# HELP nthd_imds_reads_total Metadata service reads, by source and outcome."
        );
        let _ = writeln!(o, "# TYPE nthd_imds_reads_total counter");
        for ((s, r), n) in &self.reads {
            let _ = writeln!(
                o,
                "nthd_imds_reads_total{{source=\"{}\",outcome=\"{r}\"}} {n}",
                esc(s)
            );
        }
        if let Some(t) = self.last_ok {
            let _ = writeln!(o, "# HELP nthd_last_successful_poll_timestamp_seconds Unix time of the last successful metadata read.");
            let _ = writeln!(
                o,
                "# TYPE nthd_last_successful_poll_timestamp_seconds gauge"
            );
            let _ = writeln!(o, "nthd_last_successful_poll_timestamp_seconds {t:.3}");
        }
        o
    }

    fn flush(&mut self) {
        if self.opts.textfile.is_none() && self.shared.is_none() {
            return;
        }
        let text = self.render();
        if let Some(path) = &self.opts.textfile {
            if !textfile_due(self.written.as_ref(), &text) {
                self.publish(text);
                return;
            }
            // 0644: node_exporter runs as another user. No fsync: a crash losing one write
            // of metrics is harmless, and this runs on the daemon's only thread.
            match crate::state::write_replace(path, text.as_bytes(), 0o644, false) {
                Ok(()) => {
                    self.write_error = None;
                    self.written = Some((Instant::now(), text.clone()));
                }
                Err(e) => {
                    let msg = format!(
                        "cannot write the metrics file {}: {e}; check the directory exists and \
                         is writable by user nthd (add it to ReadWritePaths= in a drop-in)",
                        path.display()
                    );
                    if self.write_error.as_deref() != Some(&msg) {
                        tracing::warn!("{msg}");
                    }
                    self.write_error = Some(msg);
                }
            }
        }
        self.publish(text);
    }

    /// Hands the text to the `/metrics` server, if there is one.
    fn publish(&self, text: String) {
        if let Some(s) = &self.shared {
            if let Ok(mut g) = s.lock() {
                *g = text;
            }
        }
    }

    /// Writes the textfile now if it is behind (at a clean stop).
    pub fn flush_now(&mut self) {
        self.written = self
            .written
            .take()
            .map(|(_, t)| (Instant::now() - TEXTFILE_REFRESH, t));
        self.flush();
    }
}

/// A minimal `/metrics` endpoint. One short response per connection; anything but
/// `GET /metrics` gets 404.
async fn serve(addr: SocketAddr, shared: Arc<Mutex<String>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(
                "cannot listen on {addr} for /metrics: {e}; the textfile and the daemon keep working"
            );
            return;
        }
    };
    tracing::info!("serving metrics on http://{addr}/metrics");
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let n =
                match tokio::time::timeout(std::time::Duration::from_secs(5), sock.read(&mut buf))
                    .await
                {
                    Ok(Ok(n)) => n,
                    _ => return,
                };
            let head = String::from_utf8_lossy(&buf[..n]);
            let resp = if head.starts_with("GET /metrics ") || head.starts_with("GET /metrics?") {
                let body = shared.lock().map(|g| g.clone()).unwrap_or_default();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_string()
            };
            let _ = sock.write_all(resp.as_bytes()).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_textfile_is_0644_and_rewritten_only_when_it_matters() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nthd.prom");
        // The unit's UMask=0077.
        let old_umask = unsafe { libc::umask(0o077) };
        let mut m = Metrics::new(MetricsOptions {
            textfile: Some(file.clone()),
            listen: None,
        });
        m.set_provider(Cloud::Aws);
        unsafe { libc::umask(old_umask) };
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o644);
        let inode = meta.ino();

        // A first read adds series: written at once. Then only counters move: not rewritten.
        let obs = |ok: bool| Observation {
            notices: vec![],
            fresh: if ok {
                vec!["aws/spot/instance-action"]
            } else {
                vec![]
            },
            errors: vec![],
        };
        m.observation(&obs(true));
        let planner = Planner::new(crate::policy::PolicyConfig::default());
        m.notices(&planner, SystemTime::now());
        let inode2 = std::fs::metadata(&file).unwrap().ino();
        assert_ne!(inode, inode2, "new series are written at once");
        for _ in 0..20 {
            m.observation(&obs(true));
            m.notices(&planner, SystemTime::now());
        }
        assert_eq!(std::fs::metadata(&file).unwrap().ino(), inode2);
        assert!(std::fs::read_to_string(&file)
            .unwrap()
            .contains("outcome=\"ok\"} 1\n"));

        // An action is written at once, with the counters as they are then.
        m.action(NoticeKind::SpotTerminate, PowerAction::PowerOff, "ok");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("result=\"ok\"} 1"), "{text}");
        assert!(text.contains("outcome=\"ok\"} 21\n"), "{text}");

        // At a clean stop whatever is behind is written.
        m.observation(&obs(true));
        m.notices(&planner, SystemTime::now());
        assert!(!std::fs::read_to_string(&file).unwrap().contains("} 22\n"));
        m.flush_now();
        assert!(std::fs::read_to_string(&file)
            .unwrap()
            .contains("outcome=\"ok\"} 22\n"));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
