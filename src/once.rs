//! `nthd once`: read every source once, print what is there and what nthd would do.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::config::Options;
use crate::logind::Logind;
use crate::notice::{Notice, SourceId};
use crate::policy::{decide, Decision, When};
use crate::provider::detect::Detection;
use crate::provider::{self, resolve_cloud, AnyProvider, Observation};
use crate::timefmt;

/// What to say when no notice is listed: "none" only for sources that answered.
fn none_line(obs: &Observation) -> String {
    match (obs.fresh.len(), obs.errors.len()) {
        (0, _) => "unknown: no source could be read, so nthd cannot tell (see the error below)"
            .to_string(),
        (_, 0) => "none".to_string(),
        (read, failed) => {
            format!("none from the {read} source(s) read; {failed} could not be read (see below)")
        }
    }
}

/// `nthd once [--json]`: exit 0 when at least one source answered.
pub(crate) async fn once(opts: &Options, json: bool) -> anyhow::Result<ExitCode> {
    let mut settings = opts.provider_settings();
    settings.client.sandbox = crate::sandbox::own_policy().await;
    // The metadata client blocks: the reads run on a thread of their own.
    let read = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let detection = resolve_cloud(&settings).context("detecting the cloud")?;
        let mut provider = provider::build(detection.cloud, &settings)?;
        let obs = first_answer(&mut provider);
        Ok((detection, provider, obs))
    });
    let (detection, provider, obs) = read.await.context("reading the metadata service")??;
    let (budget, budget_note) = drain_budget().await;
    let policy = opts.policy();
    let now = SystemTime::now();
    let rows: Vec<Row<'_>> = obs
        .notices
        .iter()
        .map(|n| (n, decide(&policy, n, now, budget)))
        .collect();
    let head = Head {
        detection: &detection,
        watching: provider.describe(),
        budget_note,
        dry_run: opts.dry_run,
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&as_json(&head, &rows, &obs))?
        );
    } else {
        print_text(&head, &rows, &obs, now);
    }
    Ok(if obs.fresh.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

type Row<'a> = (&'a Notice, Decision);

/// What `once` prints above the notices.
struct Head<'a> {
    detection: &'a Detection,
    watching: String,
    budget_note: String,
    dry_run: bool,
}

/// One observation. Azure's first Scheduled Events call can take two minutes; its own timeout
/// bounds this.
fn first_answer(provider: &mut AnyProvider) -> Observation {
    let mut obs = provider.observe();
    if provider.first_answer_pending() {
        eprintln!(
            "waiting for the metadata service's first answer (up to 2 minutes on Azure, while \
             it enables Scheduled Events for this VM)"
        );
    }
    while provider.first_answer_pending() {
        obs = provider.observe();
    }
    obs
}

/// logind's drain budget, and a line saying where it came from.
async fn drain_budget() -> (Option<Duration>, String) {
    let mut logind = Logind::new();
    match logind.inhibit_delay_max().await {
        Ok(b) => (
            Some(b),
            format!(
                "logind InhibitDelayMaxUSec = {}",
                timefmt::format_duration(b)
            ),
        ),
        Err(e) => (
            None,
            format!("logind not readable ({e}); using the fallback drain budget"),
        ),
    }
}

fn as_json(head: &Head<'_>, rows: &[Row<'_>], obs: &Observation) -> serde_json::Value {
    serde_json::json!({
        "cloud": head.detection.cloud.name(),
        "detected_by": head.detection.how,
        "watching": head.watching,
        "drain_budget": head.budget_note,
        "dry_run": head.dry_run,
        "notices": rows.iter().map(|(n, d)| serde_json::json!({
            "kind": n.kind.name(),
            "id": n.id,
            "source": n.source.as_str(),
            "event_id": n.event_id,
            "status": format!("{:?}", n.status).to_lowercase(),
            "deadline": n.deadline.map(timefmt::format_rfc3339),
            "detail": n.detail,
            "action": d.action.name(),
            "when": match d.when { When::Now => "now".to_string(), When::At(t) => timefmt::format_rfc3339(t) },
            "reason": d.reason,
            "raw": n.raw,
        })).collect::<Vec<_>>(),
        "read": obs.fresh.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "errors": obs.errors.iter().map(|e| serde_json::json!({
            "source": e.source.as_str(), "error": e.error.to_string(),
        })).collect::<Vec<_>>(),
    })
}

fn print_text(head: &Head<'_>, rows: &[Row<'_>], obs: &Observation, now: SystemTime) {
    println!("cloud: {} ({})", head.detection.cloud, head.detection.how);
    println!("watching: {}", head.watching);
    println!("drain budget: {}", head.budget_note);
    if rows.is_empty() {
        println!("notices: {}", none_line(obs));
    }
    for (n, d) in rows {
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
        let dry = if head.dry_run { " [dry run]" } else { "" };
        println!("  decision: {} {when}{dry}", d.action);
        println!("  because: {}", d.reason);
    }
    for (sources, msg) in obs.grouped_errors() {
        println!("error: {}: {msg}", SourceId::join(&sources, ", "));
    }
}
