//! `nthd once`: read every source once, print what is there and what nthd would do.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::config::Options;
use crate::logind::Logind;
use crate::policy::{decide, When};
use crate::provider::Provider;
use crate::provider::{self, resolve_cloud};
use crate::timefmt;

/// What to say when no notice is listed: "none" only for sources that answered.
fn none_line(obs: &crate::provider::Observation) -> String {
    match (obs.fresh.len(), obs.errors.len()) {
        (0, _) => "unknown: no source could be read, so nthd cannot tell (see the error below)"
            .to_string(),
        (_, 0) => "none".to_string(),
        (read, failed) => {
            format!("none from the {read} source(s) read; {failed} could not be read (see below)")
        }
    }
}

pub async fn once(opts: &Options, json: bool) -> anyhow::Result<ExitCode> {
    let detection = resolve_cloud(&opts.provider_settings())
        .await
        .context("detecting the cloud")?;
    let mut provider = provider::build(detection.cloud, &opts.provider_settings())?;
    let mut obs = provider.observe().await;
    // Azure's first Scheduled Events call can take two minutes; its own timeout bounds this.
    if provider.first_answer_pending() {
        eprintln!(
            "waiting for the metadata service's first answer (up to 2 minutes on Azure, while \
             it enables Scheduled Events for this VM)"
        );
    }
    while provider.first_answer_pending() {
        obs = provider.observe().await;
    }
    let mut logind = Logind::new();
    let (budget, budget_note) =
        match tokio::time::timeout(Duration::from_secs(3), logind.inhibit_delay_max()).await {
            Ok(Ok(b)) => (
                Some(b),
                format!(
                    "logind InhibitDelayMaxUSec = {}",
                    timefmt::format_duration(b)
                ),
            ),
            Ok(Err(e)) => (
                None,
                format!("logind not readable ({e}); using the fallback drain budget"),
            ),
            Err(_) => (
                None,
                "logind did not answer; using the fallback drain budget".into(),
            ),
        };
    let policy = opts.policy();
    let now = SystemTime::now();
    let rows: Vec<_> = obs
        .notices
        .iter()
        .map(|n| (n, decide(&policy, n, now, budget)))
        .collect();
    if json {
        let v = serde_json::json!({
            "cloud": detection.cloud.name(),
            "detected_by": detection.how,
            "watching": provider.describe(),
            "drain_budget": budget_note,
            "dry_run": opts.dry_run,
            "notices": rows.iter().map(|(n, d)| serde_json::json!({
                "kind": n.kind.name(),
                "id": n.id,
                "source": n.source,
                "event_id": n.event_id,
                "status": format!("{:?}", n.status).to_lowercase(),
                "deadline": n.deadline.map(timefmt::format_rfc3339),
                "detail": n.detail,
                "action": d.action.name(),
                "when": match d.when { When::Now => "now".to_string(), When::At(t) => timefmt::format_rfc3339(t) },
                "reason": d.reason,
                "raw": n.raw,
            })).collect::<Vec<_>>(),
            "read": obs.fresh,
            "errors": obs.errors.iter().map(|e| serde_json::json!({
                "source": e.source, "error": e.error.to_string(),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("cloud: {} ({})", detection.cloud, detection.how);
        println!("watching: {}", provider.describe());
        println!("drain budget: {budget_note}");
        if rows.is_empty() {
            println!("notices: {}", none_line(&obs));
        }
        for (n, d) in &rows {
            println!("notice: {} — {}", n.kind, n.detail);
            if let Some(t) = n.deadline {
                println!(
                    "  deadline: {} ({})",
                    timefmt::format_rfc3339(t),
                    timefmt::relative(t, now)
                );
            }
            let when = match d.when {
                When::Now => "now".to_string(),
                When::At(t) => format!(
                    "at {} ({})",
                    timefmt::format_rfc3339(t),
                    timefmt::relative(t, now)
                ),
            };
            println!(
                "  decision: {} {when}{}",
                d.action,
                if opts.dry_run { " [dry run]" } else { "" }
            );
            println!("  because: {}", d.reason);
        }
        for (sources, msg) in obs.grouped_errors() {
            println!("error: {}: {msg}", sources.join(", "));
        }
    }
    Ok(if obs.fresh.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
