//! From notices to decisions. Pure code: no I/O, no clock reads; `now` is always passed in.
//!
//! [`decide`] says what one notice calls for and when. [`Planner`] keeps the state across polls:
//! it announces each notice once, carries out each power action once, defers actions to the
//! last safe moment, cancels deferred actions the platform withdraws, and retries failed ones.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::{Duration, SystemTime};

use crate::notice::{
    ByDefault, Notice, NoticeId, NoticeKind, NoticeStatus, SourceId, Timing, KINDS,
};

/// What to do about a notice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Nothing, not even a log line above debug level.
    Ignore,
    /// Log it (and show it in STATUS= and metrics), nothing else.
    Log,
    /// Ask logind to power off, which lets kubelet drain the node first.
    PowerOff,
    /// Ask logind to reboot.
    Reboot,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 4] = [
        Action::Ignore,
        Action::Log,
        Action::PowerOff,
        Action::Reboot,
    ];

    /// The setting's name: `ignore`, `log`, `poweroff` or `reboot`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Ignore => "ignore",
            Action::Log => "log",
            Action::PowerOff => "poweroff",
            Action::Reboot => "reboot",
        }
    }

    /// Parses a setting, ignoring case and surrounding spaces; `none`, `power-off` and `shutdown`
    /// are accepted too.
    pub fn parse(s: &str) -> Option<Action> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ignore" | "none" => Some(Action::Ignore),
            "log" => Some(Action::Log),
            "poweroff" | "power-off" | "shutdown" => Some(Action::PowerOff),
            "reboot" => Some(Action::Reboot),
            _ => None,
        }
    }

    /// Whether this asks logind for something (`poweroff` or `reboot`).
    pub fn is_power(self) -> bool {
        self.power().is_some()
    }

    /// The power action this setting asks for, if any: `Ignore` and `Log` have none, so they
    /// can never reach logind.
    pub fn power(self) -> Option<PowerAction> {
        match self {
            Action::Ignore | Action::Log => None,
            Action::PowerOff => Some(PowerAction::PowerOff),
            Action::Reboot => Some(PowerAction::Reboot),
        }
    }
}

/// What nthd asks logind to carry out. This type, not [`Action`], is what the planner hands
/// over and what `Logind::act` takes, so "power off for a notice set to log" cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PowerAction {
    /// `org.freedesktop.login1.Manager.PowerOff`.
    PowerOff,
    /// `org.freedesktop.login1.Manager.Reboot`.
    Reboot,
}

impl PowerAction {
    /// The setting's name: `poweroff` or `reboot` (also the metrics label and state record).
    pub fn name(self) -> &'static str {
        Action::from(self).name()
    }

    /// The logind method: `PowerOff` or `Reboot`.
    pub fn method(self) -> &'static str {
        match self {
            PowerAction::PowerOff => "PowerOff",
            PowerAction::Reboot => "Reboot",
        }
    }

    /// The logind method that says whether this user may: `CanPowerOff` or `CanReboot`.
    pub fn can_method(self) -> &'static str {
        match self {
            PowerAction::PowerOff => "CanPowerOff",
            PowerAction::Reboot => "CanReboot",
        }
    }
}

impl From<PowerAction> for Action {
    fn from(p: PowerAction) -> Action {
        match p {
            PowerAction::PowerOff => Action::PowerOff,
            PowerAction::Reboot => Action::Reboot,
        }
    }
}

impl fmt::Display for PowerAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What nthd does about `kind` unless told otherwise: power off where the platform is about to
/// take the machine away, log where powering off would do harm (hibernation, live migration,
/// Azure Freeze, a reboot nobody asked nthd to do) or where nothing is certain yet.
pub fn default_action(kind: NoticeKind) -> Action {
    match kind.info().by_default {
        ByDefault::PowerOff => Action::PowerOff,
        ByDefault::Log => Action::Log,
    }
}

/// Whether a power action for `kind` waits for the last safe moment before the deadline by
/// default: the kinds announced hours or days ahead.
pub(crate) fn deadline_by_default(kind: NoticeKind) -> bool {
    kind.info().timing == Timing::AtDeadline
}

/// The policy settings.
#[derive(Clone, Debug)]
pub struct PolicyConfig {
    actions: HashMap<NoticeKind, Action>,
    at_deadline: HashSet<NoticeKind>,
    /// Extra time kept between the end of the drain and the platform's deadline.
    pub margin: Duration,
    /// The drain budget assumed when logind's `InhibitDelayMaxUSec` cannot be read.
    pub fallback_budget: Duration,
    /// How long to wait before retrying a failed power action.
    pub retry_delay: Duration,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            actions: KINDS
                .iter()
                .map(|k| (k.kind, default_action(k.kind)))
                .collect(),
            at_deadline: KINDS
                .iter()
                .map(|k| k.kind)
                .filter(|k| deadline_by_default(*k))
                .collect(),
            margin: Duration::from_secs(120),
            fallback_budget: Duration::from_secs(300),
            retry_delay: Duration::from_secs(5),
        }
    }
}

impl PolicyConfig {
    /// The action set for `kind`.
    pub fn action(&self, kind: NoticeKind) -> Action {
        self.actions.get(&kind).copied().unwrap_or(Action::Log)
    }

    /// Sets the action for `kind`.
    pub fn set_action(&mut self, kind: NoticeKind, action: Action) {
        self.actions.insert(kind, action);
    }

    /// Whether a power action for `kind` waits for the last safe moment before the deadline.
    pub fn at_deadline(&self, kind: NoticeKind) -> bool {
        self.at_deadline.contains(&kind)
    }

    /// Sets the kinds whose power action waits for the last safe moment, replacing the old set.
    pub fn set_at_deadline(&mut self, kinds: impl IntoIterator<Item = NoticeKind>) {
        self.at_deadline = kinds.into_iter().collect();
    }

    /// Whether any kind is set to reboot (the polkit reboot grant is then needed).
    pub fn wants_reboot(&self) -> bool {
        self.actions.values().any(|a| *a == Action::Reboot)
    }

    /// The power actions this policy may ask logind for, so the permissions to check: power-off
    /// always, reboot when a kind is set to it.
    pub fn power_actions(&self) -> Vec<PowerAction> {
        let mut actions = vec![PowerAction::PowerOff];
        if self.wants_reboot() {
            actions.push(PowerAction::Reboot);
        }
        actions
    }
}

/// When to carry out a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// At once.
    Now,
    /// At this time: the last safe moment before the platform's deadline.
    At(SystemTime),
}

/// What [`decide`] makes of one notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub action: Action,
    /// When to do it.
    pub when: When,
    /// Why, in one line for the log; it names the setting.
    pub reason: String,
}

/// What one notice calls for, given the drain budget (logind's `InhibitDelayMaxUSec`; `None`
/// when unknown). Deferred actions fire at `deadline - budget - margin`, or now if that moment
/// has passed. Arithmetic saturates: no input makes it overflow or panic.
pub fn decide(
    cfg: &PolicyConfig,
    n: &Notice,
    now: SystemTime,
    budget: Option<Duration>,
) -> Decision {
    match n.status {
        NoticeStatus::Canceled => return ignore("the platform canceled this event"),
        NoticeStatus::Completed => return ignore("the platform completed this event"),
        NoticeStatus::Active => {}
    }
    let action = cfg.action(n.kind);
    let setting = n.kind.info().flag;
    if !action.is_power() {
        return Decision {
            action,
            when: When::Now,
            reason: format!("--{setting} is {action}"),
        };
    }
    if !cfg.at_deadline(n.kind) {
        return Decision {
            action,
            when: When::Now,
            reason: format!("--{setting} is {action}, carried out at once"),
        };
    }
    let Some(deadline) = n.deadline else {
        return Decision {
            action,
            when: When::Now,
            reason: format!("--{setting} is {action}; the notice has no deadline, so at once"),
        };
    };
    at_the_last_safe_moment(cfg, n.kind, deadline, now, budget)
}

/// A power action on a notice with a deadline: at `deadline - budget - margin`, or now when
/// that moment has passed.
fn at_the_last_safe_moment(
    cfg: &PolicyConfig,
    kind: NoticeKind,
    deadline: SystemTime,
    now: SystemTime,
    budget: Option<Duration>,
) -> Decision {
    let (action, setting) = (cfg.action(kind), kind.info().flag);
    let (budget, source) = match budget {
        Some(b) => (b, "logind InhibitDelayMaxUSec"),
        None => (cfg.fallback_budget, "fallback drain budget"),
    };
    let lead = budget.saturating_add(cfg.margin);
    let at = deadline.checked_sub(lead);
    match at {
        Some(at) if at > now => Decision {
            action,
            when: When::At(at),
            reason: format!(
                "--{setting} is {action} at the last safe moment: deadline {} minus drain \
                 budget {} ({source}) minus margin {}",
                crate::timefmt::format_rfc3339(deadline),
                crate::timefmt::format_duration(budget),
                crate::timefmt::format_duration(cfg.margin),
            ),
        },
        _ => Decision {
            action,
            when: When::Now,
            reason: format!(
                "--{setting} is {action}; the deadline {} leaves less than the drain budget {} \
                 plus margin {}, so at once",
                crate::timefmt::format_rfc3339(deadline),
                crate::timefmt::format_duration(budget),
                crate::timefmt::format_duration(cfg.margin),
            ),
        },
    }
}

fn ignore(reason: &str) -> Decision {
    Decision {
        action: Action::Ignore,
        when: When::Now,
        reason: reason.to_string(),
    }
}

/// How far a deadline may move earlier before the notice is announced again: less is jitter,
/// more changes when nthd acts.
pub(crate) const EARLIER_BY: Duration = Duration::from_secs(5);
/// How far a deadline may move later and still be drift, not news: amazon-ec2-metadata-mock
/// recomputes "now + 2 min" on every request, so its spot time moves by the poll interval (up
/// to `NTHD_SLOW_POLL_INTERVAL` for a rebalance recommendation) each time. A platform that
/// postpones an event by more is announced again.
pub(crate) const LATER_BY: Duration = Duration::from_secs(60);

/// Whether a deadline (or a deferred time) moved enough to be announced again.
fn moved(old: Option<SystemTime>, new: Option<SystemTime>) -> bool {
    match (old, new) {
        (Some(a), Some(b)) => match a.duration_since(b) {
            Ok(earlier) => earlier > EARLIER_BY,
            Err(later) => later.duration() > LATER_BY,
        },
        (None, Some(_)) => true,
        _ => false,
    }
}

/// How a notice differs from the one listed under the same fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    New,
    /// Kind or status changed, or the deadline appeared or [`moved`]: announced again.
    Announce,
    /// Only the deadline moved, within [`EARLIER_BY`] / [`LATER_BY`], or went away.
    Drifted,
    Same,
}

fn change(old: &Notice, new: &Notice) -> Change {
    if old.kind != new.kind || old.status != new.status {
        return Change::Announce;
    }
    if old.deadline == new.deadline {
        Change::Same
    } else if moved(old.deadline, new.deadline) {
        Change::Announce
    } else {
        Change::Drifted
    }
}

/// Why a deferred or pending action will not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CancelReason {
    /// The platform no longer lists the event.
    NoLongerListed,
    /// The platform says the event was canceled or has completed.
    Ended(NoticeStatus),
    /// The notice is still active, but the settings no longer act on it: the policy's reason.
    NotActedOn(String),
}

impl std::fmt::Display for CancelReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CancelReason::NoLongerListed => f.write_str("the platform no longer lists this event"),
            CancelReason::Ended(NoticeStatus::Completed) => {
                f.write_str("the platform completed this event")
            }
            CancelReason::Ended(_) => f.write_str("the platform canceled this event"),
            CancelReason::NotActedOn(why) => f.write_str(why),
        }
    }
}

/// What the planner asks the daemon to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// A notice seen for the first time, or changed: log it with its decision.
    Announce {
        /// The notice.
        notice: Notice,
        /// What the policy makes of it.
        decision: Decision,
        /// Already acted on (this boot, or an event remembered across reboots).
        already_done: bool,
    },
    /// A notice's deadline moved later (or a little earlier): an update, not news.
    Drifted {
        /// The notice, with its new deadline.
        notice: Notice,
        /// The deadline before the move.
        from: Option<SystemTime>,
    },
    /// A notice is no longer listed by its source.
    Gone {
        /// The notice as it was last listed.
        notice: Notice,
    },
    /// A power action is deferred to `at`.
    Scheduled {
        /// The notice.
        notice: Notice,
        /// The action deferred.
        action: PowerAction,
        /// When it is due.
        at: SystemTime,
    },
    /// A deferred or pending action will not happen.
    Canceled {
        /// The notice.
        notice: Notice,
        /// Why, for the log and the `io.nthd.canceled` event.
        reason: CancelReason,
    },
    /// Carry this out now, then report with [`Planner::record_result`].
    Execute {
        /// The notice; report the result under its `id`.
        notice: Notice,
        /// What to ask logind for.
        action: PowerAction,
    },
}

#[derive(Clone, Debug)]
struct Want {
    notice: Notice,
    action: PowerAction,
    /// Deferred until then; `None` means as soon as possible.
    at: Option<SystemTime>,
    /// Earliest retry after a failure.
    retry_at: Option<SystemTime>,
    in_flight: bool,
    attempts: u32,
}

/// What [`Planner::shutdown_cancelled`] made of a cancelled shutdown.
#[derive(Debug, PartialEq)]
pub(crate) enum Cancelled {
    /// No power action had succeeded.
    NotShuttingDown,
    /// The notice is gone or no longer active: nothing to do again.
    NoLongerListed(NoticeId),
    /// It was cancelled once before: not again.
    AlreadyRetried(NoticeId),
    /// Wanted again; here is what is due now.
    ActingAgain(NoticeId, Vec<Effect>),
}

/// The state kept between polls.
#[derive(Debug)]
pub struct Planner {
    cfg: PolicyConfig,
    /// Every notice currently listed, by fingerprint.
    known: HashMap<NoticeId, Notice>,
    /// Power actions wanted and not yet carried out, by fingerprint.
    wants: BTreeMap<NoticeId, Want>,
    /// Fingerprints acted on successfully.
    done: HashSet<NoticeId>,
    /// Set once a power action succeeded: the machine is going down.
    shutting_down: Option<(NoticeId, PowerAction)>,
    /// Fingerprints acted on again after their shutdown was cancelled: each gets one more try.
    reopened: HashSet<NoticeId>,
}

impl Planner {
    /// A planner that has seen nothing yet.
    pub fn new(cfg: PolicyConfig) -> Planner {
        Planner {
            cfg,
            known: HashMap::new(),
            wants: BTreeMap::new(),
            done: HashSet::new(),
            shutting_down: None,
            reopened: HashSet::new(),
        }
    }

    pub(crate) fn config(&self) -> &PolicyConfig {
        &self.cfg
    }

    /// Marks fingerprints as already acted on (from the persisted state).
    pub fn mark_done(&mut self, ids: impl IntoIterator<Item = NoticeId>) {
        self.done.extend(ids);
    }

    /// Whether the notice with this fingerprint was acted on, in this run or (per the state file)
    /// before.
    pub fn is_done(&self, id: &NoticeId) -> bool {
        self.done.contains(id)
    }

    /// The fingerprint and action of the power action that succeeded, once one has: the machine
    /// is going down.
    pub fn shutting_down(&self) -> Option<&(NoticeId, PowerAction)> {
        self.shutting_down.as_ref()
    }

    /// Notices currently listed, sorted by fingerprint.
    pub(crate) fn current(&self) -> Vec<&Notice> {
        let mut v: Vec<_> = self.known.values().collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// Deferred actions: (notice, action, when).
    pub fn scheduled(&self) -> Vec<(&Notice, PowerAction, SystemTime)> {
        self.wants
            .values()
            .filter_map(|w| w.at.map(|at| (&w.notice, w.action, at)))
            .collect()
    }

    /// Feeds one observation. `fresh` lists the sources read successfully this time: a
    /// notice of such a source that is no longer listed is gone.
    pub fn observe(
        &mut self,
        notices: &[Notice],
        fresh: &[SourceId],
        now: SystemTime,
        budget: Option<Duration>,
    ) -> Vec<Effect> {
        let mut out = self.forget_gone(notices, fresh);
        for n in notices {
            let decision = decide(&self.cfg, n, now, budget);
            self.note(n, &decision, &mut out);
            self.want(n, &decision, &mut out);
        }
        out.extend(self.tick(now));
        out
    }

    /// Known notices of fresh sources that are no longer listed are gone. A deferred action for
    /// such an event is withdrawn; an action wanted at once is kept until it succeeds (the
    /// notice was real).
    fn forget_gone(&mut self, notices: &[Notice], fresh: &[SourceId]) -> Vec<Effect> {
        let listed: HashSet<&NoticeId> = notices.iter().map(|n| &n.id).collect();
        let gone: Vec<NoticeId> = self
            .known
            .iter()
            .filter(|(id, n)| fresh.contains(&n.source) && !listed.contains(id))
            .map(|(id, _)| id.clone())
            .collect();
        let mut out = Vec::new();
        for id in gone {
            let notice = self.known.remove(&id).expect("listed above");
            if self
                .wants
                .get(&id)
                .is_some_and(|w| w.at.is_some() && !w.in_flight)
            {
                self.wants.remove(&id);
                out.push(Effect::Canceled {
                    notice: notice.clone(),
                    reason: CancelReason::NoLongerListed,
                });
            }
            out.push(Effect::Gone { notice });
        }
        out
    }

    /// Remembers `n`, announcing it when new or changed (only a deadline drift when that is
    /// all that changed).
    fn note(&mut self, n: &Notice, decision: &Decision, out: &mut Vec<Effect>) {
        let change = self
            .known
            .get(&n.id)
            .map_or(Change::New, |old| change(old, n));
        if change == Change::Same {
            return;
        }
        let previous = self.known.insert(n.id.clone(), n.clone());
        out.push(match (change, previous) {
            (Change::Drifted, Some(old)) => Effect::Drifted {
                notice: n.clone(),
                from: old.deadline,
            },
            _ => Effect::Announce {
                notice: n.clone(),
                decision: decision.clone(),
                already_done: self.done.contains(&n.id),
            },
        });
    }

    /// What `n` wants now: a power action (new, or updated while not in flight), or the
    /// withdrawal of one it wanted before (no longer active, or now a kind not acted on).
    fn want(&mut self, n: &Notice, decision: &Decision, out: &mut Vec<Effect>) {
        let power = decision.action.power();
        if n.status != NoticeStatus::Active || (power.is_none() && !self.done.contains(&n.id)) {
            if self.wants.get(&n.id).is_some_and(|w| !w.in_flight) {
                self.wants.remove(&n.id);
                let reason = match n.status {
                    NoticeStatus::Active => CancelReason::NotActedOn(decision.reason.clone()),
                    status => CancelReason::Ended(status),
                };
                out.push(Effect::Canceled {
                    notice: n.clone(),
                    reason,
                });
            }
            return;
        }
        let Some(power) = power.filter(|_| !self.done.contains(&n.id)) else {
            return;
        };
        let at = match decision.when {
            When::Now => None,
            When::At(t) => Some(t),
        };
        let announce = match self.wants.get_mut(&n.id) {
            Some(w) if w.in_flight => false,
            Some(w) => {
                w.notice = n.clone();
                // A deferred time that drifts later, or a little earlier, is an update like
                // its deadline: only a real move is announced again.
                let changed = moved(w.at, at) || w.action != power;
                w.at = at;
                w.action = power;
                changed
            }
            None => {
                let want = Want {
                    notice: n.clone(),
                    action: power,
                    at,
                    retry_at: None,
                    in_flight: false,
                    attempts: 0,
                };
                self.wants.insert(n.id.clone(), want);
                true
            }
        };
        if let (true, Some(t)) = (announce, at) {
            out.push(Effect::Scheduled {
                notice: n.clone(),
                action: power,
                at: t,
            });
        }
    }

    /// Returns the actions due at `now`. Power-offs go before reboots; once one power action
    /// has succeeded, nothing more is executed.
    pub fn tick(&mut self, now: SystemTime) -> Vec<Effect> {
        if self.shutting_down.is_some() || self.wants.values().any(|w| w.in_flight) {
            return Vec::new();
        }
        let due = |w: &Want| w.at.is_none_or(|t| t <= now) && w.retry_at.is_none_or(|t| t <= now);
        let pick = self
            .wants
            .iter()
            .filter(|(_, w)| due(w))
            .min_by_key(|(id, w)| (w.action != PowerAction::PowerOff, (*id).clone()))
            .map(|(id, _)| id.clone());
        let Some(id) = pick else {
            return Vec::new();
        };
        let w = self.wants.get_mut(&id).expect("picked above");
        w.in_flight = true;
        w.attempts += 1;
        vec![Effect::Execute {
            notice: w.notice.clone(),
            action: w.action,
        }]
    }

    /// Reports how an `Execute` went.
    pub fn record_result(&mut self, id: &NoticeId, ok: bool, now: SystemTime) {
        let Some(w) = self.wants.get_mut(id) else {
            return;
        };
        w.in_flight = false;
        if ok {
            let action = w.action;
            self.wants.remove(id);
            self.done.insert(id.clone());
            self.shutting_down = Some((id.clone(), action));
        } else {
            w.retry_at = now.checked_add(self.cfg.retry_delay);
        }
    }

    /// The shutdown a power action started was cancelled (logind stopped preparing for it while
    /// the system kept running). If the notice is still listed and active, its action is wanted
    /// again, once: a second cancellation is left alone, since someone is cancelling on purpose.
    pub(crate) fn shutdown_cancelled(&mut self, now: SystemTime) -> Cancelled {
        let Some((id, action)) = self.shutting_down.take() else {
            return Cancelled::NotShuttingDown;
        };
        let Some(n) = self
            .known
            .get(&id)
            .filter(|n| n.status == NoticeStatus::Active)
        else {
            return Cancelled::NoLongerListed(id);
        };
        if !self.reopened.insert(id.clone()) {
            return Cancelled::AlreadyRetried(id);
        }
        self.done.remove(&id);
        self.wants.insert(
            id.clone(),
            Want {
                notice: n.clone(),
                action,
                at: None,
                retry_at: None,
                in_flight: false,
                attempts: 0,
            },
        );
        Cancelled::ActingAgain(id, self.tick(now))
    }

    /// Attempts made for a wanted action (0 if none is wanted); for the tests.
    #[cfg(test)]
    pub(crate) fn attempts(&self, id: &NoticeId) -> u32 {
        self.wants.get(id).map_or(0, |w| w.attempts)
    }

    /// When `tick` may next return something: the earliest deferred time or retry.
    pub fn next_wakeup(&self) -> Option<SystemTime> {
        if self.shutting_down.is_some() {
            return None;
        }
        self.wants
            .values()
            .filter(|w| !w.in_flight)
            .filter_map(|w| match (w.at, w.retry_at) {
                (Some(a), Some(r)) => Some(a.max(r)),
                (a, r) => a.or(r),
            })
            .min()
    }

    /// Whether an action is wanted and waiting (now or later).
    pub fn has_wants(&self) -> bool {
        !self.wants.is_empty()
    }

    /// Whether nothing is known, wanted or under way: then an observation with no notice in it
    /// changes nothing, at any time.
    pub(crate) fn is_idle(&self) -> bool {
        self.known.is_empty() && self.wants.is_empty() && self.shutting_down.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn t(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    const NOW: u64 = 1_000_000;
    const SRC: SourceId = SourceId::new("test/source");

    fn nid(s: &str) -> NoticeId {
        NoticeId::from_parts(&[s])
    }

    fn notice(kind: NoticeKind, id: &str, deadline: Option<u64>) -> Notice {
        Notice {
            kind,
            source: SRC,
            id: nid(id),
            event_id: None,
            deadline: deadline.map(t),
            status: NoticeStatus::Active,
            detail: String::new(),
            raw: String::new(),
        }
    }

    fn cfg_all(action: Action) -> PolicyConfig {
        let mut c = PolicyConfig::default();
        for k in KINDS {
            c.set_action(k.kind, action);
        }
        c
    }

    /// Every kind × every setting × deadline case, against the rules written out by hand.
    #[test]
    fn harmful_kinds_default_to_log() {
        for kind in [
            NoticeKind::SpotHibernate,
            NoticeKind::AzureFreeze,
            NoticeKind::Rebalance,
            NoticeKind::ScheduledReboot,
            NoticeKind::ScheduledMaintenance,
            NoticeKind::AzureReboot,
            NoticeKind::AzureRedeploy,
            NoticeKind::GcpMigrate,
            NoticeKind::Unknown,
        ] {
            assert_eq!(default_action(kind), Action::Log, "{kind}");
        }
    }

    #[test]
    fn decide_table() {
        let budget = Some(Duration::from_secs(90));
        let margin = 120u64;
        // (deadline, expected time when deferred)
        let cases: [(Option<u64>, Option<u64>); 6] = [
            (None, None),                                       // no deadline: at once
            (Some(NOW - 3600), None),                           // already past
            (Some(NOW), None),                                  // right now
            (Some(NOW + 60), None),                             // inside the drain budget
            (Some(NOW + 210), None),                            // exactly budget + margin: at once
            (Some(NOW + 3600), Some(NOW + 3600 - 90 - margin)), // far: last safe moment
        ];
        for info in KINDS {
            for action in Action::ALL {
                for at_deadline in [false, true] {
                    let mut cfg = cfg_all(Action::Log);
                    cfg.set_action(info.kind, action);
                    cfg.set_at_deadline(if at_deadline { vec![info.kind] } else { vec![] });
                    for (deadline, deferred) in cases {
                        let n = notice(info.kind, "x", deadline);
                        let d = decide(&cfg, &n, t(NOW), budget);
                        assert_eq!(d.action, action, "{} {action}", info.name);
                        let want = match (action.is_power(), at_deadline, deferred) {
                            (true, true, Some(at)) => When::At(t(at)),
                            _ => When::Now,
                        };
                        assert_eq!(
                            d.when, want,
                            "{} {action} at_deadline={at_deadline} {deadline:?}",
                            info.name
                        );
                        assert!(d.reason.contains(info.flag), "{}", d.reason);
                    }
                }
            }
        }
    }

    #[test]
    fn canceled_and_completed_are_ignored_whatever_the_setting() {
        let cfg = cfg_all(Action::PowerOff);
        for status in [NoticeStatus::Canceled, NoticeStatus::Completed] {
            let mut n = notice(NoticeKind::ScheduledStop, "e", Some(NOW + 10));
            n.status = status;
            assert_eq!(decide(&cfg, &n, t(NOW), None).action, Action::Ignore);
        }
    }

    #[test]
    fn unknown_budget_uses_fallback_and_extremes_do_not_overflow() {
        let cfg = PolicyConfig::default();
        let n = notice(NoticeKind::ScheduledStop, "e", Some(NOW + 10_000));
        let d = decide(&cfg, &n, t(NOW), None);
        assert_eq!(d.when, When::At(t(NOW + 10_000 - 300 - 120)));
        assert!(d.reason.contains("fallback"));
        // Huge budget, deadline near the epoch, far future: no panic, sane answers.
        let d = decide(&cfg, &n, t(NOW), Some(Duration::MAX));
        assert_eq!(d.when, When::Now);
        let n = notice(NoticeKind::ScheduledStop, "e", Some(0));
        assert_eq!(
            decide(&cfg, &n, t(NOW), Some(Duration::from_secs(5))).when,
            When::Now
        );
        let n = notice(NoticeKind::ScheduledStop, "e", Some(u64::MAX / 4));
        assert!(matches!(
            decide(&cfg, &n, t(NOW), Some(Duration::ZERO)).when,
            When::At(_)
        ));
    }

    #[test]
    fn defaults_match_the_documented_policy() {
        let cfg = PolicyConfig::default();
        let at = |k| {
            decide(
                &cfg,
                &notice(k, "x", Some(NOW + 100_000)),
                t(NOW),
                Some(Duration::from_secs(60)),
            )
        };
        for k in [
            NoticeKind::SpotTerminate,
            NoticeKind::SpotStop,
            NoticeKind::AsgTerminate,
            NoticeKind::GcpPreempt,
            NoticeKind::AzurePreempt,
            NoticeKind::AzureTerminate,
            NoticeKind::AlibabaSpot,
            NoticeKind::TencentSpot,
        ] {
            assert_eq!(
                at(k),
                Decision {
                    action: Action::PowerOff,
                    when: When::Now,
                    reason: at(k).reason
                },
                "{k}"
            );
        }
        // Waits for the last safe moment when the platform gives a start (GCP: from
        // instance/upcoming-maintenance), else at once.
        for k in [
            NoticeKind::ScheduledStop,
            NoticeKind::GcpTerminateMaintenance,
        ] {
            assert_eq!(at(k).action, Action::PowerOff, "{k}");
            assert!(matches!(at(k).when, When::At(_)), "{k}");
            let no_deadline = decide(&cfg, &notice(k, "x", None), t(NOW), None);
            assert_eq!(no_deadline.when, When::Now, "{k}");
        }
        for k in [
            NoticeKind::SpotHibernate,
            NoticeKind::Rebalance,
            NoticeKind::ScheduledReboot,
            NoticeKind::ScheduledMaintenance,
            NoticeKind::AzureFreeze,
            NoticeKind::AzureReboot,
            NoticeKind::AzureRedeploy,
            NoticeKind::GcpMigrate,
            NoticeKind::AsgOther,
            NoticeKind::Unknown,
        ] {
            assert_eq!(at(k).action, Action::Log, "{k}");
        }
    }

    fn executes(cmds: &[Effect]) -> Vec<(String, PowerAction)> {
        cmds.iter()
            .filter_map(|c| match c {
                Effect::Execute { notice, action } => Some((notice.id.to_string(), *action)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_notice_seen_on_every_poll_is_announced_and_acted_on_once() {
        let mut p = Planner::new(PolicyConfig::default());
        let n = notice(
            NoticeKind::SpotTerminate,
            "aws/spot/terminate",
            Some(NOW + 120),
        );
        let first = p.observe(std::slice::from_ref(&n), &[SRC], t(NOW), None);
        assert_eq!(
            executes(&first),
            vec![("aws/spot/terminate".into(), PowerAction::PowerOff)]
        );
        assert_eq!(
            first
                .iter()
                .filter(|c| matches!(c, Effect::Announce { .. }))
                .count(),
            1
        );
        // In flight: the next polls do not execute again.
        assert!(p
            .observe(std::slice::from_ref(&n), &[SRC], t(NOW + 1), None)
            .is_empty());
        p.record_result(&n.id, true, t(NOW + 1));
        for i in 2..50 {
            let mut again = n.clone();
            again.deadline = Some(t(NOW + 120 + i)); // a mock recomputing `time`
            let cmds = p.observe(&[again], &[SRC], t(NOW + i), None);
            assert!(executes(&cmds).is_empty(), "poll {i}: {cmds:?}");
        }
        assert!(p.shutting_down().is_some());
    }

    #[test]
    fn flapping_notice_is_acted_on_once() {
        let mut p = Planner::new(PolicyConfig::default());
        let n = notice(NoticeKind::SpotTerminate, "aws/spot/terminate", None);
        let c = p.observe(std::slice::from_ref(&n), &[SRC], t(NOW), None);
        assert_eq!(executes(&c).len(), 1);
        p.record_result(&n.id, true, t(NOW));
        let c = p.observe(&[], &[SRC], t(NOW + 1), None);
        assert!(matches!(c.as_slice(), [Effect::Gone { .. }]));
        let c = p.observe(std::slice::from_ref(&n), &[SRC], t(NOW + 2), None);
        assert!(executes(&c).is_empty());
        assert!(matches!(
            c.as_slice(),
            [Effect::Announce {
                already_done: true,
                ..
            }]
        ));
    }

    fn announces(cmds: &[Effect]) -> usize {
        cmds.iter()
            .filter(|c| matches!(c, Effect::Announce { .. }))
            .count()
    }

    /// amazon-ec2-metadata-mock recomputes a spot notice's `time` (now + 2 min) on every
    /// request: that is one notice, announced once, not one per poll.
    #[test]
    fn a_drifting_deadline_is_announced_once_and_an_earlier_one_again() {
        let mut cfg = PolicyConfig::default();
        cfg.set_action(NoticeKind::SpotHibernate, Action::Log);
        let mut p = Planner::new(cfg);
        let fresh = [SRC];
        let mut total = 0;
        let mut drifted = 0;
        for i in 0..29 {
            let n = notice(NoticeKind::SpotHibernate, "spot", Some(NOW + i + 120));
            let cmds = p.observe(&[n], &fresh, t(NOW + i), None);
            total += announces(&cmds);
            drifted += cmds
                .iter()
                .filter(|c| matches!(c, Effect::Drifted { .. }))
                .count();
        }
        assert_eq!((total, drifted), (1, 28));
        // A few seconds earlier is jitter; more changes when nthd acts: announced again.
        let n = notice(NoticeKind::SpotHibernate, "spot", Some(NOW + 28 + 120 - 3));
        assert_eq!(announces(&p.observe(&[n], &fresh, t(NOW + 30), None)), 0);
        let n = notice(NoticeKind::SpotHibernate, "spot", Some(NOW + 60));
        let cmds = p.observe(std::slice::from_ref(&n), &fresh, t(NOW + 31), None);
        assert_eq!(announces(&cmds), 1);
        assert_eq!(
            p.current()[0].deadline,
            n.deadline,
            "the new deadline is kept"
        );
    }

    #[test]
    fn a_cancelled_shutdown_is_acted_on_again_once_while_listed() {
        let mut p = Planner::new(PolicyConfig::default());
        let n = notice(NoticeKind::SpotTerminate, "spot", None);
        let fresh = [SRC];
        assert_eq!(p.shutdown_cancelled(t(NOW)), Cancelled::NotShuttingDown);
        let cmds = p.observe(std::slice::from_ref(&n), &fresh, t(NOW), None);
        assert!(cmds.iter().any(|c| matches!(c, Effect::Execute { .. })));
        p.record_result(&nid("spot"), true, t(NOW));
        assert!(p.shutting_down().is_some());
        // Still listed: nothing more while the shutdown is under way.
        let cmds = p.observe(std::slice::from_ref(&n), &fresh, t(NOW + 1), None);
        assert!(!cmds.iter().any(|c| matches!(c, Effect::Execute { .. })));

        // Cancelled: the same action once more, at once.
        match p.shutdown_cancelled(t(NOW + 2)) {
            Cancelled::ActingAgain(id, cmds) => {
                assert_eq!(id, "spot");
                assert_eq!(
                    cmds,
                    vec![Effect::Execute {
                        notice: n.clone(),
                        action: PowerAction::PowerOff
                    }]
                );
            }
            other => panic!("{other:?}"),
        }
        p.record_result(&nid("spot"), true, t(NOW + 2));
        // Cancelled again: left alone.
        assert_eq!(
            p.shutdown_cancelled(t(NOW + 3)),
            Cancelled::AlreadyRetried(nid("spot"))
        );
        let cmds = p.observe(std::slice::from_ref(&n), &fresh, t(NOW + 4), None);
        assert!(!cmds.iter().any(|c| matches!(c, Effect::Execute { .. })));
    }

    #[test]
    fn a_cancelled_shutdown_for_a_notice_no_longer_listed_is_not_redone() {
        let mut p = Planner::new(PolicyConfig::default());
        let n = notice(NoticeKind::SpotTerminate, "spot", None);
        let fresh = [SRC];
        p.observe(std::slice::from_ref(&n), &fresh, t(NOW), None);
        p.record_result(&nid("spot"), true, t(NOW));
        p.observe(&[], &fresh, t(NOW + 1), None);
        assert_eq!(
            p.shutdown_cancelled(t(NOW + 2)),
            Cancelled::NoLongerListed(nid("spot"))
        );
        assert!(p.tick(t(NOW + 3)).is_empty());
    }

    #[test]
    fn failure_is_retried_after_the_delay_even_if_the_notice_vanishes() {
        let mut p = Planner::new(PolicyConfig::default());
        let n = notice(NoticeKind::SpotTerminate, "s", None);
        assert_eq!(
            executes(&p.observe(std::slice::from_ref(&n), &[SRC], t(NOW), None)).len(),
            1
        );
        p.record_result(&nid("s"), false, t(NOW));
        assert!(executes(&p.tick(t(NOW + 4))).is_empty());
        assert_eq!(p.next_wakeup(), Some(t(NOW + 5)));
        // The notice vanishes; the action wanted at once is kept.
        p.observe(&[], &[SRC], t(NOW + 4), None);
        assert_eq!(executes(&p.tick(t(NOW + 5))).len(), 1);
        assert_eq!(p.attempts(&nid("s")), 2);
        p.record_result(&nid("s"), true, t(NOW + 5));
        assert!(p.next_wakeup().is_none());
        assert!(!p.has_wants());
    }

    #[test]
    fn deferred_action_fires_at_the_computed_time_and_can_be_canceled() {
        let mut p = Planner::new(PolicyConfig::default());
        let budget = Some(Duration::from_secs(60));
        let mut n = notice(
            NoticeKind::ScheduledStop,
            "aws/scheduled/e1",
            Some(NOW + 1000),
        );
        let c = p.observe(std::slice::from_ref(&n), &[SRC], t(NOW), budget);
        let at = t(NOW + 1000 - 60 - 120);
        assert!(c
            .iter()
            .any(|c| matches!(c, Effect::Scheduled { at: a, .. } if *a == at)));
        assert!(executes(&c).is_empty());
        assert_eq!(p.next_wakeup(), Some(at));
        assert!(executes(&p.tick(at - Duration::from_secs(1))).is_empty());
        // Rescheduled by the platform: the deferred time follows.
        n.deadline = Some(t(NOW + 2000));
        let c = p.observe(std::slice::from_ref(&n), &[SRC], t(NOW + 10), budget);
        let at2 = t(NOW + 2000 - 180);
        assert!(c
            .iter()
            .any(|c| matches!(c, Effect::Scheduled { at: a, .. } if *a == at2)));
        assert!(executes(&p.tick(at)).is_empty());
        // Canceled: nothing fires.
        n.status = NoticeStatus::Canceled;
        let c = p.observe(std::slice::from_ref(&n), &[SRC], t(NOW + 20), budget);
        let reason = c.iter().find_map(|c| match c {
            Effect::Canceled { reason, .. } => Some(reason.clone()),
            _ => None,
        });
        assert_eq!(reason, Some(CancelReason::Ended(NoticeStatus::Canceled)));
        assert_eq!(
            reason.unwrap().to_string(),
            "the platform canceled this event"
        );
        assert!(executes(&p.tick(at2)).is_empty());
        assert!(p.next_wakeup().is_none());
    }

    /// A deadline that moves while its action is deferred (GCP re-reads the maintenance window
    /// every slow poll) moves the action, earlier or later, announced or not, even when it
    /// comes in an observation where its source was not read afresh.
    #[test]
    fn a_moved_deadline_moves_the_deferred_action() {
        let mut p = Planner::new(PolicyConfig::default());
        let budget = Some(Duration::from_secs(60));
        let lead = 60 + 120;
        let mut n = notice(
            NoticeKind::GcpTerminateMaintenance,
            "gcp/m",
            Some(NOW + 3600),
        );
        p.observe(std::slice::from_ref(&n), &[SRC], t(NOW), budget);
        assert_eq!(p.next_wakeup(), Some(t(NOW + 3600 - lead)));
        // Earlier by half an hour, in an observation that read nothing afresh.
        n.deadline = Some(t(NOW + 1800));
        let c = p.observe(std::slice::from_ref(&n), &[], t(NOW + 20), budget);
        assert_eq!(announces(&c), 1);
        let at = t(NOW + 1800 - lead);
        assert!(c
            .iter()
            .any(|c| matches!(c, Effect::Scheduled { at: a, .. } if *a == at)));
        assert_eq!(p.next_wakeup(), Some(at));
        // Later by 30 s: a drift, not announced, but the action follows it.
        n.deadline = Some(t(NOW + 1830));
        let c = p.observe(std::slice::from_ref(&n), &[], t(NOW + 40), budget);
        assert_eq!(announces(&c), 0);
        assert!(c.iter().any(|c| matches!(c, Effect::Drifted { .. })));
        let at2 = t(NOW + 1830 - lead);
        assert_eq!(p.next_wakeup(), Some(at2));
        assert!(executes(&p.tick(at)).is_empty(), "the old time is gone");
        assert_eq!(
            executes(&p.tick(at2)),
            vec![("gcp/m".into(), PowerAction::PowerOff)]
        );
    }

    #[test]
    fn deferred_action_fires_when_due() {
        let mut p = Planner::new(PolicyConfig::default());
        let n = notice(NoticeKind::ScheduledStop, "e", Some(NOW + 1000));
        p.observe(
            std::slice::from_ref(&n),
            &[SRC],
            t(NOW),
            Some(Duration::ZERO),
        );
        let at = t(NOW + 1000 - 120);
        assert_eq!(
            executes(&p.tick(at)),
            vec![("e".into(), PowerAction::PowerOff)]
        );
    }

    #[test]
    fn deferred_action_for_an_event_that_disappears_is_canceled_only_on_a_fresh_read() {
        let mut p = Planner::new(PolicyConfig::default());
        let n = notice(NoticeKind::ScheduledStop, "e", Some(NOW + 1000));
        p.observe(std::slice::from_ref(&n), &[SRC], t(NOW), None);
        // The source failed this time (not fresh): nothing is canceled.
        let c = p.observe(&[], &[], t(NOW + 1), None);
        assert!(c.is_empty());
        assert!(p.has_wants());
        let c = p.observe(&[], &[SRC], t(NOW + 2), None);
        assert!(c.iter().any(|c| matches!(c, Effect::Canceled { .. })));
        assert!(!p.has_wants());
    }

    #[test]
    fn poweroff_goes_before_reboot_and_nothing_runs_after_success() {
        let mut cfg = PolicyConfig::default();
        cfg.set_action(NoticeKind::ScheduledReboot, Action::Reboot);
        cfg.set_at_deadline(vec![]);
        let mut p = Planner::new(cfg);
        let r = notice(NoticeKind::ScheduledReboot, "a-reboot", None);
        let s = notice(NoticeKind::SpotTerminate, "z-spot", None);
        let c = p.observe(&[r.clone(), s.clone()], &[SRC], t(NOW), None);
        assert_eq!(executes(&c), vec![("z-spot".into(), PowerAction::PowerOff)]);
        p.record_result(&nid("z-spot"), true, t(NOW));
        assert!(executes(&p.tick(t(NOW + 100))).is_empty());
        assert!(executes(&p.observe(&[r, s], &[SRC], t(NOW + 101), None)).is_empty());
    }

    #[test]
    fn remembered_ids_are_not_acted_on_again() {
        let mut cfg = PolicyConfig::default();
        cfg.set_action(NoticeKind::ScheduledReboot, Action::Reboot);
        let mut p = Planner::new(cfg);
        p.mark_done([nid("aws/scheduled/e9")]);
        let n = notice(
            NoticeKind::ScheduledReboot,
            "aws/scheduled/e9",
            Some(NOW - 10),
        );
        let c = p.observe(&[n], &[SRC], t(NOW), None);
        assert!(executes(&c).is_empty());
        assert!(matches!(
            c.as_slice(),
            [Effect::Announce {
                already_done: true,
                ..
            }]
        ));
    }

    #[test]
    fn hibernate_and_freeze_never_act_by_default() {
        let mut p = Planner::new(PolicyConfig::default());
        for (i, k) in [
            NoticeKind::SpotHibernate,
            NoticeKind::AzureFreeze,
            NoticeKind::Rebalance,
        ]
        .iter()
        .enumerate()
        {
            let n = notice(*k, &format!("n{i}"), Some(NOW + 5));
            for s in 0..5 {
                assert!(
                    executes(&p.observe(std::slice::from_ref(&n), &[SRC], t(NOW + s), None))
                        .is_empty()
                );
            }
        }
    }

    #[test]
    fn a_kind_change_under_the_same_id_follows_the_new_policy() {
        let mut cfg = PolicyConfig::default();
        cfg.set_action(NoticeKind::ScheduledReboot, Action::Reboot);
        let mut p = Planner::new(cfg);
        let mut n = notice(NoticeKind::ScheduledStop, "e", Some(NOW + 10_000));
        p.observe(
            std::slice::from_ref(&n),
            &[SRC],
            t(NOW),
            Some(Duration::ZERO),
        );
        // Re-listed as a reboot with the same deadline: the action follows.
        n.kind = NoticeKind::ScheduledReboot;
        p.observe(
            std::slice::from_ref(&n),
            &[SRC],
            t(NOW + 1),
            Some(Duration::ZERO),
        );
        assert_eq!(
            executes(&p.tick(t(NOW + 20_000))),
            vec![("e".into(), PowerAction::Reboot)]
        );
        // Re-listed as a kind set to log: the wanted action is withdrawn.
        let mut p = Planner::new(PolicyConfig::default());
        let mut n = notice(NoticeKind::ScheduledStop, "f", Some(NOW + 10_000));
        p.observe(
            std::slice::from_ref(&n),
            &[SRC],
            t(NOW),
            Some(Duration::ZERO),
        );
        n.kind = NoticeKind::ScheduledMaintenance;
        let c = p.observe(
            std::slice::from_ref(&n),
            &[SRC],
            t(NOW + 1),
            Some(Duration::ZERO),
        );
        assert!(
            c.iter().any(|c| matches!(c, Effect::Canceled { .. })),
            "{c:?}"
        );
        assert!(executes(&p.tick(t(NOW + 20_000))).is_empty());
        assert!(!p.has_wants());
    }

    #[test]
    fn action_names_round_trip() {
        for a in Action::ALL {
            assert_eq!(Action::parse(a.name()), Some(a));
        }
        assert_eq!(Action::parse("PowerOff"), Some(Action::PowerOff));
        assert_eq!(Action::parse("explode"), None);
    }
}
