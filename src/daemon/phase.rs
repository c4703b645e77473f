//! The daemon's life as named states, drawn in docs/architecture.md.
//!
//! ```text
//!   Starting ──detect failed──▶ Detecting ──detected──▶ Watching ◀──cancelled── Draining
//!      │                                                 ▲   │                   ▲
//!      └──detected, then the first observation───────────┘   └──power action ────┘
//!                                                              accepted
//! ```
//!
//! Each transition is a method that takes the states it may start from; from any other it
//! leaves the state as it is and says so at debug level (a message out of order is a bug, never
//! a reason to stop watching). Whether nthd sees the metadata service ([`crate::status::Sight`]:
//! seeing, blind, blind to one source) is a state of its own beside this one, since it changes
//! in every phase.

use std::time::Instant;

use crate::notice::Cloud;

/// Where the daemon is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// READY=1 is not sent yet: no observation, and detection has not failed. The cloud may
    /// be known already (the reader sends it before its first observation).
    Starting(Option<Cloud>),
    /// The cloud is not known: detection keeps failing, and nthd sees nothing. READY=1 is sent
    /// (at the first failure), so the unit's start does not wait for a cloud.
    Detecting,
    /// The cloud's metadata service is read; notices are planned and acted on.
    Watching(Cloud),
    /// logind accepted a power action at the instant given: kubelet drains, the drain report
    /// watches, and from [`super::CANCEL_GRACE`] on a cancelled shutdown is looked for.
    Draining(Cloud, Instant),
}

/// What a transition asks of the daemon beyond the new state.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(super) enum Ready {
    /// Send READY=1 now: the first time nthd has something to say.
    Now,
    /// Already sent, or not yet due.
    No,
}

impl Phase {
    /// The cloud, once known.
    pub(super) fn cloud(self) -> Option<Cloud> {
        match self {
            Phase::Starting(cloud) => cloud,
            Phase::Detecting => None,
            Phase::Watching(c) | Phase::Draining(c, _) => Some(c),
        }
    }

    /// When logind accepted the power action being drained for.
    pub(super) fn draining_since(self) -> Option<Instant> {
        match self {
            Phase::Draining(_, since) => Some(since),
            _ => None,
        }
    }

    /// The reader found the cloud.
    pub(super) fn detected(&mut self, cloud: Cloud) {
        *self = match *self {
            Phase::Starting(_) => Phase::Starting(Some(cloud)),
            Phase::Detecting => Phase::Watching(cloud),
            other => return out_of_order("detected", other),
        };
    }

    /// Detection failed (again).
    pub(super) fn detect_failed(&mut self) -> Ready {
        match *self {
            Phase::Starting(None) => {
                *self = Phase::Detecting;
                Ready::Now
            }
            Phase::Detecting => Ready::No,
            other => {
                out_of_order("detect failed", other);
                Ready::No
            }
        }
    }

    /// An observation was made: the first one ends `Starting`.
    pub(super) fn observed(&mut self) -> Ready {
        match *self {
            Phase::Starting(Some(cloud)) => {
                *self = Phase::Watching(cloud);
                Ready::Now
            }
            Phase::Starting(None) | Phase::Detecting => {
                out_of_order("observed", *self);
                Ready::No
            }
            Phase::Watching(_) | Phase::Draining(..) => Ready::No,
        }
    }

    /// logind accepted a power action now (again, when a cancelled one is retried).
    pub(super) fn accepted(&mut self, now: Instant) {
        match *self {
            Phase::Watching(c) | Phase::Draining(c, _) => *self = Phase::Draining(c, now),
            other => out_of_order("accepted", other),
        }
    }

    /// The shutdown logind had accepted was cancelled: watching again.
    pub(super) fn cancelled(&mut self) {
        match *self {
            Phase::Draining(c, _) => *self = Phase::Watching(c),
            other => out_of_order("cancelled", other),
        }
    }
}

/// A transition from a state it may not start from: left as it is.
fn out_of_order(what: &str, from: Phase) {
    tracing::debug!("daemon state: {what} while {from:?}; state left as it is");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_is_sent_once_at_the_first_observation_or_the_first_failure() {
        let mut p = Phase::Starting(None);
        p.detected(Cloud::Aws);
        assert_eq!(p, Phase::Starting(Some(Cloud::Aws)));
        assert_eq!(p.observed(), Ready::Now);
        assert_eq!(p, Phase::Watching(Cloud::Aws));
        assert_eq!(p.observed(), Ready::No);

        let mut p = Phase::Starting(None);
        assert_eq!(p.detect_failed(), Ready::Now);
        assert_eq!(p.detect_failed(), Ready::No);
        assert_eq!(p.cloud(), None);
        p.detected(Cloud::Gcp);
        assert_eq!(p, Phase::Watching(Cloud::Gcp));
        assert_eq!(p.observed(), Ready::No, "READY=1 went at the failure");
    }

    #[test]
    fn a_drain_starts_at_the_acceptance_and_ends_at_a_cancellation() {
        let mut p = Phase::Watching(Cloud::Azure);
        let t0 = Instant::now();
        p.accepted(t0);
        assert_eq!(p.draining_since(), Some(t0));
        assert_eq!(p.cloud(), Some(Cloud::Azure));
        let t1 = t0 + std::time::Duration::from_secs(5);
        p.accepted(t1);
        assert_eq!(
            p,
            Phase::Draining(Cloud::Azure, t1),
            "acting again restarts it"
        );
        p.cancelled();
        assert_eq!(p, Phase::Watching(Cloud::Azure));
        assert_eq!(p.draining_since(), None);
    }

    #[test]
    fn transitions_out_of_order_leave_the_state_as_it_is() {
        for start in [
            Phase::Starting(None),
            Phase::Detecting,
            Phase::Watching(Cloud::Aws),
        ] {
            let mut p = start;
            p.cancelled();
            assert_eq!(p, start);
        }
        let mut p = Phase::Starting(None);
        p.accepted(Instant::now());
        assert_eq!(p, Phase::Starting(None));
        let mut p = Phase::Draining(Cloud::Aws, Instant::now());
        p.detected(Cloud::Gcp);
        assert_eq!(p.cloud(), Some(Cloud::Aws));
        assert_eq!(p.detect_failed(), Ready::No);
    }
}
