//! `nthd simulate KIND`: a fire drill. A synthetic notice goes through the same planner and
//! executor as a real one, without touching the metadata service. Without `--yes` it only
//! narrates; with `--yes` it carries the action out, so the kubelet drain can be rehearsed on a
//! real node. It cannot be triggered by accident: `--yes` is required, and on a terminal the
//! host name must be typed as well.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use crate::config::Options;
use crate::executor::{self, Executor, Outcome};
use crate::logind::Logind;
use crate::metrics::{Metrics, MetricsOptions};
use crate::notice::{Notice, NoticeKind, NoticeStatus, SourceId};

/// The source of a drill's notice.
const SIMULATE: SourceId = SourceId::new("simulate");
use crate::policy::{Effect, Planner, PowerAction};
use crate::timefmt;

/// A plausible deadline for a drill of `kind`: the platform's usual lead time.
pub(crate) fn default_lead(kind: NoticeKind) -> Duration {
    Duration::from_secs(kind.info().usual_lead_secs)
}

/// The synthetic notice.
pub(crate) fn synthetic(kind: NoticeKind, deadline_in: Duration, now: SystemTime) -> Notice {
    let deadline = (!deadline_in.is_zero()).then(|| now + deadline_in);
    Notice {
        kind,
        source: SIMULATE,
        // Unique per drill without waiting for a new second: every drill is its own process.
        id: format!(
            "simulate/{}/{}-{}",
            kind.name(),
            now.duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            std::process::id()
        ),
        event_id: None,
        deadline,
        status: NoticeStatus::Active,
        detail: format!("simulated {kind} notice (fire drill)"),
        raw: String::new(),
    }
}

/// `nthd simulate KIND [--yes] [--deadline-in D]`.
pub(crate) async fn simulate(
    opts: &Options,
    kind: NoticeKind,
    yes: bool,
    deadline_in: Option<Duration>,
) -> anyhow::Result<ExitCode> {
    let now = SystemTime::now();
    let notice = synthetic(kind, deadline_in.unwrap_or_else(|| default_lead(kind)), now);
    let mut logind = Logind::new();
    let budget = read_budget(&mut logind).await;
    let mut planner = Planner::new(opts.policy());
    println!(
        "simulated notice: {} ({}){}",
        kind,
        kind.info().help,
        notice
            .deadline
            .map(|d| format!(", platform acts at {}", timefmt::format_rfc3339(d)))
            .unwrap_or_default()
    );
    let cmds = planner.observe(std::slice::from_ref(&notice), &[SIMULATE], now, budget);
    let Some(action) = narrate(&cmds, now) else {
        println!("nothing to carry out: the policy for {kind} is not poweroff or reboot");
        return Ok(ExitCode::SUCCESS);
    };
    if !yes || opts.dry_run {
        println!(
            "dry run: nthd would call org.freedesktop.login1.Manager.{}(false); kubelet's \
             delay lock would then drain the node. Add --yes to carry it out for real.",
            action.method()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if !confirmed(action)? {
        println!("not confirmed; nothing done");
        return Ok(ExitCode::FAILURE);
    }
    // The drill goes through the same executor as a real notice: state record, the
    // shutdown-under-way guard, call timeout, metrics (the textfile, if set), journald IDs.
    let state = executor::load_state(&opts.state_dir(), now);
    let mut exec = Executor::new(logind, state, false, None);
    let mut metrics = Metrics::new(MetricsOptions {
        textfile: opts.metrics_options().textfile,
        listen: None,
    });
    let Some((n, action)) = wait_until_due(&mut planner, cmds).await else {
        println!("nothing left to do");
        return Ok(ExitCode::SUCCESS);
    };
    println!(
        "calling org.freedesktop.login1.Manager.{}(false) for {}",
        action.method(),
        n.id
    );
    let outcome = exec.execute(&n, action, &mut metrics, &|| {}).await;
    metrics.flush_now();
    Ok(report(&outcome, action))
}

/// logind's drain budget, as the planner uses it.
async fn read_budget(logind: &mut Logind) -> Option<Duration> {
    match tokio::time::timeout(executor::READ_TIMEOUT, logind.inhibit_delay_max()).await {
        Ok(Ok(b)) => {
            println!(
                "logind InhibitDelayMaxUSec: {} (kubelet's drain budget)",
                timefmt::format_duration(b)
            );
            Some(b)
        }
        Ok(Err(e)) => {
            println!("logind: {e}");
            None
        }
        Err(_) => {
            println!(
                "logind did not answer within {}",
                timefmt::format_duration(executor::READ_TIMEOUT)
            );
            None
        }
    }
}

/// Prints the planner's decision; the power action it plans, if any.
fn narrate(cmds: &[Effect], now: SystemTime) -> Option<PowerAction> {
    let mut planned = None;
    for c in cmds {
        match c {
            Effect::Announce { decision, .. } => {
                println!("decision: {} ({})", decision.action, decision.reason);
            }
            Effect::Scheduled { action, at, .. } => {
                println!(
                    "{action} would run at {} ({})",
                    timefmt::format_rfc3339(*at),
                    timefmt::relative(*at, now)
                );
                planned = Some(*action);
            }
            Effect::Execute { action, .. } => planned = Some(*action),
            _ => {}
        }
    }
    planned
}

/// On a terminal, the host name must be typed; otherwise `--yes` is enough.
fn confirmed(action: PowerAction) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Ok(true);
    }
    let host = crate::webhook::hostname();
    print!(
        "This will {} {host} for real. Type the host name to go ahead: ",
        action.method()
    );
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim() == host)
}

/// Waits for a deferred action exactly as the daemon would; the notice and action once due.
async fn wait_until_due(
    planner: &mut Planner,
    mut cmds: Vec<Effect>,
) -> Option<(Notice, PowerAction)> {
    loop {
        let due = cmds.into_iter().find_map(|c| match c {
            Effect::Execute { notice, action } => Some((notice, action)),
            _ => None,
        });
        if due.is_some() {
            return due;
        }
        let at = planner.next_wakeup()?;
        let wait = at
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        println!(
            "waiting {} for the last safe moment (Ctrl-C to abort)",
            timefmt::format_duration(wait)
        );
        tokio::time::sleep(wait).await;
        cmds = planner.tick(SystemTime::now());
    }
}

/// The drill's last line and exit status.
fn report(outcome: &Outcome, action: PowerAction) -> ExitCode {
    let method = action.method();
    match outcome {
        Outcome::Accepted => {
            println!("done: logind accepted {method}; kubelet's lock now drains the node");
            ExitCode::SUCCESS
        }
        Outcome::AlreadyShuttingDown => {
            println!(
                "stood down: logind is already preparing for shutdown, so nthd did not call \
                 {method} again (recorded as done, as the daemon would)"
            );
            ExitCode::SUCCESS
        }
        Outcome::DryRun => {
            println!("dry run: nothing called");
            ExitCode::SUCCESS
        }
        Outcome::Failed(e) => {
            println!("failed: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_notices_are_distinct_from_real_ones() {
        let n = synthetic(
            NoticeKind::SpotTerminate,
            Duration::from_secs(120),
            SystemTime::UNIX_EPOCH + Duration::from_secs(100),
        );
        assert_eq!(n.source, "simulate");
        assert!(n.id.starts_with("simulate/spot-terminate/"));
        assert_eq!(
            n.deadline,
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(220))
        );
        assert!(
            synthetic(NoticeKind::Rebalance, Duration::ZERO, SystemTime::now())
                .deadline
                .is_none()
        );
        for k in crate::notice::KINDS {
            let _ = default_lead(k.kind);
        }
    }
}
