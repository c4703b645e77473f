//! `nthd-bench`: how fast nthd notices an interruption, what it costs while nothing happens,
//! how fast it starts and how big it is, measured against the mock IMDS and the fake logind and
//! side by side with the shell + curl loop people run instead.
//!
//! ```text
//! nthd-bench [--smoke] [--check] [--trials N] [--concurrency N] [--idle-secs S] [--starts N]
//!            [--cases ID,ID,...] [--seed N] [--nthd PATH] [--out DIR]
//! ```
//!
//! Normally run through `bash bench/run.sh [--smoke]`, which builds the release binaries first.
//! Writes `DIR/latest.md` and `DIR/latest.json` (DIR defaults to `bench/results`, or
//! `bench/results/smoke` with `--smoke`) and prints the markdown on stdout; progress goes to
//! stderr. Exit status: 0 when the run completed (whatever the targets say), 1 when it could not
//! run, 3 with `--check` when a case or idle subject could not be measured or a trial failed.
//!
//! How each number is taken (all on this host, wall clocks, 127.0.0.1 only):
//!
//! * **Detection latency**: every trial gets a fresh subject process with its own mock IMDS,
//!   private `dbus-daemon`, fake logind and state directory. Once the subject is running
//!   (nthd: `READY=1` on a `NOTIFY_SOCKET` the bench binds; the curl loop: its first read of the
//!   spot path), the bench waits a uniformly random fraction of the poll interval, records the
//!   wall clock and switches the notice on in the mock. The latency is the fake logind's
//!   timestamp of the `PowerOff` call minus that instant. Trials of all cases are shuffled
//!   together and run `--concurrency` at a time, so every case sees the same background noise.
//!   A trial whose `PowerOff` never comes counts as an infinite latency.
//! * **Idle cost**: the subjects run side by side with no notice for `--idle-secs`. CPU is
//!   `perf stat -e task-clock -p PID` (which follows forked children, so the curl loop's curl,
//!   sleep and dbus-send processes count) when perf works, else the per-thread schedstat sum
//!   (nthd) or utime+stime+cutime+cstime from `/proc/PID/stat` (the loop). The `/proc/PID/stat`
//!   tick figure is always reported too. Peak RSS is `VmHWM`; for the loop, the shell's and a
//!   typical curl's (`ru_maxrss` from `wait4`). The IMDS request rate comes from the mock's log.
//! * **Startup**: spawn → `READY=1` on the notify socket, sequentially, median.
//! * **Binary size**: bytes of the nthd binary given (the release profile strips it).
//!
//! Every child (nthd, dbus-daemon, the loops, perf) is killed when the bench ends, panics (the
//! release profile aborts on panic, so a panic hook does it) or gets SIGINT/SIGTERM; children
//! also get `PR_SET_PDEATHSIG`.

use std::collections::BTreeMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nthd_testkit::imds::{MockImds, Response};
use nthd_testkit::logind::{FakeLogind, PrivateBus};
use serde_json::{json, Value};
use tokio::net::UnixDatagram;
use tokio::sync::{watch, Semaphore};

const USAGE: &str =
    "usage: nthd-bench [--smoke] [--check] [--trials N] [--concurrency N] [--idle-secs S] \
[--starts N] [--cases ID,ID,...] [--seed N] [--nthd PATH] [--out DIR]";

const SPOT_PATH: &str = "/latest/meta-data/spot/instance-action";
const REBALANCE_PATH: &str = "/latest/meta-data/events/recommendations/rebalance";
const SCHEDULED_PATH: &str = "/latest/meta-data/events/maintenance/scheduled";
const GCP_PREEMPTED: &str = "/computeMetadata/v1/instance/preempted";
const GCP_MAINTENANCE: &str = "/computeMetadata/v1/instance/maintenance-event";
const AZURE_EVENTS: &str = "/metadata/scheduledevents";
const AZURE_NAME: &str = "/metadata/instance/compute/name";
const AZURE_VM: &str = "nthd-bench-vm";

/// The packaged unit's `WatchdogSec=30s`: nthd pings every 10 s, as it would in production.
const WATCHDOG_USEC: &str = "30000000";

/// The loop from the AWS documentation, as people deploy it (bash, token first, then poll).
const CURL_LOOP: &str = r#"TOKEN=$(curl -s -X PUT -H "X-aws-ec2-metadata-token-ttl-seconds: 21600" "$URL/latest/api/token")
while true; do curl -s -f -H "X-aws-ec2-metadata-token: $TOKEN" "$URL/latest/meta-data/spot/instance-action" && dbus-send --system --print-reply --dest=org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager.PowerOff boolean:false && break; sleep $EVERY; done"#;

// ---------------------------------------------------------------------------------------------
// Arguments

#[derive(Clone, Debug)]
struct Args {
    smoke: bool,
    check: bool,
    trials: usize,
    concurrency: usize,
    idle: Duration,
    starts: usize,
    cases: Option<Vec<String>>,
    seed: u64,
    nthd: PathBuf,
    out: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let smoke = argv.iter().any(|a| a == "--smoke");
    let default_nthd = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("nthd")))
        .unwrap_or_else(|| PathBuf::from("target/release/nthd"));
    let mut a = Args {
        smoke,
        check: false,
        trials: if smoke { 8 } else { 200 },
        concurrency: if smoke { 8 } else { 12 },
        idle: Duration::from_secs(if smoke { 10 } else { 120 }),
        starts: if smoke { 20 } else { 50 },
        cases: None,
        seed: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
        nthd: default_nthd,
        out: PathBuf::from(if smoke {
            "bench/results/smoke"
        } else {
            "bench/results"
        }),
    };
    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
            v.parse()
                .map_err(|_| format!("{flag}: `{v}` is not a valid number"))
        }
        match flag.as_str() {
            "--smoke" => {}
            "--check" => a.check = true,
            "--trials" => a.trials = num(&flag, value()?)?,
            "--concurrency" => a.concurrency = num(&flag, value()?)?,
            "--idle-secs" => a.idle = Duration::from_secs(num(&flag, value()?)?),
            "--starts" => a.starts = num(&flag, value()?)?,
            "--seed" => a.seed = num(&flag, value()?)?,
            "--cases" => {
                a.cases = Some(
                    value()?
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect(),
                )
            }
            "--nthd" => a.nthd = PathBuf::from(value()?),
            "--out" => a.out = PathBuf::from(value()?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if a.trials == 0 || a.concurrency == 0 || a.starts == 0 || a.idle.is_zero() {
        return Err("--trials, --concurrency, --starts and --idle-secs must be positive".into());
    }
    Ok(a)
}

// ---------------------------------------------------------------------------------------------
// Cleanup: every child is registered so a panic (abort) or a signal still kills it.

/// Registered kill targets: negative = a process group, positive = one process.
static KILL_LIST: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// The scratch directory, removed on every exit path.
static SCRATCH: Mutex<Option<PathBuf>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn register(target: i32) {
    lock(&KILL_LIST).push(target);
}

fn unregister(target: i32) {
    let mut l = lock(&KILL_LIST);
    if let Some(i) = l.iter().position(|t| *t == target) {
        l.swap_remove(i);
    }
}

/// Kill everything still registered and remove the scratch directory. Safe to call from the
/// panic hook (it never blocks on a lock another thread could hold forever).
fn emergency_cleanup() {
    if let Ok(l) = KILL_LIST.try_lock() {
        for t in l.iter() {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(*t, libc::SIGKILL);
            }
        }
    }
    if let Ok(s) = SCRATCH.try_lock() {
        if let Some(d) = s.as_ref() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A child process in its own process group; the whole group is SIGKILLed on drop.
struct Proc {
    child: Child,
    pid: i32,
}

impl Proc {
    fn spawn(mut cmd: Command) -> io::Result<Proc> {
        cmd.process_group(0);
        // SAFETY: prctl is async-signal-safe; the closure touches no shared state.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let pid = child.id() as i32;
        register(-pid);
        Ok(Proc { child, pid })
    }

    fn pid(&self) -> i32 {
        self.pid
    }

    fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        unregister(-self.pid);
    }
}

/// A private dbus-daemon, registered for emergency cleanup.
struct Bus(PrivateBus);

impl Bus {
    async fn start() -> Result<Bus, String> {
        let bus = tokio::task::spawn_blocking(PrivateBus::start)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("private dbus-daemon: {e}"))?;
        register(bus.pid() as i32);
        Ok(Bus(bus))
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        unregister(self.0.pid() as i32);
    }
}

/// A directory under the scratch directory, removed on drop.
struct TempDir(PathBuf);

static DIR_COUNTER: AtomicU64 = AtomicU64::new(0);

impl TempDir {
    fn new(prefix: &str) -> io::Result<TempDir> {
        let root = lock(&SCRATCH)
            .clone()
            .ok_or_else(|| io::Error::other("no scratch directory"))?;
        let p = root.join(format!(
            "{prefix}{}",
            DIR_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&p)?;
        Ok(TempDir(p))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Aborts a tokio task on drop.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// The world one subject runs in

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cloud {
    Aws,
    Gcp,
    Azure,
}

impl Cloud {
    fn name(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Gcp => "gcp",
            Cloud::Azure => "azure",
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Subject {
    /// nthd with its defaults except the poll interval (`None` = nthd's default, 1 s).
    Nthd {
        cloud: Cloud,
        interval: Option<Duration>,
        /// Also write the metrics textfile (`NTHD_METRICS_TEXTFILE`), to price it.
        textfile: bool,
        /// A rebalance recommendation is listed from the start (AWS): spot is read at the
        /// boosted rate.
        rebalance: bool,
    },
    /// The bash + curl loop, sleeping this many seconds between reads.
    Curl { every: u32 },
}

impl Subject {
    fn cloud(self) -> Cloud {
        match self {
            Subject::Nthd { cloud, .. } => cloud,
            Subject::Curl { .. } => Cloud::Aws,
        }
    }
}

/// A listener on a `NOTIFY_SOCKET` that drains every datagram (an undrained socket would block
/// nthd's `sd_notify` once the queue is full) and remembers when `READY=1` arrived.
struct Notify {
    path: PathBuf,
    ready: watch::Receiver<Option<Instant>>,
    _task: AbortOnDrop,
}

impl Notify {
    fn bind(path: PathBuf) -> io::Result<Notify> {
        let sock = UnixDatagram::bind(&path)?;
        let (tx, rx) = watch::channel(None);
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = sock.recv(&mut buf).await {
                let at = Instant::now();
                if tx.borrow().is_none()
                    && String::from_utf8_lossy(&buf[..n])
                        .lines()
                        .any(|l| l == "READY=1")
                {
                    tx.send_replace(Some(at));
                }
            }
        });
        Ok(Notify {
            path,
            ready: rx,
            _task: AbortOnDrop(task),
        })
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Option<Instant> {
        match tokio::time::timeout(timeout, self.ready.wait_for(|v| v.is_some())).await {
            Ok(Ok(v)) => *v,
            _ => None,
        }
    }
}

/// One mock IMDS + private bus + fake logind + scratch directory.
struct World {
    // Field order is drop order: the subject's world goes away after the subject.
    logind: FakeLogind,
    imds: MockImds,
    bus: Bus,
    dir: TempDir,
}

impl World {
    async fn new(cloud: Cloud) -> Result<World, String> {
        let dir = TempDir::new("w").map_err(|e| format!("scratch dir: {e}"))?;
        std::fs::create_dir(dir.path().join("state")).map_err(|e| e.to_string())?;
        let bus = Bus::start().await?;
        let logind = FakeLogind::serve(bus.0.address())
            .await
            .map_err(|e| format!("fake logind: {e}"))?;
        let imds = MockImds::start("127.0.0.1:0")
            .await
            .map_err(|e| format!("mock IMDS: {e}"))?;
        quiet_routes(&imds, cloud);
        Ok(World {
            logind,
            imds,
            bus,
            dir,
        })
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("stderr.log")
    }

    /// The last lines of the subject's stderr, for error messages.
    fn log_tail(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.log_path()) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(1500)));
            let _ = f.read_to_string(&mut s);
        }
        let s = s.trim();
        if s.is_empty() {
            "(no output)".into()
        } else {
            s.replace('\n', "\n    ")
        }
    }

    fn spawn_nthd(
        &self,
        nthd: &Path,
        cloud: Cloud,
        interval: Option<Duration>,
        textfile: bool,
        notify: &Notify,
    ) -> Result<Proc, String> {
        let mut cmd = Command::new(nthd);
        cmd.arg("run")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DBUS_SYSTEM_BUS_ADDRESS", self.bus.0.address())
            .env("NOTIFY_SOCKET", &notify.path)
            .env("WATCHDOG_USEC", WATCHDOG_USEC)
            .env("NTHD_PROVIDER", cloud.name())
            .env("NTHD_IMDS_ENDPOINT", self.imds.url())
            .env("NTHD_STATE_DIR", self.dir.path().join("state"))
            .env("NTHD_LOG_TARGET", "stderr")
            .env("NTHD_LOG_LEVEL", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log_file()?);
        if let Some(i) = interval {
            cmd.env("NTHD_POLL_INTERVAL", format!("{}ms", i.as_millis()));
        }
        if textfile {
            cmd.env("NTHD_METRICS_TEXTFILE", self.dir.path().join("nthd.prom"));
        }
        Proc::spawn(cmd).map_err(|e| format!("cannot run {}: {e}", nthd.display()))
    }

    fn spawn_curl_loop(&self, every: u32) -> Result<Proc, String> {
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(CURL_LOOP)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DBUS_SYSTEM_BUS_ADDRESS", self.bus.0.address())
            .env("URL", self.imds.url())
            .env("EVERY", every.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log_file()?);
        Proc::spawn(cmd).map_err(|e| format!("cannot run bash: {e}"))
    }

    fn log_file(&self) -> Result<std::fs::File, String> {
        std::fs::File::create(self.log_path()).map_err(|e| format!("log file: {e}"))
    }

    /// Starts the subject and waits until it is running: nthd's `READY=1`, or the loop's first
    /// read of the spot path. Returns the process, the notify listener (kept alive so nthd is
    /// never blocked on it) and how long the start took.
    async fn start(
        &self,
        nthd: &Path,
        subject: Subject,
    ) -> Result<(Proc, Option<Notify>, Duration), String> {
        let t0 = Instant::now();
        match subject {
            Subject::Nthd {
                cloud,
                interval,
                textfile,
                rebalance,
            } => {
                if rebalance {
                    self.imds.set(
                        REBALANCE_PATH,
                        Response::json(200, r#"{"noticeTime":"2026-01-01T00:00:00Z"}"#),
                    );
                }
                let mut notify = Notify::bind(self.dir.path().join("notify"))
                    .map_err(|e| format!("notify socket: {e}"))?;
                let mut p = self.spawn_nthd(nthd, cloud, interval, textfile, &notify)?;
                let Some(at) = notify.wait_ready(Duration::from_secs(10)).await else {
                    let how = if p.exited() { "exited" } else { "is running" };
                    return Err(format!(
                        "nthd sent no READY=1 within 10 s ({how}); its log:\n    {}",
                        self.log_tail()
                    ));
                };
                Ok((p, Some(notify), at.saturating_duration_since(t0)))
            }
            Subject::Curl { every } => {
                let p = self.spawn_curl_loop(every)?;
                if !self
                    .imds
                    .wait_for_count(SPOT_PATH, 1, Duration::from_secs(10))
                    .await
                {
                    return Err(format!(
                        "the curl loop did not read the spot path within 10 s; its stderr:\n    {}",
                        self.log_tail()
                    ));
                }
                Ok((p, None, t0.elapsed()))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Routes

/// The "nothing is happening" answers of a healthy instance.
fn quiet_routes(m: &MockImds, cloud: Cloud) {
    match cloud {
        // spot/instance-action, rebalance and the ASG state are 404 (unset) when nothing is up.
        Cloud::Aws => m.set(SCHEDULED_PATH, Response::json(200, "[]")),
        Cloud::Gcp => {
            m.set(GCP_PREEMPTED, Response::text(200, "FALSE"));
            m.set(GCP_MAINTENANCE, Response::text(200, "NONE"));
        }
        Cloud::Azure => {
            m.set(AZURE_NAME, Response::text(200, AZURE_VM));
            m.set(
                AZURE_EVENTS,
                Response::json(200, r#"{"DocumentIncarnation":1,"Events":[]}"#),
            );
        }
    }
}

/// Switches the interruption notice on.
fn notice_on(m: &MockImds, cloud: Cloud) {
    let now = SystemTime::now();
    match cloud {
        Cloud::Aws => m.set(
            SPOT_PATH,
            Response::json(
                200,
                format!(
                    r#"{{"action":"terminate","time":"{}"}}"#,
                    rfc3339(now + Duration::from_secs(120))
                ),
            ),
        ),
        Cloud::Gcp => m.set(GCP_PREEMPTED, Response::text(200, "TRUE")),
        Cloud::Azure => m.set(
            AZURE_EVENTS,
            Response::json(
                200,
                json!({
                    "DocumentIncarnation": 2,
                    "Events": [{
                        "EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
                        "EventStatus": "Scheduled",
                        "EventType": "Preempt",
                        "ResourceType": "VirtualMachine",
                        "Resources": [AZURE_VM],
                        "NotBefore": rfc1123(now + Duration::from_secs(30)),
                        "Description": "Virtual machine is being preempted.",
                        "EventSource": "Platform",
                        "DurationInSeconds": -1
                    }]
                })
                .to_string(),
            ),
        ),
    }
}

/// (year, month, day, hour, minute, second, weekday 0 = Sunday) of a time, UTC.
fn civil(t: SystemTime) -> (i64, u32, u32, u32, u32, u32, usize) {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    let wd = (days + 4).rem_euclid(7) as usize;
    (
        y,
        m,
        d,
        (sod / 3600) as u32,
        (sod / 60 % 60) as u32,
        (sod % 60) as u32,
        wd,
    )
}

fn rfc3339(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, _) = civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

fn rfc1123(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, mo, d, h, mi, s, wd) = civil(t);
    format!(
        "{}, {d:02} {} {y} {h:02}:{mi:02}:{s:02} GMT",
        DAYS[wd],
        MONTHS[(mo - 1) as usize]
    )
}

// ---------------------------------------------------------------------------------------------
// Detection latency

#[derive(Clone, Debug)]
struct Case {
    id: &'static str,
    title: &'static str,
    subject: Subject,
    /// The poll interval the phase is drawn from (and the ideal-latency reference).
    interval: Duration,
    /// Whether detection is by polling (the ideal p-quantile is p × interval) or by long-poll.
    polling: bool,
}

fn all_cases() -> Vec<Case> {
    let ms = Duration::from_millis;
    vec![
        Case {
            id: "nthd-aws-1s",
            title: "nthd, AWS spot, 1 s poll (default)",
            subject: Subject::Nthd {
                cloud: Cloud::Aws,
                interval: None,
                textfile: false,
                rebalance: false,
            },
            interval: ms(1000),
            polling: true,
        },
        Case {
            id: "nthd-aws-500ms",
            title: "nthd, AWS spot, 0.5 s poll",
            subject: Subject::Nthd {
                cloud: Cloud::Aws,
                interval: Some(ms(500)),
                textfile: false,
                rebalance: false,
            },
            interval: ms(500),
            polling: true,
        },
        Case {
            id: "nthd-aws-2s",
            title: "nthd, AWS spot, 2 s poll",
            subject: Subject::Nthd {
                cloud: Cloud::Aws,
                interval: Some(ms(2000)),
                textfile: false,
                rebalance: false,
            },
            interval: ms(2000),
            polling: true,
        },
        Case {
            id: "nthd-aws-rebalance",
            title: "nthd, AWS spot after a rebalance recommendation (200 ms boost)",
            subject: Subject::Nthd {
                cloud: Cloud::Aws,
                interval: None,
                textfile: false,
                rebalance: true,
            },
            interval: ms(200),
            polling: true,
        },
        Case {
            id: "nthd-gcp",
            title: "nthd, GCP preempted (long-poll)",
            subject: Subject::Nthd {
                cloud: Cloud::Gcp,
                interval: None,
                textfile: false,
                rebalance: false,
            },
            interval: ms(1000),
            polling: false,
        },
        Case {
            id: "nthd-azure",
            title: "nthd, Azure Preempt event, 0.5 s poll (default)",
            subject: Subject::Nthd {
                cloud: Cloud::Azure,
                interval: None,
                textfile: false,
                rebalance: false,
            },
            interval: ms(500),
            polling: true,
        },
        Case {
            id: "curl-5s",
            title: "bash+curl loop, 5 s (AWS advice)",
            subject: Subject::Curl { every: 5 },
            interval: ms(5000),
            polling: true,
        },
        Case {
            id: "curl-2s",
            title: "bash+curl loop, 2 s (NTH's interval)",
            subject: Subject::Curl { every: 2 },
            interval: ms(2000),
            polling: true,
        },
    ]
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.unit() * n as f64) as usize
    }
}

#[derive(Debug)]
enum TrialError {
    /// The world or the subject could not be set up: not the subject's latency.
    Setup(String),
    /// The notice was on and `PowerOff` never came: an infinite latency.
    Missed(String),
}

#[derive(Debug)]
struct Trial {
    phase: Duration,
    latency: Duration,
}

async fn trial(nthd: &Path, case: &Case, phase_frac: f64) -> Result<Trial, TrialError> {
    let cloud = case.subject.cloud();
    let world = World::new(cloud).await.map_err(TrialError::Setup)?;
    let (proc, _notify, _) = world
        .start(nthd, case.subject)
        .await
        .map_err(TrialError::Setup)?;
    let phase = case.interval.mul_f64(phase_frac);
    tokio::time::sleep(phase).await;
    let flipped = SystemTime::now();
    notice_on(&world.imds, cloud);
    let timeout = case.interval * 2 + Duration::from_secs(5);
    if !world.logind.wait_for_method("PowerOff", 1, timeout).await {
        return Err(TrialError::Missed(format!(
            "no PowerOff within {:.1} s of the notice; subject log:\n    {}",
            timeout.as_secs_f64(),
            world.log_tail()
        )));
    }
    let call = world.logind.calls_of("PowerOff").remove(0);
    drop(proc);
    if call.args != json!([false]) {
        return Err(TrialError::Missed(format!(
            "PowerOff called with {} instead of [false]",
            call.args
        )));
    }
    let latency = call.at.duration_since(flipped).unwrap_or(Duration::ZERO);
    Ok(Trial { phase, latency })
}

#[derive(Debug, Default)]
struct CaseResult {
    /// Why the case was not measured (its warm-up trial failed).
    skipped: Option<String>,
    trials: Vec<Trial>,
    missed: Vec<String>,
    setup_errors: Vec<String>,
}

async fn run_latency(args: &Args, cases: &[Case]) -> Vec<CaseResult> {
    let nthd = Arc::new(args.nthd.clone());
    let mut results: Vec<CaseResult> = cases.iter().map(|_| CaseResult::default()).collect();

    // Warm-up: one trial per case, all at once. A case whose warm-up fails is not measured
    // (e.g. a provider that is not implemented yet), instead of failing 200 times.
    eprintln!("[latency] warm-up: one trial per case");
    let mut set = tokio::task::JoinSet::new();
    for (i, c) in cases.iter().enumerate() {
        let (nthd, c) = (nthd.clone(), c.clone());
        set.spawn(async move {
            let r = tokio::time::timeout(Duration::from_secs(60), trial(&nthd, &c, 0.5)).await;
            (i, r)
        });
    }
    while let Some(j) = set.join_next().await {
        let Ok((i, r)) = j else { continue };
        let err = match r {
            Ok(Ok(_)) => None,
            Ok(Err(TrialError::Setup(e) | TrialError::Missed(e))) => Some(e),
            Err(_) => Some("the warm-up trial took more than 60 s".into()),
        };
        if let Some(e) = err {
            eprintln!("[latency] {}: NOT MEASURED: {e}", cases[i].id);
            results[i].skipped = Some(e);
        }
    }

    let mut rng = Rng(args.seed);
    let mut jobs: Vec<(usize, f64)> = Vec::new();
    for (i, _) in cases.iter().enumerate() {
        if results[i].skipped.is_none() {
            for _ in 0..args.trials {
                jobs.push((i, rng.unit()));
            }
        }
    }
    for i in (1..jobs.len()).rev() {
        let j = rng.below(i + 1);
        jobs.swap(i, j);
    }
    let total = jobs.len();
    eprintln!(
        "[latency] {total} trials, {} at a time, cases interleaved",
        args.concurrency
    );
    let sem = Arc::new(Semaphore::new(args.concurrency));
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (i, frac) in jobs {
        let permit = sem
            .clone()
            .acquire_owned()
            .await
            .expect("semaphore never closed");
        let (nthd, c) = (nthd.clone(), cases[i].clone());
        set.spawn(async move {
            let r = tokio::time::timeout(Duration::from_secs(60), trial(&nthd, &c, frac)).await;
            drop(permit);
            (i, r)
        });
        while let Some(j) = set.try_join_next() {
            record(j, &mut results, cases, total, started);
        }
    }
    while let Some(j) = set.join_next().await {
        record(j, &mut results, cases, total, started);
    }
    results
}

type Joined = Result<
    (
        usize,
        Result<Result<Trial, TrialError>, tokio::time::error::Elapsed>,
    ),
    tokio::task::JoinError,
>;

fn record(j: Joined, results: &mut [CaseResult], cases: &[Case], total: usize, t0: Instant) {
    let Ok((i, r)) = j else {
        return;
    };
    let res = &mut results[i];
    match r {
        Ok(Ok(t)) => res.trials.push(t),
        Ok(Err(TrialError::Missed(e))) => {
            eprintln!("[latency] {}: missed: {e}", cases[i].id);
            res.missed.push(e);
        }
        Ok(Err(TrialError::Setup(e))) => {
            eprintln!("[latency] {}: setup error: {e}", cases[i].id);
            res.setup_errors.push(e);
        }
        Err(_) => {
            let e = "trial took more than 60 s".to_string();
            eprintln!("[latency] {}: {e}", cases[i].id);
            res.setup_errors.push(e);
        }
    }
    let done: usize = results
        .iter()
        .map(|r| r.trials.len() + r.missed.len() + r.setup_errors.len())
        .sum();
    let step = (total / 10).max(1);
    if done.is_multiple_of(step) || done == total {
        eprintln!(
            "[latency] {done}/{total} trials done, {:.0} s",
            t0.elapsed().as_secs_f64()
        );
    }
}

/// Nearest-rank percentile of sorted values (which may end in +inf for missed trials).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

#[derive(Clone, Debug)]
struct LatencyStats {
    n: usize,
    missed: usize,
    setup_errors: usize,
    min: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    mean: f64,
    /// Estimated reaction time after the read that could first see the notice: the latency
    /// minus the wait for the next scheduled read (interval − phase, taking READY as the read
    /// just done); the whole latency for a long-poll. Approximate to a few ms (READY comes a
    /// little after that read; the poll period drifts by the read's duration).
    react_p50: f64,
    react_p99: f64,
}

fn latency_stats(c: &Case, r: &CaseResult) -> Option<LatencyStats> {
    if r.skipped.is_some() || (r.trials.is_empty() && r.missed.is_empty()) {
        return None;
    }
    let mut v: Vec<f64> = r
        .trials
        .iter()
        .map(|t| t.latency.as_secs_f64() * 1000.0)
        .collect();
    let finite_mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    v.extend(std::iter::repeat_n(f64::INFINITY, r.missed.len()));
    v.sort_by(f64::total_cmp);
    let mut react: Vec<f64> = r
        .trials
        .iter()
        .map(|t| {
            let wait = if c.polling {
                c.interval.saturating_sub(t.phase)
            } else {
                Duration::ZERO
            };
            (t.latency.as_secs_f64() - wait.as_secs_f64()) * 1000.0
        })
        .collect();
    react.extend(std::iter::repeat_n(f64::INFINITY, r.missed.len()));
    react.sort_by(f64::total_cmp);
    Some(LatencyStats {
        react_p50: percentile(&react, 50.0),
        react_p99: percentile(&react, 99.0),
        n: v.len(),
        missed: r.missed.len(),
        setup_errors: r.setup_errors.len(),
        min: v[0],
        p50: percentile(&v, 50.0),
        p90: percentile(&v, 90.0),
        p99: percentile(&v, 99.0),
        max: v[v.len() - 1],
        mean: if r.missed.is_empty() {
            finite_mean
        } else {
            f64::INFINITY
        },
    })
}

// ---------------------------------------------------------------------------------------------
// Idle cost

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

#[derive(Clone, Debug, Default)]
struct ProcSample {
    /// utime + stime, clock ticks.
    own_ticks: u64,
    /// cutime + cstime (waited-for children), clock ticks.
    child_ticks: u64,
    /// Sum of every live thread's schedstat run time, ns.
    sched_ns: u64,
    tids: Vec<u64>,
}

fn sample(pid: i32) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // After the comm field: state is index 0, utime 11, stime 12, cutime 13, cstime 14.
    let mut s = ProcSample {
        own_ticks: f.get(11)? + f.get(12)?,
        child_ticks: f.get(13)? + f.get(14)?,
        ..ProcSample::default()
    };
    for e in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        if let Ok(ss) = std::fs::read_to_string(e.path().join("schedstat")) {
            s.sched_ns += ss
                .split_whitespace()
                .next()
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(0);
        }
        s.tids.push(tid);
    }
    s.tids.sort_unstable();
    Some(s)
}

/// `VmHWM` in KiB.
fn vm_hwm_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn perf_works() -> bool {
    Command::new("perf")
        .args(["stat", "-x,", "-e", "task-clock", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Peak RSS (KiB) of one curl read of the spot path, as the loop does it (`ru_maxrss`).
fn curl_peak_rss_kib(url: &str) -> Option<u64> {
    let child = Command::new("curl")
        .args([
            "-s",
            "-f",
            "-m",
            "5",
            "-H",
            "X-aws-ec2-metadata-token: bench",
            &format!("{url}{SPOT_PATH}"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 writes into the two locals only.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    (r > 0).then_some(ru.ru_maxrss as u64)
}

#[derive(Clone, Debug)]
struct IdleResult {
    label: String,
    window_s: f64,
    /// CPU seconds per hour by the best method available, and that method.
    cpu_s_per_h: f64,
    cpu_method: &'static str,
    /// utime+stime+cutime+cstime from /proc/PID/stat, per hour (10 ms resolution).
    ticks_s_per_h: f64,
    peak_rss_kib: Option<u64>,
    curl_rss_kib: Option<u64>,
    requests: usize,
    req_per_s: f64,
    threads: usize,
    note: Option<String>,
    /// CPU-s/h of every replica, ascending.
    cpu_all: Vec<f64>,
}

/// How many copies of each idle subject run side by side.
const IDLE_REPLICAS: usize = 3;

/// The replica with the median CPU, carrying every replica's CPU figure; an error if any failed.
fn median_idle(runs: Vec<Result<IdleResult, String>>) -> Result<IdleResult, String> {
    let mut ok = Vec::new();
    for r in runs {
        ok.push(r?);
    }
    ok.sort_by(|a, b| a.cpu_s_per_h.total_cmp(&b.cpu_s_per_h));
    let all: Vec<f64> = ok.iter().map(|r| r.cpu_s_per_h).collect();
    let mid = ok.len() / 2;
    let mut m = ok.into_iter().nth(mid).ok_or("no idle run")?;
    m.cpu_all = all;
    Ok(m)
}

async fn idle_run(
    args: &Args,
    subject: Subject,
    label: String,
    use_perf: bool,
) -> Result<IdleResult, String> {
    let world = World::new(subject.cloud()).await?;
    let (mut proc, _notify, _) = world.start(&args.nthd, subject).await?;
    // Let the first token fetch and the first round of every source pass.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pid = proc.pid();
    let tick = clock_ticks();
    let s0 = sample(pid).ok_or("cannot read /proc for the subject")?;
    let t0 = SystemTime::now();
    let i0 = Instant::now();
    let perf_out = world.dir.path().join("perf.txt");
    let perf = if use_perf {
        let mut cmd = Command::new("perf");
        cmd.args(["stat", "-x,", "-e", "task-clock", "-o"])
            .arg(&perf_out)
            .arg("-p")
            .arg(pid.to_string())
            .arg("--")
            .arg("sleep")
            .arg(format!("{}", args.idle.as_secs_f64()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Some(Proc::spawn(cmd).map_err(|e| format!("perf: {e}"))?)
    } else {
        None
    };
    tokio::time::sleep(args.idle).await;
    if let Some(mut p) = perf {
        let end = Instant::now() + Duration::from_secs(10);
        while !p.exited() && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let s1 = sample(pid).ok_or("the subject exited during the idle window")?;
    let elapsed = i0.elapsed().as_secs_f64();
    let t1 = SystemTime::now();
    let peak = vm_hwm_kib(pid);
    if proc.exited() {
        return Err(format!(
            "the subject exited during the idle window; log:\n    {}",
            world.log_tail()
        ));
    }
    if world.logind.power_off_count() > 0 {
        return Err("the subject called PowerOff with no notice".into());
    }
    let (from, to) = (nthd_testkit::unix_ms(t0), nthd_testkit::unix_ms(t1));
    let requests = world
        .imds
        .requests()
        .iter()
        .filter(|r| r.t_ms >= from && r.t_ms < to)
        .count();
    let ticks = (s1.own_ticks + s1.child_ticks).saturating_sub(s0.own_ticks + s0.child_ticks);
    let ticks_s_per_h = ticks as f64 / tick / elapsed * 3600.0;
    let perf_ms = if use_perf {
        std::fs::read_to_string(&perf_out).ok().and_then(|s| {
            s.lines()
                .find(|l| l.contains("task-clock"))
                .and_then(|l| l.split(',').next())
                .and_then(|v| match v.trim() {
                    // perf's word for "the process never ran during the window".
                    "<not counted>" => Some(0.0),
                    v => v.parse::<f64>().ok(),
                })
        })
    } else {
        None
    };
    let mut note = None;
    let (cpu_s_per_h, cpu_method) = match (perf_ms, subject) {
        (Some(ms), _) => (
            ms / 1000.0 / args.idle.as_secs_f64() * 3600.0,
            "perf task-clock",
        ),
        (None, Subject::Nthd { .. }) => {
            if s0.tids != s1.tids {
                note = Some(
                    "threads came and went during the window; schedstat may undercount".into(),
                );
            }
            (
                s1.sched_ns.saturating_sub(s0.sched_ns) as f64 / 1e9 / elapsed * 3600.0,
                "schedstat",
            )
        }
        (None, Subject::Curl { .. }) => (ticks_s_per_h, "/proc ticks"),
    };
    let curl_rss_kib = match subject {
        Subject::Curl { .. } => {
            let url = world.imds.url();
            let mut v: Vec<u64> = Vec::new();
            for _ in 0..5 {
                let u = url.clone();
                if let Ok(Some(k)) =
                    tokio::task::spawn_blocking(move || curl_peak_rss_kib(&u)).await
                {
                    v.push(k);
                }
            }
            v.sort_unstable();
            v.get(v.len() / 2).copied()
        }
        _ => None,
    };
    drop(proc);
    Ok(IdleResult {
        label,
        window_s: elapsed,
        cpu_s_per_h,
        cpu_method,
        ticks_s_per_h,
        peak_rss_kib: peak,
        curl_rss_kib,
        requests,
        req_per_s: requests as f64 / elapsed,
        threads: s1.tids.len(),
        note,
        cpu_all: Vec::new(),
    })
}

// ---------------------------------------------------------------------------------------------
// Startup

async fn startup(args: &Args) -> Result<Vec<f64>, String> {
    let world = World::new(Cloud::Aws).await?;
    let mut v = Vec::new();
    for i in 0..args.starts {
        let subject = Subject::Nthd {
            cloud: Cloud::Aws,
            interval: None,
            textfile: false,
            rebalance: false,
        };
        let (p, _n, took) = world
            .start(&args.nthd, subject)
            .await
            .map_err(|e| format!("start {}: {e}", i + 1))?;
        drop(p);
        drop(_n);
        let _ = std::fs::remove_file(world.dir.path().join("notify"));
        v.push(took.as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------------
// Binary

/// Whether an ELF file has a symbol table or debug sections (i.e. is not stripped).
fn elf_has_symbols(bytes: &[u8]) -> Option<bool> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?));
    if bytes.get(0..4)? != b"\x7fELF" || *bytes.get(4)? != 2 || *bytes.get(5)? != 1 {
        return None; // only 64-bit little-endian ELF
    }
    let shoff = u64_at(0x28)? as usize;
    let shentsize = u16_at(0x3a)? as usize;
    let shnum = u16_at(0x3c)? as usize;
    let shstrndx = u16_at(0x3e)? as usize;
    let sh = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(sh(shstrndx) + 0x18)? as usize;
    for i in 0..shnum {
        let name_off = strtab + u32_at(sh(i))? as usize;
        let name = bytes.get(name_off..)?;
        let name = &name[..name.iter().position(|b| *b == 0)?];
        if name == b".symtab" || name.starts_with(b".debug_") {
            return Some(true);
        }
    }
    Some(false)
}

// ---------------------------------------------------------------------------------------------
// Host

fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn loadavg() -> (f64, f64, f64) {
    let s = read_trim("/proc/loadavg");
    let v: Vec<f64> = s
        .split_whitespace()
        .take(3)
        .map(|x| x.parse().unwrap_or(f64::NAN))
        .collect();
    (
        v.first().copied().unwrap_or(f64::NAN),
        v.get(1).copied().unwrap_or(f64::NAN),
        v.get(2).copied().unwrap_or(f64::NAN),
    )
}

fn cpu_model() -> String {
    read_trim("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

// ---------------------------------------------------------------------------------------------
// Report

fn ms(v: f64) -> String {
    if v.is_infinite() {
        "∞ (missed)".into()
    } else if v.is_nan() {
        "—".into()
    } else if v < 10.0 {
        format!("{v:.2} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn num_or_null(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 1000.0).round() / 1000.0)
    } else if v.is_infinite() {
        json!("inf")
    } else {
        Value::Null
    }
}

fn mib(kib: u64) -> String {
    format!("{:.2} MiB", kib as f64 / 1024.0)
}

struct Target {
    name: String,
    goal: String,
    measured: String,
    /// None: not measured.
    pass: Option<bool>,
    margin: String,
}

impl Target {
    /// `lower is better` target: value ≤ limit.
    fn le(
        name: &str,
        goal: String,
        value: Option<f64>,
        limit: f64,
        show: impl Fn(f64) -> String,
    ) -> Target {
        match value {
            Some(v) if !v.is_nan() => Target {
                name: name.into(),
                goal,
                measured: show(v),
                pass: Some(v <= limit),
                margin: if v.is_infinite() {
                    "missed trials".into()
                } else if v <= limit {
                    format!("{:.0}% of the limit", v / limit * 100.0)
                } else {
                    format!(
                        "over by {} (+{:.0}%)",
                        show(v - limit),
                        (v / limit - 1.0) * 100.0
                    )
                },
            },
            _ => Target {
                name: name.into(),
                goal,
                measured: "not measured".into(),
                pass: None,
                margin: String::new(),
            },
        }
    }

    fn verdict(&self) -> &'static str {
        match self.pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "N/A",
        }
    }
}

struct Report {
    args: Args,
    started: SystemTime,
    duration_s: f64,
    load_start: (f64, f64, f64),
    load_end: (f64, f64, f64),
    load_max_1m: f64,
    cases: Vec<Case>,
    latency: Vec<CaseResult>,
    idle: Vec<(String, Result<IdleResult, String>)>,
    startup: Result<Vec<f64>, String>,
    binary: Option<(u64, Option<bool>)>,
    perf: bool,
    nthd_version: String,
    git_rev: String,
}

impl Report {
    fn stats(&self, id: &str) -> Option<LatencyStats> {
        let i = self.cases.iter().position(|c| c.id == id)?;
        latency_stats(&self.cases[i], &self.latency[i])
    }

    fn idle_of(&self, label: &str) -> Option<&IdleResult> {
        self.idle
            .iter()
            .find(|(l, _)| l == label)
            .and_then(|(_, r)| r.as_ref().ok())
    }

    fn startup_median(&self) -> Option<f64> {
        self.startup.as_ref().ok().map(|v| {
            let mut v = v.clone();
            v.sort_by(f64::total_cmp);
            percentile(&v, 50.0)
        })
    }

    fn targets(&self) -> Vec<Target> {
        let nthd_idle = self.idle_of("nthd-aws-1s");
        vec![
            Target::le(
                "AWS spot detection p99, default 1 s poll",
                "≤ 1100 ms".into(),
                self.stats("nthd-aws-1s").map(|s| s.p99),
                1100.0,
                ms,
            ),
            Target::le(
                "AWS spot detection p99 after a rebalance recommendation (200 ms boost)",
                "≤ 300 ms".into(),
                self.stats("nthd-aws-rebalance").map(|s| s.p99),
                300.0,
                ms,
            ),
            Target::le(
                "GCP preemption detection p99 (long-poll)",
                "≤ 200 ms".into(),
                self.stats("nthd-gcp").map(|s| s.p99),
                200.0,
                ms,
            ),
            Target::le(
                "Idle CPU, nthd AWS defaults",
                "≤ 1 CPU-s/hour".into(),
                nthd_idle.map(|r| r.cpu_s_per_h),
                1.0,
                |v| format!("{v:.3} CPU-s/h"),
            ),
            Target::le(
                "Peak RSS (VmHWM), nthd AWS defaults",
                "≤ 8 MiB".into(),
                nthd_idle.and_then(|r| r.peak_rss_kib).map(|k| k as f64),
                8.0 * 1024.0,
                |v| mib(v as u64),
            ),
            Target::le(
                "Stripped release binary",
                "≤ 6 MiB".into(),
                self.binary.map(|(b, _)| b as f64),
                6.0 * 1024.0 * 1024.0,
                |v| format!("{:.2} MiB", v / 1024.0 / 1024.0),
            ),
            Target::le(
                "Start → READY=1, median",
                "≤ 100 ms".into(),
                self.startup_median(),
                100.0,
                ms,
            ),
            Target::le(
                "IMDS request rate, AWS defaults, idle",
                "≤ 1.5 req/s".into(),
                nthd_idle.map(|r| r.req_per_s),
                1.5,
                |v| format!("{v:.3} req/s"),
            ),
        ]
    }

    fn markdown(&self) -> String {
        let mut o = String::new();
        let (y, mo, d, h, mi, s, _) = civil(self.started);
        let mode = if self.args.smoke { "smoke" } else { "full" };
        o += &format!("# nthd benchmark ({mode} run)\n\n");
        o += &format!(
            "- Date: {y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC, took {:.0} s\n",
            self.duration_s
        );
        o += &format!(
            "- Host: Linux {}, CPU: {} × {}\n",
            read_trim("/proc/sys/kernel/osrelease"),
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0),
            cpu_model()
        );
        o += &format!(
            "- Load average (1/5/15 min): {:.2} / {:.2} / {:.2} at start, {:.2} / {:.2} / {:.2} at end, 1-min peak {:.2}\n",
            self.load_start.0, self.load_start.1, self.load_start.2,
            self.load_end.0, self.load_end.1, self.load_end.2, self.load_max_1m
        );
        o += "- **Shared machine**: other jobs (including compilers) may run at the same time, so \
              every number includes their noise; latency cases are interleaved so they all see \
              the same noise.\n";
        o += &format!(
            "- nthd: `{}` ({}, git {}); {} trials per case, {} at a time; idle window {} s; {} starts; seed {}\n\n",
            self.args.nthd.display(),
            self.nthd_version,
            self.git_rev,
            self.args.trials,
            self.args.concurrency,
            self.args.idle.as_secs(),
            self.args.starts,
            self.args.seed
        );

        o +=
            "## Targets\n\n| Target | Goal | Measured | Result | Margin |\n|---|---|---|---|---|\n";
        for t in self.targets() {
            o += &format!(
                "| {} | {} | {} | **{}** | {} |\n",
                t.name,
                t.goal,
                t.measured,
                t.verdict(),
                t.margin
            );
        }

        o += "\n## Detection latency (notice on in the mock → PowerOff received by logind)\n\n";
        o += "| Case | Trials | p50 | p90 | p99 | max | Ideal p50 / p99 | Reaction p50 / p99 \
              | Missed | Setup errors |\n";
        o += "|---|---|---|---|---|---|---|---|---|---|\n";
        for (c, r) in self.cases.iter().zip(&self.latency) {
            let ideal = if c.polling {
                format!(
                    "{} / {}",
                    ms(c.interval.as_secs_f64() * 500.0),
                    ms(c.interval.as_secs_f64() * 990.0)
                )
            } else {
                "0 / 0".into()
            };
            match (&r.skipped, latency_stats(c, r)) {
                (Some(e), _) => {
                    let first = e.lines().next().unwrap_or("").replace('|', "/");
                    o += &format!(
                        "| {} | not measured: {} | | | | | {} | | | |\n",
                        c.title, first, ideal
                    );
                }
                (None, Some(s)) => {
                    o += &format!(
                        "| {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} |\n",
                        c.title,
                        s.n,
                        ms(s.p50),
                        ms(s.p90),
                        ms(s.p99),
                        ms(s.max),
                        ideal,
                        ms(s.react_p50),
                        ms(s.react_p99),
                        s.missed,
                        s.setup_errors
                    )
                }
                (None, None) => {
                    o += &format!(
                        "| {} | no trial completed ({} setup errors) | | | | | {} | | | |\n",
                        c.title,
                        r.setup_errors.len(),
                        ideal
                    );
                }
            }
        }
        o += "\nThe ideal is a poller that reacts the instant its read returns: the notice lands \
              at a uniformly random point of the poll cycle, so p50 = interval/2 and p99 = \
              0.99 × interval. \"Reaction\" estimates the part after the read that could first \
              see the notice: latency minus (interval − phase), or the whole latency for a \
              long-poll; it is the subject's own cost (nthd: HTTP round trip, parsing, state \
              fsync, two D-Bus round trips; the loop: spawning curl and dbus-send, plus its \
              period stretching by each curl's run time) plus scheduling noise, good to a few \
              ms.\n";

        o += "\n## Compared with the bash+curl loop\n\n";
        o += "| nthd AWS 1 s vs | p50 ratio | p99 ratio | idle CPU ratio |\n|---|---|---|---|\n";
        let n = self.stats("nthd-aws-1s");
        let ni = self.idle_of("nthd-aws-1s");
        for id in ["curl-5s", "curl-2s"] {
            let c = self.stats(id);
            let ci = self.idle_of(id);
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if a.is_finite() && b.is_finite() && a > 0.0 => {
                    format!("{:.2}× ({:.1}× lower)", a / b, b / a)
                }
                _ => "—".into(),
            };
            o += &format!(
                "| loop every {} | {} | {} | {} |\n",
                &id[5..],
                ratio(n.as_ref().map(|s| s.p50), c.as_ref().map(|s| s.p50)),
                ratio(n.as_ref().map(|s| s.p99), c.as_ref().map(|s| s.p99)),
                ratio(ni.map(|r| r.cpu_s_per_h), ci.map(|r| r.cpu_s_per_h)),
            );
        }

        o += &format!(
            "\n## Idle cost (no notice, {} s window)\n\n",
            self.args.idle.as_secs()
        );
        o += "| Subject | CPU-s per hour, median (all replicas) | method | /proc ticks CPU-s/h | Peak RSS | IMDS req/s | Threads |\n";
        o += "|---|---|---|---|---|---|---|\n";
        for (label, r) in &self.idle {
            match r {
                Ok(r) => {
                    let rss = match r.curl_rss_kib {
                        Some(c) => format!(
                            "{} (bash) + {} (each curl)",
                            r.peak_rss_kib.map(mib).unwrap_or("—".into()),
                            mib(c)
                        ),
                        None => r.peak_rss_kib.map(mib).unwrap_or("—".into()),
                    };
                    o += &format!(
                        "| {} | {:.3} ({}) | {} | {:.2} | {} | {:.3} | {} |\n",
                        r.label,
                        r.cpu_s_per_h,
                        r.cpu_all
                            .iter()
                            .map(|v| format!("{v:.2}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        r.cpu_method,
                        r.ticks_s_per_h,
                        rss,
                        r.req_per_s,
                        r.threads
                    );
                }
                Err(e) => {
                    o += &format!(
                        "| {label} | not measured: {} | | | | | |\n",
                        e.lines().next().unwrap_or("").replace('|', "/")
                    )
                }
            }
        }
        o += &format!(
            "\n{IDLE_REPLICAS} copies of each subject ran side by side in the same window; the \
             row shows the median copy. CPU counts the whole process tree (perf follows the \
             loop's forked curl, sleep and dbus-send). The /proc tick column is \
             utime+stime+cutime+cstime at 10 ms resolution (coarse for nthd). nthd runs as the \
             unit does: Type=notify with WatchdogSec=30s, logging at warn to a file.\n"
        );

        o += "\n## Startup and size\n\n| Metric | Value |\n|---|---|\n";
        match &self.startup {
            Ok(v) => {
                let mut v = v.clone();
                v.sort_by(f64::total_cmp);
                o += &format!(
                    "| spawn → READY=1 ({} starts) | median {}, p90 {}, min {}, max {} |\n",
                    v.len(),
                    ms(percentile(&v, 50.0)),
                    ms(percentile(&v, 90.0)),
                    ms(v[0]),
                    ms(v[v.len() - 1])
                );
            }
            Err(e) => o += &format!("| spawn → READY=1 | not measured: {e} |\n"),
        }
        match self.binary {
            Some((b, sym)) => {
                o += &format!(
                    "| `{}` size | {} bytes ({:.2} MiB), {} |\n",
                    self.args.nthd.display(),
                    b,
                    b as f64 / 1024.0 / 1024.0,
                    match sym {
                        Some(false) => "stripped",
                        Some(true) => "NOT stripped",
                        None => "strip state unknown",
                    }
                )
            }
            None => o += "| binary size | not measured |\n",
        }
        o += "\nREADY=1 comes after nthd's first complete read of every source (AWS: token PUT \
              and four GETs) and logind's InhibitDelayMaxUSec, so it includes real I/O.\n";

        let problems: Vec<String> = self
            .cases
            .iter()
            .zip(&self.latency)
            .flat_map(|(c, r)| {
                r.missed
                    .iter()
                    .chain(&r.setup_errors)
                    .take(3)
                    .map(move |e| format!("- {}: {}", c.id, e.lines().next().unwrap_or("")))
            })
            .collect();
        if !problems.is_empty() {
            o += "\n## Failed trials (first three per case)\n\n";
            o += &problems.join("\n");
            o += "\n";
        }
        o += &format!(
            "\n_Generated by `testkit/src/bin/nthd-bench.rs` (`bash bench/run.sh{}`); raw samples in latest.json._\n",
            if self.args.smoke { " --smoke" } else { "" }
        );
        o
    }

    fn json(&self) -> Value {
        let latency: Vec<Value> = self
            .cases
            .iter()
            .zip(&self.latency)
            .map(|(c, r)| {
                let s = latency_stats(c, r);
                json!({
                    "id": c.id,
                    "title": c.title,
                    "interval_ms": c.interval.as_millis() as u64,
                    "polling": c.polling,
                    "skipped": r.skipped,
                    "trials": s.as_ref().map(|s| s.n),
                    "missed": r.missed.len(),
                    "setup_errors": r.setup_errors.len(),
                    "min_ms": s.as_ref().map(|s| num_or_null(s.min)),
                    "p50_ms": s.as_ref().map(|s| num_or_null(s.p50)),
                    "p90_ms": s.as_ref().map(|s| num_or_null(s.p90)),
                    "p99_ms": s.as_ref().map(|s| num_or_null(s.p99)),
                    "max_ms": s.as_ref().map(|s| num_or_null(s.max)),
                    "mean_ms": s.as_ref().map(|s| num_or_null(s.mean)),
                    "reaction_p50_ms": s.as_ref().map(|s| num_or_null(s.react_p50)),
                    "reaction_p99_ms": s.as_ref().map(|s| num_or_null(s.react_p99)),
                    "samples": r.trials.iter().map(|t| json!({
                        "latency_ms": num_or_null(t.latency.as_secs_f64() * 1000.0),
                        "phase_ms": num_or_null(t.phase.as_secs_f64() * 1000.0),
                    })).collect::<Vec<_>>(),
                    "errors": r.missed.iter().chain(&r.setup_errors).collect::<Vec<_>>(),
                })
            })
            .collect();
        let idle: BTreeMap<String, Value> = self
            .idle
            .iter()
            .map(|(label, r)| {
                let v = match r {
                    Ok(r) => json!({
                        "window_s": num_or_null(r.window_s),
                        "cpu_s_per_hour": num_or_null(r.cpu_s_per_h),
                        "cpu_method": r.cpu_method,
                        "cpu_s_per_hour_replicas": r.cpu_all.iter().map(|v| num_or_null(*v)).collect::<Vec<_>>(),
                        "proc_ticks_cpu_s_per_hour": num_or_null(r.ticks_s_per_h),
                        "peak_rss_kib": r.peak_rss_kib,
                        "curl_peak_rss_kib": r.curl_rss_kib,
                        "imds_requests": r.requests,
                        "imds_requests_per_s": num_or_null(r.req_per_s),
                        "threads": r.threads,
                        "note": r.note,
                    }),
                    Err(e) => json!({ "error": e }),
                };
                (label.clone(), v)
            })
            .collect();
        let targets: Vec<Value> = self
            .targets()
            .iter()
            .map(|t| {
                json!({
                    "target": t.name, "goal": t.goal, "measured": t.measured,
                    "result": t.verdict(), "margin": t.margin,
                })
            })
            .collect();
        json!({
            "mode": if self.args.smoke { "smoke" } else { "full" },
            "date_unix_ms": nthd_testkit::unix_ms(self.started),
            "date": rfc3339(self.started),
            "duration_s": num_or_null(self.duration_s),
            "host": {
                "kernel": read_trim("/proc/sys/kernel/osrelease"),
                "cpu_model": cpu_model(),
                "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                "loadavg_start": [self.load_start.0, self.load_start.1, self.load_start.2],
                "loadavg_end": [self.load_end.0, self.load_end.1, self.load_end.2],
                "loadavg_1m_peak": self.load_max_1m,
                "shared": true,
                "note": "shared machine: other jobs (compilers) may run concurrently; numbers include that noise",
            },
            "settings": {
                "nthd": self.args.nthd.display().to_string(),
                "nthd_version": self.nthd_version,
                "git_rev": self.git_rev,
                "trials_per_case": self.args.trials,
                "concurrency": self.args.concurrency,
                "idle_window_s": self.args.idle.as_secs(),
                "starts": self.args.starts,
                "seed": self.args.seed,
                "perf": self.perf,
            },
            "targets": targets,
            "latency": latency,
            "idle": idle,
            "startup_ms": match &self.startup {
                Ok(v) => json!({
                    "median": self.startup_median().map(num_or_null),
                    "samples": v.iter().map(|x| num_or_null(*x)).collect::<Vec<_>>(),
                }),
                Err(e) => json!({ "error": e }),
            },
            "binary": self.binary.map(|(b, sym)| json!({ "bytes": b, "stripped": sym.map(|s| !s) })),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Main

/// Runs everything and writes the report. `Ok(false)` when something could not be measured.
async fn run(args: Args) -> Result<bool, String> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let load_start = loadavg();
    let load_peak = Arc::new(Mutex::new(load_start.0));
    let _load_sampler = {
        let peak = load_peak.clone();
        AbortOnDrop(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                let l = loadavg().0;
                let mut p = lock(&peak);
                if l > *p {
                    *p = l;
                }
            }
        }))
    };

    let nthd = &args.nthd;
    let bytes = std::fs::read(nthd).map_err(|e| {
        format!(
            "cannot read {}: {e} (build it: cargo build --release -p nthd)",
            nthd.display()
        )
    })?;
    let binary = Some((bytes.len() as u64, elf_has_symbols(&bytes)));
    drop(bytes);
    let nthd_version = command_output(&nthd.to_string_lossy(), &["--version"]).unwrap_or_default();
    let git_rev =
        command_output("git", &["describe", "--always", "--dirty"]).unwrap_or("unknown".into());
    let perf = perf_works();
    eprintln!(
        "nthd-bench: {} ({nthd_version}); CPU measured with {}",
        nthd.display(),
        if perf {
            "perf task-clock"
        } else {
            "/proc (perf unavailable)"
        }
    );

    let wanted = |id: &str| {
        args.cases
            .as_ref()
            .is_none_or(|c| c.iter().any(|x| x == id))
    };
    let cases: Vec<Case> = all_cases().into_iter().filter(|c| wanted(c.id)).collect();
    if let Some(list) = &args.cases {
        for id in list {
            if !all_cases().iter().any(|c| c.id == id) {
                return Err(format!(
                    "unknown case `{id}`; cases: {}",
                    all_cases()
                        .iter()
                        .map(|c| c.id)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }

    // 1. Startup, alone on the machine (as far as this bench goes).
    eprintln!("[startup] {} sequential starts", args.starts);
    let startup = startup(&args).await;
    if let Err(e) = &startup {
        eprintln!("[startup] failed: {e}");
    }

    // 2. Idle cost, the subjects side by side.
    eprintln!("[idle] {} s window", args.idle.as_secs());
    let mut idle_subjects: Vec<(String, Subject)> = vec![
        (
            "nthd-aws-1s".into(),
            Subject::Nthd {
                cloud: Cloud::Aws,
                interval: None,
                textfile: false,
                rebalance: false,
            },
        ),
        (
            "nthd-aws-rebalance".into(),
            Subject::Nthd {
                cloud: Cloud::Aws,
                interval: None,
                textfile: false,
                rebalance: true,
            },
        ),
        (
            "nthd-aws-1s-textfile".into(),
            Subject::Nthd {
                cloud: Cloud::Aws,
                interval: None,
                textfile: true,
                rebalance: false,
            },
        ),
        ("curl-5s".into(), Subject::Curl { every: 5 }),
        ("curl-2s".into(), Subject::Curl { every: 2 }),
    ];
    for (cloud, id) in [(Cloud::Gcp, "nthd-gcp"), (Cloud::Azure, "nthd-azure")] {
        if wanted(id) {
            idle_subjects.push((
                id.into(),
                Subject::Nthd {
                    cloud,
                    interval: None,
                    textfile: false,
                    rebalance: false,
                },
            ));
        }
    }
    // Several replicas of each subject in the same window; the median one is reported.
    let mut set = tokio::task::JoinSet::new();
    for (i, (label, subject)) in idle_subjects.iter().cloned().enumerate() {
        for _ in 0..IDLE_REPLICAS {
            let (a, label) = (args.clone(), label.clone());
            set.spawn(async move {
                let r = tokio::time::timeout(
                    a.idle + Duration::from_secs(60),
                    idle_run(&a, subject, label, perf),
                )
                .await
                .unwrap_or_else(|_| Err("idle measurement timed out".into()));
                (i, r)
            });
        }
    }
    let mut runs: Vec<Vec<Result<IdleResult, String>>> =
        idle_subjects.iter().map(|_| Vec::new()).collect();
    while let Some(j) = set.join_next().await {
        if let Ok((i, r)) = j {
            if let Err(e) = &r {
                eprintln!("[idle] {}: {e}", idle_subjects[i].0);
            }
            runs[i].push(r);
        }
    }
    let idle: Vec<(String, Result<IdleResult, String>)> = idle_subjects
        .iter()
        .zip(runs)
        .map(|((label, _), rs)| (label.clone(), median_idle(rs)))
        .collect();

    // 3. Detection latency.
    let latency = run_latency(&args, &cases).await;

    let report = Report {
        load_end: loadavg(),
        load_max_1m: *lock(&load_peak),
        duration_s: t0.elapsed().as_secs_f64(),
        args: args.clone(),
        started,
        load_start,
        cases,
        latency,
        idle,
        startup,
        binary,
        perf,
        nthd_version,
        git_rev,
    };
    let md = report.markdown();
    let js = serde_json::to_string_pretty(&report.json()).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    std::fs::write(args.out.join("latest.md"), &md).map_err(|e| e.to_string())?;
    std::fs::write(args.out.join("latest.json"), js + "\n").map_err(|e| e.to_string())?;
    println!("{md}");
    eprintln!(
        "nthd-bench: wrote {} and {}",
        args.out.join("latest.md").display(),
        args.out.join("latest.json").display()
    );
    let complete = report.startup.is_ok()
        && report.idle.iter().all(|(_, r)| r.is_ok())
        && report
            .latency
            .iter()
            .all(|r| r.skipped.is_none() && r.missed.is_empty() && r.setup_errors.is_empty());
    Ok(complete)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("nthd-bench: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };

    // All scratch files (state dirs, notify sockets, the private buses' sockets) live under one
    // directory removed on every exit path; PrivateBus uses TMPDIR, so point it there too
    // (before any thread exists).
    let scratch = std::env::temp_dir().join(format!("nthd-bench-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&scratch) {
        eprintln!("nthd-bench: cannot create {}: {e}", scratch.display());
        return ExitCode::FAILURE;
    }
    *lock(&SCRATCH) = Some(scratch.clone());
    std::env::set_var("TMPDIR", &scratch);

    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        emergency_cleanup();
        default_hook(info);
    }));

    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nthd-bench: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let check = args.check;
    let result = rt.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
        tokio::select! {
            r = run(args) => r,
            _ = term.recv() => Err("interrupted by SIGTERM".into()),
            _ = int.recv() => Err("interrupted by SIGINT".into()),
        }
    });
    // Whatever is still running (an interrupted run) dies here; drops already handled the rest.
    emergency_cleanup();
    rt.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) if check => {
            eprintln!("nthd-bench: --check: something could not be measured (see the report)");
            ExitCode::from(3)
        }
        Ok(false) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nthd-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
