//! The daemon: poll, decide, act.
//!
//! The metadata reader (`daemon/reader.rs`, a thread of its own) reads the metadata service and
//! sends observations over a channel. The main loop reads top-down: observe (a message from the
//! reader) → plan (the [`Planner`]) →
//! execute (the [`Executor`], the one path to logind) → record (the planner learns the
//! outcome). It keeps systemd informed (READY=1, STATUS=, WATCHDOG=1, STOPPING=1) and stops on
//! SIGTERM. No transient fault (metadata service down, bus missing, polkit denial, unwritable
//! state) makes it exit; a bad setting does, with the status the unit does not restart on.

use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;

use tokio::sync::{mpsc, oneshot};

use crate::config::Options;
use crate::executor::{self, ActionError, Executor, Outcome};
use crate::extras::{Reporter, WebhookSlot};
use crate::imds::ImdsError;
use crate::logind::{Logind, SystemState};
use crate::metrics::Metrics;
use crate::notice::{Identity, Notice, SourceId};
use crate::policy::{Action, Cancelled, Decision, Effect, Planner, PowerAction, When};
use crate::provider::detect::DetectError;
use crate::provider::Observation;
use crate::report::{self, Outputs};
use crate::status::Sight;
use crate::timefmt;
use crate::webhook::{Context, Event};

mod drained;
mod logind_watch;
mod phase;
mod reader;

use crate::provider::Request;
use phase::{Phase, Ready};
use reader::FromProvider;

/// journald MESSAGE_ID of a notice, stable across releases: `journalctl MESSAGE_ID=...` finds
/// every interruption across reboots. The action's are in `executor.rs`.
pub(crate) const MSG_NOTICE: &str = "9d3f6a0c4b1e4f2a8c7d5e6f1a2b3c4d";

/// journald MESSAGE_ID of "nthd cannot see the metadata service", stable across releases.
pub(crate) const MSG_BLIND: &str = "4a2f9e8d1c7b4d6a8e3f0b1c2d9a7e5f";

/// The longest interval between two health checks (blindness, webhook retry, status heartbeat).
const HEALTH_TICK: Duration = Duration::from_secs(10);

/// How long after logind accepted a power action nthd starts watching for its cancellation.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

fn notify(states: &[sd_notify::NotifyState<'_>]) {
    // Outside systemd NOTIFY_SOCKET is unset and this is a no-op.
    let _ = sd_notify::notify(states);
}

fn to_instant(t: SystemTime) -> tokio::time::Instant {
    let now = SystemTime::now();
    let delta = t.duration_since(now).unwrap_or(Duration::ZERO);
    tokio::time::Instant::now() + delta.min(Duration::from_secs(86_400))
}

fn log_announce(n: &Notice, d: &Decision, already_done: bool) {
    let deadline = n.deadline.map(timefmt::format_rfc3339).unwrap_or_default();
    let when = match d.when {
        When::Now => "now".to_string(),
        When::At(t) => timefmt::format_rfc3339(t),
    };
    let event_id = n.event_id.clone().unwrap_or_default();
    let suffix = if already_done {
        " (already acted on; not repeated)"
    } else {
        ""
    };
    macro_rules! announce {
        ($lvl:ident) => {
            tracing::$lvl!(
                message_id = MSG_NOTICE,
                nthd_kind = n.kind.name(),
                nthd_source = n.source.as_str(),
                nthd_notice_id = n.id.as_str(),
                nthd_event_id = event_id.as_str(),
                nthd_deadline = deadline.as_str(),
                nthd_action = d.action.name(),
                nthd_when = when.as_str(),
                "notice {}: {}; decision: {} {} ({}){suffix}",
                n.kind,
                n.detail,
                d.action,
                if d.when == When::Now {
                    "now".to_string()
                } else {
                    format!("at {when}")
                },
                d.reason
            )
        };
    }
    match d.action {
        Action::Ignore => announce!(debug),
        Action::Log => announce!(info),
        _ if already_done => announce!(info),
        _ => announce!(warn),
    }
    tracing::debug!("raw answer for {}: {}", n.id, n.raw);
}

/// What last kept nthd from reading the metadata service, kept as the error itself: a repeat is
/// told from a new problem by value, and logged once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum MetadataError {
    /// The cloud could not be detected.
    #[error(transparent)]
    Detect(DetectError),
    /// A read failed (the first failing source of the last observation).
    #[error(transparent)]
    Read(ImdsError),
}

impl MetadataError {
    /// Whether this is that read error.
    fn is_read(&self, e: &ImdsError) -> bool {
        matches!(self, MetadataError::Read(last) if last == e)
    }
}

/// What one observation's errors call for in the log, given the error kept from before.
#[derive(Debug, PartialEq)]
struct ErrorLog<'a> {
    /// The errors to log, equal ones merged with their sources; the one kept from before and
    /// those already logged while the metadata service kept failing are left out, so a repeat
    /// is logged once.
    warn: Vec<(Vec<SourceId>, &'a ImdsError)>,
    /// Whether to log that the metadata service answers again, and how many distinct errors
    /// were not logged meanwhile.
    recovered: Option<u64>,
    /// The error to keep for the next observation: the first failing source's.
    last: Option<MetadataError>,
}

/// The most distinct read errors logged while the metadata service keeps failing; the rest
/// are counted, and the count is logged with the recovery.
const MAX_TOLD: usize = 16;

/// The read errors logged since every source that failed last answered again. Sources with a
/// short lead time are read again every interval while they fail, so a service that fails in
/// changing ways (a 500, a garbage body, a stall, a 500 again) would otherwise cost a line per
/// read; this way it costs one per distinct error, however fast nthd retries.
#[derive(Debug, Default)]
struct ReadErrors {
    /// The sources whose last read failed.
    failing: Vec<SourceId>,
    /// The distinct errors logged since `failing` was last empty.
    told: Vec<ImdsError>,
    /// Distinct errors past [`MAX_TOLD`], not logged.
    untold: u64,
}

impl ReadErrors {
    /// What to log for `obs`, given the error kept from before (`last`).
    fn log<'a>(&mut self, last: Option<&MetadataError>, obs: &'a Observation) -> ErrorLog<'a> {
        let was_failing = !self.failing.is_empty();
        self.failing.retain(|s| !obs.fresh.contains(s));
        for e in &obs.errors {
            if !self.failing.contains(&e.source) {
                self.failing.push(e.source);
            }
        }
        let mut warn = Vec::new();
        for (sources, e) in obs.grouped_errors() {
            if last.is_some_and(|l| l.is_read(e)) || self.told.contains(e) {
                continue;
            }
            if self.told.len() < MAX_TOLD {
                self.told.push(e.clone());
                warn.push((sources, e));
            } else {
                self.untold += 1;
            }
        }
        let answers = self.failing.is_empty() && !obs.fresh.is_empty();
        let recovered = (answers && (was_failing || last.is_some())).then(|| {
            self.told.clear();
            std::mem::take(&mut self.untold)
        });
        ErrorLog {
            warn,
            recovered,
            last: obs
                .errors
                .first()
                .map(|e| MetadataError::Read(e.error.clone())),
        }
    }
}

/// The daemon's mutable parts, so the loop body stays readable.
struct Daemon {
    opts: Options,
    planner: Planner,
    executor: Executor,
    /// The metrics, the status file and the webhooks.
    out: Outputs,
    budget: Option<Duration>,
    budget_read_at: Option<Instant>,
    /// Where the daemon is in its life (`daemon/phase.rs`).
    phase: Phase,
    describe: String,
    last_error: Option<MetadataError>,
    /// The read errors logged while the metadata service keeps failing.
    read_errors: ReadErrors,
    logind_error: Option<ActionError>,
    grant_checked: bool,
    last_status: String,
    /// Logs the extras' problems once each.
    extras: Reporter,
    /// Whether nthd saw the metadata service at the last status update, to log a change once.
    sight: Sight,
    watchdog: Watchdog,
    /// The drain watcher's other end.
    drain: drained::DrainSide,
    /// Shared with the metadata reader: whether the picture has settled (then it keeps quiet
    /// reads instead of sending them), and the reads it kept.
    quiet: std::sync::Arc<reader::Quiet>,
}

/// systemd's watchdog. The main loop pings it on a tick of a third of `WatchdogSec=`, and also
/// right before every logind call, each of which is bounded: so a hung logind, whatever the
/// chain of calls, never makes the gap longer than the longest single call (10 s) while the
/// metadata watcher is healthy.
struct Watchdog {
    enabled: bool,
    /// The loop is healthy while observations keep arriving within this.
    healthy_window: Duration,
    last_progress: Instant,
}

impl Watchdog {
    fn new(opts: &Options) -> Watchdog {
        Watchdog {
            enabled: sd_notify::watchdog_enabled().is_some(),
            healthy_window: opts.timing_set().watchdog_window(),
            last_progress: Instant::now(),
        }
    }

    /// Pings when enabled and the metadata watcher is healthy; false when withheld.
    fn ping(&self) -> bool {
        if !self.enabled {
            return true;
        }
        if self.last_progress.elapsed() >= self.healthy_window {
            return false;
        }
        notify(&[sd_notify::NotifyState::Watchdog]);
        true
    }
}

impl Daemon {
    /// The daemon's watch of logind: its bounded reads, each after a watchdog ping.
    fn logind(&mut self) -> logind_watch::Watch<'_> {
        logind_watch::Watch::new(self.executor.reads(), &self.watchdog)
    }

    /// Once logind answers, asks whether this user may power off (and reboot, if a reboot
    /// policy is set) and warns with the fix when polkit would say no. nthd still tries when
    /// a notice comes: the answer can change when the rule is installed.
    async fn check_grant(&mut self) {
        if self.grant_checked || self.opts.dry_run {
            return;
        }
        let actions = self.planner.config().power_actions();
        self.grant_checked = self.logind().check_grant(&actions).await;
    }

    async fn refresh_budget(&mut self) {
        if !logind_watch::budget_due(self.budget_read_at) {
            return;
        }
        self.budget_read_at = Some(Instant::now());
        match self.logind().budget().await {
            Ok(b) => {
                if self.budget != Some(b) {
                    tracing::info!(
                        "logind InhibitDelayMaxUSec is {}: kubelet can delay shutdown that long to drain",
                        timefmt::format_duration(b)
                    );
                }
                self.budget = Some(b);
                self.logind_error = None;
                self.check_grant().await;
            }
            Err(e) => {
                let e = ActionError::Logind(e);
                if self.logind_error.as_ref() != Some(&e) {
                    tracing::warn!("{e}");
                }
                self.logind_error = Some(e);
            }
        }
    }

    async fn handle(&mut self, cmds: Vec<Effect>) {
        for c in cmds {
            match c {
                Effect::Announce {
                    notice,
                    decision,
                    already_done,
                } => {
                    log_announce(&notice, &decision, already_done);
                    report::announce(self.out.webhooks.hooks(), &notice, &decision);
                }
                Effect::Drifted { notice, from } => tracing::debug!(
                    nthd_notice_id = notice.id.as_str(),
                    "notice {} ({}): deadline moved from {} to {}",
                    notice.kind,
                    notice.id,
                    from.map_or_else(|| "none".into(), timefmt::format_rfc3339),
                    notice
                        .deadline
                        .map_or_else(|| "none".into(), timefmt::format_rfc3339)
                ),
                Effect::Gone { notice } => {
                    tracing::info!(
                        nthd_notice_id = notice.id.as_str(),
                        "notice {} ({}) is no longer listed",
                        notice.kind,
                        notice.id
                    );
                }
                Effect::Scheduled { notice, action, at } => tracing::warn!(
                    message_id = MSG_NOTICE,
                    nthd_kind = notice.kind.name(),
                    nthd_notice_id = notice.id.as_str(),
                    nthd_action = action.name(),
                    nthd_when = timefmt::format_rfc3339(at).as_str(),
                    "{action} for {} scheduled at {} ({})",
                    notice.id,
                    timefmt::format_rfc3339(at),
                    timefmt::relative(at, SystemTime::now())
                ),
                Effect::Canceled { notice, reason } => {
                    tracing::warn!(
                        nthd_notice_id = notice.id.as_str(),
                        "pending action for {} canceled: {reason}",
                        notice.id
                    );
                    self.out
                        .webhooks
                        .hooks()
                        .send(Event::canceled(&notice, &reason.to_string()));
                }
                Effect::Execute { notice, action } => self.execute(&notice, action).await,
            }
        }
    }

    /// Once logind accepted the power action, watches that the shutdown really goes on. If logind
    /// is no longer preparing for it while PID 1 is not stopping, someone cancelled it (a
    /// `PrepareForShutdown(false)`, a logind restart mid-drain): while the notice is still
    /// listed, nthd acts again, once.
    async fn watch_cancellation(&mut self) {
        let Some((id, action)) = self.planner.shutting_down().cloned() else {
            return;
        };
        // logind sets PreparingForShutdown before it answers; give a moment all the same.
        let since = self.phase.draining_since();
        if self.opts.dry_run || since.is_none_or(|t| t.elapsed() < CANCEL_GRACE) {
            return;
        }
        if !self.logind().shutdown_cancelled().await {
            return;
        }
        self.phase.cancelled();
        match self.planner.shutdown_cancelled(SystemTime::now()) {
            Cancelled::NotShuttingDown => {}
            Cancelled::NoLongerListed(_) => tracing::warn!(
                nthd_notice_id = id.as_str(),
                "the {action} requested for {id} was cancelled (logind is no longer preparing for \
                 shutdown); the notice is no longer listed, so nthd does not act again"
            ),
            Cancelled::AlreadyRetried(_) => tracing::warn!(
                nthd_notice_id = id.as_str(),
                "the {action} requested for {id} was cancelled a second time; nthd leaves it \
                 cancelled (someone is cancelling on purpose)"
            ),
            Cancelled::ActingAgain(_, cmds) => {
                tracing::warn!(
                    nthd_notice_id = id.as_str(),
                    "the {action} requested for {id} was cancelled (logind is no longer preparing \
                     for shutdown, and the system is not stopping) while the notice is still \
                     listed: acting again, once"
                );
                self.handle(cmds).await;
            }
        }
    }

    /// Carries out a power action the planner asks for, through the executor, applies what
    /// follows from it, and tells the planner how it went.
    async fn execute(&mut self, notice: &Notice, action: PowerAction) {
        self.drain.acting(notice, action);
        let watchdog = &self.watchdog;
        let rec = self
            .executor
            .execute(notice, action, &|| {
                watchdog.ping();
            })
            .await;
        self.out.action(&rec);
        if !matches!(rec.outcome, Outcome::Accepted) {
            self.drain.not_acting();
        }
        match &rec.outcome {
            Outcome::Failed(e) => self.logind_error = Some(e.clone()),
            _ => {
                self.logind_error = None;
                self.phase.accepted(Instant::now());
            }
        }
        self.planner
            .record_result(&notice.id, rec.outcome.acted(), rec.at);
    }

    /// Sends STATUS= when it changed: every message costs systemd (and nthd) a wakeup.
    fn send_status(&mut self) {
        let status = self.status();
        if status != self.last_status {
            notify(&[sd_notify::NotifyState::Status(&status)]);
            self.last_status = status;
        }
    }

    fn status(&self) -> String {
        let mut s = match self.phase.cloud() {
            Some(_) => self.describe.clone(),
            None => "detecting the cloud".to_string(),
        };
        if let Some((id, action)) = self.planner.shutting_down() {
            s = format!("{action} requested for {id}; waiting for the drain");
        } else {
            let current: Vec<String> = self
                .planner
                .current()
                .iter()
                .filter(|n| self.planner.config().action(n.kind) != Action::Ignore)
                .map(|n| n.kind.name().to_string())
                .collect();
            if current.is_empty() {
                s.push_str("; no notices");
            } else {
                s.push_str(&format!("; notices: {}", current.join(", ")));
            }
            for (n, action, at) in self.planner.scheduled() {
                s.push_str(&format!(
                    "; {action} for {} at {}",
                    n.id,
                    timefmt::format_rfc3339(at)
                ));
            }
        }
        if let Some(e) = &self.last_error {
            s.push_str(&format!("; metadata error: {e}"));
        }
        if let Some(e) = &self.logind_error {
            s.push_str(&format!("; logind error: {e}"));
        }
        if self.opts.dry_run {
            s.push_str(" [dry run]");
        }
        // STATUS= is one line; keep it short enough to read in systemctl status.
        let mut s = s.replace('\n', " ");
        if s.len() > 900 {
            let mut end = 900;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            s.push('…');
        }
        s
    }
}

/// Tells the platform to go ahead (Azure `StartRequests`) for the events acted on in this boot,
/// once kubelet has drained. nthd is stopped at the end of the shutdown it requested, but also by
/// a package upgrade or `systemctl restart` in the middle of the drain, and then an
/// acknowledgement would let Azure evict the VM mid-drain. So it acknowledges only when PID 1
/// says the system is stopping. Without that answer it stays silent: the platform then goes
/// ahead at its own deadline, which is the safe side.
async fn acknowledge_on_stop(d: &mut Daemon, requests: &std::sync::mpsc::Sender<Request>) {
    if d.opts.dry_run {
        return;
    }
    let ids = d.executor.state().event_ids_this_boot();
    if ids.is_empty() {
        return;
    }
    let list = ids.join(", ");
    match d.logind().system_state().await {
        Ok(SystemState::Stopping) => {}
        Ok(s) => {
            tracing::info!(
                "stopped while the system is not shutting down (systemd SystemState is {:?}): \
                 not acknowledging {list} to the platform, so it keeps waiting for the drain",
                s.to_string()
            );
            return;
        }
        Err(e) => {
            tracing::warn!(
                "{e}; not acknowledging {list} to the platform: without knowing that the system \
                 is shutting down, the platform is left to go ahead at its own deadline"
            );
            return;
        }
    }
    let (reply_tx, reply_rx) = oneshot::channel();
    if requests.send(Request::Acknowledge(ids, reply_tx)).is_err() {
        return;
    }
    match tokio::time::timeout(Duration::from_secs(5), reply_rx).await {
        Ok(Ok(Ok(n))) if n > 0 => {
            tracing::info!("acknowledged {n} event(s) to the platform: {list}");
        }
        Ok(Ok(Ok(_))) => {}
        Ok(Ok(Err(e))) => tracing::warn!("could not acknowledge events {list}: {e}"),
        _ => tracing::warn!("acknowledging events {list} timed out"),
    }
}

impl Daemon {
    /// The daemon's parts, from the settings and the record of earlier actions.
    fn new(
        opts: &Options,
        webhooks: WebhookSlot,
        drain: drained::DrainSide,
        quiet: std::sync::Arc<reader::Quiet>,
    ) -> Daemon {
        let policy = opts.policy();
        let st = executor::load_state(&opts.state_dir(), SystemTime::now());
        let mut planner = Planner::new(policy.clone());
        planner.mark_done(st.acted_ids());
        let mut status = crate::status::Tracker::new(opts.daemon_status_path(), st.records());
        let degraded = opts.degraded.iter();
        status.set_degraded(degraded.map(|d| (d.setting.clone(), d.message.clone())));
        let retry = Some(policy.retry_delay);
        if opts.dry_run {
            tracing::warn!("dry run: nthd will not call logind; it only logs what it would do");
        }
        if policy.wants_reboot() {
            tracing::info!(
                "a reboot policy is set: the polkit rule must also grant \
                 org.freedesktop.login1.reboot to user nthd (see \
                 /usr/share/doc/nthd/examples/50-nthd-reboot.rules)"
            );
        }
        let mut metrics = Metrics::new(opts.metrics_options());
        metrics.set_degraded(opts.degraded.len());
        Daemon {
            out: Outputs {
                metrics,
                status,
                webhooks,
            },
            planner,
            executor: Executor::new(Logind::new(), st, opts.dry_run, retry),
            budget: None,
            budget_read_at: None,
            phase: Phase::Starting(None),
            describe: String::new(),
            last_error: None,
            read_errors: ReadErrors::default(),
            logind_error: None,
            grant_checked: false,
            watchdog: Watchdog::new(opts),
            last_status: String::new(),
            extras: Reporter::default(),
            sight: Sight::Seeing,
            drain,
            quiet,
            opts: opts.clone(),
        }
    }

    /// READY=1 when a transition says it is time: after the first observation, or the first
    /// failure to find the cloud.
    fn ready(ready: Ready) {
        if ready == Ready::Now {
            notify(&[sd_notify::NotifyState::Ready]);
        }
    }

    /// One message from the metadata watcher. An error here is a bad setting: nthd stops.
    async fn on_message(&mut self, msg: FromProvider) -> anyhow::Result<()> {
        self.take_held();
        self.watchdog.last_progress = Instant::now();
        match msg {
            FromProvider::Detected(det, describe) => {
                // With auto-detection the cloud is known only now (the watcher already fell
                // back to the cloud's default poll interval when the one set does not fit).
                if let Some(fb) = self.opts.fit_poll_interval(det.cloud) {
                    tracing::warn!("{fb}");
                }
                tracing::info!("cloud: {} ({}); watching {}", det.cloud, det.how, describe);
                self.out.cloud(det.cloud, &det.how, &describe);
                let (all, source) = self.opts.blind_after(det.cloud);
                self.out.status.set_blind_after(all, source);
                self.phase.detected(det.cloud);
                self.describe = describe;
            }
            FromProvider::DetectFailed(e) => {
                let e = MetadataError::Detect(e);
                if self.last_error.as_ref() != Some(&e) {
                    tracing::error!("{e}; retrying");
                }
                self.last_error = Some(e);
                Self::ready(self.phase.detect_failed());
            }
            FromProvider::Config(e) => anyhow::bail!("{e}"),
            FromProvider::Observed(obs) if self.quiet.settled() && quiet(&obs) => {
                if self.on_quiet_observation(&obs).await {
                    return Ok(());
                }
            }
            FromProvider::Observed(obs) => self.on_observation(obs).await,
            FromProvider::Identity(id) => self.on_identity(id),
        }
        self.send_status();
        Ok(())
    }

    /// The metadata service described the machine.
    fn on_identity(&mut self, id: Identity) {
        match crate::status::InstanceView::from(&id).describe() {
            Some(d) => tracing::info!("instance: {d}"),
            None => tracing::debug!("the metadata service does not describe this instance"),
        }
        self.out.identity(id);
        self.update_status(false);
    }

    /// Keeps the status file up to date (`changed`: the planner's picture moved).
    fn update_status(&mut self, changed: bool) {
        let (listen, textfile) = self.out.metrics.problems();
        let extras = crate::notice::PerExtra {
            webhooks: self.out.webhooks.problem(),
            metrics_listen: listen,
            metrics_textfile: textfile,
        };
        self.extras.report(&extras);
        let metadata_error = self.last_error.as_ref().map(ToString::to_string);
        let logind_error = self.logind_error.as_ref().map(ToString::to_string);
        let facts = crate::status::Facts {
            planner: &self.planner,
            budget: self.budget,
            dry_run: self.opts.dry_run,
            metadata_error: metadata_error.as_deref(),
            logind_error: logind_error.as_deref(),
            extras,
        };
        let now = crate::status::Moment::now();
        self.out.status.update(&facts, changed, now);
        let (blind, age) = self.out.status.health(now);
        let disabled = extras.map(Option::is_some);
        self.out.metrics.health(blind.is_blind(), age, &disabled);
        if blind != self.sight {
            self.log_blindness(blind);
        }
    }

    /// Says, once per change, that nthd cannot see notices, or sees again.
    fn log_blindness(&mut self, blind: Sight) {
        let err = self
            .last_error
            .as_ref()
            .map_or_else(|| "no answer yet".to_string(), ToString::to_string);
        match blind {
            Sight::Blind => tracing::error!(
                message_id = MSG_BLIND,
                "nthd is blind: no metadata read succeeded for over {}; a notice now would be \
                 missed. `nthd status` and the NPD plugin say unknown. Last error: {err}",
                timefmt::format_duration(self.out.status.blind_after())
            ),
            Sight::BlindTo(src) => tracing::error!(
                message_id = MSG_BLIND,
                nthd_source = src.as_str(),
                "nthd is blind to {}: it keeps failing; notices from it would be missed. Last \
                 error: {err}",
                src.as_str()
            ),
            Sight::Seeing => tracing::info!("nthd sees the metadata service again"),
        }
        self.sight = blind;
    }

    /// An empty observation after one that changed nothing: only the reads are counted and
    /// timed. The planner would decide nothing (it knows no notice), and the status line and
    /// file would not change (the watchdog tick still writes the file's heartbeat and checks
    /// blindness). This is most polls of a node's life (docs/performance.md). False when
    /// something else moved after all (a new source, logind's budget): then the status is
    /// brought up to date as after a full pass.
    async fn on_quiet_observation(&mut self, obs: &Observation) -> bool {
        self.out.reads(obs, 1, crate::status::Moment::now());
        let budget = self.budget;
        self.refresh_budget().await;
        if self.budget == budget && self.nothing_to_watch(false) {
            return true;
        }
        self.quiet.settle(false);
        self.update_status(false);
        false
    }

    /// Whether the state after the last full pass leaves the next quiet observation nothing to
    /// do: no change, no error, no notice known or action wanted, the status file up to date.
    fn nothing_to_watch(&self, changed: bool) -> bool {
        !changed
            && self.last_error.is_none()
            && self.logind_error.is_none()
            && self.planner.is_idle()
            && !self.out.status.is_dirty()
    }

    /// observe → plan → execute → record, for one observation.
    async fn on_observation(&mut self, obs: Observation) {
        // Out of Starting before any action, so an acceptance is a drain; READY=1 at the end.
        let ready = self.phase.observed();
        let empty = quiet(&obs);
        self.out.reads(&obs, 1, crate::status::Moment::now());
        let log = self.read_errors.log(self.last_error.as_ref(), &obs);
        for (sources, error) in &log.warn {
            tracing::warn!(
                nthd_source = SourceId::join(sources, ",").as_str(),
                "{error}"
            );
        }
        match log.recovered {
            Some(0) => tracing::info!("the metadata service answers again"),
            Some(n) => tracing::info!(
                "the metadata service answers again ({n} further distinct errors while it \
                 failed were not logged)"
            ),
            None => {}
        }
        self.last_error = log.last;
        self.refresh_budget().await;
        let now = SystemTime::now();
        let cmds = self
            .planner
            .observe(&obs.notices, &obs.fresh, now, self.budget);
        let changed = !cmds.is_empty();
        self.handle(cmds).await;
        self.watch_cancellation().await;
        self.out.metrics.notices(&self.planner, SystemTime::now());
        self.update_status(changed);
        Self::ready(ready);
        self.quiet.settle(empty && self.nothing_to_watch(changed));
    }

    /// A deferred action or a retry fell due.
    async fn on_wakeup(&mut self) {
        self.refresh_budget().await;
        let cmds = self.planner.tick(SystemTime::now());
        let changed = !cmds.is_empty();
        self.handle(cmds).await;
        self.update_status(changed);
        self.send_status();
    }

    /// The quiet reads the metadata reader kept while the daemon was settled: counted in the
    /// metrics, timed in the status, and proof for the watchdog that the reader is alive.
    fn take_held(&mut self) {
        let held = self.quiet.take();
        if let Some(t) = held.observed {
            self.watchdog.last_progress = self.watchdog.last_progress.max(t);
        }
        let mut sources = held.sources;
        // In time order, so the last successful read is the latest.
        sources.sort_by_key(|h| h.last.wall);
        for h in &sources {
            let obs = Observation {
                fresh: vec![h.source],
                ..Observation::default()
            };
            self.out.reads(&obs, h.reads, h.last);
        }
    }

    /// Tells the metadata reader what it reads for, after every event: the picture is no longer
    /// settled when something else than an observation moved it (a drain message, a wakeup,
    /// the health tick); and when the next deferred action is due, so a deadline that can move
    /// is read again just before.
    fn publish_to_reader(&self) {
        if self.quiet.settled() && !self.nothing_to_watch(false) {
            self.quiet.settle(false);
        }
        let next = self
            .planner
            .scheduled()
            .into_iter()
            .map(|(_, _, at)| at)
            .min();
        self.quiet.defer(next);
    }

    /// The health tick: the quiet reads so far, logind's budget when due, the webhook retry,
    /// the status file's heartbeat and blindness, the watchdog.
    async fn on_health_tick(&mut self) {
        self.take_held();
        let budget = self.budget;
        self.refresh_budget().await;
        if self.budget != budget {
            self.quiet.settle(false);
        }
        self.on_watchdog_tick();
    }

    fn on_watchdog_tick(&mut self) {
        self.out.webhooks.retry_if_due(&self.opts, Instant::now());
        self.update_status(false);
        if !self.watchdog.ping() {
            tracing::error!(
                "no word from the metadata watcher for {}; withholding the watchdog ping so \
                 systemd restarts nthd",
                timefmt::format_duration(self.watchdog.last_progress.elapsed())
            );
        }
    }
}

/// An observation with no notice and no error.
fn quiet(obs: &Observation) -> bool {
    obs.notices.is_empty() && obs.errors.is_empty()
}

/// How long a stopping daemon waits for webhook deliveries still under way.
pub(crate) const WEBHOOK_DRAIN: Duration = Duration::from_secs(3);

/// Sleeps until `wake`, or forever.
async fn sleep_until(wake: Option<tokio::time::Instant>) {
    match wake {
        Some(w) => tokio::time::sleep_until(w).await,
        None => std::future::pending().await,
    }
}

/// The health tick: a third of `WatchdogSec=`, and at least every 10 s, since it is also the
/// clock of the blindness check, the webhook retry and the quiet reads. On a timerfd, which
/// wakes nthd once a tick where tokio's wheel woke it three times (`timer.rs`).
fn health_every() -> Duration {
    sd_notify::watchdog_enabled()
        .map_or(HEALTH_TICK, |w| w / 3)
        .min(HEALTH_TICK)
}

/// Runs the daemon until SIGTERM or SIGINT.
pub(crate) async fn run(opts: Options) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    // The default action of SIGHUP is to exit, which systemd counts as a clean stop: nthd would
    // then silently stop watching. It is handled and ignored instead.
    let mut sighup = signal(SignalKind::hangup())?;

    // Read once: a change to the unit's IP access lists needs a restart anyway.
    let sandbox = crate::sandbox::own_policy().await;
    let webhooks = WebhookSlot::start(&opts, Context::for_this_host(), sandbox.clone());
    // What the daemon asks of the metadata reader: acknowledgements, the Auto Scaling reads.
    let (requests, requests_rx) = std::sync::mpsc::channel::<Request>();
    let (drain, mut drain_rx) = drained::DrainSide::start(&opts, sandbox.clone(), requests.clone());
    let quiet = reader::Quiet::new();
    let mut d = Daemon::new(&opts, webhooks, drain, quiet.clone());
    d.refresh_budget().await;
    let (tx, mut rx) = mpsc::channel(8);
    let mut settings = opts.provider_settings();
    settings.client.sandbox = sandbox;
    // Ends by itself once this loop has gone (its messages' channel closed).
    let _reader = reader::start(settings, tx, requests_rx, quiet)
        .context("cannot start the metadata reader thread; nthd exits so systemd restarts it")?;
    let health_every = health_every();
    let mut health = crate::timer::Deadline::new();
    let mut health_at = tokio::time::Instant::now() + health_every;

    loop {
        let wake = d.planner.next_wakeup().map(to_instant);
        tokio::select! {
            msg = rx.recv() => {
                let Some(msg) = msg else {
                    // The provider task ended: only on a configuration error, already logged.
                    tracing::error!("the metadata watcher stopped; nthd exits so systemd restarts it");
                    anyhow::bail!("metadata watcher stopped");
                };
                d.on_message(msg).await?;
            }
            Some(msg) = drain_rx.recv() => d.on_drain(msg),
            _ = sleep_until(wake) => d.on_wakeup().await,
            _ = health.sleep_until(health_at) => {
                health_at = tokio::time::Instant::now() + health_every;
                d.on_health_tick().await;
            }
            _ = sighup.recv() => tracing::info!(
                "SIGHUP: ignored, nthd keeps watching. It reads its settings only at start; to \
                 apply changed settings run: systemctl restart nthd"
            ),
            _ = sigterm.recv() => { tracing::info!("SIGTERM: stopping"); break; }
            _ = sigint.recv() => { tracing::info!("SIGINT: stopping"); break; }
        }
        d.publish_to_reader();
    }

    notify(&[sd_notify::NotifyState::Stopping]);
    d.out.metrics.flush_now();
    acknowledge_on_stop(&mut d, &requests).await;
    // The action event is sent right before the machine goes down: give it a moment, within
    // the unit's TimeoutStopSec=15s (the Azure acknowledgement above takes at most 5 s).
    d.out.webhooks.drain(WEBHOOK_DRAIN).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::SourceError;

    const A: SourceId = SourceId::new("aws/spot/instance-action");
    const B: SourceId = SourceId::new("aws/events/recommendations/rebalance");

    fn status(code: u16) -> ImdsError {
        ImdsError::Status {
            url: "http://169.254.169.254/latest/meta-data/spot/instance-action".into(),
            status: code,
            hint: "",
            retry_after: None,
        }
    }

    fn observation(errors: &[(SourceId, ImdsError)], fresh: &[SourceId]) -> Observation {
        Observation {
            notices: Vec::new(),
            fresh: fresh.to_vec(),
            errors: errors
                .iter()
                .map(|(source, error)| SourceError {
                    source: *source,
                    error: error.clone(),
                })
                .collect(),
        }
    }

    /// Feeds the observations in turn, as the daemon does: how many warnings each logs, and
    /// whether it logs the recovery.
    fn run(observations: &[Observation]) -> Vec<(usize, bool)> {
        let (mut last, mut errors) = (None, ReadErrors::default());
        let mut out = Vec::new();
        for obs in observations {
            let log = errors.log(last.as_ref(), obs);
            out.push((log.warn.len(), log.recovered.is_some()));
            last = log.last;
        }
        out
    }

    #[test]
    fn a_repeated_metadata_error_is_logged_once() {
        let same = observation(&[(A, status(500))], &[]);
        let other = observation(&[(A, status(503))], &[]);
        let ok = observation(&[], &[A]);
        let seen = run(&[
            observation(&[(A, status(500))], &[]),
            same,
            observation(&[(A, status(500))], &[]),
            other,
            ok,
            observation(&[], &[A]),
            observation(&[(A, status(500))], &[]),
        ]);
        assert_eq!(
            seen,
            [
                (1, false),
                (0, false),
                (0, false),
                (1, false),
                (0, true),
                (0, false),
                (1, false)
            ]
        );
    }

    #[test]
    fn alternating_errors_are_logged_once_each_until_the_service_answers_again() {
        // Read every interval while it fails: a 500, a garbage body, a stall, over and over.
        let malformed = ImdsError::Malformed {
            url: "u".into(),
            reason: "invalid spot instance-action JSON".into(),
            bytes: 14,
            secret: false,
        };
        let cycle = [status(500), malformed, status(504)];
        let mut obs: Vec<Observation> = (0..600)
            .map(|n| observation(&[(A, cycle[n % 3].clone())], &[]))
            .collect();
        // B answers meanwhile: that is no recovery while A still fails.
        obs.insert(10, observation(&[], &[B]));
        obs.push(observation(&[], &[A]));
        let seen = run(&obs);
        assert_eq!(seen.iter().map(|s| s.0).sum::<usize>(), 3, "{seen:?}");
        assert_eq!(seen.iter().filter(|s| s.1).count(), 1);
        assert!(seen.last().unwrap().1);
    }

    #[test]
    fn distinct_errors_past_the_cap_are_counted_and_told_with_the_recovery() {
        let mut errors = ReadErrors::default();
        let mut warned = 0;
        for n in 0..100 {
            let obs = observation(&[(A, status(500 + n))], &[]);
            warned += errors.log(None, &obs).warn.len();
        }
        assert_eq!(warned, MAX_TOLD);
        let back = observation(&[], &[A]);
        let log = errors.log(None, &back);
        assert_eq!(log.recovered, Some(100 - MAX_TOLD as u64));
    }

    #[test]
    fn equal_errors_of_several_sources_are_one_warning() {
        let obs = observation(&[(A, status(500)), (B, status(500)), (B, status(404))], &[]);
        let log = ReadErrors::default().log(None, &obs);
        assert_eq!(
            log.warn,
            [(vec![A, B], &status(500)), (vec![B], &status(404))]
        );
        assert_eq!(log.last, Some(MetadataError::Read(status(500))));
        // Only the error kept from before is left out.
        let again = ReadErrors::default().log(log.last.as_ref(), &obs);
        assert_eq!(again.warn, [(vec![B], &status(404))]);
    }

    #[test]
    fn a_detection_error_is_not_a_read_error() {
        let detect = MetadataError::Detect(DetectError::default());
        let obs = observation(&[(A, status(500))], &[]);
        let log = |o: &Observation| ReadErrors::default().log(Some(&detect), o).recovered;
        assert_eq!(ReadErrors::default().log(Some(&detect), &obs).warn.len(), 1);
        // Recovery is said only when a source was read.
        assert!(log(&observation(&[], &[])).is_none());
        assert!(log(&observation(&[], &[A])).is_some());
    }
}
