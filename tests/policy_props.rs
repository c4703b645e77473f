//! Property tests for src/policy.rs: whatever the metadata services say, in whatever order and
//! at whatever times, and however the power actions turn out, the planner
//!
//! (a) has at most one power action succeed, and executes nothing after one has;
//! (b) executes only notices whose kind is configured to power off or reboot, with exactly
//!     that action (with the default settings never SpotHibernate or AzureFreeze);
//! (c) never executes an id again once it succeeded, nor an id marked done at startup;
//! (d) `decide` never panics, and a deferred time is after `now` and never later than the
//!     notice's deadline;
//! (e) executes a deferred notice only at or after the time it is deferred to;
//! (f) has at most one action in flight: nothing is executed before the last one is reported;
//! (g) withdraws a wanted action when the notice is re-listed as canceled, completed or a kind
//!     not set to power off or reboot: that id is not executed again until it is listed as a
//!     kind that is (unless its action was already in flight when the change came).
//!
//! Observations are random notices (random kinds, ids from a small pool so they collide, random
//! statuses, deadlines from the epoch to the end of `SystemTime`), random fresh-source sets and
//! a clock that only moves forward, by random steps and jumps. Every `Execute` gets a random
//! result through `record_result`, at once or a few steps later.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nthd::testing::notice::{Notice, NoticeId, NoticeKind, NoticeStatus, SourceId, KINDS};
use nthd::testing::policy::{decide, Action, Effect, Planner, PolicyConfig, PowerAction, When};
use proptest::prelude::*;

const SOURCES: [SourceId; 3] = [
    SourceId::new("test/a"),
    SourceId::new("test/b"),
    SourceId::new("test/c"),
];
const IDS: [&str; 6] = ["id/0", "id/1", "id/2", "id/3", "id/4", "id/5"];

/// The latest `SystemTime` Linux can represent.
fn max_time() -> SystemTime {
    UNIX_EPOCH + Duration::new(i64::MAX as u64, 999_999_999)
}

/// The earliest.
fn min_time() -> SystemTime {
    UNIX_EPOCH - Duration::from_secs(i64::MAX as u64)
}

#[derive(Clone, Debug)]
enum Deadline {
    None,
    /// Seconds from the current `now` (negative: already past).
    Relative(i64),
    /// Seconds from the epoch.
    Absolute(u64),
    Min,
    Max,
}

impl Deadline {
    fn resolve(&self, now: SystemTime) -> Option<SystemTime> {
        match *self {
            Deadline::None => None,
            Deadline::Relative(s) if s >= 0 => Some(
                now.checked_add(Duration::from_secs(s as u64))
                    .unwrap_or_else(max_time),
            ),
            Deadline::Relative(s) => Some(
                now.checked_sub(Duration::from_secs(s.unsigned_abs()))
                    .unwrap_or_else(min_time),
            ),
            Deadline::Absolute(s) => Some(UNIX_EPOCH + Duration::from_secs(s)),
            Deadline::Min => Some(min_time()),
            Deadline::Max => Some(max_time()),
        }
    }
}

#[derive(Clone, Debug)]
struct NoticeSpec {
    kind: NoticeKind,
    id: usize,
    source: usize,
    status: NoticeStatus,
    deadline: Deadline,
}

impl NoticeSpec {
    fn build(&self, now: SystemTime) -> Notice {
        Notice {
            kind: self.kind,
            source: SOURCES[self.source],
            id: NoticeId::from_parts(&[IDS[self.id]]),
            event_id: None,
            deadline: self.deadline.resolve(now),
            status: self.status,
            detail: format!("{:?}", self.kind),
            raw: String::new(),
        }
    }
}

#[derive(Clone, Debug)]
enum Step {
    Observe {
        notices: Vec<NoticeSpec>,
        /// Bit i: SOURCES[i] was read successfully.
        fresh: u8,
        budget: Option<Duration>,
    },
    Tick,
    /// Sleep until `next_wakeup()` (if any), then tick.
    Wake,
}

#[derive(Clone, Debug)]
struct Scenario {
    cfg: PolicyConfig,
    /// Ids marked done at startup, as the daemon does from its state file.
    done: Vec<usize>,
    start: SystemTime,
    /// Each step: how far the clock moves first, and what happens.
    steps: Vec<(Duration, Step)>,
    /// Results of the executions, in order: (succeeded, steps until reported).
    results: Vec<(bool, usize)>,
}

fn kind() -> impl Strategy<Value = NoticeKind> {
    (0..KINDS.len()).prop_map(|i| KINDS[i].kind)
}

fn action() -> impl Strategy<Value = Action> {
    (0..Action::ALL.len()).prop_map(|i| Action::ALL[i])
}

fn status() -> impl Strategy<Value = NoticeStatus> {
    prop_oneof![
        6 => Just(NoticeStatus::Active),
        1 => Just(NoticeStatus::Canceled),
        1 => Just(NoticeStatus::Completed),
    ]
}

fn deadline() -> impl Strategy<Value = Deadline> {
    prop_oneof![
        3 => Just(Deadline::None),
        6 => (-600i64..4000).prop_map(Deadline::Relative),
        2 => any::<i64>().prop_map(Deadline::Relative),
        1 => (0u64..4_000_000_000).prop_map(Deadline::Absolute),
        1 => Just(Deadline::Min),
        1 => Just(Deadline::Max),
    ]
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        2 => Just(Duration::ZERO),
        6 => (0u64..600).prop_map(Duration::from_secs),
        1 => (0u64..u64::MAX).prop_map(Duration::from_secs),
        1 => Just(Duration::MAX),
    ]
}

/// The default settings most of the time; otherwise random actions, deadline kinds and times.
fn config() -> impl Strategy<Value = PolicyConfig> {
    prop_oneof![
        1 => Just(PolicyConfig::default()),
        2 => (
            proptest::collection::vec(action(), KINDS.len()),
            proptest::collection::vec(any::<bool>(), KINDS.len()),
            duration(),
            duration(),
            prop_oneof![Just(Duration::from_secs(5)), duration()],
        )
            .prop_map(|(actions, at_deadline, margin, budget, retry)| {
                let mut c = PolicyConfig::default();
                for (k, a) in KINDS.iter().zip(&actions) {
                    c.set_action(k.kind, *a);
                }
                c.set_at_deadline(
                    KINDS
                        .iter()
                        .zip(&at_deadline)
                        .filter(|(_, d)| **d)
                        .map(|(k, _)| k.kind),
                );
                c.margin = margin;
                c.fallback_budget = budget;
                c.retry_delay = retry;
                c
            }),
    ]
}

fn notice() -> impl Strategy<Value = NoticeSpec> {
    (kind(), 0..IDS.len(), 0..SOURCES.len(), status(), deadline()).prop_map(
        |(kind, id, source, status, deadline)| NoticeSpec {
            kind,
            id,
            source,
            status,
            deadline,
        },
    )
}

fn step() -> impl Strategy<Value = (Duration, Step)> {
    let advance = prop_oneof![
        3 => Just(Duration::ZERO),
        6 => (1u64..10).prop_map(Duration::from_secs),
        2 => (0u64..5000).prop_map(Duration::from_millis),
        2 => (10u64..100_000).prop_map(Duration::from_secs),
        1 => any::<u64>().prop_map(Duration::from_secs),
    ];
    let what = prop_oneof![
        6 => (
            proptest::collection::vec(notice(), 0..4),
            0u8..8,
            prop_oneof![Just(None), duration().prop_map(Some)],
        )
            .prop_map(|(notices, fresh, budget)| Step::Observe { notices, fresh, budget }),
        2 => Just(Step::Tick),
        2 => Just(Step::Wake),
    ];
    (advance, what)
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        config(),
        proptest::collection::vec(0..IDS.len(), 0..3),
        prop_oneof![
            8 => (1_000_000_000u64..2_000_000_000).prop_map(|s| UNIX_EPOCH + Duration::from_secs(s)),
            1 => Just(UNIX_EPOCH),
            1 => (0u64..i64::MAX as u64).prop_map(|s| UNIX_EPOCH + Duration::from_secs(s)),
        ],
        proptest::collection::vec(step(), 1..40),
        proptest::collection::vec((any::<bool>(), 0usize..3), 0..12),
    )
        .prop_map(|(cfg, done, start, steps, results)| Scenario {
            cfg,
            done,
            start,
            steps,
            results,
        })
}

/// Checks `decide` on its own and returns nothing: (d).
fn check_decide(cfg: &PolicyConfig, n: &Notice, now: SystemTime, budget: Option<Duration>) {
    let d = decide(cfg, n, now, budget);
    assert!(!d.reason.is_empty());
    if n.status != NoticeStatus::Active {
        assert_eq!(d.action, Action::Ignore, "{n:?}");
        assert_eq!(d.when, When::Now);
        return;
    }
    assert_eq!(d.action, cfg.action(n.kind));
    if let When::At(at) = d.when {
        assert!(d.action.is_power(), "{d:?}");
        assert!(cfg.at_deadline(n.kind), "{d:?} for {:?}", n.kind);
        let deadline = n.deadline.expect("deferred without a deadline");
        assert!(
            at <= deadline,
            "deferred to {at:?}, after the deadline {deadline:?}"
        );
        assert!(at > now, "deferred to {at:?}, not after now {now:?}");
    }
}

/// Runs one scenario and checks every property on every command.
fn run(s: &Scenario) {
    let mut r = Run::new(s);
    for (advance, step) in &s.steps {
        r.now = r.now.checked_add(*advance).unwrap_or(r.now);
        let cmds = r.apply(step);
        r.check_effects(&cmds);
        r.report_result();
    }
}

/// One scenario's planner and what the run has seen so far.
struct Run<'a> {
    cfg: &'a PolicyConfig,
    p: Planner,
    marked: HashSet<NoticeId>,
    now: SystemTime,
    results: std::iter::Copied<std::slice::Iter<'a, (bool, usize)>>,
    /// The execution awaiting its result: (id, steps left until it is reported, succeeded).
    in_flight: Option<(NoticeId, usize, bool)>,
    succeeded: Option<NoticeId>,
    executed: HashMap<NoticeId, u32>,
    /// (g): ids whose latest listing calls for no power action.
    withdrawn: HashSet<NoticeId>,
}

impl<'a> Run<'a> {
    fn new(s: &'a Scenario) -> Self {
        let mut p = Planner::new(s.cfg.clone());
        let marked: HashSet<NoticeId> = s
            .done
            .iter()
            .map(|i| NoticeId::from_parts(&[IDS[*i]]))
            .collect();
        p.mark_done(marked.iter().cloned());
        Run {
            cfg: &s.cfg,
            p,
            marked,
            now: s.start,
            results: s.results.iter().copied(),
            in_flight: None,
            succeeded: None,
            executed: HashMap::new(),
            withdrawn: HashSet::new(),
        }
    }

    /// Gives the planner one step; its commands.
    fn apply(&mut self, step: &Step) -> Vec<Effect> {
        match step {
            Step::Observe {
                notices,
                fresh,
                budget,
            } => self.observe(notices, *fresh, *budget),
            Step::Tick => self.p.tick(self.now),
            Step::Wake => {
                if let Some(t) = self.p.next_wakeup() {
                    self.now = self.now.max(t);
                }
                self.p.tick(self.now)
            }
        }
    }

    /// One observation, each notice checked with `decide` on its own and (g) tracked.
    fn observe(
        &mut self,
        notices: &[NoticeSpec],
        fresh: u8,
        budget: Option<Duration>,
    ) -> Vec<Effect> {
        let (cfg, now) = (self.cfg, self.now);
        let notices: Vec<Notice> = notices.iter().map(|n| n.build(now)).collect();
        for n in &notices {
            check_decide(cfg, n, now, budget);
            let in_flight_now = self.in_flight.as_ref().is_some_and(|f| f.0 == n.id);
            if n.status == NoticeStatus::Active && cfg.action(n.kind).is_power() {
                self.withdrawn.remove(&n.id);
            } else if !in_flight_now {
                self.withdrawn.insert(n.id.clone());
            }
        }
        let fresh: Vec<SourceId> = (0..SOURCES.len())
            .filter(|i| fresh & (1 << i) != 0)
            .map(|i| SOURCES[i])
            .collect();
        self.p.observe(&notices, &fresh, now, budget)
    }

    /// Every property of one step's commands.
    fn check_effects(&mut self, cmds: &[Effect]) {
        let deferred: HashMap<NoticeId, SystemTime> = self
            .p
            .scheduled()
            .into_iter()
            .map(|(n, _, at)| (n.id.clone(), at))
            .collect();
        for c in cmds {
            match c {
                Effect::Scheduled { notice, action, at } => {
                    let now = self.now;
                    // Only the power action set for the notice's kind is ever scheduled.
                    assert_eq!(
                        self.cfg.action(notice.kind).power(),
                        Some(*action),
                        "{notice:?}"
                    );
                    assert!(*at > now, "scheduled at {at:?}, not after now {now:?}");
                    if let Some(d) = notice.deadline {
                        assert!(*at <= d, "scheduled after the deadline");
                    }
                }
                Effect::Execute { notice, action } => {
                    self.check_execute(notice, *action, &deferred);
                }
                _ => {}
            }
        }
        assert!(
            cmds.iter()
                .filter(|c| matches!(c, Effect::Execute { .. }))
                .count()
                <= 1
        );
    }

    /// (a), (b), (c), (e), (f), (g) for one execution, which then is in flight.
    fn check_execute(
        &mut self,
        notice: &Notice,
        action: PowerAction,
        deferred: &HashMap<NoticeId, SystemTime>,
    ) {
        let (id, now, succeeded, in_flight) =
            (&notice.id, self.now, &self.succeeded, &self.in_flight);
        // (a), (c): nothing after a success, never a done id.
        assert!(
            succeeded.is_none(),
            "{id} executed after {succeeded:?} succeeded"
        );
        assert!(!self.marked.contains(id), "{id} was marked done at startup");
        // (f): one at a time.
        assert!(
            in_flight.is_none(),
            "{id} executed while {in_flight:?} in flight"
        );
        // (b): only kinds set to power off or reboot, with the action set for
        // the notice's current kind.
        assert_eq!(
            self.cfg.action(notice.kind).power(),
            Some(action),
            "{id} ({:?}) executed as {action}",
            notice.kind
        );
        // (g): not after the platform re-listed it as nothing to act on.
        assert!(
            !self.withdrawn.contains(id),
            "{id} executed after it was withdrawn"
        );
        // (e): a deferred action runs at or after its time.
        if let Some(at) = deferred.get(id) {
            assert!(*at <= now, "{id} deferred to {at:?} ran at {now:?}");
        }
        *self.executed.entry(id.clone()).or_default() += 1;
        let (ok, delay) = self.results.next().unwrap_or((false, 0));
        self.in_flight = Some((id.clone(), delay, ok));
    }

    /// Reports the result when its time has come.
    fn report_result(&mut self) {
        let now = self.now;
        if let Some((id, left, ok)) = self.in_flight.take() {
            if left == 0 {
                self.p.record_result(&id, ok, now);
                if ok {
                    assert_eq!(
                        self.p.shutting_down().map(|s| s.0.as_str()),
                        Some(id.as_str())
                    );
                    assert!(self.p.is_done(&id));
                    assert!(self.p.next_wakeup().is_none());
                    self.succeeded = Some(id);
                }
            } else {
                self.in_flight = Some((id, left - 1, ok));
            }
        }
        if self.succeeded.is_some() {
            assert!(self.p.tick(now).is_empty());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// (a)–(f) for random settings and random sequences of observations.
    #[test]
    fn planner_properties_hold(s in scenario()) {
        run(&s);
    }

    /// (d) on its own, over every kind, setting and time.
    #[test]
    fn decide_never_defers_past_the_deadline(
        cfg in config(),
        n in notice(),
        now in prop_oneof![
            (0u64..4_000_000_000).prop_map(|s| UNIX_EPOCH + Duration::from_secs(s)),
            Just(UNIX_EPOCH),
            Just(max_time()),
            Just(min_time()),
        ],
        budget in prop_oneof![Just(None), duration().prop_map(Some)],
    ) {
        check_decide(&cfg, &n.build(now), now, budget);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// (b) with the default settings: hibernation and freezes never power off, whatever else
    /// is going on, and whatever their deadlines.
    #[test]
    fn default_policy_never_acts_on_hibernate_or_freeze(
        mut s in scenario(),
        hibernate in any::<bool>(),
    ) {
        s.cfg = PolicyConfig::default();
        let harmless = if hibernate { NoticeKind::SpotHibernate } else { NoticeKind::AzureFreeze };
        for (_, step) in &mut s.steps {
            if let Step::Observe { notices, .. } = step {
                for n in notices.iter_mut() {
                    n.kind = harmless;
                }
            }
        }
        let mut p = Planner::new(PolicyConfig::default());
        let mut now = s.start;
        for (advance, step) in &s.steps {
            now = now.checked_add(*advance).unwrap_or(now);
            let cmds = match step {
                Step::Observe { notices, fresh, budget } => {
                    let notices: Vec<Notice> = notices.iter().map(|n| n.build(now)).collect();
                    let fresh: Vec<SourceId> = (0..SOURCES.len())
                        .filter(|i| fresh & (1 << i) != 0)
                        .map(|i| SOURCES[i])
                        .collect();
                    p.observe(&notices, &fresh, now, *budget)
                }
                Step::Tick | Step::Wake => p.tick(now),
            };
            prop_assert!(
                !cmds.iter().any(|c| matches!(
                    c,
                    Effect::Execute { .. } | Effect::Scheduled { .. }
                )),
                "{harmless:?}: {cmds:?}"
            );
            prop_assert!(!p.has_wants());
        }
        run(&s);
    }
}

/// Found while writing these properties (fixed since): when a notice keeps its id but changes
/// kind, and the deferred time stays the same, the wanted action must follow the new kind: a
/// scheduled event re-listed as a reboot (set to `reboot`) is carried out as a reboot.
#[test]
fn kind_change_under_the_same_id_updates_the_action() {
    let mut cfg = PolicyConfig::default();
    cfg.set_action(NoticeKind::ScheduledReboot, Action::Reboot);
    let mut p = Planner::new(cfg.clone());
    let t = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
    let mut n = NoticeSpec {
        kind: NoticeKind::ScheduledStop,
        id: 0,
        source: 0,
        status: NoticeStatus::Active,
        deadline: Deadline::Absolute(10_000),
    };
    p.observe(
        &[n.build(t(1000))],
        &[SOURCES[0]],
        t(1000),
        Some(Duration::ZERO),
    );
    n.kind = NoticeKind::ScheduledReboot;
    p.observe(
        &[n.build(t(1001))],
        &[SOURCES[0]],
        t(1001),
        Some(Duration::ZERO),
    );
    let cmds = p.tick(t(20_000));
    let Some(Effect::Execute { notice, action }) = cmds.first() else {
        panic!("nothing executed: {cmds:?}");
    };
    assert_eq!(notice.kind, NoticeKind::ScheduledReboot);
    assert_eq!(Some(*action), cfg.action(notice.kind).power(), "{notice:?}");
}
