//! The drain report: how every shutdown's drain went, told before the machine goes down.
//!
//! nthd holds its own `delay` inhibitor lock on `shutdown` from start-up ([`watch`]). When a
//! shutdown begins (`PrepareForShutdown(true)`, nthd's own or anyone's) it polls
//! `ListInhibitors` until no other delay lock on `shutdown` is left (kubelet released its lock:
//! the drain fit) or until logind's budget (`InhibitDelayMaxUSec`) is nearly spent (logind
//! goes ahead anyway and kills what still runs). Then it tells the daemon, which writes the
//! [`Report`] to the journal, the status file, the metrics textfile and the webhooks, and it
//! releases its lock. Its own lock holds the shutdown back at most [`AFTER_LAST`] after the
//! last other lock went, and never past logind's budget.
//!
//! This module knows logind and the pod layout; it knows nothing of the outputs (the daemon
//! owns them), so the report goes out the same way as every other event.

pub(crate) mod pods;
pub(crate) mod watch;

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::logind::Inhibitor;
use crate::timefmt;

pub(crate) use pods::PodsLeft;

/// journald MESSAGE_ID of a drain report, stable across releases: `journalctl -b -1
/// MESSAGE_ID=...` tells how the last boot's drain went.
pub(crate) const MSG_DRAINED: &str = "3c9e1f4a6b2d4e8f9a7c5b3d1e0f2a4c";

/// How often `ListInhibitors` is read while a drain is under way: the report sees a release
/// this late at most. logind sends no signal when a lock goes.
pub(crate) const POLL: Duration = Duration::from_millis(200);

/// The longest nthd's own lock holds the shutdown back after the last other delay lock went:
/// one poll, the report and (when on) the Auto Scaling completion, all within this.
pub(crate) const AFTER_LAST: Duration = Duration::from_millis(2000);

/// How long before logind's budget runs out nthd stops waiting, so the report is sent while
/// the machine is still up: a fifth of the budget, at least 0.5 s and at most 2 s.
pub(crate) fn margin(budget: Duration) -> Duration {
    (budget / 5).clamp(Duration::from_millis(500), Duration::from_secs(2))
}

/// What follows the drain of an Auto Scaling termination, while nthd still holds its lock:
/// completing the lifecycle action (src/asg/ implements it; the daemon hands it over). It is a
/// trait so that this module depends on logind alone.
pub(crate) trait Finish: Send + 'static {
    /// Reads what the completion needs (credentials, region, group), while the drain runs.
    fn prepare(&mut self) -> impl std::future::Future<Output = Result<(), String>> + Send;
    /// How often to send a lifecycle heartbeat while a drain of `budget` runs, if at all.
    fn heartbeat_every(&self, budget: Duration) -> Option<Duration>;
    /// One heartbeat; the error in an operator's words.
    fn heartbeat(&mut self) -> impl std::future::Future<Output = Result<(), String>> + Send;
    /// Completes the action, retrying until `until`; what happened, in an operator's words.
    fn complete(
        &mut self,
        until: std::time::Instant,
    ) -> impl std::future::Future<Output = Result<String, String>> + Send;
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// Every other delay lock on shutdown was released: the drain fit the budget.
    Released,
    /// A delay lock was still held when the budget was nearly spent: logind goes ahead and
    /// kills what still runs.
    BudgetExhausted,
}

impl Outcome {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Outcome::Released => "released",
            Outcome::BudgetExhausted => "budget_exhausted",
        }
    }
}

/// One delay lock on shutdown (other than nthd's) held when the drain began or during it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Holder {
    /// As logind names it (`kubelet`).
    pub(crate) who: String,
    pub(crate) why: String,
    pub(crate) pid: u32,
    pub(crate) uid: u32,
    /// Seconds after the shutdown began that it was seen released; `None`: still held.
    pub(crate) released_s: Option<f64>,
}

impl Holder {
    fn of(i: &Inhibitor) -> Holder {
        Holder {
            who: crate::logging::clean(&i.who, 64),
            why: crate::logging::clean(&i.why, 160),
            pid: i.pid,
            uid: i.uid,
            released_s: None,
        }
    }
}

/// The most lock holders a report names; the others are counted ([`Holders::more`]). Any local
/// user may take up to 8,192 delay locks: the report stays small, and each read costs one pass.
pub(crate) const MAX_HOLDERS: usize = 32;

/// The holders of delay locks seen during one drain: the first [`MAX_HOLDERS`] by name, and
/// how many more were held at once at most.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Holders {
    pub(crate) list: Vec<Holder>,
    pub(crate) more: u32,
}

impl Holders {
    /// Brought up to date with one `ListInhibitors` read `at` into the drain: new ones are
    /// added (while there is room, else counted), the ones no longer listed are marked
    /// released. A holder is a process, user and name: its several locks count once. kubelet
    /// comes first, so it is named however many others hold locks. Each `who` is cleaned once,
    /// and each lookup is a hash lookup.
    pub(crate) fn track(&mut self, now_held: &[&Inhibitor], at: Duration) {
        let mut cleaned: Vec<Holder> = now_held.iter().map(|i| Holder::of(i)).collect();
        cleaned.sort_by_key(|h| !h.who.to_ascii_lowercase().contains("kubelet"));
        let mut held = HashSet::new();
        cleaned.retain(|h| held.insert((h.pid, h.uid, h.who.clone())));
        for h in &mut self.list {
            if h.released_s.is_none() && !held.contains(&(h.pid, h.uid, h.who.clone())) {
                h.released_s = Some(secs(at));
            }
        }
        let tracked: HashSet<(u32, u32, String)> = self
            .list
            .iter()
            .filter(|h| h.released_s.is_none())
            .map(|h| (h.pid, h.uid, h.who.clone()))
            .collect();
        let mut untracked = 0u32;
        for h in cleaned {
            if tracked.contains(&(h.pid, h.uid, h.who.clone())) {
                continue;
            }
            match self.list.len() < MAX_HOLDERS {
                true => self.list.push(h),
                false => untracked = untracked.saturating_add(1),
            }
        }
        self.more = self.more.max(untracked);
    }
}

/// The notice nthd acted on, as the daemon shares it with the watcher.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Followed {
    pub(crate) kind: &'static str,
    pub(crate) id: String,
    pub(crate) action: &'static str,
    pub(crate) deadline: Option<SystemTime>,
    /// When logind accepted nthd's request.
    pub(crate) accepted: SystemTime,
    /// An Auto Scaling termination: the lifecycle action may be completed after the drain.
    pub(crate) asg_terminate: bool,
}

impl Followed {
    /// Whether the shutdown that began at `started` is the one nthd asked for: logind emits
    /// `PrepareForShutdown` while it handles the request, so the two are within moments.
    pub(crate) fn started(&self, started: SystemTime) -> bool {
        let gap = match self.accepted.duration_since(started) {
            Ok(d) => d,
            Err(e) => e.duration(),
        };
        gap <= Duration::from_secs(10)
    }
}

/// What the report says of the notice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct NoticeData {
    pub(crate) kind: String,
    pub(crate) id: String,
    pub(crate) action: String,
    pub(crate) deadline: Option<String>,
    /// Seconds from the end of the drain to the notice's deadline (negative: past it).
    pub(crate) seconds_left: Option<f64>,
    /// A fire drill (`nthd simulate --yes`), not a notice from the platform; absent when not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) drill: bool,
}

/// Finds the fire drill, run from another process, whose power-off began the shutdown that
/// started at the given moment.
pub(crate) type DrillFinder = Box<dyn Fn(SystemTime) -> Option<Followed> + Send + Sync>;

/// One shutdown's drain report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Report {
    /// When the shutdown began (`PrepareForShutdown(true)`), RFC 3339.
    pub(crate) started: String,
    /// Seconds from the start until the last other delay lock went; at `budget_exhausted`, the
    /// whole budget, which logind waited out.
    pub(crate) held_s: f64,
    /// logind's `InhibitDelayMaxUSec`, in seconds.
    pub(crate) budget_s: f64,
    pub(crate) outcome: Outcome,
    /// The first [`MAX_HOLDERS`] holders of delay locks seen.
    pub(crate) holders: Vec<Holder>,
    /// How many more held a delay lock at once, at most, beyond those listed; absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) holders_more: u32,
    /// `namespace/name` of the pods still running when the drain ended; absent when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pods_left: Option<Vec<String>>,
    /// Why `pods_left` is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pods_left_unknown: Option<String>,
    /// The notice the shutdown followed; `null` when it was not nthd's.
    pub(crate) notice: Option<NoticeData>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Seconds with one decimal.
fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 10.0).round() / 10.0
}

/// The delay locks on shutdown other than nthd's own.
pub(crate) fn others(list: &[Inhibitor]) -> Vec<&Inhibitor> {
    list.iter()
        .filter(|i| i.delays_shutdown() && !i.is_nthds())
        .collect()
}

/// The parts of a report, put together once the drain ended.
pub(crate) struct Ended {
    pub(crate) started: SystemTime,
    pub(crate) held: Duration,
    pub(crate) budget: Duration,
    pub(crate) outcome: Outcome,
    pub(crate) holders: Holders,
    pub(crate) pods: PodsLeft,
    pub(crate) followed: Option<Followed>,
    pub(crate) now: SystemTime,
}

impl Report {
    pub(crate) fn new(e: Ended) -> Report {
        let (pods_left, pods_left_unknown) = match e.pods {
            PodsLeft::Known(p) => (Some(p), None),
            PodsLeft::Unknown(why) => (None, Some(why)),
        };
        let notice = e
            .followed
            .filter(|f| f.started(e.started))
            .map(|f| NoticeData {
                drill: crate::notice::NoticeId::from_parts(&[&f.id]).is_drill(),
                kind: f.kind.to_string(),
                id: f.id,
                action: f.action.to_string(),
                deadline: f.deadline.map(timefmt::format_rfc3339),
                seconds_left: f.deadline.map(|d| match d.duration_since(e.now) {
                    Ok(left) => secs(left),
                    Err(past) => -secs(past.duration()),
                }),
            });
        Report {
            started: timefmt::format_rfc3339(e.started),
            held_s: secs(e.held),
            budget_s: secs(e.budget),
            outcome: e.outcome,
            holders: e.holders.list,
            holders_more: e.holders.more,
            pods_left,
            pods_left_unknown,
            notice,
        }
    }

    /// The report in one sentence, for the journal, `nthd status` and the Slack format.
    /// Who held the drain: when it was released, every holder; when the budget ran out, who
    /// still held it at the end, then who had released and when.
    fn holders_text(&self) -> String {
        let more = match self.holders_more {
            0 => String::new(),
            n => format!(" and up to {n} more"),
        };
        // Released: everyone who held it; out of budget: who still held it at the end.
        let still: Vec<&str> = self
            .holders
            .iter()
            .filter(|h| self.outcome == Outcome::Released || h.released_s.is_none())
            .map(|h| h.who.as_str())
            .collect();
        let mut t = match (still.is_empty(), self.holders_more) {
            (true, 0) => "no other delay lock was held".to_string(),
            (true, n) => format!("held by up to {n} holders not named"),
            (false, _) => format!("held by {}{more}", still.join(", ")),
        };
        if self.outcome == Outcome::BudgetExhausted {
            let gone: Vec<String> = self
                .holders
                .iter()
                .filter_map(|h| h.released_s.map(|at| format!("{} at {at:.1} s", h.who)))
                .collect();
            if !gone.is_empty() {
                t.push_str(&format!("; released: {}", gone.join(", ")));
            }
        }
        t
    }

    pub(crate) fn sentence(&self) -> String {
        let who = self.holders_text();
        let mut s = match self.outcome {
            Outcome::Released => format!(
                "drain released after {:.1} s of the {:.1} s budget ({who})",
                self.held_s, self.budget_s
            ),
            Outcome::BudgetExhausted => format!(
                "drain budget exhausted: still held after {:.1} s of the {:.1} s budget ({who}); \
                 logind goes ahead and what still runs is killed",
                self.held_s, self.budget_s
            ),
        };
        s.push_str(&match (&self.pods_left, &self.pods_left_unknown) {
            (Some(p), _) if p.is_empty() => "; no pods left running".to_string(),
            (Some(p), _) => format!("; pods still running: {}", p.join(", ")),
            (None, Some(why)) => format!("; pods left unknown: {why}"),
            (None, None) => String::new(),
        });
        s.push_str(&match &self.notice {
            Some(n) if n.drill => format!(
                "; it followed a fire drill (nthd simulate {}) {}",
                n.kind, n.id
            ),
            Some(n) => format!(
                "; it followed {} {}{}",
                n.kind,
                n.id,
                n.seconds_left
                    .map_or(String::new(), |l| format!(", {l:.0} s before its deadline"))
            ),
            None => "; not a shutdown nthd asked for".to_string(),
        });
        s
    }
}

#[cfg(test)]
mod tests;
