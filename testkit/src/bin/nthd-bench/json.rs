//! The report as JSON (`latest.json`), with every raw sample.

use std::collections::BTreeMap;

use nthd::testing::timefmt::format_rfc3339;
use serde_json::{json, Value};

use crate::host;
use crate::idle::IdleResult;
use crate::latency::{latency_stats, Case, CaseResult};
use crate::report::Report;

/// A number rounded to 3 decimals, `"inf"` for a missed trial, null for NaN.
fn num_or_null(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 1000.0).round() / 1000.0)
    } else if v.is_infinite() {
        json!("inf")
    } else {
        Value::Null
    }
}

fn latency_json(c: &Case, r: &CaseResult) -> Value {
    let s = latency_stats(c, r);
    let stat = |f: fn(&crate::latency::LatencyStats) -> f64| s.as_ref().map(|s| num_or_null(f(s)));
    let samples: Vec<Value> = r
        .trials
        .iter()
        .map(|t| {
            json!({
                "latency_ms": num_or_null(t.latency.as_secs_f64() * 1000.0),
                "phase_ms": num_or_null(t.phase.as_secs_f64() * 1000.0),
            })
        })
        .collect();
    json!({
        "id": c.id,
        "title": c.title,
        "interval_ms": c.interval.as_millis() as u64,
        "polling": c.polling,
        "skipped": r.skipped,
        "trials": s.as_ref().map(|s| s.n),
        "missed": r.missed.len(),
        "setup_errors": r.setup_errors.len(),
        "min_ms": stat(|s| s.min),
        "p50_ms": stat(|s| s.p50),
        "p90_ms": stat(|s| s.p90),
        "p99_ms": stat(|s| s.p99),
        "max_ms": stat(|s| s.max),
        "mean_ms": stat(|s| s.mean),
        "reaction_p50_ms": stat(|s| s.react_p50),
        "reaction_p99_ms": stat(|s| s.react_p99),
        "samples": samples,
        "errors": r.missed.iter().chain(&r.setup_errors).collect::<Vec<_>>(),
    })
}

fn idle_json(r: &Result<IdleResult, String>) -> Value {
    let r = match r {
        Ok(r) => r,
        Err(e) => return json!({ "error": e }),
    };
    json!({
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
    })
}

impl Report {
    pub(crate) fn json(&self) -> Value {
        let latency: Vec<Value> = (self.cases.iter().zip(&self.latency))
            .map(|(c, r)| latency_json(c, r))
            .collect();
        let idle: BTreeMap<String, Value> = (self.idle.iter())
            .map(|(label, r)| (label.clone(), idle_json(r)))
            .collect();
        let targets: Vec<Value> = (self.targets().iter())
            .map(|t| {
                json!({
                    "target": t.name, "goal": t.goal, "measured": t.measured,
                    "result": t.verdict(), "margin": t.margin,
                })
            })
            .collect();
        let real_idle = match &self.real_idle {
            None => Value::Null,
            Some(Ok(r)) => r.raw.clone(),
            Some(Err(e)) => json!({ "error": e }),
        };
        json!({
            "mode": if self.args.smoke { "smoke" } else { "full" },
            "date_unix_ms": nthd_testkit::unix_ms(self.started),
            "date": format_rfc3339(self.started),
            "duration_s": num_or_null(self.duration_s),
            "host": self.host_json(),
            "settings": self.settings_json(),
            "targets": targets,
            "latency": latency,
            "idle": idle,
            "real_idle": real_idle,
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

    fn host_json(&self) -> Value {
        let (s, e) = (self.load_start, self.load_end);
        json!({
            "kernel": host::kernel(),
            "cpu_model": host::cpu_model(),
            "cpus": host::cpus(),
            "loadavg_start": [s.0, s.1, s.2],
            "loadavg_end": [e.0, e.1, e.2],
            "loadavg_1m_peak": self.load_max_1m,
            "shared": true,
            "note": "shared machine: other jobs (compilers) may run concurrently; numbers include that noise",
        })
    }

    fn settings_json(&self) -> Value {
        let a = &self.args;
        json!({
            "nthd": a.nthd.display().to_string(),
            "nthd_version": self.nthd_version,
            "git_rev": self.git_rev,
            "trials_per_case": a.trials,
            "concurrency": a.concurrency,
            "idle_window_s": a.idle.as_secs(),
            "starts": a.starts,
            "seed": a.seed,
            "perf": self.perf,
        })
    }
}
