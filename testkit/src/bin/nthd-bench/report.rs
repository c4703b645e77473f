//! The report: what was measured, the targets, and the markdown and JSON forms
//! (`markdown.rs`, `json.rs`).

use std::time::SystemTime;

use crate::args::Args;
use crate::idle::IdleResult;
use crate::latency::{latency_stats, Case, CaseResult, LatencyStats};
use crate::real::RealIdle;
use crate::stats::{percentile, sorted};

pub(crate) struct Report {
    pub args: Args,
    pub started: SystemTime,
    pub duration_s: f64,
    pub load_start: (f64, f64, f64),
    pub load_end: (f64, f64, f64),
    pub load_max_1m: f64,
    pub cases: Vec<Case>,
    pub latency: Vec<CaseResult>,
    pub idle: Vec<(String, Result<IdleResult, String>)>,
    /// `bench/real-idle.sh`'s result, when `--real-idle` named one.
    pub real_idle: Option<Result<RealIdle, String>>,
    pub startup: Result<Vec<f64>, String>,
    pub binary: Option<(u64, Option<bool>)>,
    pub perf: bool,
    pub nthd_version: String,
    pub git_rev: String,
}

/// Milliseconds, to two decimals under 10 ms.
pub(crate) fn ms(v: f64) -> String {
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

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.2} MiB", kib as f64 / 1024.0)
}

pub(crate) struct Target {
    pub name: String,
    pub goal: String,
    pub measured: String,
    /// None: not measured.
    pub pass: Option<bool>,
    pub margin: String,
}

impl Target {
    /// `lower is better` target: value ≤ limit.
    fn le(
        name: &str,
        goal: &str,
        value: Option<f64>,
        limit: f64,
        show: fn(f64) -> String,
    ) -> Target {
        let (measured, pass, margin) = match value {
            Some(v) if !v.is_nan() => (show(v), Some(v <= limit), margin(v, limit, show)),
            _ => ("not measured".into(), None, String::new()),
        };
        Target {
            name: name.into(),
            goal: goal.into(),
            measured,
            pass,
            margin,
        }
    }

    pub(crate) fn verdict(&self) -> &'static str {
        match self.pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "N/A",
        }
    }
}

fn margin(v: f64, limit: f64, show: fn(f64) -> String) -> String {
    if v.is_infinite() {
        "missed trials".into()
    } else if v <= limit {
        format!("{:.0}% of the limit", v / limit * 100.0)
    } else {
        let over = (v / limit - 1.0) * 100.0;
        format!("over by {} (+{over:.0}%)", show(v - limit))
    }
}

fn cpu_per_hour(v: f64) -> String {
    format!("{v:.3} CPU-s/h")
}

impl Report {
    pub(crate) fn stats(&self, id: &str) -> Option<LatencyStats> {
        let i = self.cases.iter().position(|c| c.id == id)?;
        latency_stats(&self.cases[i], &self.latency[i])
    }

    pub(crate) fn idle_of(&self, label: &str) -> Option<&IdleResult> {
        self.idle
            .iter()
            .find(|(l, _)| l == label)
            .and_then(|(_, r)| r.as_ref().ok())
    }

    pub(crate) fn real(&self) -> Option<&RealIdle> {
        self.real_idle.as_ref().and_then(|r| r.as_ref().ok())
    }

    pub(crate) fn startup_median(&self) -> Option<f64> {
        let v = self.startup.as_ref().ok()?;
        Some(percentile(&sorted(v.clone()), 50.0))
    }

    /// Whether everything asked for was measured (what `--check` asks).
    pub(crate) fn complete(&self) -> bool {
        self.startup.is_ok()
            && self.idle.iter().all(|(_, r)| r.is_ok())
            && self
                .real_idle
                .as_ref()
                .is_none_or(std::result::Result::is_ok)
            && self
                .latency
                .iter()
                .all(|r| r.skipped.is_none() && r.missed.is_empty() && r.setup_errors.is_empty())
    }

    pub(crate) fn targets(&self) -> Vec<Target> {
        let idle = self.idle_of("nthd-aws-1s");
        let p99 = |id| self.stats(id).map(|s| s.p99);
        let mut v = vec![
            Target::le(
                "AWS spot detection p99, default 1 s poll",
                "≤ 1100 ms",
                p99("nthd-aws-1s"),
                1100.0,
                ms,
            ),
            Target::le(
                "AWS spot detection p99 after a rebalance recommendation (200 ms boost)",
                "≤ 300 ms",
                p99("nthd-aws-rebalance"),
                300.0,
                ms,
            ),
            Target::le(
                "GCP preemption detection p99 (long-poll)",
                "≤ 200 ms",
                p99("nthd-gcp"),
                200.0,
                ms,
            ),
            Target::le(
                "Idle CPU, nthd AWS defaults",
                "≤ 1 CPU-s/hour",
                idle.map(|r| r.cpu_s_per_h),
                1.0,
                cpu_per_hour,
            ),
        ];
        if self.real_idle.is_some() {
            v.push(Target::le(
                "Idle CPU, packaged unit on a booted Debian 12 (bench/real-idle.sh)",
                "≤ 1 CPU-s/hour",
                self.real().map(|r| r.cpu_s_per_hour),
                1.0,
                cpu_per_hour,
            ));
        }
        v.extend(self.size_targets(idle));
        v
    }

    fn size_targets(&self, idle: Option<&IdleResult>) -> [Target; 4] {
        [
            Target::le(
                "Peak RSS (VmHWM), nthd AWS defaults",
                "≤ 8 MiB",
                idle.and_then(|r| r.peak_rss_kib).map(|k| k as f64),
                8.0 * 1024.0,
                |v| mib(v as u64),
            ),
            Target::le(
                "Stripped release binary",
                "≤ 6 MiB",
                self.binary.map(|(b, _)| b as f64),
                6.0 * 1024.0 * 1024.0,
                |v| format!("{:.2} MiB", v / 1024.0 / 1024.0),
            ),
            Target::le(
                "Start → READY=1, median",
                "≤ 100 ms",
                self.startup_median(),
                100.0,
                ms,
            ),
            // 1.63 by schedule: spot 1/s, ASG 1/3 s, rebalance 1/4 s (so the spot boost starts
            // within 5 s of a recommendation), scheduled 1/20 s.
            Target::le(
                "IMDS request rate, AWS defaults, idle",
                "≤ 1.7 req/s",
                idle.map(|r| r.req_per_s),
                1.7,
                |v| format!("{v:.3} req/s"),
            ),
        ]
    }
}
