//! `nthd-bench`: how fast nthd notices an interruption, what it costs while nothing happens,
//! how fast it starts and how big it is, measured against the mock IMDS and the fake logind and
//! side by side with the shell + curl loop people run instead.
//!
//! ```text
//! nthd-bench [--smoke] [--check] [--trials N] [--concurrency N] [--idle-secs S] [--starts N]
//!            [--cases ID,ID,...] [--seed N] [--nthd PATH] [--out DIR] [--real-idle FILE]
//! ```
//!
//! Normally run through `bash bench/run.sh [--smoke]`, which builds the release binaries first
//! and runs `bench/real-idle.sh` (the packaged unit on a booted Debian) for `--real-idle`.
//! Writes `DIR/latest.md` and `DIR/latest.json` (DIR defaults to `bench/results`, or
//! `bench/results/smoke` with `--smoke`) and prints the markdown on stdout; progress goes to
//! stderr. Exit status: 0 when the run completed (whatever the targets say), 1 when it could not
//! run, 3 with `--check` when a case or idle subject could not be measured or a trial failed.
//!
//! The modules, by what they measure:
//!
//! * [`latency`]: detection latency. Every trial gets a fresh [`world::World`] (mock IMDS,
//!   private `dbus-daemon`, fake logind, state directory). Once the subject runs (nthd:
//!   `READY=1` on a `NOTIFY_SOCKET` the bench binds; the loop: its first read of the spot path),
//!   the bench waits a uniformly random fraction of the poll interval, records the wall clock
//!   and switches the notice on ([`routes`]). The latency is the fake logind's timestamp of the
//!   `PowerOff` call minus that instant. Trials of all cases are shuffled together and run
//!   `--concurrency` at a time; a `PowerOff` that never comes is an infinite latency.
//! * [`idle`]: idle cost, the subjects side by side with no notice for `--idle-secs`: `perf
//!   stat -e task-clock` when perf works, else [`procfs`] (per-thread schedstat for nthd,
//!   utime+stime+cutime+cstime for the loop); peak RSS is `VmHWM`. [`real`] reads back the
//!   real-system figure of `bench/real-idle.sh`.
//! * [`startup`]: spawn → `READY=1`, sequentially, median. [`binary`]: size and strip state.
//! * [`report`], [`markdown`], [`json`]: the targets and the two forms of the report.
//! * [`cleanup`]: every child (nthd, dbus-daemon, the loops, perf) is killed when the bench
//!   ends, panics (the release profile aborts on panic, so a panic hook does it) or gets
//!   SIGINT/SIGTERM; children also get `PR_SET_PDEATHSIG`.

mod args;
mod binary;
mod cleanup;
mod host;
mod idle;
mod json;
mod latency;
mod markdown;
mod procfs;
mod real;
mod report;
mod routes;
mod startup;
mod stats;
mod world;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use nthd_testkit::lock;

use crate::args::Args;
use crate::cleanup::{emergency_cleanup, AbortOnDrop};
use crate::latency::{all_cases, Case};
use crate::report::Report;

/// Samples the 1-minute load average every 5 s and keeps the peak.
struct LoadPeak {
    peak: Arc<Mutex<f64>>,
    _task: AbortOnDrop,
}

impl LoadPeak {
    fn start(first: f64) -> LoadPeak {
        let peak = Arc::new(Mutex::new(first));
        let p = peak.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                let l = host::loadavg().0;
                let mut p = lock(&p);
                *p = p.max(l);
            }
        });
        LoadPeak {
            peak,
            _task: AbortOnDrop(task),
        }
    }

    fn peak(&self) -> f64 {
        *lock(&self.peak)
    }
}

/// The cases `--cases` asks for (all by default); an error names an unknown one.
fn chosen_cases(args: &Args) -> Result<Vec<Case>, String> {
    let all = all_cases();
    let Some(list) = &args.cases else {
        return Ok(all);
    };
    if let Some(bad) = list.iter().find(|id| !all.iter().any(|c| c.id == *id)) {
        let ids: Vec<&str> = all.iter().map(|c| c.id).collect();
        return Err(format!("unknown case `{bad}`; cases: {}", ids.join(", ")));
    }
    Ok(all
        .into_iter()
        .filter(|c| list.iter().any(|x| x == c.id))
        .collect())
}

fn wanted(args: &Args, id: &str) -> bool {
    args.cases
        .as_ref()
        .is_none_or(|c| c.iter().any(|x| x == id))
}

/// Runs everything and writes the report. `Ok(false)` when something could not be measured.
async fn run(args: Args) -> Result<bool, String> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let load_start = host::loadavg();
    let load = LoadPeak::start(load_start.0);
    let binary = Some(binary::measure(&args.nthd)?);
    let nthd_version =
        host::command_output(&args.nthd.to_string_lossy(), &["--version"]).unwrap_or_default();
    let git_rev = host::command_output("git", &["describe", "--always", "--dirty"])
        .unwrap_or("unknown".into());
    let perf = idle::perf_works();
    let method = if perf {
        "perf task-clock"
    } else {
        "/proc (perf unavailable)"
    };
    eprintln!(
        "nthd-bench: {} ({nthd_version}); CPU measured with {method}",
        args.nthd.display()
    );
    let cases = chosen_cases(&args)?;
    let real_idle = args.real_idle.as_deref().map(real::load);

    // 1. Startup, alone on the machine (as far as this bench goes).
    eprintln!("[startup] {} sequential starts", args.starts);
    let startup = startup::startup(&args).await;
    if let Err(e) = &startup {
        eprintln!("[startup] failed: {e}");
    }
    // 2. Idle cost, the subjects side by side.
    eprintln!("[idle] {} s window", args.idle.as_secs());
    let subjects = idle::idle_subjects(|id| wanted(&args, id));
    let idle = idle::run_idle(&args, &subjects, perf).await;
    // 3. Detection latency.
    let latency = latency::run_latency(&args, &cases).await;

    let report = Report {
        load_end: host::loadavg(),
        load_max_1m: load.peak(),
        duration_s: t0.elapsed().as_secs_f64(),
        args,
        started,
        load_start,
        cases,
        latency,
        idle,
        real_idle,
        startup,
        binary,
        perf,
        nthd_version,
        git_rev,
    };
    write_report(&report)?;
    Ok(report.complete())
}

fn write_report(report: &Report) -> Result<(), String> {
    let out = &report.args.out;
    let md = report.markdown();
    let js = serde_json::to_string_pretty(&report.json()).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    std::fs::write(out.join("latest.md"), &md).map_err(|e| e.to_string())?;
    std::fs::write(out.join("latest.json"), js + "\n").map_err(|e| e.to_string())?;
    println!("{md}");
    eprintln!(
        "nthd-bench: wrote {} and {}",
        out.join("latest.md").display(),
        out.join("latest.json").display()
    );
    Ok(())
}

/// Runs [`run`] until it ends or SIGINT/SIGTERM comes.
async fn run_until_signal(args: Args) -> Result<bool, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    tokio::select! {
        r = run(args) => r,
        _ = term.recv() => Err("interrupted by SIGTERM".into()),
        _ = int.recv() => Err("interrupted by SIGINT".into()),
    }
}

fn main() -> ExitCode {
    let args = args::parse_args();
    // All scratch files (state dirs, notify sockets, the private buses' sockets) live under one
    // directory removed on every exit path.
    let scratch = std::env::temp_dir().join(format!("nthd-bench-{}", std::process::id()));
    if let Err(e) = cleanup::set_scratch(&scratch) {
        eprintln!("nthd-bench: cannot create {}: {e}", scratch.display());
        return ExitCode::FAILURE;
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        emergency_cleanup();
        default_hook(info);
    }));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build();
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nthd-bench: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let check = args.check;
    let result = rt.block_on(run_until_signal(args));
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
