//! Idle cost: the subjects side by side with no notice for the window. CPU is `perf stat -e
//! task-clock -p PID` when perf works (it follows the loop's forked children), else per-thread
//! schedstat (nthd) or utime+stime+cutime+cstime (the loop); peak RSS is `VmHWM`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::args::Args;
use crate::cleanup::Proc;
use crate::procfs::{clock_ticks, sample, vm_hwm_kib, ProcSample};
use crate::routes::SPOT_PATH;
use crate::world::{Cloud, Subject, World};

/// How many copies of each idle subject run side by side.
pub(crate) const IDLE_REPLICAS: usize = 3;

#[derive(Clone, Debug)]
pub(crate) struct IdleResult {
    pub label: String,
    pub window_s: f64,
    /// CPU seconds per hour by the best method available, and that method.
    pub cpu_s_per_h: f64,
    pub cpu_method: &'static str,
    /// utime+stime+cutime+cstime from /proc/PID/stat, per hour (10 ms resolution).
    pub ticks_s_per_h: f64,
    pub peak_rss_kib: Option<u64>,
    pub curl_rss_kib: Option<u64>,
    pub requests: usize,
    pub req_per_s: f64,
    pub threads: usize,
    pub note: Option<String>,
    /// CPU-s/h of every replica, ascending.
    pub cpu_all: Vec<f64>,
}

/// Whether `perf stat` can count here (root, or `kernel.perf_event_paranoid` ≤ 2).
pub(crate) fn perf_works() -> bool {
    Command::new("perf")
        .args(["stat", "-x,", "-e", "task-clock", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `perf stat -e task-clock` on `pid` for `secs`, writing to `out`.
fn spawn_perf(pid: i32, secs: Duration, out: &Path) -> Result<Proc, String> {
    let mut cmd = Command::new("perf");
    cmd.args(["stat", "-x,", "-e", "task-clock", "-o"])
        .arg(out)
        .arg("-p")
        .arg(pid.to_string())
        .arg("--")
        .arg("sleep")
        .arg(format!("{}", secs.as_secs_f64()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Proc::spawn(cmd).map_err(|e| format!("perf: {e}"))
}

/// The task-clock milliseconds perf wrote.
fn perf_task_clock_ms(out: &Path) -> Option<f64> {
    let s = std::fs::read_to_string(out).ok()?;
    let line = s.lines().find(|l| l.contains("task-clock"))?;
    match line.split(',').next()?.trim() {
        // perf's word for "the process never ran during the window".
        "<not counted>" => Some(0.0),
        v => v.parse::<f64>().ok(),
    }
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
        ])
        .arg(format!("{url}{SPOT_PATH}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 writes into the two locals only.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4(2) writes only into the two locals, which outlive the call.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    (r > 0).then_some(ru.ru_maxrss as u64)
}

/// The median of five curls' peak RSS.
async fn typical_curl_rss_kib(url: String) -> Option<u64> {
    let mut v: Vec<u64> = Vec::new();
    for _ in 0..5 {
        let u = url.clone();
        if let Ok(Some(k)) = tokio::task::spawn_blocking(move || curl_peak_rss_kib(&u)).await {
            v.push(k);
        }
    }
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// What one window saw: /proc before and after, perf's figure, wall time.
struct Window {
    s0: ProcSample,
    s1: ProcSample,
    perf_ms: Option<f64>,
    elapsed: f64,
    from_ms: u64,
    to_ms: u64,
}

/// Samples `pid` over the window, with perf alongside when `use_perf`.
async fn measure(
    pid: i32,
    idle: Duration,
    perf_out: PathBuf,
    use_perf: bool,
) -> Result<Window, String> {
    let s0 = sample(pid).ok_or("cannot read /proc for the subject")?;
    let from_ms = nthd_testkit::now_ms();
    let i0 = Instant::now();
    let perf = use_perf
        .then(|| spawn_perf(pid, idle, &perf_out))
        .transpose()?;
    tokio::time::sleep(idle).await;
    if let Some(mut p) = perf {
        let end = Instant::now() + Duration::from_secs(10);
        while !p.exited() && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let s1 = sample(pid).ok_or("the subject exited during the idle window")?;
    Ok(Window {
        s0,
        s1,
        perf_ms: use_perf.then(|| perf_task_clock_ms(&perf_out)).flatten(),
        elapsed: i0.elapsed().as_secs_f64(),
        from_ms,
        to_ms: nthd_testkit::now_ms(),
    })
}

impl Window {
    fn per_hour(&self, secs: f64) -> f64 {
        secs / self.elapsed * 3600.0
    }

    /// CPU-s per hour by the best method, the method, and a caveat.
    fn cpu(&self, subject: Subject, idle: Duration) -> (f64, &'static str, Option<String>) {
        match (self.perf_ms, subject) {
            (Some(ms), _) => (
                ms / 1000.0 / idle.as_secs_f64() * 3600.0,
                "perf task-clock",
                None,
            ),
            (None, Subject::Nthd { .. }) => {
                let note = (self.s0.tids != self.s1.tids).then(|| {
                    "threads came and went during the window; schedstat may undercount".into()
                });
                let ns = self.s1.sched_ns.saturating_sub(self.s0.sched_ns);
                (self.per_hour(ns as f64 / 1e9), "schedstat", note)
            }
            (None, Subject::Curl { .. }) => (self.ticks_per_hour(), "/proc ticks", None),
        }
    }

    fn ticks_per_hour(&self) -> f64 {
        let ticks = self.s1.ticks().saturating_sub(self.s0.ticks());
        self.per_hour(ticks as f64 / clock_ticks())
    }
}

async fn idle_run(
    args: &Args,
    subject: Subject,
    label: String,
    use_perf: bool,
) -> Result<IdleResult, String> {
    let world = World::new(subject.cloud()).await?;
    let mut started = world.start(&args.nthd, subject).await?;
    // Let the first token fetch and the first round of every source pass.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pid = started.proc.pid();
    let w = measure(pid, args.idle, world.dir().join("perf.txt"), use_perf).await?;
    let peak_rss_kib = vm_hwm_kib(pid);
    if started.proc.exited() {
        return Err(format!(
            "the subject exited during the idle window; log:\n    {}",
            world.log_tail()
        ));
    }
    if world.logind.power_off_count() > 0 {
        return Err("the subject called PowerOff with no notice".into());
    }
    let requests = world
        .imds
        .requests()
        .iter()
        .filter(|r| r.t_ms >= w.from_ms && r.t_ms < w.to_ms)
        .count();
    let curl_rss_kib = match subject {
        Subject::Curl { .. } => typical_curl_rss_kib(world.imds.url()).await,
        Subject::Nthd { .. } => None,
    };
    let (cpu_s_per_h, cpu_method, note) = w.cpu(subject, args.idle);
    Ok(IdleResult {
        label,
        window_s: w.elapsed,
        cpu_s_per_h,
        cpu_method,
        ticks_s_per_h: w.ticks_per_hour(),
        peak_rss_kib,
        curl_rss_kib,
        requests,
        req_per_s: requests as f64 / w.elapsed,
        threads: w.s1.tids.len(),
        note,
        cpu_all: Vec::new(),
    })
}

/// The replica with the median CPU, carrying every replica's CPU figure; an error if any failed.
fn median_idle(runs: Vec<Result<IdleResult, String>>) -> Result<IdleResult, String> {
    let mut ok = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
    ok.sort_by(|a, b| a.cpu_s_per_h.total_cmp(&b.cpu_s_per_h));
    let all: Vec<f64> = ok.iter().map(|r| r.cpu_s_per_h).collect();
    let mid = ok.len() / 2;
    let mut m = ok.into_iter().nth(mid).ok_or("no idle run")?;
    m.cpu_all = all;
    Ok(m)
}

/// The idle subjects: nthd's AWS modes and the two loops always, GCP and Azure when wanted.
pub(crate) fn idle_subjects(wanted: impl Fn(&str) -> bool) -> Vec<(String, Subject)> {
    let aws = |textfile, rebalance| Subject::Nthd {
        cloud: Cloud::Aws,
        interval: None,
        textfile,
        rebalance,
    };
    let mut v: Vec<(String, Subject)> = vec![
        ("nthd-aws-1s".into(), aws(false, false)),
        ("nthd-aws-rebalance".into(), aws(false, true)),
        ("nthd-aws-1s-textfile".into(), aws(true, false)),
        ("curl-5s".into(), Subject::Curl { every: 5 }),
        ("curl-2s".into(), Subject::Curl { every: 2 }),
    ];
    for (cloud, id) in [(Cloud::Gcp, "nthd-gcp"), (Cloud::Azure, "nthd-azure")] {
        if wanted(id) {
            v.push((id.into(), Subject::nthd(cloud)));
        }
    }
    v
}

/// Runs [`IDLE_REPLICAS`] copies of every subject in the same window; the median copy each.
pub(crate) async fn run_idle(
    args: &Args,
    subjects: &[(String, Subject)],
    perf: bool,
) -> Vec<(String, Result<IdleResult, String>)> {
    let mut set = JoinSet::new();
    for (i, (label, subject)) in subjects.iter().cloned().enumerate() {
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
    let mut runs: Vec<Vec<Result<IdleResult, String>>> = subjects.iter().map(|_| vec![]).collect();
    while let Some(j) = set.join_next().await {
        let Ok((i, r)) = j else { continue };
        if let Err(e) = &r {
            eprintln!("[idle] {}: {e}", subjects[i].0);
        }
        runs[i].push(r);
    }
    subjects
        .iter()
        .zip(runs)
        .map(|((label, _), rs)| (label.clone(), median_idle(rs)))
        .collect()
}
