//! A stand-in for kubelet's Graceful Node Shutdown manager, as seen from logind.
//!
//! Like kubelet it takes a `delay` inhibitor on `shutdown` with kubelet's exact who/why strings,
//! holds the returned fd, and on `PrepareForShutdown(true)` "drains" and then closes the fd to
//! release the lock. Unlike kubelet it subscribes to the signal *before* taking the lock, so a
//! signal sent right after the lock is taken cannot be missed.
//!
//! Every step is appended to a JSON-lines record file and fsynced, so a test can read the
//! timeline even if the machine is powered off right after.
//!
//! # Stopping (SIGTERM / SIGINT)
//!
//! logind starts the shutdown the instant the last delay lock's fd is closed, and systemd then
//! sends SIGTERM to the stand-in within milliseconds, i.e. between "lock released" and "record
//! written". With the default signal disposition that killed the process before `released`
//! reached the file (about 1 run in 5 on the e2e harness). So [`run`] handles SIGTERM and SIGINT
//! itself, from before the lock is taken:
//!
//! * idle (holding the lock, no shutdown under way): record `stopped` and exit at once (closing
//!   the fd releases the lock);
//! * a drain in progress: keep draining for at most [`KubeletOptions::stop_grace`] (2.5 s) more.
//!   If the drain ends within that, the record is the usual `drained`; otherwise it is
//!   `drain_aborted` (never `drained`, so a test cannot mistake a cut-short drain for a full
//!   one). Then release the lock, record `released`, record `stopped`, exit;
//! * the drain just finished: the records are written synchronously right after the fd is
//!   closed, and a signal can no longer kill the process in between, so `released` is on disk;
//!   then `stopped` is recorded and the process exits.
//!
//! Whatever happens, the process exits (status 1) at most [`HARD_STOP`] after the first signal,
//! so it never holds up a shutdown for long. The exit status after a signal is 0.
//!
//! # Pods
//!
//! With [`KubeletOptions::pods`] the stand-in also lays out pods as kubelet with the systemd
//! cgroup driver does, and stops them group by group during the drain ([`pods`]). It then
//! records `pods` first (before `locked`) and a `group_stopped` as each group's period ends;
//! the drain lasts the groups' periods together, and a group whose period had not ended when a
//! stop request cut the drain short is never stopped. Without pods nothing of this happens and
//! the records are as above.

pub mod pods;

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::logind::{login1_proxy, Login1ManagerProxy, PrepareForShutdown};
use crate::now_ms;
use pods::{Group, Pod, Pods};

/// kubelet's inhibitor "who".
pub const WHO: &str = "kubelet";
/// kubelet's inhibitor "why".
pub const WHY: &str = "Kubelet needs time to handle node shutdown";

/// After SIGTERM/SIGINT the process exits (status 1) at the latest this long after the first
/// signal, whatever it is doing.
pub const HARD_STOP: Duration = Duration::from_secs(3);

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
    /// How much longer a drain in progress may go on once a stop was requested (SIGTERM).
    pub stop_grace: Duration,
    /// Pods to lay out and stop during the drain (none: the plain drain of `drain`).
    pub pods: Vec<Pod>,
    /// The pods' priority groups (none: one group of `drain`).
    pub groups: Vec<Group>,
    /// Where the pods' cgroups appear (`/sys/fs/cgroup`).
    pub cgroup_root: PathBuf,
    /// Where the pods' log directories go (`/var/log/pods`).
    pub log_root: PathBuf,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        KubeletOptions {
            record: PathBuf::from("kubelet-record.jsonl"),
            drain: Duration::from_secs(5),
            progress_every: Duration::from_secs(1),
            address: None,
            stop_grace: Duration::from_millis(2500),
            pods: Vec::new(),
            groups: Vec::new(),
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            log_root: PathBuf::from("/var/log/pods"),
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

/// Run until SIGTERM/SIGINT (see the module docs for what a signal does mid-drain). Returns an
/// error (for a non-zero exit) if the bus cannot be reached, the lock cannot be taken, the record
/// file cannot be written, or the bus connection is lost.
pub async fn run(opts: KubeletOptions) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    // Installed before anything else: from here on a SIGTERM can no longer kill the process
    // between closing the inhibitor fd and writing `released`.
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
    let mut int =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot handle SIGINT: {e}"))?;
    let (tx, rx) = tokio::sync::oneshot::channel::<&'static str>();
    // A task of its own, so the signal is noticed (and the hard bound armed) even while the main
    // task is busy.
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        std::thread::spawn(move || {
            std::thread::sleep(HARD_STOP);
            eprintln!(
                "nthd-fake-kubelet: still running {}s after {name}; exiting",
                HARD_STOP.as_secs()
            );
            std::process::exit(1);
        });
        let _ = tx.send(name);
    });
    run_until(opts, async move {
        match rx.await {
            Ok(name) => name,
            Err(_) => std::future::pending().await,
        }
    })
    .await
}

/// Connect to the bus at `address` (the system bus if `None`) and make a login1 proxy.
pub async fn connect(
    address: Option<&str>,
) -> Result<(zbus::Connection, Login1ManagerProxy<'static>), String> {
    let conn = match address {
        Some(a) => zbus::connection::Builder::address(a).build().await,
        None => zbus::Connection::system().await,
    }
    .map_err(|e| format!("cannot connect to the system bus: {e}"))?;
    let proxy = login1_proxy(&conn)
        .await
        .map_err(|e| format!("cannot create login1 proxy: {e}"))?;
    Ok((conn, proxy))
}

/// Milliseconds of `d`, as the records carry them.
fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// A drain in progress after `PrepareForShutdown(true)`: when it began, when it ends now
/// (`end`, brought forward by a stop request), when it would end in full, the stop request
/// that came during it, if any, and when each pod group not yet stopped ends (with its index
/// in the pods' plan).
struct Drain {
    began: Instant,
    end: Instant,
    full_end: Instant,
    stopping: Option<&'static str>,
    stages: VecDeque<(Instant, usize)>,
}

impl Drain {
    /// A drain beginning now: of `length`, or with `pods`, of their groups' periods.
    fn new(length: Duration, pods: Option<&Pods>) -> Drain {
        let began = Instant::now();
        let length = pods.map_or(length, Pods::drain_length);
        let stages = pods.map(Pods::stages).unwrap_or_default();
        Drain {
            began,
            end: began + length,
            full_end: began + length,
            stopping: None,
            stages: stages.into_iter().map(|(at, i)| (began + at, i)).collect(),
        }
    }

    /// Stop the pod groups whose period has ended by `now` (none beyond `end`).
    async fn stop_due(
        &mut self,
        pods: Option<&Pods>,
        now: Instant,
        rec: &mut Recorder,
    ) -> Result<(), String> {
        let Some(pods) = pods else {
            return Ok(());
        };
        while let Some(&(at, i)) = self.stages.front() {
            if at > now || at > self.end {
                break;
            }
            self.stages.pop_front();
            pods.stop_group(i, now - self.began, rec).await?;
        }
        Ok(())
    }

    /// Wait for the next progress record (`draining`), the end of the drain or a stop request,
    /// and record it. Returns `false` once the drain has ended.
    async fn step<S>(
        &mut self,
        opts: &KubeletOptions,
        stop: &mut Pin<&mut S>,
        rec: &mut Recorder,
        pods: Option<&Pods>,
    ) -> Result<bool, String>
    where
        S: Future<Output = &'static str>,
    {
        let now = Instant::now();
        self.stop_due(pods, now, rec).await?;
        if now >= self.end {
            return Ok(false);
        }
        let step = opts.progress_every.max(Duration::from_millis(1));
        let next_group = self.stages.front().map_or(step, |&(at, _)| at - now);
        tokio::select! {
            _ = tokio::time::sleep((self.end - now).min(step).min(next_group)) => {}
            why = stop, if self.stopping.is_none() => {
                self.stop_requested(why, opts.stop_grace, rec)?;
                return Ok(true);
            }
        }
        let now = Instant::now();
        if now < self.end {
            rec.event(
                "draining",
                json!({
                    "elapsed_ms": ms(now - self.began),
                    "remaining_ms": ms(self.end - now),
                }),
            )?;
        }
        Ok(true)
    }

    /// A stop was requested (`why`): the drain goes on for at most `grace` more.
    fn stop_requested(
        &mut self,
        why: &'static str,
        grace: Duration,
        rec: &mut Recorder,
    ) -> Result<(), String> {
        self.stopping = Some(why);
        let now = Instant::now();
        self.end = self.end.min(now + grace);
        rec.event(
            "stop_requested",
            json!({
                "signal": why,
                "elapsed_ms": ms(now - self.began),
                "remaining_ms": ms(self.full_end.saturating_duration_since(now)),
            }),
        )
    }

    /// Record how the drain ended: `drained` if it ran in full, `drain_aborted` if a stop cut it
    /// short.
    fn finish(&self, rec: &mut Recorder) -> Result<(), String> {
        let now = Instant::now();
        if now >= self.full_end {
            rec.event("drained", json!({ "elapsed_ms": ms(now - self.began) }))
        } else {
            rec.event(
                "drain_aborted",
                json!({
                    "elapsed_ms": ms(now - self.began),
                    "remaining_ms": ms(self.full_end - now),
                    "signal": self.stopping,
                }),
            )
        }
    }
}

/// Drain (see [`Drain`]), then release the lock `fd` and record `released`. Returns the stop
/// request that came during the drain, if any.
async fn drain_and_release<S>(
    opts: &KubeletOptions,
    stop: &mut Pin<&mut S>,
    rec: &mut Recorder,
    fd: zbus::OwnedFd,
    pods: Option<&Pods>,
) -> Result<Option<&'static str>, String>
where
    S: Future<Output = &'static str>,
{
    let mut drain = Drain::new(opts.drain, pods);
    while drain.step(opts, stop, rec, pods).await? {}
    drain.finish(rec)?;
    // Closing the fd lets logind go ahead; systemd SIGTERMs us within milliseconds. The
    // record below is written synchronously (no await in between), and the signal is
    // handled, so it cannot be lost.
    drop(fd);
    rec.event("released", json!({}))?;
    Ok(drain.stopping)
}

/// The `start` argument of a `PrepareForShutdown` signal; `None` (and a complaint on stderr)
/// if it is malformed.
fn start_arg(sig: &PrepareForShutdown) -> Option<bool> {
    match sig.args() {
        Ok(a) => Some(*a.start()),
        Err(e) => {
            eprintln!("nthd-fake-kubelet: malformed PrepareForShutdown: {e}");
            None
        }
    }
}

/// `PrepareForShutdown(start)`: with `true` drain and release the lock, if held; with `false`
/// take the lock again, if released. Returns the stop request that came during a drain, if any.
async fn on_prepare<S>(
    start: bool,
    opts: &KubeletOptions,
    stop: &mut Pin<&mut S>,
    rec: &mut Recorder,
    proxy: &Login1ManagerProxy<'_>,
    lock: &mut Option<zbus::OwnedFd>,
    pods: Option<&Pods>,
) -> Result<Option<&'static str>, String>
where
    S: Future<Output = &'static str>,
{
    if start {
        rec.event("prepare", json!({ "locked": lock.is_some() }))?;
        let Some(fd) = lock.take() else {
            return Ok(None);
        };
        drain_and_release(opts, stop, rec, fd, pods).await
    } else {
        rec.event("prepare_cancelled", json!({ "locked": lock.is_some() }))?;
        if lock.is_none() {
            *lock = Some(take_lock(proxy, rec).await?);
        }
        Ok(None)
    }
}

/// With pods in `opts`, lay them out ([`Pods::start`]); `None` without.
async fn start_pods(
    conn: &zbus::Connection,
    opts: &KubeletOptions,
    rec: &mut Recorder,
) -> Result<Option<Pods>, String> {
    if opts.pods.is_empty() {
        return Ok(None);
    }
    let plan = pods::plan(&opts.pods, &opts.groups, opts.drain)?;
    let roots = (opts.cgroup_root.as_path(), opts.log_root.as_path());
    Pods::start(conn, plan, roots, rec).await.map(Some)
}

/// [`run`] with the stop request as a future (resolving to a name for the record, e.g.
/// `"SIGTERM"`) instead of signals. Returns `Ok(())` once stopped.
pub async fn run_until<S>(opts: KubeletOptions, stop: S) -> Result<(), String>
where
    S: Future<Output = &'static str>,
{
    tokio::pin!(stop);
    let mut rec = Recorder::open(&opts.record)?;
    let (conn, proxy) = tokio::select! {
        r = connect(opts.address.as_deref()) => r?,
        why = &mut stop => {
            rec.event("stopped", json!({ "signal": why, "locked": false }))?;
            return Ok(());
        }
    };
    let pods = start_pods(&conn, &opts, &mut rec).await?;
    // Match rule first, lock second: no PrepareForShutdown can slip between the two.
    let mut signals = proxy
        .receive_prepare_for_shutdown()
        .await
        .map_err(|e| format!("cannot subscribe to PrepareForShutdown: {e}"))?;
    let mut lock = Some(take_lock(&proxy, &mut rec).await?);

    loop {
        let sig = tokio::select! {
            // Prefer a pending PrepareForShutdown over a stop that arrived at the same time.
            biased;
            sig = signals.next() => match sig {
                Some(sig) => sig,
                None => break,
            },
            why = &mut stop => {
                rec.event("stopped", json!({ "signal": why, "locked": lock.is_some() }))?;
                return Ok(());
            }
        };
        let Some(start) = start_arg(&sig) else {
            continue;
        };
        let pods = pods.as_ref();
        if let Some(why) =
            on_prepare(start, &opts, &mut stop, &mut rec, &proxy, &mut lock, pods).await?
        {
            rec.event("stopped", json!({ "signal": why, "locked": false }))?;
            return Ok(());
        }
    }
    Err("lost the bus connection (PrepareForShutdown stream ended)".into())
}

#[cfg(test)]
mod tests {
    //! `run_until` against the fake logind on a private bus, with the stop request (SIGTERM in
    //! the binary) sent at each point of the shutdown sequence.

    use std::path::Path;
    use std::time::Instant;

    use super::*;
    use crate::logind::{FakeLogind, PrivateBus, ShutdownReason};
    use crate::systemd::FakeSystemd;

    fn records(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("every record line is JSON"))
            .collect()
    }

    fn events(r: &[Value]) -> Vec<String> {
        r.iter()
            .map(|v| v["event"].as_str().unwrap().to_string())
            .filter(|e| e != "draining")
            .collect()
    }

    async fn wait_for_event(path: &Path, event: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !records(path).iter().any(|v| v["event"] == event) {
            assert!(
                Instant::now() < deadline,
                "no {event:?} record: {:?}",
                records(path)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    struct Node {
        _bus: PrivateBus,
        fake: FakeLogind,
        conn: zbus::Connection,
        _dir: tempfile::TempDir,
        opts: KubeletOptions,
    }

    async fn node(drain_ms: u64, stop_grace_ms: u64) -> Node {
        let bus = PrivateBus::start().unwrap();
        let fake = FakeLogind::serve(bus.address()).await.unwrap();
        fake.set_inhibit_delay_max(Duration::from_secs(30));
        let conn = bus.connect().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let opts = KubeletOptions {
            record: dir.path().join("kubelet.jsonl"),
            drain: Duration::from_millis(drain_ms),
            progress_every: Duration::from_millis(100),
            address: Some(bus.address().to_string()),
            stop_grace: Duration::from_millis(stop_grace_ms),
            ..KubeletOptions::default()
        };
        Node {
            _bus: bus,
            fake,
            conn,
            _dir: dir,
            opts,
        }
    }

    impl Node {
        async fn power_off(&self) {
            login1_proxy(&self.conn)
                .await
                .unwrap()
                .power_off(false)
                .await
                .unwrap();
        }
    }

    /// Runs the stand-in until `driver` (given a stop sender) is done and the stand-in has
    /// stopped; returns its result and the instant the stop was sent.
    async fn drive<F, Fut>(n: &Node, driver: F) -> (Result<(), String>, Instant)
    where
        F: FnOnce(tokio::sync::oneshot::Sender<&'static str>) -> Fut,
        Fut: Future<Output = Instant>,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let kube = run_until(n.opts.clone(), async move {
            rx.await.unwrap_or("stop sender dropped")
        });
        let (r, sent) = tokio::time::timeout(Duration::from_secs(20), async {
            tokio::join!(kube, driver(tx))
        })
        .await
        .expect("the stand-in did not stop");
        (r, sent)
    }

    #[tokio::test]
    async fn stop_while_idle_releases_the_lock_and_exits_at_once() {
        let n = node(5000, 2500).await;
        let rec = n.opts.record.clone();
        let (r, sent) = drive(&n, |tx| async {
            wait_for_event(&rec, "locked").await;
            let _ = tx.send("SIGTERM");
            Instant::now()
        })
        .await;
        assert_eq!(r, Ok(()));
        assert!(sent.elapsed() < Duration::from_secs(1));
        let r = records(&n.opts.record);
        assert_eq!(events(&r), ["locked", "stopped"]);
        assert_eq!(r[1]["signal"], "SIGTERM");
        assert_eq!(r[1]["locked"], true);
        assert!(n.fake.wait_for_inhibitors(0, Duration::from_secs(5)).await);
    }

    #[tokio::test]
    async fn stop_right_after_the_release_keeps_the_released_record() {
        // What systemd does: the last delay lock goes, the shutdown proceeds, and the stand-in's
        // unit gets SIGTERM at once.
        let n = node(300, 2500).await;
        let rec = n.opts.record.clone();
        let (r, _) = drive(&n, |tx| async {
            wait_for_event(&rec, "locked").await;
            n.power_off().await;
            let sd = n
                .fake
                .wait_for_shutdown(Duration::from_secs(10))
                .await
                .unwrap();
            assert_eq!(sd.reason, ShutdownReason::InhibitorsReleased);
            let _ = tx.send("SIGTERM");
            Instant::now()
        })
        .await;
        assert_eq!(r, Ok(()));
        let r = records(&n.opts.record);
        assert_eq!(
            events(&r),
            ["locked", "prepare", "drained", "released", "stopped"]
        );
        assert_eq!(r.last().unwrap()["locked"], false);
    }

    #[tokio::test]
    async fn stop_during_a_drain_that_ends_within_the_grace_finishes_it() {
        let n = node(600, 2500).await;
        let rec = n.opts.record.clone();
        let (r, _) = drive(&n, |tx| async {
            wait_for_event(&rec, "locked").await;
            n.power_off().await;
            wait_for_event(&rec, "prepare").await;
            tokio::time::sleep(Duration::from_millis(150)).await;
            let _ = tx.send("SIGTERM");
            Instant::now()
        })
        .await;
        assert_eq!(r, Ok(()));
        let r = records(&n.opts.record);
        assert_eq!(
            events(&r),
            [
                "locked",
                "prepare",
                "stop_requested",
                "drained",
                "released",
                "stopped"
            ]
        );
        let drained = r.iter().find(|v| v["event"] == "drained").unwrap();
        assert!(drained["elapsed_ms"].as_u64().unwrap() >= 600);
        let sd = n
            .fake
            .wait_for_shutdown(Duration::from_secs(5))
            .await
            .expect("the release let the shutdown proceed");
        assert_eq!(sd.reason, ShutdownReason::InhibitorsReleased);
    }

    #[tokio::test]
    async fn stop_during_a_long_drain_is_bounded_and_says_so() {
        let n = node(30_000, 400).await;
        let rec = n.opts.record.clone();
        let (r, sent) = drive(&n, |tx| async {
            wait_for_event(&rec, "locked").await;
            n.power_off().await;
            wait_for_event(&rec, "prepare").await;
            tokio::time::sleep(Duration::from_millis(150)).await;
            let _ = tx.send("SIGINT");
            Instant::now()
        })
        .await;
        assert_eq!(r, Ok(()));
        let took = sent.elapsed();
        assert!(
            took >= Duration::from_millis(350) && took < Duration::from_secs(2),
            "stopped {took:?} after the request"
        );
        let r = records(&n.opts.record);
        assert_eq!(
            events(&r),
            [
                "locked",
                "prepare",
                "stop_requested",
                "drain_aborted",
                "released",
                "stopped"
            ]
        );
        let aborted = r.iter().find(|v| v["event"] == "drain_aborted").unwrap();
        assert_eq!(aborted["signal"], "SIGINT");
        assert!(aborted["remaining_ms"].as_u64().unwrap() > 20_000);
        assert!(n.fake.wait_for_inhibitors(0, Duration::from_secs(5)).await);
        assert!(r
            .windows(2)
            .all(|w| w[0]["t_ms"].as_u64() <= w[1]["t_ms"].as_u64()));
    }

    /// The stand-in of `n` with `pods` and `groups`, a fake systemd on its bus, and each pod's
    /// cgroup already populated under a temporary cgroup root (as systemd would make it).
    async fn with_pods(n: &mut Node, pods: &[&str], groups: &[&str]) -> FakeSystemd {
        let systemd = FakeSystemd::serve(n.opts.address.as_deref().unwrap())
            .await
            .unwrap();
        n.opts.pods = pods.iter().map(|p| p.parse().unwrap()).collect();
        n.opts.groups = groups.iter().map(|g| g.parse().unwrap()).collect();
        n.opts.cgroup_root = n._dir.path().join("cgroup");
        n.opts.log_root = n._dir.path().join("pods");
        for p in &n.opts.pods {
            let dir = n.opts.cgroup_root.join(p.cgroup());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
        }
        systemd
    }

    fn records_but_progress(path: &Path) -> Vec<Value> {
        let r = records(path).into_iter();
        r.filter(|v| v["event"] != "draining").collect()
    }

    fn slice_of(n: &Node, i: usize) -> Option<String> {
        Some(n.opts.pods[i].slice())
    }

    #[tokio::test]
    async fn pods_stop_group_by_group_and_the_lock_goes_after_the_last() {
        let mut n = node(0, 2500).await;
        let pods = [
            "a/one:burstable:1",
            "b/two:besteffort:2",
            "c/three:guaranteed:2",
        ];
        let systemd = with_pods(&mut n, &pods, &["2:0.4", "1:0.3"]).await;
        let rec = n.opts.record.clone();
        let (r, _) = drive(&n, |tx| async {
            wait_for_event(&rec, "locked").await;
            n.power_off().await;
            let sd = n.fake.wait_for_shutdown(Duration::from_secs(10)).await;
            assert_eq!(sd.unwrap().reason, ShutdownReason::InhibitorsReleased);
            let _ = tx.send("SIGTERM");
            Instant::now()
        })
        .await;
        assert_eq!(r, Ok(()));
        let r = records_but_progress(&n.opts.record);
        let want = [
            "pods",
            "locked",
            "prepare",
            "group_stopped",
            "group_stopped",
        ];
        assert_eq!(events(&r)[..5], want);
        assert_eq!(events(&r)[5..], ["drained", "released", "stopped"]);
        let listed = r[0]["pods"].as_array().unwrap();
        assert_eq!(listed.len(), 3);
        assert_eq!(listed[0]["name"], "a/one");
        assert_eq!(listed[0]["populated"], true);
        let a = &n.opts.pods[0];
        assert_eq!(listed[0]["unit"], a.unit());
        let cgroup = n.opts.cgroup_root.join(a.cgroup());
        assert_eq!(listed[0]["cgroup"], cgroup.to_str().unwrap());
        assert!(n
            .opts
            .log_root
            .join(a.log_dir())
            .join("app/0.log")
            .is_file());
        let (g1, g2) = (&r[3], &r[4]);
        assert_eq!(
            (g1["group"].as_u64(), g1["pods"].clone()),
            (Some(1), json!(["a/one"]))
        );
        assert_eq!(g2["pods"], json!(["b/two", "c/three"]));
        let ms = |v: &Value| v["elapsed_ms"].as_u64().unwrap();
        assert!((300..650).contains(&ms(g1)), "{g1}");
        assert!(ms(g2) >= 700 && ms(&r[5]) >= ms(g2), "{g2}");
        let calls = systemd.unit_calls();
        let seen: Vec<_> = calls.iter().map(|c| (c.method, c.slice.clone())).collect();
        let start = |i| ("StartTransientUnit", slice_of(&n, i));
        assert_eq!(seen[..3], [start(0), start(1), start(2)]);
        assert_eq!(calls[0].exec, ["sleep", "infinity"]);
        let stopped = calls[3..].iter().map(|c| (c.method, Some(c.unit.clone())));
        let stop = |i| ("StopUnit", slice_of(&n, i));
        assert_eq!(stopped.collect::<Vec<_>>(), [stop(0), stop(1), stop(2)]);
    }

    #[tokio::test]
    async fn a_group_still_draining_when_logind_goes_ahead_is_never_stopped() {
        let mut n = node(0, 400).await;
        n.fake.set_inhibit_delay_max(Duration::from_millis(800));
        let pods = ["a/one:besteffort:1", "b/two:burstable:2"];
        let systemd = with_pods(&mut n, &pods, &["1:0.2", "2:30"]).await;
        let rec = n.opts.record.clone();
        let (r, _) = drive(&n, |tx| async {
            wait_for_event(&rec, "locked").await;
            n.power_off().await;
            let sd = n.fake.wait_for_shutdown(Duration::from_secs(10)).await;
            assert_eq!(sd.unwrap().reason, ShutdownReason::DelayTimeout);
            // What systemd does next: SIGTERM to the stand-in's service.
            let _ = tx.send("SIGTERM");
            Instant::now()
        })
        .await;
        assert_eq!(r, Ok(()));
        let r = records_but_progress(&n.opts.record);
        let want = [
            "pods",
            "locked",
            "prepare",
            "group_stopped",
            "stop_requested",
        ];
        assert_eq!(events(&r)[..5], want);
        assert_eq!(events(&r)[5..], ["drain_aborted", "released", "stopped"]);
        assert_eq!(r[3]["pods"], json!(["a/one"]));
        let stops: Vec<_> = systemd
            .unit_calls()
            .into_iter()
            .filter(|c| c.method == "StopUnit")
            .map(|c| c.unit)
            .collect();
        assert_eq!(stops, [n.opts.pods[0].slice()]);
    }
}
