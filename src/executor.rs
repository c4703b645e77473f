//! The one path that carries out a power action.
//!
//! Whatever asks for a power-off or reboot, the daemon for a real notice or `nthd simulate
//! --yes` for a fire drill, it goes through [`Executor::execute`], which:
//! - stands down when logind is already preparing for shutdown (our own earlier call, or
//!   someone else's), and records the notice as done;
//! - writes the state record before the call, and refuses a reboot it could not record (the
//!   event still listed after the reboot would look new, and nthd would reboot on every boot);
//!   the write (fsyncs) runs off the runtime thread, and a power-off does not wait for it;
//! - bounds the logind call, and names the real cause of a refusal (see `logind.rs`);
//! - returns one [`ActionRecord`]: what was asked, what logind was called with, and the result.
//!
//! What follows from the record (the journald line with its stable `MESSAGE_ID`, the metrics,
//! the status file's `actions`, the webhook's action event) is applied in one place,
//! [`crate::report::apply`], by the daemon and by a fire drill alike.
//!
//! Whether to act, when, and when to retry is the planner's business (`policy.rs`): exactly once
//! lives there (the done set) and here (the state record that survives a restart).

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::logind::{Logind, LogindError, CALL_TIMEOUT};
use crate::notice::{Notice, NoticeId};
use crate::policy::PowerAction;
use crate::state::{self, Phase, State};
use crate::timefmt;

/// journald `MESSAGE_ID` of "nthd called logind" (or, in a dry run, "would have"): stable
/// across releases, so `journalctl MESSAGE_ID=...` finds every action across reboots.
pub(crate) const MSG_ACTION: &str = "5b8e2d1f7a9c4e3b9f0a1c2d3e4f5a6b";
/// journald `MESSAGE_ID` of a power action that failed.
pub(crate) const MSG_ACTION_FAILED: &str = "c1e4a7b2d5f84c6e8a9b0c1d2e3f4a5b";

/// How long the executor waits for a state write (file and directory fsync). A reboot whose
/// record did not land in this time is refused; a power-off has gone ahead by then.
pub(crate) const WRITE_WAIT: Duration = Duration::from_secs(5);

/// A state write under way on the blocking pool.
type Write = tokio::task::JoinHandle<Result<(), state::StateError>>;

/// What came of one [`Executor::execute`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// logind accepted the call: kubelet's delay lock now drains the node.
    Accepted,
    /// logind was already preparing for shutdown, so nthd did not call it again.
    AlreadyShuttingDown,
    /// A dry run: logged, nothing called.
    DryRun,
    /// It did not happen; the error names the cause and what to do.
    Failed(ActionError),
}

/// Why a power action (or the logind read before one) did not happen, kept as a value so that
/// the daemon can tell a repeated failure from a new one without comparing messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ActionError {
    /// logind answered with an error.
    #[error(transparent)]
    Logind(#[from] LogindError),
    /// logind did not answer in time; the next call reconnects.
    #[error(
        "logind {method} did not answer within {}; is systemd-logind hung? (systemctl \
         status systemd-logind)",
        timefmt::format_duration(*after)
    )]
    NoAnswer {
        /// The method called, e.g. `PowerOff`.
        method: &'static str,
        /// How long nthd waited.
        after: Duration,
    },
    /// A reboot whose state record could not be written first.
    #[error(
        "not rebooting for {notice}: the record of it could not be written first, and without \
         it nthd would reboot again on every boot while the event is listed. Make the state \
         directory writable"
    )]
    Unrecorded {
        /// The notice the reboot was for.
        notice: NoticeId,
    },
}

impl ActionError {
    /// logind's refusal in its own words (error name, block holders); `None` when logind did
    /// not refuse (no answer, unreachable, a reboot not recorded).
    pub(crate) fn refusal(&self) -> Option<crate::logind::Refusal<'_>> {
        match self {
            ActionError::Logind(e) => e.refusal(),
            _ => None,
        }
    }
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
            Outcome::Failed(e) => Some(ActionResult::Failed(e.to_string())),
        }
    }

    /// logind's refusal, for a failed action that logind refused.
    pub(crate) fn refusal(&self) -> Option<crate::logind::Refusal<'_>> {
        match self {
            Outcome::Failed(e) => e.refusal(),
            _ => None,
        }
    }

    /// The `result` label of `nthd_actions_total`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Outcome::Accepted => "ok",
            Outcome::AlreadyShuttingDown => "already_shutting_down",
            Outcome::DryRun => "dry_run",
            Outcome::Failed(_) => "error",
        }
    }
}

/// One power action carried out (or not): what was asked, what was called, what came of it.
/// Everything the rest of nthd learns about the action comes from it ([`crate::report::apply`]).
#[derive(Debug, Clone)]
pub(crate) struct ActionRecord {
    /// The notice acted on (a fire drill's is [`Notice::is_drill`]).
    pub(crate) notice: Notice,
    /// The action asked for.
    pub(crate) action: PowerAction,
    /// The logind method called, `None` when none was (stood down, dry run, refused first).
    pub(crate) called: Option<&'static str>,
    /// What came of it.
    pub(crate) outcome: Outcome,
    /// When it was decided.
    pub(crate) at: SystemTime,
    /// When the planner tries a failed action again, named in the log line; `None` for a drill.
    pub(crate) retry: Option<Duration>,
}

impl ActionRecord {
    /// Whether it was a fire drill (`nthd simulate --yes`).
    pub(crate) fn drill(&self) -> bool {
        self.notice.is_drill()
    }

    /// The journald line, with its stable `MESSAGE_ID` and `NTHD_*` fields (`NTHD_DRILL=true`
    /// and a "fire drill:" prefix for a drill).
    pub(crate) fn log(&self) {
        let (n, action) = (&self.notice, self.action);
        match &self.outcome {
            Outcome::Accepted => log_accepted(n, action),
            Outcome::DryRun => log_dry_run(n, action),
            Outcome::AlreadyShuttingDown => tracing::info!(
                nthd_notice_id = n.id.as_str(),
                nthd_drill = n.is_drill(),
                "{}logind is already preparing for shutdown; not calling {} again for {}",
                drill_tag(n),
                action.method(),
                n.id
            ),
            Outcome::Failed(e) => log_failed(n, action, e, self.retry),
        }
    }
}

/// The prefix of a drill's log lines.
fn drill_tag(n: &Notice) -> &'static str {
    if n.is_drill() {
        "fire drill: "
    } else {
        ""
    }
}

/// Carries out power actions and remembers them.
pub(crate) struct Executor {
    logind: Logind,
    state: State,
    dry_run: bool,
    /// The planner's retry delay, named in failure messages; `None` when nobody retries (a drill).
    retry: Option<Duration>,
    /// How long to wait for a state write: [`WRITE_WAIT`].
    write_wait: Duration,
    /// Holds the state writes back until opened: a stalled disk, in tests.
    #[cfg(test)]
    gate: Option<std::sync::Arc<Gate>>,
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
            write_wait: WRITE_WAIT,
            #[cfg(test)]
            gate: None,
        }
    }

    /// Whether this executor only logs (`--dry-run`).
    pub(crate) fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// logind's bounded reads, for the daemon's watch of logind; actions go through
    /// [`Executor::execute`] only.
    pub(crate) fn reads(&mut self) -> crate::logind::Reads<'_> {
        self.logind.reads()
    }

    /// The records of actions taken.
    pub(crate) fn state(&self) -> &State {
        &self.state
    }

    /// Carries out `action` for `n`. `keepalive` runs before each logind call that may take its
    /// whole timeout (the daemon pings systemd's watchdog there). Nothing is logged or counted
    /// here: the caller applies the record ([`crate::report::apply`]).
    pub(crate) async fn execute(
        &mut self,
        n: &Notice,
        action: PowerAction,
        keepalive: &(dyn Fn() + Sync),
    ) -> ActionRecord {
        let (called, outcome) = if self.dry_run {
            (None, Outcome::DryRun)
        } else {
            keepalive();
            if self.shutdown_under_way().await {
                (None, self.stand_down(n, action).await)
            } else {
                self.call(n, action, keepalive).await
            }
        };
        ActionRecord {
            notice: n.clone(),
            action,
            called,
            outcome,
            at: SystemTime::now(),
            retry: self.retry,
        }
    }

    /// Whether logind already prepares for shutdown. Acting once across restarts: another call
    /// could then only do harm (for a reboot). Unknown counts as no: the call itself is safe.
    async fn shutdown_under_way(&mut self) -> bool {
        matches!(self.logind.preparing_for_shutdown().await, Ok(true))
    }

    async fn stand_down(&mut self, n: &Notice, action: PowerAction) -> Outcome {
        let done = self.start_record(n, action, Phase::Done);
        self.finish_record(done).await;
        Outcome::AlreadyShuttingDown
    }

    /// Records, then calls logind: the method called (`None` when the reboot was refused
    /// first) and the outcome.
    async fn call(
        &mut self,
        n: &Notice,
        action: PowerAction,
        keepalive: &(dyn Fn() + Sync),
    ) -> (Option<&'static str>, Outcome) {
        let started = self.start_record(n, action, Phase::Started);
        // A reboot's record must be on disk first. A power-off's is written beside the call: a
        // stalled disk must hold up neither the call nor the watchdog.
        let started = match action {
            PowerAction::Reboot => {
                keepalive();
                if !self.finish_record(started).await {
                    return (None, self.refuse_unrecorded_reboot(n));
                }
                None
            }
            PowerAction::PowerOff => Some(started),
        };
        keepalive();
        let answer = tokio::time::timeout(CALL_TIMEOUT, self.logind.act(action)).await;
        if let Some(started) = started {
            keepalive();
            self.finish_record(started).await;
        }
        keepalive();
        (
            Some(action.method()),
            self.answered(n, action, answer).await,
        )
    }

    /// What came of the logind call.
    async fn answered(
        &mut self,
        n: &Notice,
        action: PowerAction,
        answer: Result<Result<(), crate::logind::LogindError>, tokio::time::error::Elapsed>,
    ) -> Outcome {
        match answer {
            Ok(Ok(())) => {
                let done = self.start_record(n, action, Phase::Done);
                self.finish_record(done).await;
                Outcome::Accepted
            }
            Ok(Err(e)) => Outcome::Failed(e.into()),
            Err(_) => {
                // The connection may be stuck: the next call reconnects.
                self.logind.reset();
                Outcome::Failed(ActionError::NoAnswer {
                    method: action.method(),
                    after: CALL_TIMEOUT,
                })
            }
        }
    }

    /// Refuses a reboot whose record did not land. Its write may still land later: the record
    /// is dropped and that written too, so a reboot that never happened never counts as done.
    fn refuse_unrecorded_reboot(&mut self, n: &Notice) -> Outcome {
        self.state.forget(&n.id);
        drop(self.spawn_write());
        Outcome::Failed(ActionError::Unrecorded {
            notice: n.id.clone(),
        })
    }

    /// Records a phase of an action in memory, and starts writing the file off the runtime
    /// thread.
    fn start_record(&mut self, n: &Notice, action: PowerAction, phase: Phase) -> Write {
        let at = SystemTime::now();
        self.state
            .note(&n.id, n.event_id.as_deref(), action, phase, at);
        self.spawn_write()
    }

    /// Writes the state file as it is now, on the blocking pool.
    fn spawn_write(&mut self) -> Write {
        let snapshot = self.state.snapshot();
        #[cfg(test)]
        let gate = self.gate.clone();
        tokio::task::spawn_blocking(move || {
            #[cfg(test)]
            if let Some(g) = gate {
                g.wait();
            }
            snapshot?.write()
        })
    }

    /// Waits for a state write, at most [`WRITE_WAIT`]; false (and logged) when it failed or did
    /// not finish in time (it then goes on in the background).
    async fn finish_record(&self, write: Write) -> bool {
        let e = match tokio::time::timeout(self.write_wait, write).await {
            Ok(Ok(Ok(()))) => return true,
            Ok(Ok(Err(e))) => e.to_string(),
            Ok(Err(e)) => format!(
                "writing the state file {} failed: {e}",
                self.state.path().display()
            ),
            Err(_) => {
                tracing::warn!(
                    "the state file {} was not written within {}: is the disk stalled (dmesg)? \
                     nthd goes on without it, and may act on this notice again if it restarts \
                     before the write lands",
                    self.state.path().display(),
                    timefmt::format_duration(self.write_wait)
                );
                return false;
            }
        };
        tracing::error!("{e}");
        false
    }
}

/// A gate the state writes wait at until a test opens it: a stalled disk.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Gate {
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

#[cfg(test)]
impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    pub(crate) fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

fn log_failed(n: &Notice, action: PowerAction, e: &ActionError, retry: Option<Duration>) {
    let retry = match retry {
        Some(d) => format!(" (retrying in {})", timefmt::format_duration(d)),
        None => String::new(),
    };
    let refusal = e.refusal();
    let blocked_by = refusal
        .filter(|r| !r.holders.is_empty())
        .map(|r| crate::logind::describe_holders(r.holders));
    tracing::error!(
        message_id = MSG_ACTION_FAILED,
        nthd_kind = n.kind.name(),
        nthd_notice_id = n.id.as_str(),
        nthd_action = action.name(),
        nthd_drill = n.is_drill(),
        nthd_logind_error = refusal.map(|r| r.error),
        nthd_blocked_by = blocked_by.as_deref(),
        "{}action {action} for {} failed: {e}{retry}",
        drill_tag(n),
        n.kind
    );
}

fn log_dry_run(n: &Notice, action: PowerAction) {
    tracing::warn!(
        message_id = MSG_ACTION,
        nthd_kind = n.kind.name(),
        nthd_notice_id = n.id.as_str(),
        nthd_action = action.name(),
        nthd_dry_run = true,
        nthd_drill = n.is_drill(),
        "{}action {action} for {}: dry run: would call org.freedesktop.login1.Manager.{}(false) \
         for {} ({})",
        drill_tag(n),
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
        nthd_drill = n.is_drill(),
        "{}action {action} for {}: called org.freedesktop.login1.Manager.{}(false) for {}: \
         kubelet's inhibitor lock now drains the node",
        drill_tag(n),
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
    use crate::notice::NoticeKind;
    use nthd_testkit::logind::{FakeLogind, PrivateBus};
    use std::sync::Arc;

    /// A reboot for `n` comes back refused ("not rebooting …") and never reaches logind.
    async fn expect_reboot_refused(exec: &mut Executor, n: &Notice, fake: &FakeLogind) {
        let out = exec.execute(n, PowerAction::Reboot, &|| {}).await;
        let Outcome::Failed(e) = &out.outcome else {
            panic!("the reboot was not refused: {out:?}");
        };
        assert_eq!(out.called, None, "logind was called");
        assert!(e.to_string().contains("not rebooting"), "{e}");
        assert_eq!(fake.reboot_count(), 0, "{:?}", fake.calls());
    }

    /// A drill's notice of `kind`, due now.
    fn notice(kind: NoticeKind) -> Notice {
        crate::simulate::synthetic(kind, Duration::ZERO, SystemTime::now())
    }

    /// On a read-only /var, a corrupt state file can be neither used nor moved aside: nthd then
    /// cannot record a reboot first, so it does not ask logind for one (it would reboot again on
    /// every boot); a power-off, which cannot loop, still goes ahead.
    /// The failures keep the text they had as strings (logs, the status file and webhooks show
    /// it), and compare by value.
    #[test]
    fn action_errors_read_as_before_and_compare_by_value() {
        let slow = ActionError::NoAnswer {
            method: "PowerOff",
            after: CALL_TIMEOUT,
        };
        assert_eq!(
            slow.to_string(),
            format!(
                "logind PowerOff did not answer within {}; is systemd-logind hung? (systemctl \
                 status systemd-logind)",
                timefmt::format_duration(CALL_TIMEOUT)
            )
        );
        let unrecorded = ActionError::Unrecorded {
            notice: NoticeId::from_parts(&["aws", "scheduled", "e1"]),
        };
        assert_eq!(
            unrecorded.to_string(),
            "not rebooting for aws/scheduled/e1: the record of it could not be written first, \
             and without it nthd would reboot again on every boot while the event is listed. \
             Make the state directory writable"
        );
        let busy = |reason: &str| {
            ActionError::from(LogindError::Busy {
                method: "PowerOff",
                error: "org.freedesktop.login1.OperationInProgress".into(),
                reason: reason.into(),
            })
        };
        assert_eq!(busy("x"), busy("x"));
        assert_ne!(busy("x"), busy("y"));
        assert_eq!(
            busy("x").to_string(),
            LogindError::Busy {
                method: "PowerOff",
                error: "org.freedesktop.login1.OperationInProgress".into(),
                reason: "x".into()
            }
            .to_string()
        );
    }

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
        expect_reboot_refused(&mut exec, &reboot, &fake).await;

        let spot = notice(NoticeKind::SpotTerminate);
        let out = exec.execute(&spot, PowerAction::PowerOff, &|| {}).await;
        assert_eq!(out.outcome, Outcome::Accepted);
        assert_eq!(fake.power_off_count(), 1);
        assert_eq!(std::fs::read(dir.join("state.json")).unwrap(), b"{garbage");
    }

    /// Opens the gate when dropped, even on a panic: a blocking thread left at the gate would
    /// keep the test's runtime from shutting down.
    struct OpenOnDrop(Arc<Gate>);

    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            self.0.open();
        }
    }

    /// An executor over an empty state in `dir`, calling the fake logind on `bus`, whose state
    /// writes wait at a closed gate (a stalled disk).
    fn stalled(bus: &PrivateBus, dir: &Path) -> (Executor, OpenOnDrop) {
        let st = load_state(dir, SystemTime::now());
        let mut exec = Executor::new(Logind::at(bus.address()), st, false, None);
        let gate = Arc::new(Gate::default());
        exec.gate = Some(gate.clone());
        (exec, OpenOnDrop(gate))
    }

    /// The phases recorded in `dir`'s state file (`None` while there is none), once they are
    /// `want` or after 5 s.
    async fn phases_written(dir: &Path, want: &[&str]) -> Option<Vec<String>> {
        let mut got = None;
        for _ in 0..100 {
            let body = std::fs::read_to_string(dir.join("state.json")).unwrap_or_default();
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            got = v["records"].as_array().map(|records| {
                let phase = |r: &serde_json::Value| r["phase"].as_str().unwrap_or("").to_string();
                records.iter().map(phase).collect::<Vec<String>>()
            });
            if got.as_deref()
                == Some(
                    &want
                        .iter()
                        .map(std::string::ToString::to_string)
                        .collect::<Vec<_>>(),
                )
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        got
    }

    /// The record is written before the call, but the call does not wait for the write: with
    /// the disk stalled, PowerOff reaches logind while the file is still unwritten. The gate
    /// opens only once logind has the call (or after 5 s, when it never got it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stalled_state_write_does_not_hold_up_a_power_off() {
        let bus = PrivateBus::start().unwrap();
        let fake = Arc::new(FakeLogind::serve(bus.address()).await.unwrap());
        let dir = tempfile::tempdir().unwrap();
        let (mut exec, gate) = stalled(&bus, dir.path());
        exec.write_wait = Duration::from_secs(30);
        let watcher = tokio::spawn({
            let (fake, gate, file) = (fake.clone(), gate.0.clone(), dir.path().join("state.json"));
            async move {
                let called = fake
                    .wait_for_method("PowerOff", 1, Duration::from_secs(5))
                    .await;
                let written = file.exists();
                gate.open();
                (called, written)
            }
        });
        let spot = notice(NoticeKind::SpotTerminate);
        let out = exec.execute(&spot, PowerAction::PowerOff, &|| {}).await;
        let (called, written) = watcher.await.unwrap();
        assert!(called, "PowerOff waited for the stalled state write");
        assert!(
            !written,
            "the state file was written before the call: nothing was stalled"
        );
        assert_eq!(out.outcome, Outcome::Accepted);
        let done = Some(vec!["done".to_string()]);
        assert_eq!(phases_written(dir.path(), &["done"]).await, done);
    }

    /// A reboot waits for its record, at most `write_wait`: with the disk stalled, it is refused
    /// without calling logind, and the record that lands late is undone, so the reboot that did
    /// not happen never counts as done. Once the disk is back, the retry goes through.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reboot_is_refused_when_its_record_does_not_land_in_time() {
        let bus = PrivateBus::start().unwrap();
        let fake = FakeLogind::serve(bus.address()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (mut exec, gate) = stalled(&bus, dir.path());
        exec.write_wait = Duration::from_millis(300);
        let reboot = notice(NoticeKind::ScheduledReboot);
        expect_reboot_refused(&mut exec, &reboot, &fake).await;
        drop(gate);
        // The late Started write, and the one without it: whichever comes last, the file ends
        // without the record.
        assert_eq!(phases_written(dir.path(), &[]).await, Some(vec![]));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(phases_written(dir.path(), &[]).await, Some(vec![]));
        assert!(exec.state().records().is_empty());

        // The disk is back: the retry records the reboot, then calls logind.
        let out = exec.execute(&reboot, PowerAction::Reboot, &|| {}).await;
        assert_eq!(out.outcome, Outcome::Accepted);
        assert_eq!(fake.reboot_count(), 1);
        let done = Some(vec!["done".to_string()]);
        assert_eq!(phases_written(dir.path(), &["done"]).await, done);
    }

    /// The daemon's state write takes the state directory's lock, which a drill may hold: the
    /// wait happens off the runtime thread (the runtime keeps ticking, here on a single
    /// thread), and a reboot, whose record must land first, goes through once the lock is
    /// released, with the drill's record kept.
    ///
    /// No wall-clock bound: the drill gives the lock back only once the runtime has ticked
    /// while it held it (on a current-thread runtime the ticker runs only while `execute` is
    /// suspended), or after 1.5 s if it never does, which fails the test; `execute` must not
    /// return before the lock is given back.
    #[tokio::test]
    async fn a_state_lock_held_by_a_drill_never_blocks_the_runtime() {
        use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
        let bus = PrivateBus::start().unwrap();
        let fake = FakeLogind::serve(bus.address()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let st = load_state(dir.path(), SystemTime::now());
        let mut exec = Executor::new(Logind::at(bus.address()), st, false, None);
        let drill_id = drill_record(dir.path());
        let lock = crate::files::DirLock::take(&dir.path().join("state.json"), Duration::ZERO)
            .unwrap()
            .expect("free");
        let ticks = Arc::new(AtomicU32::new(0));
        let released = Arc::new(AtomicBool::new(false));
        let ticker = {
            let ticks = ticks.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    ticks.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let drill = hold_until_ticked(lock, ticks, released.clone());
        let reboot = notice(NoticeKind::ScheduledReboot);
        let out = exec.execute(&reboot, PowerAction::Reboot, &|| {}).await;
        assert!(
            released.load(Ordering::SeqCst),
            "the reboot went ahead while the drill held the state lock"
        );
        ticker.abort();
        assert!(
            drill.join().unwrap(),
            "the runtime stood still while the lock was held"
        );
        assert_eq!(out.outcome, Outcome::Accepted);
        assert_eq!(fake.reboot_count(), 1);
        let body = std::fs::read_to_string(dir.path().join("state.json")).unwrap();
        assert!(
            body.contains(drill_id.as_str()),
            "the drill's record was lost: {body}"
        );
    }

    /// The drill's side: holds `lock` until the runtime has ticked 5 times (or 1.5 s have
    /// passed), says so in `released`, then gives it back. Joins to whether it ticked.
    fn hold_until_ticked(
        lock: crate::files::DirLock,
        ticks: Arc<std::sync::atomic::AtomicU32>,
        released: Arc<std::sync::atomic::AtomicBool>,
    ) -> std::thread::JoinHandle<bool> {
        use std::sync::atomic::Ordering;
        std::thread::spawn(move || {
            let give_up = std::time::Instant::now() + Duration::from_millis(1500);
            while ticks.load(Ordering::SeqCst) < 5 && std::time::Instant::now() < give_up {
                std::thread::sleep(Duration::from_millis(5));
            }
            let ticked_while_held = ticks.load(Ordering::SeqCst) >= 5;
            released.store(true, Ordering::SeqCst);
            drop(lock);
            ticked_while_held
        })
    }

    /// A drill's record in `dir`'s state file, as `nthd simulate` writes it; its notice id.
    fn drill_record(dir: &std::path::Path) -> crate::notice::NoticeId {
        let (drill, _) = State::load(dir, state::current_boot_id(), SystemTime::now());
        let mut drill = drill.for_drill();
        let drill_id = crate::simulate::synthetic(
            NoticeKind::SpotTerminate,
            Duration::ZERO,
            SystemTime::now(),
        )
        .id;
        drill.note(
            &drill_id,
            None,
            PowerAction::PowerOff,
            Phase::Done,
            SystemTime::now(),
        );
        drill.snapshot().unwrap().write().unwrap();
        drill_id
    }

    /// A PowerOff refused for a block inhibitor: the record carries logind's error name, as each
    /// systemd version gives it, and the holder from `ListInhibitors`; the status file's line and
    /// the webhook's action event carry both.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_block_refusal_carries_loginds_error_and_the_holder() {
        let bus = PrivateBus::start().unwrap();
        let fake = FakeLogind::serve(bus.address()).await.unwrap();
        fake.hold_inhibitor(
            "shutdown",
            "backup-agent",
            "nightly backup",
            "block",
            0,
            812,
        );
        let dir = tempfile::tempdir().unwrap();
        let spot = notice(NoticeKind::SpotTerminate);
        for (systemd, want) in [
            (
                252,
                "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired",
            ),
            (257, "org.freedesktop.DBus.Error.AccessDenied"),
            (262, "org.freedesktop.login1.BlockedByInhibitorLock"),
        ] {
            let (name, message, _) = nthd_testkit::logind::block_refusal(systemd);
            fake.set_power_off_error(Some((name, message)));
            let st = load_state(dir.path(), SystemTime::now());
            let mut exec = Executor::new(Logind::at(bus.address()), st, false, None);
            let rec = exec.execute(&spot, PowerAction::PowerOff, &|| {}).await;
            let r = rec.outcome.refusal().expect("a refusal");
            assert_eq!(r.error, want, "systemd {systemd}");
            assert_eq!((r.holders.len(), r.holders[0].pid), (1, 812), "{r:?}");
            let view = crate::status::action_view(&rec);
            assert_eq!(view.logind_error.as_deref(), Some(want));
            assert_eq!(view.blocked_by[0].who, "backup-agent");
            assert_eq!(view.blocked_by[0].why, "nightly backup");
            let json = serde_json::to_value(&view).unwrap();
            assert_eq!(json["blocked_by"][0]["mode"], "block", "{json}");
            let result = rec.outcome.for_webhook().unwrap();
            let event = crate::webhook::Event::action(&spot, rec.action, result)
                .with_refusal(rec.outcome.refusal());
            let ctx = crate::webhook::Context::default();
            let body = event
                .render(&ctx, crate::webhook::WebhookFormat::CloudEvents)
                .1;
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let result = &v["data"]["result"];
            assert_eq!(result["logind_error"], want, "{v}");
            assert_eq!(result["blocked_by"][0]["who"], "backup-agent", "{v}");
            assert_eq!(result["blocked_by"][0]["pid"], 812, "{v}");
        }
        fake.set_power_off_error(None);
    }

    /// An action that logind did not refuse carries no refusal anywhere.
    #[test]
    fn no_refusal_without_one() {
        let slow = ActionError::NoAnswer {
            method: "PowerOff",
            after: CALL_TIMEOUT,
        };
        assert_eq!(slow.refusal(), None);
        assert_eq!(Outcome::Accepted.refusal(), None);
        assert_eq!(Outcome::Failed(slow).refusal(), None);
    }
}
