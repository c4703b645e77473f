//! `nthd simulate KIND`: a fire drill. A synthetic notice goes through the same planner and
//! executor as a real one, without touching the metadata service. Without `--yes` it only
//! narrates; with `--yes` it carries the action out, so the kubelet drain can be rehearsed on a
//! real node, and applies the record as the daemon does ([`crate::report::apply`]): the journald
//! line, the metrics textfile, the daemon's status file and the webhooks all show the action,
//! marked as a drill. `--yes --dry-run` does all of that without calling logind. It cannot be triggered by accident: `--yes` is required, and on a terminal the
//! host name must be typed as well.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use std::path::{Path, PathBuf};

use crate::config::Options;
use crate::executor::{self, ActionRecord, Executor, Outcome};
use crate::extras::WebhookSlot;
use crate::files;
use crate::logind::Logind;
use crate::metrics::{Metrics, MetricsOptions};
use crate::notice::{
    Cloud, Identity, Lifecycle, Notice, NoticeId, NoticeKind, NoticeStatus, DRILL_SOURCE,
};
use crate::policy::{Effect, Planner, PowerAction};
use crate::report::{self, StatusOut};
use crate::timefmt;
use crate::webhook::Context;

/// A plausible deadline for a drill of `kind`: the platform's usual lead time.
pub(crate) fn default_lead(kind: NoticeKind) -> Duration {
    Duration::from_secs(kind.info().usual_lead_secs)
}

/// Numbers the synthetic notices of this process.
static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What tells one drill's id from another's, without waiting for a new second:
/// `SECS.NANOS-PID-SEQ`. The sequence number tells apart the notices of one process (tests make
/// several); the process id, drills run at the same time; the nanoseconds, drills whose
/// process ids are the same (each in its own PID namespace, such as a container's PID 1, or a
/// PID reused).
fn drill_serial(now: SystemTime) -> String {
    let since = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}.{:09}-{}-{}",
        since.as_secs(),
        since.subsec_nanos(),
        std::process::id(),
        SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// The synthetic notice.
pub(crate) fn synthetic(kind: NoticeKind, deadline_in: Duration, now: SystemTime) -> Notice {
    let deadline = (!deadline_in.is_zero()).then(|| now + deadline_in);
    Notice {
        kind,
        source: DRILL_SOURCE,
        id: NoticeId::drill(kind, &drill_serial(now)),
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
    let cmds = planner.observe(std::slice::from_ref(&notice), &[DRILL_SOURCE], now, budget);
    let Some(action) = narrate(&cmds, now) else {
        println!("nothing to carry out: the policy for {kind} is not poweroff or reboot");
        return Ok(ExitCode::SUCCESS);
    };
    if !yes {
        println!(
            "dry run: nthd would call org.freedesktop.login1.Manager.{}(false); kubelet's \
             delay lock would then drain the node. Add --yes to carry it out for real.",
            action.method()
        );
        return Ok(ExitCode::SUCCESS);
    }
    // With --dry-run nothing is powered off: no need to confirm.
    if !opts.dry_run && !confirmed(action)? {
        println!("not confirmed; nothing done");
        return Ok(ExitCode::FAILURE);
    }
    let drill = Drill::start(opts, logind, now);
    drill.announce(&cmds);
    let Some((n, action)) = wait_until_due(&mut planner, cmds).await else {
        println!("nothing left to do");
        return Ok(ExitCode::SUCCESS);
    };
    let rec = drill.carry_out(&n, action).await;
    Ok(report(&rec))
}

/// A drill under way: the daemon's path to logind and to everyone who hears of an action.
struct Drill {
    exec: Executor,
    metrics: Metrics,
    webhooks: WebhookSlot,
    /// The daemon's status file, which the drill's action is added to.
    status: PathBuf,
}

impl Drill {
    /// The same executor as a real notice's (state record, the shutdown-under-way guard, call
    /// timeout), the metrics textfile if set, and the daemon's webhooks (`NTHD_WEBHOOK` from
    /// the same settings files), naming the instance as the daemon's status file does.
    fn start(opts: &Options, logind: Logind, now: SystemTime) -> Drill {
        // The daemon writes the same file meanwhile (a drill may wait minutes for its moment):
        // the drill's writes keep what the daemon wrote since this load.
        let state = executor::load_state(&opts.state_dir(), now).for_drill();
        let status = opts.status_path();
        let webhooks = WebhookSlot::start(opts, drill_context(&status), None);
        if let Some(p) = webhooks.problem() {
            println!("webhooks: {p}");
        }
        Drill {
            exec: Executor::new(logind, state, opts.dry_run, None),
            metrics: Metrics::new(MetricsOptions {
                textfile: opts.metrics_options().textfile,
                listen: None,
            }),
            webhooks,
            status,
        }
    }

    /// Sends the notice events, as the daemon does when it announces a notice.
    fn announce(&self, cmds: &[Effect]) {
        for c in cmds {
            if let Effect::Announce {
                notice, decision, ..
            } = c
            {
                report::announce(self.webhooks.hooks(), notice, decision);
            }
        }
    }

    /// Carries out `action`, applies the record as the daemon would, and gives the webhooks a
    /// moment to deliver (failing to deliver fails nothing).
    async fn carry_out(mut self, n: &Notice, action: PowerAction) -> ActionRecord {
        let verb = if self.exec.dry_run() {
            "dry run: not calling"
        } else {
            "calling"
        };
        println!(
            "{verb} org.freedesktop.login1.Manager.{}(false) for {}",
            action.method(),
            n.id
        );
        let rec = self.exec.execute(n, action, &|| {}).await;
        let status = StatusOut::Drill(&self.status);
        report::apply(&rec, &mut self.metrics, status, self.webhooks.hooks());
        self.metrics.flush_now();
        self.webhooks.drain(crate::daemon::WEBHOOK_DRAIN).await;
        rec
    }
}

/// Who the drill's events come from: this host, and the cloud and instance the daemon's status
/// file names (a drill does not ask the metadata service). The file is read as
/// [`files::read_untrusted`] reads (the drill runs as root, user nthd owns the directory); a
/// file it refuses names nothing.
fn drill_context(status: &Path) -> Context {
    let mut ctx = Context::for_this_host();
    let v: serde_json::Value = files::read_untrusted(status)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    ctx.cloud = Cloud::ALL.into_iter().find(|c| v["cloud"] == c.name());
    let i = &v["instance"];
    let lifecycles = [Lifecycle::Spot, Lifecycle::Preemptible, Lifecycle::OnDemand];
    ctx.identity = Identity {
        instance_id: text(&i["id"]),
        instance_type: text(&i["type"]),
        zone: text(&i["zone"]),
        lifecycle: lifecycles.into_iter().find(|l| i["lifecycle"] == l.name()),
    };
    ctx
}

/// logind's drain budget, as the planner uses it.
async fn read_budget(logind: &mut Logind) -> Option<Duration> {
    match logind.inhibit_delay_max().await {
        Ok(b) => {
            println!(
                "logind InhibitDelayMaxUSec: {} (kubelet's drain budget)",
                timefmt::format_duration(b)
            );
            Some(b)
        }
        Err(e) => {
            println!("logind: {e}");
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
fn report(rec: &ActionRecord) -> ExitCode {
    let method = rec.called.unwrap_or(rec.action.method());
    match &rec.outcome {
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
            println!("dry run (--dry-run): nothing called; the drill was reported as one");
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
        assert!(n.id.as_str().starts_with("simulate/spot-terminate/"));
        assert_eq!(
            n.deadline,
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(220))
        );
        assert!(n.is_drill());
        let again = synthetic(NoticeKind::Rebalance, Duration::ZERO, SystemTime::now());
        assert!(again.deadline.is_none());
        let third = synthetic(NoticeKind::Rebalance, Duration::ZERO, SystemTime::now());
        assert_ne!(again.id, third.id, "two drills in one second, one id");
        assert!(again.id.is_drill() && third.id.is_drill());
        for k in crate::notice::KINDS {
            let _ = default_lead(k.kind);
        }
    }

    /// Two drills at the very same instant, in one process, still get two ids; no sleep needed.
    #[test]
    fn drills_at_the_same_instant_get_distinct_ids() {
        let now = SystemTime::UNIX_EPOCH + Duration::new(1_800_000_000, 5);
        let a = synthetic(NoticeKind::SpotTerminate, Duration::ZERO, now);
        let b = synthetic(NoticeKind::SpotTerminate, Duration::ZERO, now);
        assert_ne!(a.id, b.id);
        let prefix = format!(
            "simulate/spot-terminate/1800000000.000000005-{}-",
            std::process::id()
        );
        for n in [&a, &b] {
            assert!(n.id.as_str().starts_with(&prefix), "{}", n.id);
        }
    }
}
