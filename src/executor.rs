//! The one path that carries out a power action.
//!
//! Whatever asks for a power-off or reboot, the daemon for a real notice or `nthd simulate
//! --yes` for a fire drill, it goes through [`Executor::execute`], which:
//! - stands down when logind is already preparing for shutdown (our own earlier call, or
//!   someone else's), and records the notice as done;
//! - writes the state record before the call, and refuses a reboot it could not record (the
//!   event still listed after the reboot would look new, and nthd would reboot on every boot);
//! - bounds the logind call, and names the real cause of a refusal (see `logind.rs`);
//! - records the result, counts it in the metrics and logs it with a stable journald
//!   `MESSAGE_ID`.
//!
//! Whether to act, when, and when to retry is the planner's business (`policy.rs`): exactly once
//! lives there (the done set) and here (the state record that survives a restart).

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::logind::Logind;
use crate::metrics::Metrics;
use crate::notice::Notice;
use crate::policy::PowerAction;
use crate::state::{self, Phase, State};
use crate::timefmt;

/// journald `MESSAGE_ID` of "nthd called logind" (or, in a dry run, "would have"): stable
/// across releases, so `journalctl MESSAGE_ID=...` finds every action across reboots.
pub(crate) const MSG_ACTION: &str = "5b8e2d1f7a9c4e3b9f0a1c2d3e4f5a6b";
/// journald `MESSAGE_ID` of a power action that failed.
pub(crate) const MSG_ACTION_FAILED: &str = "c1e4a7b2d5f84c6e8a9b0c1d2e3f4a5b";

/// How long the `PowerOff` / `Reboot` call may take. logind answers at once when it accepts
/// (the drain happens after the answer); a hung logind must not stall nthd.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a logind property read may take.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// What came of one [`Executor::execute`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// logind accepted the call: kubelet's delay lock now drains the node.
    Accepted,
    /// logind was already preparing for shutdown, so nthd did not call it again.
    AlreadyShuttingDown,
    /// A dry run: logged, nothing called.
    DryRun,
    /// It did not happen; the message names the cause and what to do.
    Failed(String),
}

impl Outcome {
    /// Whether the notice counts as acted on (the planner then does not act on it again).
    pub(crate) fn acted(&self) -> bool {
        !matches!(self, Outcome::Failed(_))
    }

    /// The result a webhook's action event carries; `None` when logind was already shutting
    /// down (nthd did not act, the earlier action's event was sent).
    pub(crate) fn for_webhook(&self) -> Option<crate::webhook::ActionResult> {
        use crate::webhook::ActionResult;
        match self {
            Outcome::Accepted => Some(ActionResult::Accepted),
            Outcome::AlreadyShuttingDown => None,
            Outcome::DryRun => Some(ActionResult::DryRun),
            Outcome::Failed(e) => Some(ActionResult::Failed(e.clone())),
        }
    }

    /// The `result` label of `nthd_actions_total`.
    fn label(&self) -> &'static str {
        match self {
            Outcome::Accepted => "ok",
            Outcome::AlreadyShuttingDown => "already_shutting_down",
            Outcome::DryRun => "dry_run",
            Outcome::Failed(_) => "error",
        }
    }
}

/// Carries out power actions and remembers them.
pub(crate) struct Executor {
    logind: Logind,
    state: State,
    dry_run: bool,
    /// The planner's retry delay, named in failure messages; `None` when nobody retries (a drill).
    retry: Option<Duration>,
}

impl Executor {
    /// An executor over `state`. With `dry_run` it only logs what it would do.
    pub(crate) fn new(
        logind: Logind,
        state: State,
        dry_run: bool,
        retry: Option<Duration>,
    ) -> Executor {
        Executor {
            logind,
            state,
            dry_run,
            retry,
        }
    }

    /// The logind client, for the reads the daemon makes around the actions.
    pub(crate) fn logind(&mut self) -> &mut Logind {
        &mut self.logind
    }

    /// The records of actions taken.
    pub(crate) fn state(&self) -> &State {
        &self.state
    }

    /// Carries out `action` for `n`. `keepalive` runs before each logind call that may take its
    /// whole timeout (the daemon pings systemd's watchdog there).
    pub(crate) async fn execute(
        &mut self,
        n: &Notice,
        action: PowerAction,
        metrics: &mut Metrics,
        keepalive: &dyn Fn(),
    ) -> Outcome {
        let outcome = if self.dry_run {
            log_dry_run(n, action);
            Outcome::DryRun
        } else {
            keepalive();
            if self.shutdown_under_way().await {
                self.stand_down(n, action)
            } else {
                self.call(n, action, keepalive).await
            }
        };
        metrics.action(n.kind, action, outcome.label());
        outcome
    }

    /// Whether logind already prepares for shutdown. Acting once across restarts: another call
    /// could then only do harm (for a reboot). Unknown counts as no: the call itself is safe.
    async fn shutdown_under_way(&mut self) -> bool {
        matches!(
            tokio::time::timeout(READ_TIMEOUT, self.logind.preparing_for_shutdown()).await,
            Ok(Ok(true))
        )
    }

    fn stand_down(&mut self, n: &Notice, action: PowerAction) -> Outcome {
        tracing::info!(
            nthd_notice_id = n.id.as_str(),
            "logind is already preparing for shutdown; not calling {} again for {}",
            action.method(),
            n.id
        );
        self.record(n, action, Phase::Done);
        Outcome::AlreadyShuttingDown
    }

    async fn call(&mut self, n: &Notice, action: PowerAction, keepalive: &dyn Fn()) -> Outcome {
        if !self.record(n, action, Phase::Started) && action == PowerAction::Reboot {
            return self.failed(n, action, self.unrecorded_reboot(n));
        }
        keepalive();
        let answer = tokio::time::timeout(CALL_TIMEOUT, self.logind.act(action)).await;
        match answer {
            Ok(Ok(())) => {
                self.record(n, action, Phase::Done);
                log_accepted(n, action);
                Outcome::Accepted
            }
            Ok(Err(e)) => self.failed(n, action, e.to_string()),
            Err(_) => {
                // The connection may be stuck: the next call reconnects.
                self.logind.reset();
                let e = format!(
                    "logind {} did not answer within {}; is systemd-logind hung? (systemctl \
                     status systemd-logind)",
                    action.method(),
                    timefmt::format_duration(CALL_TIMEOUT)
                );
                self.failed(n, action, e)
            }
        }
    }

    fn unrecorded_reboot(&self, n: &Notice) -> String {
        format!(
            "not rebooting for {}: the record of it could not be written first, and without it \
             nthd would reboot again on every boot while the event is listed. Make the state \
             directory writable",
            n.id
        )
    }

    fn failed(&self, n: &Notice, action: PowerAction, e: String) -> Outcome {
        let retry = match self.retry {
            Some(d) => format!(" (retrying in {})", timefmt::format_duration(d)),
            None => String::new(),
        };
        tracing::error!(
            message_id = MSG_ACTION_FAILED,
            nthd_kind = n.kind.name(),
            nthd_notice_id = n.id.as_str(),
            nthd_action = action.name(),
            "action {action} for {} failed: {e}{retry}",
            n.kind
        );
        Outcome::Failed(e)
    }

    /// Records a phase of an action; false (and logged) when the file could not be written.
    fn record(&mut self, n: &Notice, action: PowerAction, phase: Phase) -> bool {
        let at = SystemTime::now();
        match self
            .state
            .record(&n.id, n.event_id.as_deref(), action, phase, at)
        {
            Ok(()) => true,
            Err(e) => {
                tracing::error!("{e}");
                false
            }
        }
    }
}

fn log_dry_run(n: &Notice, action: PowerAction) {
    tracing::warn!(
        message_id = MSG_ACTION,
        nthd_kind = n.kind.name(),
        nthd_notice_id = n.id.as_str(),
        nthd_action = action.name(),
        nthd_dry_run = true,
        "action {action} for {}: dry run: would call org.freedesktop.login1.Manager.{}(false) for \
         {} ({})",
        n.kind,
        action.method(),
        n.id,
        n.detail
    );
}

fn log_accepted(n: &Notice, action: PowerAction) {
    tracing::warn!(
        message_id = MSG_ACTION,
        nthd_kind = n.kind.name(),
        nthd_notice_id = n.id.as_str(),
        nthd_event_id = n.event_id.as_deref().unwrap_or(""),
        nthd_action = action.name(),
        "action {action} for {}: called org.freedesktop.login1.Manager.{}(false) for {}: kubelet's \
         inhibitor lock now drains the node",
        n.kind,
        action.method(),
        n.id
    );
}

/// Loads the record of actions taken from `dir`, saying what is wrong with it: an unreadable
/// boot id, a damaged file (moved aside), an unusable directory. It never fails: without a
/// record nthd still acts, at worst once more after a restart.
pub(crate) fn load_state(dir: &Path, now: SystemTime) -> State {
    let boot_id = state::current_boot_id();
    if boot_id == state::UNKNOWN_BOOT {
        tracing::error!(
            "cannot read the boot id (/proc/sys/kernel/random/boot_id and /proc/stat are hidden, \
             e.g. by ProcSubset=pid in a drop-in): nthd cannot tell this boot from an earlier \
             one, so it acts on every notice it sees, possibly once more after a restart. \
             Remove ProcSubset=pid from the unit's drop-ins"
        );
    }
    let (st, report) = State::load(dir, boot_id, now);
    if let Some(e) = &report.error {
        match &report.moved_aside {
            Some(p) => tracing::error!(
                "{e}; moved it to {} and starting with an empty state",
                p.display()
            ),
            None => tracing::warn!("{e}; starting with an empty state"),
        }
    }
    if let Err(e) = std::fs::metadata(dir) {
        tracing::warn!(
            "state directory {} is not usable ({e}); nthd remembers what it acted on only until \
             it restarts. Set NTHD_STATE_DIR or StateDirectory= in the unit",
            dir.display()
        );
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricsOptions;
    use crate::notice::NoticeKind;
    use nthd_testkit::logind::{FakeLogind, PrivateBus};

    fn metrics() -> Metrics {
        Metrics::new(MetricsOptions {
            textfile: None,
            listen: None,
        })
    }

    /// A drill's notice of `kind`, due now.
    fn notice(kind: NoticeKind) -> Notice {
        crate::simulate::synthetic(kind, Duration::ZERO, SystemTime::now())
    }

    /// On a read-only /var, a corrupt state file can be neither used nor moved aside: nthd then
    /// cannot record a reboot first, so it does not ask logind for one (it would reboot again on
    /// every boot); a power-off, which cannot loop, still goes ahead.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_reboot_reaches_logind_without_a_record() {
        let name = "executor::tests::no_reboot_reaches_logind_without_a_record";
        let fill = |d: &Path| std::fs::write(d.join("state.json"), b"{garbage").unwrap();
        let Some(dir) = state::tests::in_read_only_dir(name, fill) else {
            return;
        };
        let bus = PrivateBus::start().unwrap();
        let fake = FakeLogind::serve(bus.address()).await.unwrap();
        let st = load_state(&dir, SystemTime::now());
        let mut exec = Executor::new(Logind::at(bus.address()), st, false, None);

        let reboot = notice(NoticeKind::ScheduledReboot);
        let out = exec
            .execute(&reboot, PowerAction::Reboot, &mut metrics(), &|| {})
            .await;
        let Outcome::Failed(e) = out else {
            panic!("the reboot was not refused: {out:?}");
        };
        assert!(e.contains("not rebooting"), "{e}");
        assert_eq!(fake.reboot_count(), 0, "{:?}", fake.calls());

        let spot = notice(NoticeKind::SpotTerminate);
        let out = exec
            .execute(&spot, PowerAction::PowerOff, &mut metrics(), &|| {})
            .await;
        assert_eq!(out, Outcome::Accepted);
        assert_eq!(fake.power_off_count(), 1);
        assert_eq!(std::fs::read(dir.join("state.json")).unwrap(), b"{garbage");
    }
}
