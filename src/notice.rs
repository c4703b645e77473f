//! The shared vocabulary: clouds, notice kinds, notices. It depends on nothing else in nthd;
//! providers produce [`Notice`]s, the policy decides on them, the executor acts on them.

use std::fmt;
use std::time::SystemTime;

/// Where a notice was read: one metadata endpoint, named `cloud/path`, for example
/// `aws/spot/instance-action`. It labels metrics and log lines, so it is always a fixed name a
/// provider chose, never text from the metadata service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceId(&'static str);

impl SourceId {
    /// A source named by its provider.
    pub const fn new(name: &'static str) -> SourceId {
        SourceId(name)
    }

    /// The name, e.g. `aws/spot/instance-action`.
    pub const fn as_str(self) -> &'static str {
        self.0
    }

    /// The names joined by `sep`, for one log field or line.
    pub(crate) fn join(ids: &[SourceId], sep: &str) -> String {
        ids.iter().map(|s| s.0).collect::<Vec<_>>().join(sep)
    }
}

impl fmt::Display for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl PartialEq<&str> for SourceId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// The clouds nthd knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cloud {
    /// Amazon Web Services (EC2).
    Aws,
    /// Google Cloud (Compute Engine).
    Gcp,
    /// Microsoft Azure.
    Azure,
    /// Alibaba Cloud (ECS).
    Alibaba,
    /// Tencent Cloud (CVM).
    Tencent,
}

impl Cloud {
    /// Every cloud, in the order the docs list them.
    pub const ALL: [Cloud; 5] = [
        Cloud::Aws,
        Cloud::Gcp,
        Cloud::Azure,
        Cloud::Alibaba,
        Cloud::Tencent,
    ];

    /// The short name, as `--provider` takes it: `aws`, `gcp`, `azure`, `alibaba` or `tencent`.
    pub fn name(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Gcp => "gcp",
            Cloud::Azure => "azure",
            Cloud::Alibaba => "alibaba",
            Cloud::Tencent => "tencent",
        }
    }

    /// The default metadata endpoint of this cloud. Every one is an address, so that nthd needs
    /// no DNS and the packaged unit's `IPAddressAllow=` can admit it. Tencent documents only the
    /// name `metadata.tencentyun.com`, which resolves to 169.254.0.23 on CVM; the name still
    /// works through `NTHD_IMDS_ENDPOINT`.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Cloud::Alibaba => "http://100.100.100.200",
            Cloud::Tencent => "http://169.254.0.23",
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
    /// AWS spot instance-action `terminate`: the instance is reclaimed in about 2 minutes.
    SpotTerminate,
    /// AWS spot instance-action `stop`: the instance is stopped in about 2 minutes.
    SpotStop,
    /// AWS spot instance-action `hibernate`; powering off would break the hibernation.
    SpotHibernate,
    /// AWS rebalance recommendation: the interruption risk is elevated. Not a notice itself; when
    /// an interruption follows, it usually comes 10–20 minutes later.
    Rebalance,
    /// AWS Auto Scaling target lifecycle state `Terminated` or `Warmed:Terminated`.
    AsgTerminate,
    /// AWS Auto Scaling target lifecycle state other than `InService` (`Standby`, `Detached`,
    /// `Warmed:*`).
    AsgOther,
    /// AWS scheduled event `instance-stop` or `instance-retirement`.
    ScheduledStop,
    /// AWS scheduled event `instance-reboot` or `system-reboot`.
    ScheduledReboot,
    /// AWS scheduled event `system-maintenance`.
    ScheduledMaintenance,
    /// GCP `instance/preempted` is `TRUE`: the Spot or preemptible VM is being reclaimed. It
    /// turns TRUE as the ACPI soft-off starts, with hard-off 30 s later; VMs created with a
    /// preemption notice duration see it 120 s before the soft-off.
    GcpPreempt,
    /// GCP `instance/maintenance-event` is `TERMINATE_ON_HOST_MAINTENANCE`: the VM is shut down
    /// for host maintenance (about 60 s ahead; about an hour on GPU VMs).
    GcpTerminateMaintenance,
    /// GCP `instance/maintenance-event` is `MIGRATE_ON_HOST_MAINTENANCE`: a live migration, which
    /// the VM survives.
    GcpMigrate,
    /// Azure Scheduled Event `Preempt` for this VM: a Spot eviction (documented 30 s ahead, often
    /// less).
    AzurePreempt,
    /// Azure Scheduled Event `Terminate` for this VM: it is deleted (5–15 minutes ahead, opt-in).
    AzureTerminate,
    /// Azure Scheduled Event `Reboot` for this VM (at least 15 minutes ahead).
    AzureReboot,
    /// Azure Scheduled Event `Redeploy` for this VM: it moves to another host (at least 10 minutes
    /// ahead).
    AzureRedeploy,
    /// Azure Scheduled Event `Freeze` for this VM: a pause of a few seconds.
    AzureFreeze,
    /// Alibaba Cloud spot `termination-time` is set: the instance is reclaimed in about 5 minutes.
    AlibabaSpot,
    /// Tencent Cloud spot `termination-time` is set: the instance is about to be reclaimed (lead
    /// time not documented).
    TencentSpot,
    /// Anything the metadata service says that nthd does not recognise, such as a new spot action
    /// or event type.
    Unknown,
}

/// What the node should do about a kind's notice unless told otherwise: the fact the policy's
/// default action rests on (`policy::default_action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByDefault {
    /// The machine is going away: power off, so kubelet drains first.
    PowerOff,
    /// Powering off would do harm (hibernation, live migration, Azure Freeze, a reboot nobody
    /// asked nthd to do) or nothing is certain yet: log it.
    Log,
}

/// When a power action for the kind happens by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// At once: the notice comes minutes or seconds ahead.
    AtOnce,
    /// At the last safe moment before the deadline: the notice comes hours or days ahead.
    AtDeadline,
}

/// Whether the kind's notices carry a platform event id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventIdentity {
    /// AWS scheduled events, Azure Scheduled Events: a notice can be told apart from a new one
    /// across a reboot, so `reboot` is allowed.
    EventId,
    /// A spot notice or a rebalance recommendation still listed after a reboot looks exactly
    /// like a new one.
    NoEventId,
}

/// Every fact about a notice kind, in one row per kind: its setting name, flag, environment
/// variable and help, and what it means for the node. `NoticeKind::info` is an exhaustive
/// match over these rows, so a new kind does not compile until it has one.
#[derive(Clone, Copy, Debug)]
pub struct KindInfo {
    /// The kind.
    pub kind: NoticeKind,
    /// Its setting name, e.g. `spot-terminate`.
    pub name: &'static str,
    /// Its flag, without the dashes: `action-<name>`.
    pub flag: &'static str,
    /// Its environment variable: `NTHD_ACTION_<NAME>`.
    pub env: &'static str,
    /// What the notice is, for `--help`.
    pub help: &'static str,
    /// What nthd does about it unless told otherwise.
    pub by_default: ByDefault,
    /// When a power action for it happens unless told otherwise.
    pub timing: Timing,
    /// Whether its notices carry a platform event id.
    pub event_identity: EventIdentity,
    /// The platform's usual lead time in seconds (0: none or not a notice), the deadline of a
    /// fire drill.
    pub usual_lead_secs: u64,
}

macro_rules! kinds {
    ($( $kind:ident, $name:literal, $env:literal, $by:ident, $timing:ident, $id:ident, $lead:literal,
        $help:literal; )*) => {
        /// Every kind, in documentation order.
        pub const KINDS: &[KindInfo] = &[ $( *NoticeKind::$kind.info(), )* ];

        impl NoticeKind {
            /// The kind's row of facts.
            pub const fn info(self) -> &'static KindInfo {
                match self {
                    $( NoticeKind::$kind => &KindInfo {
                        kind: NoticeKind::$kind,
                        name: $name,
                        flag: concat!("action-", $name),
                        env: concat!("NTHD_ACTION_", $env),
                        help: $help,
                        by_default: ByDefault::$by,
                        timing: Timing::$timing,
                        event_identity: EventIdentity::$id,
                        usual_lead_secs: $lead,
                    }, )*
                }
            }
        }
    };
}

// kind, name, variable, by default, timing, event id, usual lead time (s), help
kinds! {
    SpotTerminate, "spot-terminate", "SPOT_TERMINATE", PowerOff, AtOnce, NoEventId, 120,
        "AWS spot instance-action `terminate` (about 2 minutes ahead)";
    SpotStop, "spot-stop", "SPOT_STOP", PowerOff, AtOnce, NoEventId, 120,
        "AWS spot instance-action `stop`";
    SpotHibernate, "spot-hibernate", "SPOT_HIBERNATE", Log, AtOnce, NoEventId, 120,
        "AWS spot instance-action `hibernate` (powering off would break hibernation)";
    Rebalance, "rebalance", "REBALANCE", Log, AtOnce, NoEventId, 0,
        "AWS rebalance recommendation (elevated interruption risk, not a notice)";
    AsgTerminate, "asg-terminate", "ASG_TERMINATE", PowerOff, AtOnce, NoEventId, 0,
        "AWS Auto Scaling target-lifecycle-state `Terminated` / `Warmed:Terminated`";
    AsgOther, "asg-other", "ASG_OTHER", Log, AtOnce, NoEventId, 0,
        "AWS Auto Scaling target-lifecycle-state other than InService (Standby, Detached, Warmed:*)";
    ScheduledStop, "scheduled-stop", "SCHEDULED_STOP", PowerOff, AtDeadline, EventId, 3600,
        "AWS scheduled event `instance-stop` or `instance-retirement`";
    ScheduledReboot, "scheduled-reboot", "SCHEDULED_REBOOT", Log, AtDeadline, EventId, 3600,
        "AWS scheduled event `instance-reboot` or `system-reboot`";
    ScheduledMaintenance, "scheduled-maintenance", "SCHEDULED_MAINTENANCE", Log, AtDeadline, EventId, 3600,
        "AWS scheduled event `system-maintenance`";
    GcpPreempt, "gcp-preempt", "GCP_PREEMPT", PowerOff, AtOnce, NoEventId, 30,
        "GCP `instance/preempted` = TRUE (as the ACPI soft-off starts, hard-off 30 s later; 120 s earlier with a preemption notice)";
    GcpTerminateMaintenance, "gcp-terminate-maintenance", "GCP_TERMINATE_MAINTENANCE", PowerOff, AtDeadline, NoEventId, 30,
        "GCP `instance/maintenance-event` = TERMINATE_ON_HOST_MAINTENANCE (at the last safe moment before instance/upcoming-maintenance's start, else at once)";
    GcpMigrate, "gcp-migrate", "GCP_MIGRATE", Log, AtOnce, NoEventId, 60,
        "GCP `instance/maintenance-event` = MIGRATE_ON_HOST_MAINTENANCE (live migration)";
    AzurePreempt, "azure-preempt", "AZURE_PREEMPT", PowerOff, AtOnce, EventId, 30,
        "Azure Scheduled Event `Preempt` for this VM (at least 30 seconds ahead)";
    AzureTerminate, "azure-terminate", "AZURE_TERMINATE", PowerOff, AtOnce, EventId, 600,
        "Azure Scheduled Event `Terminate` for this VM";
    AzureReboot, "azure-reboot", "AZURE_REBOOT", Log, AtDeadline, EventId, 900,
        "Azure Scheduled Event `Reboot` for this VM";
    AzureRedeploy, "azure-redeploy", "AZURE_REDEPLOY", Log, AtDeadline, EventId, 900,
        "Azure Scheduled Event `Redeploy` for this VM";
    AzureFreeze, "azure-freeze", "AZURE_FREEZE", Log, AtOnce, EventId, 900,
        "Azure Scheduled Event `Freeze` (a pause of seconds, never a reason to power off)";
    AlibabaSpot, "alibaba-spot", "ALIBABA_SPOT", PowerOff, AtOnce, NoEventId, 300,
        "Alibaba Cloud spot termination-time (about 5 minutes ahead)";
    // Tencent's lead time is not documented: 2 minutes, as Cloud::notice_lead_time assumes.
    TencentSpot, "tencent-spot", "TENCENT_SPOT", PowerOff, AtOnce, NoEventId, 120,
        "Tencent Cloud spot termination-time (read as UTC+8; lead time not documented)";
    Unknown, "unknown", "UNKNOWN", Log, AtOnce, NoEventId, 0,
        "Anything the metadata service says that nthd does not recognise";
}

impl NoticeKind {
    /// The setting name, e.g. `spot-terminate`.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The kind with this setting name, if there is one.
    pub fn from_name(name: &str) -> Option<NoticeKind> {
        KINDS.iter().find(|k| k.name == name).map(|k| k.kind)
    }

    /// Whether notices of this kind carry a platform event id (AWS scheduled events, Azure
    /// Scheduled Events). Only those can be told apart across a reboot: a spot notice or a
    /// rebalance recommendation still listed after a reboot looks exactly like a new one.
    pub fn has_event_id(self) -> bool {
        self.info().event_identity == EventIdentity::EventId
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
    /// What it announces.
    pub kind: NoticeKind,
    /// The endpoint it came from, e.g. `aws/spot/instance-action`.
    pub source: SourceId,
    /// A fingerprint that stays the same on every poll of the same notice. It never includes a
    /// time a mock or the platform might recompute on each request.
    pub id: NoticeId,
    /// The platform's own id (AWS scheduled EventId, Azure EventId), if it has one. Notices with
    /// one are remembered across reboots; the others only within one boot.
    pub event_id: Option<String>,
    /// When the platform will act, if it says.
    pub deadline: Option<SystemTime>,
    /// Where the platform is in carrying it out.
    pub status: NoticeStatus,
    /// A one-line human summary.
    pub detail: String,
    /// The raw answer, capped at [`RAW_CAP`] bytes.
    pub raw: String,
}

/// The source of a fire drill's notice (`nthd simulate`): never a metadata endpoint.
pub(crate) const DRILL_SOURCE: SourceId = SourceId::new("simulate");

/// A notice's fingerprint ([`Notice::id`]): parts joined by `/`, the first naming the cloud
/// (`aws/spot/terminate`, `azure/E-1`) or a fire drill (`simulate/KIND/...`). Its text is what
/// logs, the status file, webhooks and the state file show, and it is stored as a plain JSON
/// string. A type of its own, so that it is never mixed up with a [`SourceId`], an event id or
/// any other text. Parts taken from the metadata service must be cleaned by the caller
/// (`logging::clean_id`): this type joins, it does not judge.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct NoticeId(String);

impl NoticeId {
    /// The id of a notice from `cloud`: its name, then `parts`, joined by `/`.
    pub fn new(cloud: Cloud, parts: &[&str]) -> NoticeId {
        NoticeId::from_parts(&[&[cloud.name()][..], parts].concat())
    }

    /// A fire drill's id: `simulate/KIND/SERIAL`, where `serial` tells drills apart.
    pub fn drill(kind: NoticeKind, serial: &str) -> NoticeId {
        NoticeId::from_parts(&[DRILL_SOURCE.as_str(), kind.name(), serial])
    }

    /// `parts` joined by `/`, as they are: for ids read back (tests, tools) rather than built by
    /// a provider.
    pub fn from_parts(parts: &[&str]) -> NoticeId {
        NoticeId(parts.join("/"))
    }

    /// The text, e.g. `aws/spot/terminate`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The kind of a fire drill's id (`simulate/KIND/SERIAL`); `None` for any other id.
    pub fn drill_kind(&self) -> Option<NoticeKind> {
        let rest = self
            .0
            .strip_prefix(DRILL_SOURCE.as_str())?
            .strip_prefix('/')?;
        NoticeKind::from_name(rest.split('/').next()?)
    }

    /// Whether this is a fire drill's id (a state record keeps only the id).
    pub fn is_drill(&self) -> bool {
        // Its first part is the drill's source (`simulate/KIND/...`); no provider's is.
        self.0
            .strip_prefix(DRILL_SOURCE.as_str())
            .is_some_and(|rest| rest.starts_with('/'))
    }
}

impl fmt::Display for NoticeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<&str> for NoticeId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<str> for NoticeId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl Notice {
    /// Whether this is a fire drill's synthetic notice (`nthd simulate`), not the platform's.
    pub fn is_drill(&self) -> bool {
        self.source == DRILL_SOURCE
    }
}

/// How the machine is billed, as the metadata service says: users track interruptions by
/// capacity pool (instance type, zone and lifecycle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Spot capacity (AWS `spot`, GCP `SPOT`, Azure priority `Spot`, Tencent `SPOTPAID`).
    Spot,
    /// GCP's older preemptible VMs (`scheduling/preemptible` TRUE without the SPOT model).
    Preemptible,
    /// Regular capacity (AWS `on-demand`, GCP `STANDARD`, Azure `Regular`).
    OnDemand,
}

impl Lifecycle {
    /// The label value: `spot`, `preemptible` or `on-demand`.
    pub fn name(self) -> &'static str {
        match self {
            Lifecycle::Spot => "spot",
            Lifecycle::Preemptible => "preemptible",
            Lifecycle::OnDemand => "on-demand",
        }
    }
}

impl fmt::Display for Lifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the metadata service says about this machine, for `nthd status`, the `nthd_info`
/// labels and webhook events. Every field is optional: clouds differ in what they give, and a
/// failed read leaves a field unknown rather than stopping anything. Values are cleaned by the
/// provider (printable, at most [`MAX_IDENTITY`] characters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// The instance id (AWS `i-...`, GCP numeric id, Azure vmId).
    pub instance_id: Option<String>,
    /// The instance type or VM size (`m5.large`, `e2-medium`, `Standard_D2s_v5`).
    pub instance_type: Option<String>,
    /// The zone (`us-east-1a`, `us-central1-a`, Azure `westeurope` + zone `1` as `westeurope-1`).
    pub zone: Option<String>,
    /// Spot, preemptible or on-demand, where the cloud says.
    pub lifecycle: Option<Lifecycle>,
}

impl Identity {
    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        *self == Identity::default()
    }
}

/// The longest identity value nthd keeps, in characters.
pub const MAX_IDENTITY: usize = 128;

/// The longest notice summary nthd logs or prints, in characters.
pub(crate) const MAX_DETAIL: usize = 400;

/// How much of a raw answer a notice keeps.
pub const RAW_CAP: usize = 2048;

pub(crate) fn cap_raw(s: &str) -> String {
    if s.len() <= RAW_CAP {
        return s.to_string();
    }
    let mut end = RAW_CAP;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The optional features. None of them may switch protection off: a setup error disables only
/// that one, loudly (the status file, `nthd_extra_disabled`, the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Extra {
    /// Webhook delivery.
    Webhooks,
    /// The `/metrics` server.
    MetricsListen,
    /// The metrics textfile.
    MetricsTextfile,
}

impl Extra {
    /// Every extra, in the order the status file and the metric list them.
    pub(crate) const ALL: [Extra; 3] = [
        Extra::Webhooks,
        Extra::MetricsListen,
        Extra::MetricsTextfile,
    ];

    /// The name the status file, the metric label and the log use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Extra::Webhooks => "webhooks",
            Extra::MetricsListen => "metrics_listen",
            Extra::MetricsTextfile => "metrics_textfile",
        }
    }
}

/// One value for each [`Extra`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PerExtra<T> {
    /// For [`Extra::Webhooks`].
    pub(crate) webhooks: T,
    /// For [`Extra::MetricsListen`].
    pub(crate) metrics_listen: T,
    /// For [`Extra::MetricsTextfile`].
    pub(crate) metrics_textfile: T,
}

impl<T> PerExtra<T> {
    /// The value for `e`.
    pub(crate) fn get(&self, e: Extra) -> &T {
        match e {
            Extra::Webhooks => &self.webhooks,
            Extra::MetricsListen => &self.metrics_listen,
            Extra::MetricsTextfile => &self.metrics_textfile,
        }
    }

    /// The value for `e`, to change.
    pub(crate) fn get_mut(&mut self, e: Extra) -> &mut T {
        match e {
            Extra::Webhooks => &mut self.webhooks,
            Extra::MetricsListen => &mut self.metrics_listen,
            Extra::MetricsTextfile => &mut self.metrics_textfile,
        }
    }

    /// Each extra with its value, in [`Extra::ALL`] order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Extra, &T)> {
        Extra::ALL.into_iter().map(move |e| (e, self.get(e)))
    }

    /// A value for each extra, from this one's.
    pub(crate) fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> PerExtra<U> {
        PerExtra {
            webhooks: f(&self.webhooks),
            metrics_listen: f(&self.metrics_listen),
            metrics_textfile: f(&self.metrics_textfile),
        }
    }
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
    fn notice_ids_keep_their_text_form() {
        let cases = [
            (
                NoticeId::new(Cloud::Aws, &["spot", "terminate"]),
                "aws/spot/terminate",
            ),
            (NoticeId::new(Cloud::Aws, &["rebalance"]), "aws/rebalance"),
            (NoticeId::new(Cloud::Gcp, &["preempted"]), "gcp/preempted"),
            (NoticeId::new(Cloud::Azure, &["E-1"]), "azure/E-1"),
            (
                NoticeId::new(Cloud::Alibaba, &["spot", "termination"]),
                "alibaba/spot/termination",
            ),
            (
                NoticeId::new(Cloud::Tencent, &["spot", "termination"]),
                "tencent/spot/termination",
            ),
            (
                NoticeId::drill(NoticeKind::SpotTerminate, "1-2-3"),
                "simulate/spot-terminate/1-2-3",
            ),
            (NoticeId::from_parts(&["a/b", "c"]), "a/b/c"),
        ];
        for (id, text) in cases {
            assert_eq!(id.as_str(), text);
            assert_eq!(id.to_string(), text);
            assert_eq!(id, text);
        }
    }

    #[test]
    fn notice_ids_are_plain_json_strings() {
        let id = NoticeId::new(Cloud::Aws, &["scheduled", "instance-event-1"]);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, r#""aws/scheduled/instance-event-1""#);
        assert_eq!(serde_json::from_str::<NoticeId>(&json).unwrap(), id);
    }

    #[test]
    fn only_drill_ids_are_drills() {
        assert!(NoticeId::drill(NoticeKind::Rebalance, "x").is_drill());
        assert_eq!(
            NoticeId::drill(NoticeKind::Rebalance, "x").drill_kind(),
            Some(NoticeKind::Rebalance)
        );
        assert_eq!(
            NoticeId::from_parts(&["aws", "spot-stop", "1"]).drill_kind(),
            None
        );
        assert!(NoticeId::from_parts(&["simulate", "spot-stop", "1"]).is_drill());
        for cloud in Cloud::ALL {
            assert!(!NoticeId::new(cloud, &["simulate"]).is_drill(), "{cloud}");
        }
        // The prefix is the whole first part, not a name that starts the same way.
        assert!(!NoticeId::from_parts(&["simulated", "x"]).is_drill());
    }
}
