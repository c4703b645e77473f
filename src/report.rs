//! What follows from a power action, applied in one place for the daemon and a fire drill
//! alike: the journald line, the metrics, the status file's `actions`, the webhook's action
//! event. The executor only returns the [`ActionRecord`]; [`apply`] carries out its effects.
//! A drill's record is marked as such in each of them (see [`ActionRecord::drill`]).

use std::path::Path;

use crate::executor::ActionRecord;
use crate::metrics::Metrics;
use crate::notice::Notice;
use crate::policy::{Action, Decision};
use crate::status::{self, Moment, Tracker};
use crate::webhook::{Event, Webhooks};

/// Where the status file's line for an action goes.
pub(crate) enum StatusOut<'a> {
    /// The daemon's tracker, which writes the file at its next update.
    Daemon(&'a mut Tracker),
    /// A drill's: added to the daemon's file at this path, if there is one
    /// ([`status::shared::add_drill_action`]).
    Drill(&'a Path),
}

/// Applies everything that follows from `rec`. Webhook delivery is only queued: it never holds
/// up or fails anything.
pub(crate) fn apply(
    rec: &ActionRecord,
    metrics: &mut Metrics,
    status: StatusOut<'_>,
    hooks: &Webhooks,
) {
    rec.log();
    metrics.action(rec.notice.kind, rec.action, rec.outcome.label());
    let view = status::action_view(rec);
    match status {
        StatusOut::Daemon(tracker) => tracker.action(view),
        StatusOut::Drill(path) => drill_status(path, view),
    }
    if let Some(result) = rec.outcome.for_webhook() {
        let event = Event::action(&rec.notice, rec.action, result);
        hooks.send(event.with_refusal(rec.outcome.refusal()));
    }
}

/// Sends the notice event of an announced notice, unless the policy ignores it. A notice
/// re-announced after a restart gets the same event id: receivers deduplicate.
pub(crate) fn announce(hooks: &Webhooks, n: &Notice, d: &Decision) {
    if d.action != Action::Ignore {
        hooks.send(Event::notice(n, d));
    }
}

/// Lists a drill's action in the daemon's status file; says so when it cannot.
fn drill_status(path: &Path, view: status::ActionView) {
    match status::shared::add_drill_action(path, view) {
        Ok(true) => tracing::info!("the fire drill is listed in {}", path.display()),
        Ok(false) => tracing::info!(
            "no status file at {}: the fire drill is listed in none",
            path.display()
        ),
        Err(e) => tracing::warn!("the fire drill is not listed in the status file: {e}"),
    }
}

/// Everyone who hears of what the daemon learns and does: the metrics, the status file and the
/// webhooks. The daemon tells it once (the cloud, the instance, an action) and each takes its
/// part, instead of the daemon copying each fact to each of them.
pub(crate) struct Outputs {
    /// The metrics (`/metrics`, the textfile).
    pub(crate) metrics: Metrics,
    /// The status file.
    pub(crate) status: Tracker,
    /// Webhook delivery (a no-op without `NTHD_WEBHOOK`, or while a setup error disables it);
    /// never waited on before an action.
    pub(crate) webhooks: crate::extras::WebhookSlot,
}

impl Outputs {
    /// The cloud was found (`how`), and what is watched on it.
    pub(crate) fn cloud(&mut self, cloud: crate::notice::Cloud, how: &str, watching: &str) {
        self.metrics.set_provider(cloud);
        self.status.set_cloud(cloud, how, watching);
        self.webhooks.update_context(|c| c.cloud = Some(cloud));
    }

    /// Reads made: `obs`'s sources read `n` times each, the last at `at`. The one route of every
    /// read into the metrics and the status, whether the reader sent it or kept it.
    pub(crate) fn reads(&mut self, obs: &crate::provider::Observation, n: u64, at: Moment) {
        self.metrics.reads(obs, n, at.wall);
        self.status.observation(obs, at);
    }

    /// The metadata service described the machine.
    pub(crate) fn identity(&mut self, id: crate::notice::Identity) {
        self.metrics.set_identity(&id);
        self.status.set_identity(&id);
        self.webhooks.update_context(|c| c.identity = id);
    }

    /// A power action the daemon carried out (or not): [`apply`].
    pub(crate) fn action(&mut self, rec: &ActionRecord) {
        let status = StatusOut::Daemon(&mut self.status);
        apply(rec, &mut self.metrics, status, self.webhooks.hooks());
    }
}
