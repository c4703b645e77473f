//! The daemon's side of the drain report: it tells the watcher (src/drain/) which notice a
//! shutdown follows, and writes the watcher's report to every output before the watcher
//! releases its lock.

use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, oneshot, watch};

use super::Daemon;
use crate::drain::watch::{Msg, Watcher};
use crate::drain::{Followed, Report, MSG_DRAINED};
use crate::notice::{Notice, NoticeKind};
use crate::policy::{Action, PowerAction};
use crate::timefmt::format_duration;
use crate::webhook::Event;

/// How long the textfile may take to land before the lock is released.
const TEXTFILE_WITHIN: Duration = Duration::from_millis(300);

/// What the daemon keeps of the drain watcher.
pub(super) struct DrainSide {
    followed: watch::Sender<Option<Followed>>,
    /// The notice last acted on, for the report's event.
    notice: Option<Notice>,
    /// Whether the lock is held (with the budget), or why not; `None` until first told.
    lock: Option<Result<Duration, String>>,
}

impl DrainSide {
    /// Starts the watcher task; its messages come on the receiver.
    pub(super) fn start(
        opts: &crate::config::Options,
        sandbox: Option<std::sync::Arc<crate::sandbox::IpPolicy>>,
        reader: std::sync::mpsc::Sender<crate::provider::Request>,
    ) -> (DrainSide, mpsc::Receiver<Msg>) {
        let (tx, rx) = mpsc::channel(4);
        let (followed, seen) = watch::channel(None);
        let lifecycle = opts
            .asg_settings()
            .and_then(|s| crate::asg::Lifecycle::through_reader(s, reader))
            .map(|l| l.with_sandbox(sandbox));
        let mut watcher = Watcher::new(tx, seen, lifecycle.map(Asg));
        let dir = opts.state_dir();
        let boot = crate::state::current_boot_id();
        watcher.drills = Some(Box::new(move |started| {
            drill_followed(&dir, &boot, started)
        }));
        tokio::spawn(watcher.run());
        let side = DrainSide {
            followed,
            notice: None,
            lock: None,
        };
        (side, rx)
    }

    /// nthd is about to ask logind for `action` because of `n`: a shutdown that begins now
    /// follows it. Told before the call, since logind announces the shutdown before it answers.
    pub(super) fn acting(&mut self, n: &Notice, action: PowerAction) {
        self.notice = Some(n.clone());
        self.followed.send_replace(Some(Followed {
            kind: n.kind.name(),
            id: n.id.to_string(),
            action: action.name(),
            deadline: n.deadline,
            accepted: SystemTime::now(),
            asg_terminate: n.kind == NoticeKind::AsgTerminate,
        }));
    }

    /// logind did not take the action (refused, or a dry run): no shutdown follows it.
    pub(super) fn not_acting(&mut self) {
        self.followed.send_replace(None);
    }
}

/// The fire drill (`nthd simulate --yes`, its own process) that asked logind for the shutdown
/// begun at `started`: the latest drill record of this boot in the state file, written just
/// before its call, within moments of the start.
fn drill_followed(dir: &std::path::Path, boot: &str, started: SystemTime) -> Option<Followed> {
    crate::state::drill_records(dir, boot)
        .into_iter()
        .map(|r| {
            // The record keeps the action's name as the setting spells it.
            let action = Action::parse(&r.action)
                .and_then(Action::power)
                .unwrap_or(PowerAction::PowerOff);
            Followed {
                kind: r.id.drill_kind().map_or("unknown", NoticeKind::name),
                id: r.id.to_string(),
                action: action.name(),
                deadline: None,
                // Whole seconds: the record may read up to a second before the call.
                accepted: SystemTime::UNIX_EPOCH + Duration::from_secs(r.at_unix + 1),
                asg_terminate: false,
            }
        })
        .filter(|f| f.started(started))
        .max_by_key(|f| f.accepted)
}

impl Daemon {
    /// One message from the drain watcher.
    pub(super) fn on_drain(&mut self, msg: Msg) {
        match msg {
            Msg::Locked(budget) => {
                if !matches!(self.drain.lock, Some(Ok(_))) {
                    tracing::info!(
                        "nthd holds a delay lock on shutdown to report every drain (it holds a \
                         shutdown back at most 2 s after kubelet's lock, within logind's {} \
                         budget)",
                        format_duration(budget)
                    );
                }
                self.drain.lock = Some(Ok(budget));
                self.out.status.drain_lock(None);
            }
            Msg::NoLock(why) => {
                if self
                    .drain
                    .lock
                    .as_ref()
                    .is_none_or(|l| l.as_ref().err() != Some(&why))
                {
                    tracing::warn!("{why}");
                }
                self.out.status.drain_lock(Some(why.clone()));
                self.drain.lock = Some(Err(why));
            }
            Msg::Report(report, done) => self.record_drain(&report, done),
        }
        self.update_status(true);
    }

    /// Writes the report to the journal, the status file, the metrics and the webhooks, and
    /// answers `done` once the webhooks delivered it (the watcher bounds the wait).
    fn record_drain(&mut self, r: &Report, done: oneshot::Sender<()>) {
        log_report(r);
        let pods = r.pods_left.as_ref().map(Vec::len);
        let m = (r.held_s, r.budget_s, r.outcome.name(), pods);
        self.out.metrics.drain(m);
        let written = self.out.metrics.written();
        let notice = r
            .notice
            .as_ref()
            .and(self.drain.notice.as_ref())
            .filter(|n| r.notice.as_ref().is_some_and(|d| d.id == n.id.to_string()));
        let hooks = self.out.webhooks.hooks();
        hooks.send(Event::drained(r, notice));
        let delivered = hooks.delivered();
        self.out.status.drain(r.clone());
        tokio::spawn(async move {
            let written = tokio::task::spawn_blocking(move || {
                if let Some(w) = written {
                    w.wait(TEXTFILE_WITHIN);
                }
            });
            let _ = tokio::join!(delivered, written);
            let _ = done.send(());
        });
    }
}

/// The journal line, with its own MESSAGE_ID and fields.
fn log_report(r: &Report) {
    let pods = r.pods_left.as_ref().map(|p| p.join(","));
    let notice = r.notice.as_ref().map_or("", |n| n.id.as_str());
    let text = r.sentence();
    // tracing's level is part of the call site, so the fields are written once for both.
    macro_rules! at {
        ($level:ident) => {
            tracing::$level!(
                message_id = MSG_DRAINED,
                nthd_drain_outcome = r.outcome.name(),
                nthd_drain_held_s = r.held_s,
                nthd_drain_budget_s = r.budget_s,
                nthd_pods_left = pods.as_deref().unwrap_or("unknown"),
                nthd_notice_id = notice,
                "{text}"
            )
        };
    }
    match r.outcome {
        crate::drain::Outcome::Released => at!(info),
        crate::drain::Outcome::BudgetExhausted => at!(warn),
    }
}

/// The Auto Scaling lifecycle action, as the drain watcher finishes it.
struct Asg(crate::asg::Lifecycle);

impl crate::drain::Finish for Asg {
    async fn prepare(&mut self) -> Result<(), String> {
        self.0.prepare().await.map_err(|e| e.to_string())
    }

    fn heartbeat_every(&self, budget: Duration) -> Option<Duration> {
        self.0.heartbeat_every(budget)
    }

    async fn heartbeat(&mut self) -> Result<(), String> {
        self.0.heartbeat().await.map_err(|e| e.to_string())
    }

    async fn complete(&mut self, until: std::time::Instant) -> Result<String, String> {
        let c = self.0.complete(until).await.map_err(|e| e.to_string())?;
        Ok(format!(
            "Auto Scaling lifecycle action completed: {} for hook {} of group {} (after {} \
             attempt(s))",
            c.result, c.hook, c.group, c.attempts
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notice::NoticeId;
    use crate::state::{Phase, State};

    /// A drill recorded its call in the state file: the shutdown that began a moment later is
    /// the drill's; one begun a minute later, or a record of another boot, is not.
    #[test]
    fn a_shutdown_right_after_a_drills_call_is_the_drills() {
        let dir = tempfile::tempdir().unwrap();
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (state, _) = State::load(dir.path(), "boot-a".into(), t);
        let mut state = state.for_drill();
        let id = NoticeId::drill(NoticeKind::SpotTerminate, "7");
        state
            .record(&id, None, PowerAction::PowerOff, Phase::Started, t)
            .unwrap();
        let f = drill_followed(dir.path(), "boot-a", t + Duration::from_millis(300)).unwrap();
        assert_eq!(
            (f.kind, f.id.as_str(), f.action),
            ("spot-terminate", id.as_str(), "poweroff")
        );
        assert!(drill_followed(dir.path(), "boot-a", t + Duration::from_secs(60)).is_none());
        assert!(drill_followed(dir.path(), "boot-b", t).is_none());
        assert!(drill_followed(&dir.path().join("nothing"), "boot-a", t).is_none());
    }
}
