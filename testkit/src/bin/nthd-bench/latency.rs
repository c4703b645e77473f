//! Detection latency: the notice switches on in the mock at a random phase of the poll cycle;
//! the latency is the fake logind's timestamp of `PowerOff` minus that instant.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::args::Args;
use crate::routes::notice_on;
use crate::stats::{percentile, sorted, Rng};
use crate::world::{Cloud, Subject, World};

#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub id: &'static str,
    pub title: &'static str,
    pub subject: Subject,
    /// The poll interval the phase is drawn from (and the ideal-latency reference).
    pub interval: Duration,
    /// Whether detection is by polling (the ideal p-quantile is p × interval) or by long-poll.
    pub polling: bool,
}

fn nthd_case(id: &'static str, title: &'static str, subject: Subject, interval_ms: u64) -> Case {
    Case {
        id,
        title,
        subject,
        interval: Duration::from_millis(interval_ms),
        polling: true,
    }
}

fn aws_every(ms: u64) -> Subject {
    Subject::Nthd {
        cloud: Cloud::Aws,
        interval: Some(Duration::from_millis(ms)),
        textfile: false,
        rebalance: false,
    }
}

/// nthd on AWS with the rebalance-recommendation boost.
fn aws_rebalance() -> Subject {
    Subject::Nthd {
        cloud: Cloud::Aws,
        interval: None,
        textfile: false,
        rebalance: true,
    }
}

pub(crate) fn all_cases() -> Vec<Case> {
    vec![
        nthd_case(
            "nthd-aws-1s",
            "nthd, AWS spot, 1 s poll (default)",
            Subject::nthd(Cloud::Aws),
            1000,
        ),
        nthd_case(
            "nthd-aws-500ms",
            "nthd, AWS spot, 0.5 s poll",
            aws_every(500),
            500,
        ),
        nthd_case(
            "nthd-aws-2s",
            "nthd, AWS spot, 2 s poll",
            aws_every(2000),
            2000,
        ),
        nthd_case(
            "nthd-aws-rebalance",
            "nthd, AWS spot after a rebalance recommendation (200 ms boost)",
            aws_rebalance(),
            200,
        ),
        Case {
            polling: false,
            ..nthd_case(
                "nthd-gcp",
                "nthd, GCP preempted (long-poll)",
                Subject::nthd(Cloud::Gcp),
                1000,
            )
        },
        nthd_case(
            "nthd-azure",
            "nthd, Azure Preempt event, 0.5 s poll (default)",
            Subject::nthd(Cloud::Azure),
            500,
        ),
        nthd_case(
            "curl-5s",
            "bash+curl loop, 5 s (AWS advice)",
            Subject::Curl { every: 5 },
            5000,
        ),
        nthd_case(
            "curl-2s",
            "bash+curl loop, 2 s (NTH's interval)",
            Subject::Curl { every: 2 },
            2000,
        ),
    ]
}

#[derive(Debug)]
enum TrialError {
    /// The world or the subject could not be set up: not the subject's latency.
    Setup(String),
    /// The notice was on and `PowerOff` never came: an infinite latency.
    Missed(String),
}

#[derive(Debug)]
pub(crate) struct Trial {
    pub phase: Duration,
    pub latency: Duration,
}

async fn trial(nthd: &Path, case: &Case, phase_frac: f64) -> Result<Trial, TrialError> {
    let cloud = case.subject.cloud();
    let world = World::new(cloud).await.map_err(TrialError::Setup)?;
    let started = world
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
    drop(started);
    if call.args != json!([false]) {
        return Err(TrialError::Missed(format!(
            "PowerOff called with {} instead of [false]",
            call.args
        )));
    }
    let latency = call.at.duration_since(flipped).unwrap_or(Duration::ZERO);
    Ok(Trial { phase, latency })
}

/// One trial with the 60 s bound every trial gets.
async fn bounded_trial(nthd: &Path, case: &Case, frac: f64) -> Result<Trial, TrialError> {
    tokio::time::timeout(Duration::from_secs(60), trial(nthd, case, frac))
        .await
        .unwrap_or_else(|_| Err(TrialError::Setup("trial took more than 60 s".into())))
}

#[derive(Debug, Default)]
pub(crate) struct CaseResult {
    /// Why the case was not measured (its warm-up trial failed).
    pub skipped: Option<String>,
    pub trials: Vec<Trial>,
    pub missed: Vec<String>,
    pub setup_errors: Vec<String>,
}

impl CaseResult {
    fn done(&self) -> usize {
        self.trials.len() + self.missed.len() + self.setup_errors.len()
    }
}

/// Warm-up: one trial per case, all at once. A case whose warm-up fails is not measured (e.g. a
/// provider that is not implemented yet), instead of failing 200 times.
async fn warm_up(nthd: &Arc<std::path::PathBuf>, cases: &[Case], results: &mut [CaseResult]) {
    eprintln!("[latency] warm-up: one trial per case");
    let mut set = JoinSet::new();
    for (i, c) in cases.iter().enumerate() {
        let (nthd, c) = (nthd.clone(), c.clone());
        set.spawn(async move { (i, bounded_trial(&nthd, &c, 0.5).await) });
    }
    while let Some(j) = set.join_next().await {
        if let Ok((i, Err(TrialError::Setup(e) | TrialError::Missed(e)))) = j {
            eprintln!("[latency] {}: NOT MEASURED: {e}", cases[i].id);
            results[i].skipped = Some(e);
        }
    }
}

/// Every trial of every measured case with its phase fraction, shuffled together.
fn jobs(args: &Args, results: &[CaseResult]) -> Vec<(usize, f64)> {
    let mut rng = Rng(args.seed);
    let mut jobs: Vec<(usize, f64)> = Vec::new();
    for (i, r) in results.iter().enumerate() {
        if r.skipped.is_none() {
            for _ in 0..args.trials {
                jobs.push((i, rng.unit()));
            }
        }
    }
    rng.shuffle(&mut jobs);
    jobs
}

pub(crate) async fn run_latency(args: &Args, cases: &[Case]) -> Vec<CaseResult> {
    let nthd = Arc::new(args.nthd.clone());
    let mut results: Vec<CaseResult> = cases.iter().map(|_| CaseResult::default()).collect();
    warm_up(&nthd, cases, &mut results).await;
    let jobs = jobs(args, &results);
    let progress = Progress {
        total: jobs.len(),
        started: Instant::now(),
    };
    eprintln!(
        "[latency] {} trials, {} at a time, cases interleaved",
        progress.total, args.concurrency
    );
    let sem = Arc::new(Semaphore::new(args.concurrency));
    let mut set = JoinSet::new();
    for (i, frac) in jobs {
        let permit = sem.clone().acquire_owned().await;
        let permit = permit.expect("semaphore never closed");
        let (nthd, c) = (nthd.clone(), cases[i].clone());
        set.spawn(async move {
            let r = bounded_trial(&nthd, &c, frac).await;
            drop(permit);
            (i, r)
        });
        while let Some(j) = set.try_join_next() {
            if let Ok((i, r)) = j {
                progress.record(i, r, &mut results, cases);
            }
        }
    }
    while let Some(j) = set.join_next().await {
        if let Ok((i, r)) = j {
            progress.record(i, r, &mut results, cases);
        }
    }
    results
}

struct Progress {
    total: usize,
    started: Instant,
}

impl Progress {
    fn record(
        &self,
        i: usize,
        r: Result<Trial, TrialError>,
        results: &mut [CaseResult],
        cases: &[Case],
    ) {
        let res = &mut results[i];
        match r {
            Ok(t) => res.trials.push(t),
            Err(TrialError::Missed(e)) => {
                eprintln!("[latency] {}: missed: {e}", cases[i].id);
                res.missed.push(e);
            }
            Err(TrialError::Setup(e)) => {
                eprintln!("[latency] {}: setup error: {e}", cases[i].id);
                res.setup_errors.push(e);
            }
        }
        let done: usize = results.iter().map(CaseResult::done).sum();
        let step = (self.total / 10).max(1);
        if done.is_multiple_of(step) || done == self.total {
            eprintln!(
                "[latency] {done}/{} trials done, {:.0} s",
                self.total,
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct LatencyStats {
    pub n: usize,
    pub missed: usize,
    pub setup_errors: usize,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    /// Estimated reaction time after the read that could first see the notice: the latency
    /// minus the wait for the next scheduled read (interval − phase, taking READY as the read
    /// just done); the whole latency for a long-poll. Approximate to a few ms (READY comes a
    /// little after that read; the poll period drifts by the read's duration).
    pub react_p50: f64,
    pub react_p99: f64,
}

/// Milliseconds of `f(trial)` for every trial, with +inf for every missed one, sorted.
fn with_missed(r: &CaseResult, f: impl Fn(&Trial) -> f64) -> Vec<f64> {
    let mut v: Vec<f64> = r.trials.iter().map(f).collect();
    v.extend(std::iter::repeat_n(f64::INFINITY, r.missed.len()));
    sorted(v)
}

pub(crate) fn latency_stats(c: &Case, r: &CaseResult) -> Option<LatencyStats> {
    if r.skipped.is_some() || (r.trials.is_empty() && r.missed.is_empty()) {
        return None;
    }
    let ms = |t: &Trial| t.latency.as_secs_f64() * 1000.0;
    let v = with_missed(r, ms);
    let finite_mean = r.trials.iter().map(ms).sum::<f64>() / r.trials.len().max(1) as f64;
    let react = with_missed(r, |t| {
        let wait = if c.polling {
            c.interval.saturating_sub(t.phase)
        } else {
            Duration::ZERO
        };
        (t.latency.as_secs_f64() - wait.as_secs_f64()) * 1000.0
    });
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
