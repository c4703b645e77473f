//! Prometheus metrics, written atomically for node_exporter's textfile collector
//! (`--metrics-textfile`) and optionally served on `/metrics` (`--metrics-listen`).
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `nthd_info{provider,version,instance_type,zone,lifecycle}` | gauge | always 1; the cloud watched and the capacity pool (empty until the metadata service describes the machine) |
//! | `nthd_notice{provider,kind}` | gauge | 1 while a notice of that kind is listed, else 0 |
//! | `nthd_notice_deadline_seconds{provider,kind}` | gauge | seconds until the platform acts (negative once past) |
//! | `nthd_termination_imminent{provider}` | gauge | 1 while a notice set to poweroff/reboot is listed (like Hollowtrees' `aws_instance_termination_imminent`) |
//! | `nthd_termination_in_seconds{provider}` | gauge | seconds until the earliest such deadline (like `aws_instance_termination_in`) |
//! | `nthd_termination_deadline_timestamp_seconds{provider}` | gauge | unix time of that deadline |
//! | `nthd_actions_total{kind,action,result}` | counter | power actions attempted: result ok, error, dry_run, already_shutting_down |
//! | `nthd_imds_reads_total{source,outcome}` | counter | metadata reads: ok, unreachable, timeout, blocked, http_error, malformed, too_large, token_refused |
//! | `nthd_last_successful_poll_timestamp_seconds` | gauge | unix time of the last read that succeeded |

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prometheus::core::Collector;
use prometheus::{GaugeVec, IntCounterVec, Opts, Registry, TextEncoder};

use crate::notice::{Cloud, NoticeKind, NoticeStatus, PerExtra, KINDS};
use crate::policy::{Planner, PowerAction};
use crate::provider::Observation;

mod server;
mod textfile;

/// Where the metrics go: a textfile for node_exporter, a `/metrics` listener, both or neither.
#[derive(Debug, Clone, Default)]
pub struct MetricsOptions {
    /// The textfile to keep written (`--metrics-textfile`).
    pub textfile: Option<PathBuf>,
    /// The address to serve `/metrics` on (`--metrics-listen`), as given: a bad one disables
    /// only the server.
    pub listen: Option<String>,
}

/// The series, held in a `prometheus` registry and rendered with its text encoder (format
/// 0.0.4, which node_exporter's textfile collector and `promtool check metrics` read; see the
/// docs/architecture.md (`metrics.rs`) for why not OpenMetrics).
struct Series {
    registry: Registry,
    info: GaugeVec,
    notice: GaugeVec,
    notice_deadline: GaugeVec,
    imminent: GaugeVec,
    termination_in: GaugeVec,
    termination_deadline: GaugeVec,
    actions: IntCounterVec,
    reads: IntCounterVec,
    last_ok: GaugeVec,
    health: Health,
    drain: Drain,
}

/// The last shutdown's drain report.
struct Drain {
    seconds: GaugeVec,
    budget: GaugeVec,
    outcome: GaugeVec,
    pods_left: GaugeVec,
}

impl Drain {
    fn new(r: &Registry) -> Drain {
        Drain {
            seconds: gauge(
                r,
                "nthd_drain_seconds",
                "Seconds the last shutdown's drain held its delay locks (until released, or the budget).",
                &[],
            ),
            budget: gauge(
                r,
                "nthd_drain_budget_seconds",
                "logind's InhibitDelayMaxUSec at the last shutdown's drain, in seconds.",
                &[],
            ),
            outcome: gauge(
                r,
                "nthd_drain_outcome",
                "1 for how the last shutdown's drain ended (released or budget_exhausted).",
                &["outcome"],
            ),
            pods_left: gauge(
                r,
                "nthd_drain_pods_left",
                "Pods still running when the last drain ended (-1 when nthd cannot tell).",
                &[],
            ),
        }
    }
}

/// What nthd can vouch for: how long since a metadata read succeeded, whether it is blind, and
/// which extras are off.
struct Health {
    read_age: GaugeVec,
    blind: GaugeVec,
    extra_disabled: GaugeVec,
    degraded: GaugeVec,
}

impl Health {
    fn new(r: &Registry) -> Health {
        Health {
            read_age: gauge(
                r,
                "nthd_metadata_read_age_seconds",
                "Seconds since the last successful metadata read, as of the last write.",
                &[],
            ),
            blind: gauge(
                r,
                "nthd_metadata_blind",
                "1 while no metadata read succeeded within the blind bound: nthd cannot see notices.",
                &[],
            ),
            extra_disabled: gauge(
                r,
                "nthd_extra_disabled",
                "1 while an optional feature (webhooks, metrics_listen, metrics_textfile) is disabled by a setup error.",
                &["extra"],
            ),
            degraded: gauge(
                r,
                "nthd_settings_degraded",
                "Settings that could not be used as given and fell back at start (bad values, skipped lines, an unreadable named file).",
                &[],
            ),
        }
    }
}

/// Registers a family and hands it back. The names are literals, so a failure is a bug every
/// test hits.
fn register<C: Collector + Clone + 'static>(r: &Registry, c: prometheus::Result<C>) -> C {
    let c = c.expect("a valid metric name");
    r.register(Box::new(c.clone()))
        .expect("each name registered once");
    c
}

fn gauge(r: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    register(r, GaugeVec::new(Opts::new(name, help), labels))
}

fn counter(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(r, IntCounterVec::new(Opts::new(name, help), labels))
}

impl Series {
    fn new() -> Series {
        let r = Registry::new();
        let (p, pk) = (&["provider"][..], &["provider", "kind"][..]);
        Series {
            info: gauge(
                &r,
                "nthd_info",
                "nthd build, the cloud it watches and the machine's capacity pool.",
                &["provider", "version", "instance_type", "zone", "lifecycle"],
            ),
            notice: gauge(
                &r,
                "nthd_notice",
                "Whether a notice of this kind is listed now.",
                pk,
            ),
            notice_deadline: gauge(
                &r,
                "nthd_notice_deadline_seconds",
                "Seconds until the platform acts on the notice (negative once past).",
                pk,
            ),
            imminent: gauge(
                &r,
                "nthd_termination_imminent",
                "Whether a notice set to poweroff or reboot is listed.",
                p,
            ),
            termination_in: gauge(
                &r,
                "nthd_termination_in_seconds",
                "Seconds until the earliest such deadline, as of the last write.",
                p,
            ),
            termination_deadline: gauge(
                &r,
                "nthd_termination_deadline_timestamp_seconds",
                "Unix time of the earliest deadline of a notice set to poweroff or reboot.",
                p,
            ),
            last_ok: gauge(
                &r,
                "nthd_last_successful_poll_timestamp_seconds",
                "Unix time of the last successful metadata read.",
                &[],
            ),
            health: Health::new(&r),
            drain: Drain::new(&r),
            actions: counter(
                &r,
                "nthd_actions_total",
                "Power actions attempted, by result.",
                &["kind", "action", "result"],
            ),
            reads: counter(
                &r,
                "nthd_imds_reads_total",
                "Metadata service reads, by source and outcome.",
                &["source", "outcome"],
            ),
            registry: r,
        }
    }
}

/// The daemon's metrics: updated from the loop, written to the textfile when it matters and
/// handed to the `/metrics` server.
pub(crate) struct Metrics {
    opts: MetricsOptions,
    provider: &'static str,
    /// `nthd_info`'s capacity-pool labels: instance type, zone, lifecycle ("" while unknown).
    pool: [String; 3],
    series: Series,
    shared: Option<Arc<Mutex<String>>>,
    write_error: Option<String>,
    /// The thread that writes the textfile, when there is one.
    textfile: Option<textfile::Textfile>,
    /// Why the `/metrics` server is not running, when it was asked for.
    listen_error: Option<String>,
    /// What the textfile holds now: when it was written and what, for deciding the next write.
    written: Option<(Instant, String)>,
}

/// How often the textfile is rewritten when only counters, timestamps and "seconds until"
/// gauges moved. Anything else (a notice, an action, a new series) is written at once.
pub(crate) const TEXTFILE_REFRESH: Duration = Duration::from_secs(10);

/// Series whose values move on every poll: rewriting the file for them alone waits for
/// [`TEXTFILE_REFRESH`].
const FAST_MOVING: [&str; 5] = [
    "nthd_imds_reads_total",
    "nthd_last_successful_poll_timestamp_seconds",
    "nthd_metadata_read_age_seconds",
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

/// `--metrics-listen`: an `IP:PORT` socket address.
fn parse_listen(raw: &str) -> Result<SocketAddr, String> {
    raw.trim().parse().map_err(|_| {
        format!(
            "NTHD_METRICS_LISTEN={:?} is not an IP:PORT address (e.g. 127.0.0.1:9877 or \
             [::1]:9877); the /metrics server is off until it is fixed",
            raw.chars().take(64).collect::<String>()
        )
    })
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What the planner's active notices say, reduced to what the series show.
#[derive(Default)]
struct NoticeView {
    /// Per kind listed: the earliest deadline, if any notice of the kind has one.
    kinds: Vec<(NoticeKind, Option<SystemTime>)>,
    imminent: bool,
    power_deadline: Option<SystemTime>,
}

impl NoticeView {
    fn of(planner: &Planner) -> NoticeView {
        let mut v = NoticeView::default();
        let earliest = |a: Option<SystemTime>, b: Option<SystemTime>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for n in planner.current() {
            if n.status != NoticeStatus::Active {
                continue;
            }
            match v.kinds.iter_mut().find(|(k, _)| *k == n.kind) {
                Some((_, d)) => *d = earliest(*d, n.deadline),
                None => v.kinds.push((n.kind, n.deadline)),
            }
            if planner.config().action(n.kind).is_power() {
                v.imminent = true;
                v.power_deadline = earliest(v.power_deadline, n.deadline);
            }
        }
        v
    }
}

impl Metrics {
    /// Starts the `/metrics` server when asked for; must run inside the daemon's runtime then.
    pub(crate) fn new(opts: MetricsOptions) -> Metrics {
        let mut m = Metrics {
            opts,
            provider: "unknown",
            pool: Default::default(),
            series: Series::new(),
            shared: None,
            write_error: None,
            textfile: None,
            listen_error: None,
            written: None,
        };
        m.textfile = m.opts.textfile.clone().map(textfile::Textfile::new);
        m.set_series_for_provider();
        if let Some(raw) = m.opts.listen.clone() {
            match parse_listen(&raw).and_then(server::bind) {
                Ok(listener) => {
                    // Served from the first connection on, before the first poll.
                    let shared = Arc::new(Mutex::new(m.render()));
                    m.shared = Some(shared.clone());
                    tokio::spawn(server::serve(listener, shared));
                }
                Err(e) => m.listen_error = Some(e),
            }
        }
        m
    }

    /// Why the `/metrics` server is off although asked for, and why the textfile is not being
    /// written: each disables only that extra.
    pub(crate) fn problems(&self) -> (Option<&str>, Option<&str>) {
        (self.listen_error.as_deref(), self.write_error.as_deref())
    }

    /// Whether the metadata service is unread for too long (`nthd_metadata_blind`), and for how
    /// long (`nthd_metadata_read_age_seconds`); and which extras are disabled.
    pub(crate) fn health(
        &mut self,
        blind: bool,
        read_age: Option<Duration>,
        disabled: &PerExtra<bool>,
    ) {
        if !self.has_reader() {
            return;
        }
        let s = &self.series.health;
        s.blind
            .with_label_values(&[] as &[&str])
            .set(if blind { 1.0 } else { 0.0 });
        if let Some(a) = read_age {
            s.read_age
                .with_label_values(&[] as &[&str])
                .set(a.as_secs_f64().round());
        }
        for (extra, off) in disabled.iter() {
            s.extra_disabled
                .with_label_values(&[extra.name()])
                .set(if *off { 1.0 } else { 0.0 });
        }
    }

    /// How many settings fell back at start (`nthd_settings_degraded`).
    pub(crate) fn set_degraded(&mut self, n: usize) {
        if !self.has_reader() {
            return;
        }
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        self.series
            .health
            .degraded
            .with_label_values(&[] as &[&str])
            .set(f64::from(n));
        self.flush();
    }

    /// The cloud is known (detected or configured): the series carry its name from now on.
    pub(crate) fn set_provider(&mut self, c: Cloud) {
        self.provider = c.name();
        self.set_series_for_provider();
        self.flush();
    }

    /// The metadata service described the machine: `nthd_info` carries its capacity pool.
    pub(crate) fn set_identity(&mut self, id: &crate::notice::Identity) {
        let v = |o: &Option<String>| o.clone().unwrap_or_default();
        self.pool = [
            v(&id.instance_type),
            v(&id.zone),
            id.lifecycle
                .map(|l| l.name().to_string())
                .unwrap_or_default(),
        ];
        self.set_info();
        self.flush();
    }

    fn set_info(&self) {
        let s = &self.series;
        s.info.reset();
        let [t, z, l] = &self.pool;
        s.info
            .with_label_values(&[self.provider, env!("CARGO_PKG_VERSION"), t, z, l])
            .set(1.0);
    }

    fn set_series_for_provider(&mut self) {
        self.set_info();
        let s = &self.series;
        s.notice.reset();
        for k in KINDS {
            s.notice
                .with_label_values(&[self.provider, k.name])
                .set(0.0);
        }
        s.imminent.reset();
        s.imminent.with_label_values(&[self.provider]).set(0.0);
    }

    /// Whether anything reads the metrics: a textfile or the `/metrics` server. Without either,
    /// the series are not kept up to date at all; the registry's label lookups on every poll
    /// would be work for nothing.
    fn has_reader(&self) -> bool {
        self.opts.textfile.is_some() || self.shared.is_some()
    }

    /// Counts reads by source and outcome: each source in `obs.fresh` read successfully `n`
    /// times, the last at `at`, and each failure in `obs.errors` once. The one count of reads,
    /// whether the metadata reader sent them or kept them (`daemon/reader.rs`).
    pub(crate) fn reads(&mut self, obs: &Observation, n: u64, at: SystemTime) {
        if !self.has_reader() {
            return;
        }
        for s in &obs.fresh {
            self.series
                .reads
                .with_label_values(&[s.as_str(), "ok"])
                .inc_by(n);
        }
        for e in &obs.errors {
            self.series
                .reads
                .with_label_values(&[e.source.as_str(), e.error.outcome()])
                .inc();
        }
        if !obs.fresh.is_empty() {
            self.series
                .last_ok
                .with_label_values(&[] as &[&str])
                .set(unix(at));
        }
    }

    /// Counts a power action with its result, and writes at once.
    pub(crate) fn action(&mut self, kind: NoticeKind, action: PowerAction, result: &'static str) {
        if !self.has_reader() {
            return;
        }
        self.series
            .actions
            .with_label_values(&[kind.name(), action.name(), result])
            .inc();
        self.flush();
    }

    /// The drain report, written out at once: it must land before nthd releases its lock and
    /// the machine goes down, so the caller waits for the textfile with [`Metrics::written`],
    /// off the loop. `(held_s, budget_s, outcome, pods_left)`; `pods_left` is `None` when nthd
    /// cannot tell.
    pub(crate) fn drain(&mut self, r: (f64, f64, &str, Option<usize>)) {
        if !self.has_reader() {
            return;
        }
        let (held, budget, outcome, pods) = r;
        let s = &self.series;
        s.drain.seconds.with_label_values(&[] as &[&str]).set(held);
        s.drain.budget.with_label_values(&[] as &[&str]).set(budget);
        s.drain.outcome.reset();
        s.drain.outcome.with_label_values(&[outcome]).set(1.0);
        let left = pods.map_or(-1.0, |p| p as f64);
        s.drain
            .pods_left
            .with_label_values(&[] as &[&str])
            .set(left);
        self.flush();
    }

    /// A handle to wait, off the loop, for the textfile to hold what was flushed; `None`
    /// without a textfile.
    pub(crate) fn written(&self) -> Option<textfile::Written> {
        self.textfile.as_ref().map(textfile::Textfile::written)
    }

    /// Takes the current notices from the planner and writes the metrics out.
    pub(crate) fn notices(&mut self, planner: &Planner, now: SystemTime) {
        if !self.has_reader() {
            return;
        }
        let v = NoticeView::of(planner);
        let (s, p) = (&self.series, self.provider);
        let left = |d: SystemTime| unix(d) - unix(now);
        s.notice_deadline.reset();
        for k in KINDS {
            let listed = v.kinds.iter().find(|(kind, _)| *kind == k.kind);
            s.notice
                .with_label_values(&[p, k.name])
                .set(f64::from(u8::from(listed.is_some())));
            if let Some((_, Some(d))) = listed {
                s.notice_deadline
                    .with_label_values(&[p, k.name])
                    .set(left(*d));
            }
        }
        s.imminent
            .with_label_values(&[p])
            .set(f64::from(u8::from(v.imminent)));
        s.termination_in.reset();
        s.termination_deadline.reset();
        if let Some(d) = v.power_deadline {
            s.termination_in.with_label_values(&[p]).set(left(d));
            s.termination_deadline.with_label_values(&[p]).set(unix(d));
        }
        self.flush();
    }

    /// The exposition text (Prometheus text format 0.0.4).
    pub(crate) fn render(&self) -> String {
        // The encoder fails only on a metric family it cannot describe, which a registry
        // built by `Series::new` never holds.
        TextEncoder::new()
            .encode_to_string(&self.series.registry.gather())
            .unwrap_or_default()
    }

    fn flush(&mut self) {
        if !self.has_reader() {
            return;
        }
        let text = self.render();
        if let Some(tf) = self.textfile.as_mut() {
            if textfile_due(self.written.as_ref(), &text) {
                // Handed to the writer thread: a stalled disk never holds up the loop.
                tf.submit(text.clone());
                self.written = Some((Instant::now(), text.clone()));
            }
            self.write_error = tf.problem(Instant::now());
            if self.write_error.is_some() {
                // Written again at the next flush, once the cause is gone.
                self.written = None;
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

    /// Writes the textfile now if it is behind, and waits a moment for it to land (at a clean
    /// stop).
    pub(crate) fn flush_now(&mut self) {
        self.written = self
            .written
            .take()
            .map(|(_, t)| (Instant::now() - TEXTFILE_REFRESH, t));
        self.flush();
        self.settle(Duration::from_secs(2));
    }

    /// Waits at most `limit` for the textfile writer to finish what it was handed.
    fn settle(&self, limit: Duration) {
        if let Some(tf) = &self.textfile {
            tf.settle(limit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_reader_the_series_are_not_updated() {
        let mut m = Metrics::new(MetricsOptions::default());
        m.set_provider(Cloud::Aws);
        m.reads(
            &Observation {
                notices: vec![],
                fresh: vec![crate::notice::SourceId::new("aws/spot/instance-action")],
                errors: vec![],
            },
            1,
            SystemTime::now(),
        );
        m.action(NoticeKind::SpotTerminate, PowerAction::PowerOff, "ok");
        let text = m.render();
        assert!(!text.contains("nthd_imds_reads_total{"), "{text}");
        assert!(!text.contains("nthd_actions_total{"), "{text}");
        assert!(!text.contains("nthd_last_successful_poll"), "{text}");
    }

    #[test]
    fn blindness_and_disabled_extras_are_exported() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = Metrics::new(MetricsOptions {
            textfile: Some(dir.path().join("nthd.prom")),
            listen: None,
        });
        let extras = PerExtra {
            webhooks: true,
            ..PerExtra::default()
        };
        m.health(true, Some(Duration::from_secs(45)), &extras);
        let text = m.render();
        assert!(text.contains("\nnthd_metadata_blind 1\n"), "{text}");
        assert!(
            text.contains("\nnthd_metadata_read_age_seconds 45\n"),
            "{text}"
        );
        assert!(
            text.contains("nthd_extra_disabled{extra=\"webhooks\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("nthd_extra_disabled{extra=\"metrics_listen\"} 0"),
            "{text}"
        );
        m.health(false, None, &extras);
        assert!(m.render().contains("\nnthd_metadata_blind 0\n"));
    }

    #[test]
    fn a_bad_or_busy_listen_address_disables_only_the_server() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _g = rt.enter();
        let m = Metrics::new(MetricsOptions {
            textfile: None,
            listen: Some("not-an-address".into()),
        });
        let (listen, textfile) = m.problems();
        assert!(
            listen.unwrap().contains("is not an IP:PORT address"),
            "{listen:?}"
        );
        assert_eq!(textfile, None);
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let m = Metrics::new(MetricsOptions {
            textfile: None,
            listen: Some(busy.local_addr().unwrap().to_string()),
        });
        let e = m.problems().0.unwrap();
        assert!(
            e.contains("cannot listen on") && e.contains("free the port"),
            "{e}"
        );
    }

    /// The textfile once the writer thread has written what it was handed.
    fn settled(m: &Metrics, file: &std::path::Path) -> (u64, String) {
        use std::os::unix::fs::MetadataExt;
        m.settle(Duration::from_secs(5));
        let ino = std::fs::metadata(file).unwrap().ino();
        (ino, std::fs::read_to_string(file).unwrap())
    }

    #[test]
    fn the_textfile_is_0644_and_rewritten_only_when_it_matters() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nthd.prom");
        // The unit's UMask=0077.
        let old_umask = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
        let mut m = Metrics::new(MetricsOptions {
            textfile: Some(file.clone()),
            listen: None,
        });
        m.set_provider(Cloud::Aws);
        m.settle(Duration::from_secs(5));
        rustix::process::umask(old_umask);
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o644);
        let inode = meta.ino();

        // A first read adds series: written at once. Then only counters move: not rewritten.
        let obs = |ok: bool| Observation {
            notices: vec![],
            fresh: if ok {
                vec![crate::notice::SourceId::new("aws/spot/instance-action")]
            } else {
                vec![]
            },
            errors: vec![],
        };
        m.reads(&obs(true), 1, SystemTime::now());
        let planner = Planner::new(crate::policy::PolicyConfig::default());
        m.notices(&planner, SystemTime::now());
        let (inode2, _) = settled(&m, &file);
        assert_ne!(inode, inode2, "new series are written at once");
        for _ in 0..20 {
            m.reads(&obs(true), 1, SystemTime::now());
            m.notices(&planner, SystemTime::now());
        }
        let (inode3, text) = settled(&m, &file);
        assert_eq!(inode3, inode2);
        assert!(text.contains("{outcome=\"ok\",source=\"aws/spot/instance-action\"} 1\n"));

        // An action is written at once, with the counters as they are then.
        m.action(NoticeKind::SpotTerminate, PowerAction::PowerOff, "ok");
        let (_, text) = settled(&m, &file);
        assert!(text.contains("result=\"ok\"} 1"), "{text}");
        assert!(
            text.contains("source=\"aws/spot/instance-action\"} 21\n"),
            "{text}"
        );

        // At a clean stop whatever is behind is written.
        m.reads(&obs(true), 1, SystemTime::now());
        m.notices(&planner, SystemTime::now());
        assert!(!settled(&m, &file).1.contains("} 22\n"));
        m.flush_now();
        assert!(std::fs::read_to_string(&file)
            .unwrap()
            .contains("source=\"aws/spot/instance-action\"} 22\n"));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
