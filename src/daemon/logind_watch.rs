//! The daemon's watch of logind: whether this user may power off (with the fix when not), the
//! drain budget every minute, whether an accepted shutdown was cancelled, and whether PID 1 is
//! stopping before an acknowledgement. Only logind's bounded reads get here
//! ([`crate::logind::Reads`], each within [`crate::logind::READ_TIMEOUT`]); the daemon keeps
//! what it learns and only calls these.

use std::time::{Duration, Instant};

use crate::logind::{Grant, Inhibitor, LogindError, Reads, SystemState};
use crate::policy::PowerAction;

/// How often the daemon rereads logind's drain budget (`InhibitDelayMaxUSec`).
pub(super) const BUDGET_EVERY: Duration = Duration::from_secs(60);

/// Whether the budget read at `read_at` (never, when `None`) is due again.
pub(super) fn budget_due(read_at: Option<Instant>) -> bool {
    read_at.is_none_or(|t| t.elapsed() >= BUDGET_EVERY)
}

/// What is pinged before each read: systemd's watchdog in the daemon.
pub(super) trait Ping: Sync {
    fn ping(&self);
}

impl Ping for super::Watchdog {
    fn ping(&self) {
        super::Watchdog::ping(self);
    }
}

/// logind's reads, each after a watchdog ping: a read may take its whole timeout.
pub(super) struct Watch<'a> {
    reads: Reads<'a>,
    pinger: &'a dyn Ping,
}

impl<'a> Watch<'a> {
    pub(super) fn new(reads: Reads<'a>, pinger: &'a dyn Ping) -> Watch<'a> {
        Watch { reads, pinger }
    }

    fn ping(&self) {
        self.pinger.ping();
    }

    /// Asks whether this user may carry out each action and warns with the fix for each
    /// logind would refuse. False when logind did not answer (ask again at the next read).
    pub(super) async fn check_grant(&mut self, actions: &[PowerAction]) -> bool {
        for &action in actions {
            self.ping();
            match self.reads.can(action).await {
                Ok(Grant::Yes) => {}
                Ok(answer) => {
                    self.ping();
                    let holders = match self.reads.list_inhibitors().await {
                        Ok(l) => l.into_iter().filter(Inhibitor::blocks_shutdown).collect(),
                        Err(_) => Vec::new(),
                    };
                    tracing::warn!("{}", cannot_message(action, &answer, &holders));
                }
                Err(_) => return false,
            }
        }
        true
    }

    /// logind's drain budget, through the same bounded read as `once`, `simulate` and `check`.
    pub(super) async fn budget(&mut self) -> Result<Duration, LogindError> {
        self.ping();
        self.reads.inhibit_delay_max().await
    }

    /// Whether a shutdown logind accepted was cancelled: logind is no longer preparing for it
    /// while PID 1 is not stopping. Unknown counts as not cancelled (nthd then does nothing).
    pub(super) async fn shutdown_cancelled(&mut self) -> bool {
        self.ping();
        if !matches!(self.reads.preparing_for_shutdown().await, Ok(false)) {
            return false;
        }
        self.ping();
        !matches!(self.reads.system_state().await, Ok(SystemState::Stopping))
    }

    /// PID 1's `SystemState`.
    pub(super) async fn system_state(&mut self) -> Result<SystemState, LogindError> {
        self.ping();
        self.reads.system_state().await
    }
}

/// Why logind would not carry out `action` for this user: a block inhibitor's holders when
/// there are some (then the polkit rule is not the problem), else the polkit fix.
fn cannot_message(action: PowerAction, answer: &Grant, holders: &[Inhibitor]) -> String {
    let method = action.can_method();
    let answer_s = answer.as_str();
    if !holders.is_empty() {
        return format!(
            "logind {method} answers {answer_s:?}: {} holds a block inhibitor on shutdown. A \
             notice's drain cannot start until it is released; nthd never overrides it (it \
             is not granted power-off-ignore-inhibit) and retries until it is",
            crate::logind::describe_holders(holders)
        );
    }
    let why = answer.problem().unwrap_or("");
    format!(
        "logind {method} answers {answer_s:?} for this user ({why}): polkit will refuse {}. \
         Install /usr/share/polkit-1/rules.d/50-nthd.rules (or the .pkla on polkit 0.105), \
         run nthd as user nthd, and check with: sudo -u nthd nthd check",
        crate::logind::polkit_action(action)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logind::Logind;
    use nthd_testkit::logind::{FakeLogind, HungLogind, PrivateBus};
    use nthd_testkit::systemd::FakeSystemd;
    use std::sync::atomic::{AtomicUsize, Ordering};

    impl Ping for AtomicUsize {
        fn ping(&self) {
            self.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn the_budget_is_due_first_and_then_every_minute() {
        assert!(budget_due(None));
        assert!(!budget_due(Some(Instant::now())));
        let long_ago = Instant::now().checked_sub(BUDGET_EVERY).unwrap();
        assert!(budget_due(Some(long_ago)));
    }

    #[test]
    fn a_refusal_names_the_block_holder_or_else_the_polkit_rule() {
        let holder = Inhibitor {
            what: "shutdown".into(),
            who: "backup".into(),
            why: "nightly".into(),
            mode: "block".into(),
            uid: 0,
            pid: 812,
        };
        let blocked = cannot_message(PowerAction::PowerOff, &Grant::Challenge, &[holder]);
        assert!(blocked.contains("backup") && blocked.contains("block inhibitor"));
        assert!(!blocked.contains("50-nthd.rules"), "{blocked}");
        let denied = cannot_message(PowerAction::Reboot, &Grant::from("no"), &[]);
        assert!(denied.contains("CanReboot answers \"no\""), "{denied}");
        assert!(denied.contains("polkit denies it outright"), "{denied}");
        assert!(denied.contains("login1.reboot"), "{denied}");
    }

    #[tokio::test]
    async fn grant_budget_and_cancellation_come_from_logind_with_a_ping_each() {
        let bus = PrivateBus::start().unwrap();
        let fake = FakeLogind::serve(bus.address()).await.unwrap();
        let systemd = FakeSystemd::serve(bus.address()).await.unwrap();
        fake.set_inhibit_delay_max(Duration::from_secs(42));
        fake.set_can_power_off("challenge");
        systemd.set_system_state("running");
        let mut logind = Logind::at(bus.address());
        let pings = AtomicUsize::new(0);
        let mut w = Watch::new(logind.reads(), &pings);
        assert_eq!(w.budget().await, Ok(Duration::from_secs(42)));
        assert!(
            w.check_grant(&[PowerAction::PowerOff]).await,
            "logind answered"
        );
        fake.set_preparing(false);
        assert!(w.shutdown_cancelled().await, "not preparing, not stopping");
        systemd.set_system_state("stopping");
        assert!(!w.shutdown_cancelled().await, "PID 1 is stopping");
        fake.set_preparing(true);
        assert!(!w.shutdown_cancelled().await, "still preparing");
        assert_eq!(w.system_state().await, Ok(SystemState::Stopping));
        assert_eq!(
            pings.load(Ordering::Relaxed),
            9,
            "one ping before every read"
        );
    }

    #[tokio::test]
    async fn a_hung_logind_answers_with_the_bound_and_the_method() {
        let bus = PrivateBus::start().unwrap();
        let _hung = HungLogind::take_name(bus.address()).unwrap();
        let mut logind = Logind::at(bus.address());
        let pings = AtomicUsize::new(0);
        let mut w = Watch::new(logind.reads(), &pings);
        let started = Instant::now();
        let e = w.budget().await.unwrap_err();
        assert!(started.elapsed() < crate::logind::READ_TIMEOUT + Duration::from_secs(2));
        assert_eq!(e, crate::logind::no_answer("Get InhibitDelayMaxUSec"));
        assert!(!w.check_grant(&[PowerAction::PowerOff]).await, "no answer");
    }
}
