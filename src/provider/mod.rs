//! Cloud providers: each turns its metadata service's answers into typed [`Notice`]s.
//!
//! One file per cloud, all behind the [`Provider`] trait. The base URL and the HTTP client are
//! injected through each constructor so tests can point them at a mock.

pub mod alibaba;
pub mod aws;
pub mod azure;
pub mod detect;
pub mod gcp;
pub mod tencent;

use std::fmt;
use std::future::Future;
use std::time::{Instant, SystemTime};

use crate::imds::ImdsError;
use crate::policy::Action;

/// The clouds nthd knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cloud {
    Aws,
    Gcp,
    Azure,
    Alibaba,
    Tencent,
}

impl Cloud {
    pub const ALL: [Cloud; 5] = [
        Cloud::Aws,
        Cloud::Gcp,
        Cloud::Azure,
        Cloud::Alibaba,
        Cloud::Tencent,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Gcp => "gcp",
            Cloud::Azure => "azure",
            Cloud::Alibaba => "alibaba",
            Cloud::Tencent => "tencent",
        }
    }

    /// The default metadata endpoint of this cloud. Tencent's is a host name: its documentation
    /// gives no address, so nthd resolves the name through the node's DNS.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Cloud::Alibaba => "http://100.100.100.200",
            Cloud::Tencent => "http://metadata.tencentyun.com",
            Cloud::Aws | Cloud::Gcp | Cloud::Azure => "http://169.254.169.254",
        }
    }

    /// The notice with the shortest lead time, for messages.
    pub fn shortest_notice(self) -> &'static str {
        match self {
            Cloud::Aws => "the AWS spot instance-action notice",
            Cloud::Gcp => "the GCP preemption notice",
            Cloud::Azure => "the Azure Preempt Scheduled Event",
            Cloud::Alibaba => "the Alibaba Cloud spot termination notice",
            Cloud::Tencent => "the Tencent Cloud spot termination notice",
        }
    }

    /// The shortest lead time the platform promises before it acts on an interruption.
    pub fn notice_lead_time(self) -> std::time::Duration {
        std::time::Duration::from_secs(match self {
            Cloud::Aws => 120,
            Cloud::Gcp => 30,
            Cloud::Azure => 30,
            Cloud::Alibaba => 300,
            // Not documented: the Tencent spot pages we could read give no lead time. nthd
            // assumes 2 minutes (AWS's spot notice), not Alibaba's 5: if the real notice is
            // longer, the drain is only shorter than it could have been. At run time the
            // notice's own termination-time is the deadline.
            Cloud::Tencent => 120,
        })
    }
}

impl fmt::Display for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a notice announces. Each kind has its own action setting (`--action-<name>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NoticeKind {
    SpotTerminate,
    SpotStop,
    SpotHibernate,
    Rebalance,
    AsgTerminate,
    AsgOther,
    ScheduledStop,
    ScheduledReboot,
    ScheduledMaintenance,
    GcpPreempt,
    GcpTerminateMaintenance,
    GcpMigrate,
    AzurePreempt,
    AzureTerminate,
    AzureReboot,
    AzureRedeploy,
    AzureFreeze,
    AlibabaSpot,
    TencentSpot,
    Unknown,
}

/// Static facts about a notice kind: its setting name, flag, environment variable and default.
pub struct KindInfo {
    pub kind: NoticeKind,
    pub name: &'static str,
    pub flag: &'static str,
    pub env: &'static str,
    pub default_action: Action,
    /// Whether a power action for this kind waits for the last safe moment by default.
    pub at_deadline: bool,
    pub help: &'static str,
}

macro_rules! kinds {
    ($( $kind:ident, $name:literal, $env:literal, $act:ident, $dl:literal, $help:literal; )*) => {
        /// Every kind, in documentation order.
        pub const KINDS: &[KindInfo] = &[
            $( KindInfo {
                kind: NoticeKind::$kind,
                name: $name,
                flag: concat!("action-", $name),
                env: concat!("NTHD_ACTION_", $env),
                default_action: Action::$act,
                at_deadline: $dl,
                help: $help,
            }, )*
        ];
    };
}

kinds! {
    SpotTerminate, "spot-terminate", "SPOT_TERMINATE", PowerOff, false,
        "AWS spot instance-action `terminate` (about 2 minutes ahead)";
    SpotStop, "spot-stop", "SPOT_STOP", PowerOff, false,
        "AWS spot instance-action `stop`";
    SpotHibernate, "spot-hibernate", "SPOT_HIBERNATE", Log, false,
        "AWS spot instance-action `hibernate` (powering off would break hibernation)";
    Rebalance, "rebalance", "REBALANCE", Log, false,
        "AWS rebalance recommendation (elevated interruption risk, not a notice)";
    AsgTerminate, "asg-terminate", "ASG_TERMINATE", PowerOff, false,
        "AWS Auto Scaling target-lifecycle-state `Terminated` / `Warmed:Terminated`";
    AsgOther, "asg-other", "ASG_OTHER", Log, false,
        "AWS Auto Scaling target-lifecycle-state other than InService (Standby, Detached, Warmed:*)";
    ScheduledStop, "scheduled-stop", "SCHEDULED_STOP", PowerOff, true,
        "AWS scheduled event `instance-stop` or `instance-retirement`";
    ScheduledReboot, "scheduled-reboot", "SCHEDULED_REBOOT", Log, true,
        "AWS scheduled event `instance-reboot` or `system-reboot`";
    ScheduledMaintenance, "scheduled-maintenance", "SCHEDULED_MAINTENANCE", Log, true,
        "AWS scheduled event `system-maintenance`";
    GcpPreempt, "gcp-preempt", "GCP_PREEMPT", PowerOff, false,
        "GCP `instance/preempted` = TRUE (about 30 seconds ahead)";
    GcpTerminateMaintenance, "gcp-terminate-maintenance", "GCP_TERMINATE_MAINTENANCE", PowerOff, true,
        "GCP `instance/maintenance-event` = TERMINATE_ON_HOST_MAINTENANCE (at the last safe moment before instance/upcoming-maintenance's start, else at once)";
    GcpMigrate, "gcp-migrate", "GCP_MIGRATE", Log, false,
        "GCP `instance/maintenance-event` = MIGRATE_ON_HOST_MAINTENANCE (live migration)";
    AzurePreempt, "azure-preempt", "AZURE_PREEMPT", PowerOff, false,
        "Azure Scheduled Event `Preempt` for this VM (at least 30 seconds ahead)";
    AzureTerminate, "azure-terminate", "AZURE_TERMINATE", PowerOff, false,
        "Azure Scheduled Event `Terminate` for this VM";
    AzureReboot, "azure-reboot", "AZURE_REBOOT", Log, true,
        "Azure Scheduled Event `Reboot` for this VM";
    AzureRedeploy, "azure-redeploy", "AZURE_REDEPLOY", Log, true,
        "Azure Scheduled Event `Redeploy` for this VM";
    AzureFreeze, "azure-freeze", "AZURE_FREEZE", Log, false,
        "Azure Scheduled Event `Freeze` (a pause of seconds, never a reason to power off)";
    AlibabaSpot, "alibaba-spot", "ALIBABA_SPOT", PowerOff, false,
        "Alibaba Cloud spot termination-time (about 5 minutes ahead)";
    TencentSpot, "tencent-spot", "TENCENT_SPOT", PowerOff, false,
        "Tencent Cloud spot termination-time (read as UTC+8; lead time not documented)";
    Unknown, "unknown", "UNKNOWN", Log, false,
        "Anything the metadata service says that nthd does not recognise";
}

impl NoticeKind {
    pub fn info(self) -> &'static KindInfo {
        KINDS
            .iter()
            .find(|k| k.kind == self)
            .expect("every NoticeKind is in KINDS")
    }

    pub fn name(self) -> &'static str {
        self.info().name
    }

    pub fn from_name(name: &str) -> Option<NoticeKind> {
        KINDS.iter().find(|k| k.name == name).map(|k| k.kind)
    }

    /// Whether notices of this kind carry a platform event id (AWS scheduled events, Azure
    /// Scheduled Events). Only those can be told apart across a reboot: a spot notice or a
    /// rebalance recommendation still listed after a reboot looks exactly like a new one.
    pub fn has_event_id(self) -> bool {
        use NoticeKind::*;
        matches!(
            self,
            ScheduledStop
                | ScheduledReboot
                | ScheduledMaintenance
                | AzurePreempt
                | AzureTerminate
                | AzureReboot
                | AzureRedeploy
                | AzureFreeze
        )
    }
}

impl fmt::Display for NoticeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the platform is in carrying out a notice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeStatus {
    /// Scheduled or under way.
    Active,
    /// The platform withdrew it (AWS `canceled`).
    Canceled,
    /// The platform finished it (AWS `completed`).
    Completed,
}

/// One interruption notice, as read from the metadata service.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub kind: NoticeKind,
    /// The endpoint it came from, e.g. `aws/spot/instance-action`.
    pub source: &'static str,
    /// A fingerprint that stays the same on every poll of the same notice. It never includes a
    /// time a mock or the platform might recompute on each request.
    pub id: String,
    /// The platform's own id (AWS scheduled EventId, Azure EventId), if it has one. Notices with
    /// one are remembered across reboots; the others only within one boot.
    pub event_id: Option<String>,
    /// When the platform will act, if it says.
    pub deadline: Option<SystemTime>,
    pub status: NoticeStatus,
    /// A one-line human summary.
    pub detail: String,
    /// The raw answer, capped at [`RAW_CAP`] bytes.
    pub raw: String,
}

/// The longest notice summary nthd logs or prints, in characters.
pub const MAX_DETAIL: usize = 400;

/// How much of a raw answer a notice keeps.
pub const RAW_CAP: usize = 2048;

pub fn cap_raw(s: &str) -> String {
    if s.len() <= RAW_CAP {
        return s.to_string();
    }
    let mut end = RAW_CAP;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// An error from one source during one observation.
#[derive(Debug)]
pub struct SourceError {
    pub source: &'static str,
    pub error: ImdsError,
}

/// What one observation saw.
#[derive(Debug, Default)]
pub struct Observation {
    /// Every notice currently known, including the last known state of sources not read this
    /// time (or that failed this time).
    pub notices: Vec<Notice>,
    /// Sources read successfully this time: for them, a notice absent from `notices` is gone.
    pub fresh: Vec<&'static str>,
    pub errors: Vec<SourceError>,
}

impl Observation {
    pub fn ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The errors with the same message merged, in first-seen order: one failing token request
    /// is one error, not one per source that needed the token.
    pub fn grouped_errors(&self) -> Vec<(Vec<&'static str>, String)> {
        let mut out: Vec<(Vec<&'static str>, String)> = Vec::new();
        for e in &self.errors {
            let msg = e.error.to_string();
            match out.iter_mut().find(|(_, m)| *m == msg) {
                Some((sources, _)) => sources.push(e.source),
                None => out.push((vec![e.source], msg)),
            }
        }
        out
    }
}

/// One cloud's metadata service.
pub trait Provider: Send {
    fn cloud(&self) -> Cloud;

    /// A one-line description of what is watched, for logs and STATUS=.
    fn describe(&self) -> String;

    /// Reads every source that is due and returns what is known. Errors go in the observation,
    /// never out of it: a provider keeps its last good answer for a failing source. Providers
    /// that long-poll may take up to their wait timeout to return.
    fn observe(&mut self) -> impl Future<Output = Observation> + Send;

    /// When `observe` should be called next.
    fn next_due(&self) -> Instant;

    /// Whether a first answer is still on its way, and `observe` returned without it (Azure's
    /// first Scheduled Events call can take two minutes). `nthd once` keeps observing until it
    /// is not; the daemon does not need to.
    fn first_answer_pending(&self) -> bool {
        false
    }

    /// Tells the platform to go ahead with events nthd acted on (Azure); a no-op elsewhere.
    fn acknowledge(
        &mut self,
        _event_ids: &[String],
    ) -> impl Future<Output = Result<usize, ImdsError>> + Send {
        async { Ok(0) }
    }
}

/// Static dispatch over the five providers.
pub enum AnyProvider {
    Aws(aws::Aws),
    Gcp(gcp::Gcp),
    Azure(azure::Azure),
    Alibaba(alibaba::Alibaba),
    Tencent(tencent::Tencent),
}

macro_rules! each {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            AnyProvider::Aws($p) => $e,
            AnyProvider::Gcp($p) => $e,
            AnyProvider::Azure($p) => $e,
            AnyProvider::Alibaba($p) => $e,
            AnyProvider::Tencent($p) => $e,
        }
    };
}

impl Provider for AnyProvider {
    fn cloud(&self) -> Cloud {
        each!(self, p => p.cloud())
    }
    fn describe(&self) -> String {
        each!(self, p => p.describe())
    }
    /// Every notice's summary is cleaned here, once for all clouds: it holds metadata text
    /// (Azure's Description, AWS codes) that reaches logs, STATUS= and terminals.
    async fn observe(&mut self) -> Observation {
        let mut obs = each!(self, p => p.observe().await);
        for n in &mut obs.notices {
            n.detail = crate::logging::clean(&n.detail, MAX_DETAIL);
        }
        obs
    }
    fn next_due(&self) -> Instant {
        each!(self, p => p.next_due())
    }
    fn first_answer_pending(&self) -> bool {
        each!(self, p => p.first_answer_pending())
    }
    async fn acknowledge(&mut self, ids: &[String]) -> Result<usize, ImdsError> {
        each!(self, p => p.acknowledge(ids).await)
    }
}

/// Per-source poll bookkeeping shared by the interval-polling providers.
#[derive(Debug)]
pub(crate) struct SourceState {
    pub name: &'static str,
    pub interval: std::time::Duration,
    /// Successful reads are scheduled on a grid of `interval` from here. Sources built with the
    /// same anchor fall due together, so a slow source shares the fast source's wakeup instead
    /// of drifting off it by the time each read takes.
    anchor: Instant,
    pub next: Instant,
    pub backoff: crate::imds::Backoff,
    pub last: Vec<Notice>,
}

impl SourceState {
    pub fn new(name: &'static str, interval: std::time::Duration, start: Instant) -> Self {
        SourceState {
            name,
            interval,
            anchor: start,
            next: start,
            backoff: crate::imds::Backoff::new(interval),
            last: Vec::new(),
        }
    }

    /// The first grid point after `now`.
    fn next_on_grid(&self, now: Instant) -> Instant {
        let step = self.interval.as_nanos().max(1);
        let k = now.saturating_duration_since(self.anchor).as_nanos() / step + 1;
        u64::try_from(k * step)
            .ok()
            .and_then(|n| self.anchor.checked_add(std::time::Duration::from_nanos(n)))
            .unwrap_or(now + self.interval)
    }

    pub fn due(&self, now: Instant) -> bool {
        self.next <= now
    }

    /// Changes the interval from now on (the next read comes at most one new interval away).
    /// The grid keeps its anchor, so a source sped up and slowed down again still falls due
    /// with the others.
    pub fn set_interval(&mut self, interval: std::time::Duration, now: Instant) {
        self.interval = interval;
        self.backoff = crate::imds::Backoff::new(interval);
        self.next = self.next.min(self.next_on_grid(now));
    }

    /// The observation of a provider with this one source: the read made now (`None` when it
    /// was not due), recorded, plus the last known notices.
    pub fn observation(&mut self, result: Option<Result<Vec<Notice>, ImdsError>>) -> Observation {
        let mut obs = Observation::default();
        if let Some(result) = result {
            self.record(Instant::now(), result, &mut obs);
        }
        obs.notices.extend(self.last.iter().cloned());
        obs
    }

    /// Records the outcome of one read and schedules the next one.
    pub fn record(
        &mut self,
        now: Instant,
        result: Result<Vec<Notice>, ImdsError>,
        obs: &mut Observation,
    ) {
        match result {
            Ok(notices) => {
                self.backoff.reset();
                self.next = self.next_on_grid(now);
                self.last = notices;
                obs.fresh.push(self.name);
            }
            Err(error) => {
                self.next = now + self.backoff.next_delay();
                obs.errors.push(SourceError {
                    source: self.name,
                    error,
                });
            }
        }
    }
}

/// Collects the last known notices of every source into the observation.
pub(crate) fn gather(sources: &[SourceState], obs: &mut Observation) {
    for s in sources {
        obs.notices.extend(s.last.iter().cloned());
    }
}

/// The earliest time any source is due.
pub(crate) fn earliest(sources: &[SourceState]) -> Instant {
    sources
        .iter()
        .map(|s| s.next)
        .min()
        .unwrap_or_else(Instant::now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn kind_table_is_complete_and_unique() {
        let mut names = HashSet::new();
        let mut envs = HashSet::new();
        for k in KINDS {
            assert!(names.insert(k.name), "duplicate name {}", k.name);
            assert!(envs.insert(k.env), "duplicate env {}", k.env);
            assert_eq!(k.kind.info().name, k.name);
            assert_eq!(NoticeKind::from_name(k.name), Some(k.kind));
            assert_eq!(
                k.env,
                format!("NTHD_ACTION_{}", k.name.replace('-', "_").to_uppercase())
            );
        }
        assert_eq!(KINDS.len(), 20);
    }

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
            assert_eq!(kind.info().default_action, Action::Log, "{kind}");
        }
    }

    #[test]
    fn sources_with_one_anchor_fall_due_together() {
        use std::time::Duration;
        let t0 = Instant::now();
        let mut fast = SourceState::new("fast", Duration::from_secs(1), t0);
        let mut slow = SourceState::new("slow", Duration::from_secs(3), t0);
        let mut obs = Observation::default();
        // Reads finish a little after they were due; the schedule does not drift.
        for tick in 0..9u64 {
            let now = t0 + Duration::from_millis(tick * 1000 + 37);
            fast.record(now, Ok(vec![]), &mut obs);
            assert_eq!(fast.next, t0 + Duration::from_secs(tick + 1));
            if tick % 3 == 0 {
                slow.record(now, Ok(vec![]), &mut obs);
                assert_eq!(slow.next, t0 + Duration::from_secs(tick + 3));
            }
        }
        // A read that overran several intervals goes to the next grid point, not a burst.
        fast.record(t0 + Duration::from_millis(12_500), Ok(vec![]), &mut obs);
        assert_eq!(fast.next, t0 + Duration::from_secs(13));
    }

    #[test]
    fn raw_cap_respects_char_boundaries() {
        let s = "é".repeat(RAW_CAP);
        let c = cap_raw(&s);
        assert!(c.len() <= RAW_CAP + '…'.len_utf8());
        assert!(c.ends_with('…'));
        assert_eq!(cap_raw("short"), "short");
    }
}
