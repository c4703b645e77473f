//! `nthd simulate KIND`: a fire drill. A synthetic notice goes through the same planner and
//! logind path as a real one, without touching the metadata service. Without `--yes` it only
//! narrates; with `--yes` it carries the action out, so the kubelet drain can be rehearsed on a
//! real node. It cannot be triggered by accident: `--yes` is required, and on a terminal the
//! host name must be typed as well.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use crate::config::Options;
use crate::logind::Logind;
use crate::policy::{Command, Planner};
use crate::provider::{Notice, NoticeKind, NoticeStatus};
use crate::timefmt;

/// A plausible deadline for a drill of `kind`: the platform's usual lead time.
pub fn default_lead(kind: NoticeKind) -> Duration {
    Duration::from_secs(match kind {
        NoticeKind::SpotTerminate | NoticeKind::SpotStop | NoticeKind::SpotHibernate => 120,
        NoticeKind::GcpPreempt | NoticeKind::GcpTerminateMaintenance | NoticeKind::AzurePreempt => {
            30
        }
        NoticeKind::GcpMigrate => 60,
        NoticeKind::AlibabaSpot => 300,
        // Not documented; the lead time nthd assumes for Tencent (Cloud::notice_lead_time).
        NoticeKind::TencentSpot => 120,
        NoticeKind::AzureTerminate => 600,
        NoticeKind::AzureReboot | NoticeKind::AzureRedeploy | NoticeKind::AzureFreeze => 900,
        NoticeKind::Rebalance
        | NoticeKind::AsgTerminate
        | NoticeKind::AsgOther
        | NoticeKind::Unknown => 0,
        NoticeKind::ScheduledStop
        | NoticeKind::ScheduledReboot
        | NoticeKind::ScheduledMaintenance => 3600,
    })
}

/// The synthetic notice.
pub fn synthetic(kind: NoticeKind, deadline_in: Duration, now: SystemTime) -> Notice {
    let deadline = (!deadline_in.is_zero()).then(|| now + deadline_in);
    Notice {
        kind,
        source: "simulate",
        id: format!(
            "simulate/{}/{}",
            kind.name(),
            now.duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        ),
        event_id: None,
        deadline,
        status: NoticeStatus::Active,
        detail: format!("simulated {kind} notice (fire drill)"),
        raw: String::new(),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "this-host".into())
}

pub async fn simulate(
    opts: &Options,
    kind: NoticeKind,
    yes: bool,
    deadline_in: Option<Duration>,
) -> anyhow::Result<ExitCode> {
    let now = SystemTime::now();
    let notice = synthetic(kind, deadline_in.unwrap_or_else(|| default_lead(kind)), now);
    let mut logind = Logind::new();
    let budget =
        match tokio::time::timeout(Duration::from_secs(3), logind.inhibit_delay_max()).await {
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
                println!("logind did not answer within 3s");
                None
            }
        };
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
    let mut cmds = planner.observe(std::slice::from_ref(&notice), &["simulate"], now, budget);
    let mut planned = None;
    for c in &cmds {
        match c {
            Command::Announce { decision, .. } => {
                println!("decision: {} ({})", decision.action, decision.reason);
            }
            Command::Scheduled { action, at, .. } => {
                println!(
                    "{action} would run at {} ({})",
                    timefmt::format_rfc3339(*at),
                    timefmt::relative(*at, now)
                );
                planned = Some(*action);
            }
            Command::Execute { action, .. } => planned = Some(*action),
            _ => {}
        }
    }
    let Some(action) = planned else {
        println!("nothing to carry out: the policy for {kind} is not poweroff or reboot");
        return Ok(ExitCode::SUCCESS);
    };
    let method = if action == crate::policy::Action::Reboot {
        "Reboot"
    } else {
        "PowerOff"
    };
    if !yes || opts.dry_run {
        println!(
            "dry run: nthd would call org.freedesktop.login1.Manager.{method}(false); kubelet's \
             delay lock would then drain the node. Add --yes to carry it out for real."
        );
        return Ok(ExitCode::SUCCESS);
    }
    if std::io::stdin().is_terminal() {
        let host = hostname();
        print!("This will {method} {host} for real. Type the host name to go ahead: ");
        std::io::stdout().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if line.trim() != host {
            println!("not confirmed; nothing done");
            return Ok(ExitCode::FAILURE);
        }
    }
    // Wait for a deferred action exactly as the daemon would.
    loop {
        let exec = cmds.iter().find_map(|c| match c {
            Command::Execute { notice, action } => Some((notice.clone(), *action)),
            _ => None,
        });
        if let Some((n, action)) = exec {
            println!(
                "calling org.freedesktop.login1.Manager.{method}(false) for {}",
                n.id
            );
            match logind.act(action).await {
                Ok(()) => {
                    tracing::warn!(
                        message_id = crate::daemon::MSG_ACTION,
                        nthd_kind = kind.name(),
                        nthd_notice_id = n.id.as_str(),
                        nthd_action = action.name(),
                        "simulate: called org.freedesktop.login1.Manager.{method}(false) for {}",
                        n.id
                    );
                    println!("done: logind accepted {method}; kubelet's lock now drains the node");
                    return Ok(ExitCode::SUCCESS);
                }
                Err(e) => {
                    println!("failed: {e}");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        let Some(at) = planner.next_wakeup() else {
            println!("nothing left to do");
            return Ok(ExitCode::SUCCESS);
        };
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
        for k in crate::provider::KINDS {
            let _ = default_lead(k.kind);
        }
    }
}
