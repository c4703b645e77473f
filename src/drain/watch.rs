//! nthd's own delay lock on `shutdown`, and the watch of every shutdown's drain.
//!
//! A task of its own, so the daemon's loop (which may wait on the metadata service or on
//! logind) never delays a release. It takes the lock at start, takes it again after a
//! cancelled shutdown and after logind restarts, and on `PrepareForShutdown(true)` polls
//! `ListInhibitors` ([`super::POLL`]) until no other delay lock is left or the budget is
//! nearly spent. It then hands the report to the daemon, completes the Auto Scaling lifecycle
//! action when asked to, and releases the lock: at most [`super::AFTER_LAST`] after the last
//! other lock went, never past logind's budget, whether or not the daemon answered.

use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::pods::PodsLeft;
use super::{Ended, Finish, Followed, Outcome, Report};
use crate::logind::{Inhibitor, ManagerProxy, PrepareForShutdownStream, DRAIN_LOCK_WHO};
use crate::timefmt::format_duration;

/// How long one read of logind may take while a drain is watched.
const READ: Duration = Duration::from_millis(500);

/// logind's default `InhibitDelayMaxSec`, used until the property is read.
const DEFAULT_BUDGET: Duration = Duration::from_secs(5);

/// What the watcher tells the daemon.
#[derive(Debug)]
pub(crate) enum Msg {
    /// The lock is held, with logind's budget at that moment.
    Locked(Duration),
    /// The lock cannot be held: why, and what to do about it. Retried with backoff.
    NoLock(String),
    /// A drain ended: the daemon records the report and answers on the sender once it is out
    /// (or gives up); the lock is released then, or when its time is up.
    Report(Box<Report>, oneshot::Sender<()>),
}

/// What the watcher needs; the daemon keeps the other ends.
pub(crate) struct Watcher<F: Finish> {
    pub(crate) tx: mpsc::Sender<Msg>,
    pub(crate) followed: watch::Receiver<Option<Followed>>,
    /// The Auto Scaling lifecycle action to complete after an `asg-terminate` drain.
    pub(crate) lifecycle: Option<F>,
    /// The lifecycle action while it is prepared in a task of its own during a drain.
    preparing: Option<tokio::task::JoinHandle<F>>,
    /// Names a fire drill run from another process as the shutdown's cause.
    pub(crate) drills: Option<super::DrillFinder>,
    /// A test's bus; `None` is the system bus.
    pub(crate) bus: Option<String>,
    pub(crate) lock: Option<zbus::OwnedFd>,
    pub(crate) budget: Duration,
}

/// The streams a drain listens to: logind's shutdown signal, and its name's owner on the bus.
struct Signals {
    prepare: PrepareForShutdownStream,
    owner: zbus::proxy::OwnerChangedStream<'static>,
}

/// How watching a drain ended without a report.
enum NoReport {
    /// `PrepareForShutdown(false)`.
    Cancelled,
    /// logind restarted or left the bus: the shutdown it was preparing is gone with it, and it
    /// says nothing about it; nthd's lock went with it too.
    LogindGone,
}

/// One drain under way.
struct Drain {
    t0: Instant,
    started: SystemTime,
    budget: Duration,
    /// When nthd stops waiting for the others: the budget less its margin.
    give_up: Instant,
    holders: super::Holders,
}

impl<F: Finish> Watcher<F> {
    pub(crate) fn new(
        tx: mpsc::Sender<Msg>,
        followed: watch::Receiver<Option<Followed>>,
        lifecycle: Option<F>,
    ) -> Watcher<F> {
        Watcher {
            tx,
            followed,
            lifecycle,
            preparing: None,
            drills: None,
            bus: None,
            lock: None,
            budget: DEFAULT_BUDGET,
        }
    }

    /// Runs until the daemon is gone. Every failure is told to the daemon and retried.
    pub(crate) async fn run(mut self) {
        let mut backoff =
            crate::timings::Backoff::with_max(Duration::from_secs(2), Duration::from_secs(60));
        loop {
            let why = match self.session().await {
                Ok(()) => return,
                Err(why) => why,
            };
            self.lock = None;
            if self.tx.send(Msg::NoLock(why)).await.is_err() {
                return;
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }

    async fn connect(&self) -> Result<ManagerProxy<'static>, String> {
        let builder = match &self.bus {
            Some(a) => zbus::connection::Builder::address(a.as_str()),
            None => zbus::connection::Builder::system(),
        };
        let conn = builder.method_timeout(Duration::from_secs(5));
        let conn = tokio::time::timeout(Duration::from_secs(5), conn.build())
            .await
            .map_err(|_| "timed out connecting".to_string())?
            .map_err(|e| {
                format!(
                    "cannot connect to the system D-Bus ({}): {e}",
                    crate::logind::bus_address()
                )
            })?;
        ManagerProxy::builder(&conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(|e| e.to_string())
    }

    /// One connection: subscribe, take the lock, watch until the bus goes.
    async fn session(&mut self) -> Result<(), String> {
        let proxy = self.connect().await?;
        // Subscribed before the lock is taken, so no shutdown can slip in between.
        let prepare = proxy
            .receive_prepare_for_shutdown()
            .await
            .map_err(|e| format!("cannot subscribe to PrepareForShutdown: {e}"))?;
        let owner = proxy
            .inner()
            .receive_owner_changed()
            .await
            .map_err(|e| format!("cannot watch org.freedesktop.login1 on the bus: {e}"))?;
        let mut s = Signals { prepare, owner };
        self.ensure_lock(&proxy).await?;
        loop {
            tokio::select! {
                sig = s.prepare.next() => {
                    let Some(sig) = sig else { return Err("the D-Bus connection closed".into()) };
                    match sig.args().map(|a| a.start) {
                        // The lock is taken again only if the shutdown is cancelled: logind
                        // refuses new delay locks while one is under way.
                        Ok(true) => match self.drain(&proxy, &mut s).await {
                            Err(NoReport::LogindGone) => {
                                self.lock = None;
                                self.ensure_lock(&proxy).await?;
                            }
                            Ok(()) | Err(NoReport::Cancelled) => {}
                        },
                        Ok(false) => {
                            tracing::info!("logind cancelled the shutdown");
                            self.ensure_lock(&proxy).await?;
                        }
                        Err(e) => tracing::debug!("PrepareForShutdown with odd arguments: {e}"),
                    }
                }
                new = s.owner.next() => match new {
                    Some(Some(_)) => {
                        tracing::info!("systemd-logind restarted: checking nthd's delay lock");
                        self.ensure_lock(&proxy).await?;
                    }
                    Some(None) => {
                        self.lock = None;
                        let why = "systemd-logind left the bus: nthd takes its delay lock \
                                   again when logind is back";
                        let _ = self.tx.send(Msg::NoLock(why.into())).await;
                    }
                    None => return Err("the D-Bus connection closed".into()),
                },
                () = self.tx.closed() => return Ok(()),
            }
        }
    }

    /// Takes the lock unless logind still lists the one held; reads the budget.
    async fn ensure_lock(&mut self, proxy: &ManagerProxy<'static>) -> Result<(), String> {
        if let Ok(Ok(us)) = tokio::time::timeout(READ, proxy.inhibit_delay_max_usec()).await {
            self.budget = Duration::from_micros(us);
        }
        if self.lock.is_some() && self.still_listed(proxy).await {
            let _ = self.tx.send(Msg::Locked(self.budget)).await;
            return Ok(());
        }
        self.lock = None;
        let fd = proxy
            .inhibit(
                "shutdown",
                DRAIN_LOCK_WHO,
                crate::logind::DRAIN_LOCK_WHY,
                "delay",
            )
            .await
            .map_err(|e| no_lock_reason(&e))?;
        self.lock = Some(fd);
        let _ = self.tx.send(Msg::Locked(self.budget)).await;
        Ok(())
    }

    async fn still_listed(&self, proxy: &ManagerProxy<'static>) -> bool {
        let pid = std::process::id();
        match tokio::time::timeout(READ, proxy.list_inhibitors()).await {
            Ok(Ok(list)) => list.iter().any(|(_, who, _, mode, _, p)| {
                who == DRAIN_LOCK_WHO && mode == "delay" && *p == pid
            }),
            // Unsure: keep the fd rather than take a second lock.
            _ => true,
        }
    }
}

/// Why `Inhibit` failed, and what to do.
fn no_lock_reason(e: &zbus::Error) -> String {
    format!(
        "logind refused nthd's delay lock (org.freedesktop.login1.Manager.Inhibit shutdown \
         delay): {e}. Without it nthd cannot report how a shutdown's drain went; everything \
         else works. logind refuses new delay locks while a shutdown is under way; otherwise \
         polkit must allow org.freedesktop.login1.inhibit-delay-shutdown to user nthd (logind's \
         default allows it to anyone): check with pkaction --verbose --action-id \
         org.freedesktop.login1.inhibit-delay-shutdown"
    )
}

impl<F: Finish> Watcher<F> {
    /// Watches one shutdown's drain to its end, reports it, and releases the lock; or says why
    /// there is nothing to report.
    async fn drain(
        &mut self,
        proxy: &ManagerProxy<'static>,
        signals: &mut Signals,
    ) -> Result<(), NoReport> {
        let t0 = Instant::now();
        let budget = self.budget;
        let asg = self.asg_followed(SystemTime::now());
        if asg {
            self.start_prepare();
        }
        let mut d = Drain {
            t0,
            started: SystemTime::now(),
            budget,
            give_up: t0 + budget.saturating_sub(super::margin(budget)),
            holders: super::Holders::default(),
        };
        tracing::info!(
            "a shutdown began: watching the drain (logind's budget {})",
            format_duration(budget)
        );
        let outcome = self.wait_for_others(proxy, signals, &mut d).await?;
        let ended = Instant::now();
        // Never past logind's budget, never more than AFTER_LAST after the others went.
        let release_by = (ended + super::AFTER_LAST - super::POLL)
            .min(t0 + budget.saturating_sub(Duration::from_millis(200)));
        let scan_by = (Instant::now() + super::pods::SCAN_BOUND).min(release_by);
        let pods = super::pods::scanned_by(scan_by, super::pods::pods_left_now).await;
        let report = self.report(&d, outcome, ended, pods);
        let asg = asg && report.notice.is_some();
        self.hand_over(report, release_by).await;
        if asg {
            self.reclaim(release_by).await;
            self.complete_lifecycle(release_by).await;
        }
        self.lock = None;
        tracing::debug!("nthd's delay lock released");
        Ok(())
    }

    /// Polls until no other delay lock is held (`Released`) or the budget is nearly spent; why
    /// not when the shutdown was cancelled, or went with logind, meanwhile.
    async fn wait_for_others(
        &mut self,
        proxy: &ManagerProxy<'static>,
        signals: &mut Signals,
        d: &mut Drain,
    ) -> Result<Outcome, NoReport> {
        let mut beat = Heartbeat::new(d.budget, self.preparing.is_some());
        loop {
            let now = Instant::now();
            if let Ok(Ok(list)) = tokio::time::timeout(READ, proxy.list_inhibitors()).await {
                let list: Vec<Inhibitor> = list.into_iter().map(Inhibitor::from).collect();
                let others = super::others(&list);
                d.holders.track(&others, now - d.t0);
                if others.is_empty() {
                    return Ok(Outcome::Released);
                }
            }
            if Instant::now() >= d.give_up {
                return Ok(Outcome::BudgetExhausted);
            }
            if self
                .preparing
                .as_ref()
                .is_some_and(tokio::task::JoinHandle::is_finished)
            {
                self.reclaim(Instant::now()).await;
            }
            beat.maybe(self.lifecycle.as_mut()).await;
            let next = (Instant::now() + super::POLL).min(d.give_up);
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                sig = signals.prepare.next() => {
                    if sig.is_some_and(|s| s.args().is_ok_and(|a| !a.start)) {
                        tracing::info!(
                            "the shutdown was cancelled after {}: no drain report",
                            format_duration(d.t0.elapsed())
                        );
                        return Err(NoReport::Cancelled);
                    }
                }
                Some(_) = signals.owner.next() => {
                    tracing::warn!(
                        "systemd-logind restarted {} into the drain: the shutdown it was \
                         preparing went with it (it sends no PrepareForShutdown(false) then), so \
                         it counts as cancelled, with no drain report; nthd takes its delay lock \
                         again for the next one",
                        format_duration(d.t0.elapsed())
                    );
                    return Err(NoReport::LogindGone);
                }
            }
        }
    }

    /// Whether a shutdown beginning `now` follows an Auto Scaling termination nthd acted on,
    /// with completion on.
    fn asg_followed(&self, now: SystemTime) -> bool {
        // Still preparing after a cancelled shutdown is as good as ready: it is reclaimed at
        // this drain's end.
        (self.lifecycle.is_some() || self.preparing.is_some())
            && self
                .followed
                .borrow()
                .as_ref()
                .is_some_and(|f| f.asg_terminate && f.started(now))
    }

    /// Prepares the lifecycle action (credentials, region, group) in a task of its own, so the
    /// drain is watched meanwhile.
    fn start_prepare(&mut self) {
        if let Some(mut l) = self.lifecycle.take() {
            self.preparing = Some(tokio::spawn(async move {
                if let Err(e) = l.prepare().await {
                    tracing::warn!("{e}");
                }
                l
            }));
        }
    }

    /// Takes the lifecycle action back once prepared, waiting at most until `by`.
    async fn reclaim(&mut self, by: Instant) {
        let Some(mut task) = self.preparing.take() else {
            return;
        };
        match tokio::time::timeout_at(by, &mut task).await {
            Ok(Ok(l)) => self.lifecycle = Some(l),
            Ok(Err(e)) => tracing::warn!("preparing the Auto Scaling completion failed: {e}"),
            Err(_) => self.preparing = Some(task),
        }
    }

    fn report(&self, d: &Drain, outcome: Outcome, ended: Instant, pods: PodsLeft) -> Report {
        let followed = self.followed.borrow().clone();
        let followed = followed
            .filter(|f| f.started(d.started))
            .or_else(|| self.drills.as_ref().and_then(|find| find(d.started)));
        Report::new(Ended {
            started: d.started,
            // nthd stops waiting a margin before the budget's end, to be heard before the
            // halt; logind waits out the rest for a lock still held.
            held: match outcome {
                Outcome::Released => ended - d.t0,
                Outcome::BudgetExhausted => d.budget,
            },
            budget: d.budget,
            outcome,
            holders: d.holders.clone(),
            pods,
            followed,
            now: SystemTime::now(),
        })
    }

    /// Gives the report to the daemon and waits for it to be out, at most until `by`.
    async fn hand_over(&self, report: Report, by: Instant) {
        let (done, sent) = oneshot::channel();
        if self
            .tx
            .send(Msg::Report(Box::new(report), done))
            .await
            .is_err()
        {
            return;
        }
        if tokio::time::timeout_at(by, sent).await.is_err() {
            tracing::warn!(
                "the drain report was not out in time; nthd releases its delay lock anyway so \
                 the shutdown is not held back"
            );
        }
    }

    async fn complete_lifecycle(&mut self, by: Instant) {
        let Some(l) = self.lifecycle.as_mut() else {
            tracing::warn!(
                "the Auto Scaling lifecycle action is not completed: reading the credentials, \
                 the region and the group took longer than the drain; the group completes it \
                 at the hook's heartbeat timeout"
            );
            return;
        };
        match l.complete(by.into_std()).await {
            Ok(done) => tracing::info!("{done}"),
            Err(e) => tracing::warn!("{e}"),
        }
    }
}

/// `RecordLifecycleActionHeartbeat` while a long drain runs, when the hook would time out.
struct Heartbeat {
    budget: Duration,
    asg: bool,
    /// How often, once the prepared lifecycle action said (`None` inside: never).
    every: Option<Option<Duration>>,
    next: Instant,
}

impl Heartbeat {
    fn new(budget: Duration, asg: bool) -> Heartbeat {
        Heartbeat {
            budget,
            asg,
            every: None,
            next: Instant::now(),
        }
    }

    async fn maybe<F: Finish>(&mut self, l: Option<&mut F>) {
        let Some(l) = l.filter(|_| self.asg) else {
            return;
        };
        let budget = self.budget;
        let Some(every) = *self.every.get_or_insert_with(|| l.heartbeat_every(budget)) else {
            return;
        };
        if Instant::now() < self.next {
            return;
        }
        self.next = Instant::now() + every;
        match tokio::time::timeout(Duration::from_secs(1), l.heartbeat()).await {
            Ok(Ok(())) => tracing::info!("Auto Scaling lifecycle heartbeat sent while draining"),
            Ok(Err(e)) => tracing::warn!("{e}"),
            Err(_) => tracing::warn!("the Auto Scaling lifecycle heartbeat took over 1 s"),
        }
    }
}
