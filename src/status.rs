//! The status file, `/run/nthd/status.json`: what the daemon knows, for `nthd status`, its
//! node-problem-detector plugin mode and anyone else on the node, without credentials.
//!
//! The daemon keeps it (a [`Tracker`]); `nthd status` reads it ([`command`]). It is written
//! atomically (a temporary file renamed into place), world-readable (0644), at most once per
//! observation and only when something in it changed, except that it is refreshed at least every
//! [`HEARTBEAT`] so a reader can tell a live daemon from a dead one: a file older than
//! [`STALE_AFTER`] is stale.
//!
//! The schema is versioned by [`SCHEMA`]: fields are only ever added within a version; a
//! renamed or removed field, or a changed meaning, takes a new version, and readers refuse a
//! version newer than theirs. docs/observability.md (`nthd status`) documents every field.

pub(crate) mod command;
pub(crate) mod shared;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::notice::{Cloud, Identity, Notice, NoticeStatus, PerExtra, SourceId};
use crate::policy::{decide, Action, Planner, When};
use crate::provider::Observation;
use crate::timefmt::format_rfc3339;

/// The schema version this nthd writes and reads.
pub(crate) const SCHEMA: u32 = 1;

/// Where the packaged unit's daemon keeps the file (`RuntimeDirectory=nthd`).
pub(crate) const DEFAULT_PATH: &str = "/run/nthd/status.json";

/// The file is rewritten at least this often while the daemon runs, changed or not.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(60);

/// A file older than this is stale: the daemon is not running, or its loop is stuck.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(180);

/// The shortest time without a successful read that counts as blind, whatever the poll
/// interval: a few failed polls in a row are a hiccup, not blindness.
pub(crate) use crate::timings::BLIND_AFTER_MIN;

/// A moment on both clocks. Health (blindness, the age of the last read) is measured on the
/// monotonic one, so an NTP step cannot make a blind nthd look as if it sees; the wall clock is
/// only shown (RFC 3339 in the file) and used for the platform's deadlines.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Moment {
    /// The wall clock, for the file and the deadlines.
    pub(crate) wall: SystemTime,
    /// The monotonic clock, for every duration.
    pub(crate) mono: Instant,
}

impl Moment {
    /// This moment.
    pub(crate) fn now() -> Moment {
        Moment {
            wall: SystemTime::now(),
            mono: Instant::now(),
        }
    }

    /// `d` later on both clocks.
    #[cfg(test)]
    pub(crate) fn after(self, d: Duration) -> Moment {
        Moment {
            wall: self.wall + d,
            mono: self.mono + d,
        }
    }
}

/// `CLOCK_BOOTTIME`: time since boot, suspend included, the same for every process of the boot
/// (the status file's writer and its readers) and never stepped by NTP.
pub(crate) fn boottime() -> Option<Duration> {
    let ts = rustix::time::clock_gettime_dynamic(rustix::time::DynamicClockId::Boottime).ok()?;
    Some(Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    ))
}

/// How many actions the file lists, newest last.
const MAX_ACTIONS: usize = 16;

/// The whole file.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct Status {
    /// [`SCHEMA`].
    pub schema: u32,
    /// When it was written (RFC 3339, UTC).
    pub written_at: String,
    /// When it was written on the boot's monotonic clock (`CLOCK_BOOTTIME`, milliseconds):
    /// readers measure the file's age with it, so a wall-clock step cannot make a stale file
    /// look fresh. Absent in files of older versions (then `written_at` is used).
    #[serde(default)]
    pub written_boottime_ms: Option<u64>,
    /// The nthd version that wrote it.
    pub version: String,
    /// The daemon's process id.
    pub pid: u32,
    /// `--dry-run`: nthd logs what it would do and never calls logind.
    pub dry_run: bool,
    /// The cloud watched (`aws`, `gcp`, ...), once known.
    pub cloud: Option<String>,
    /// How the cloud was found (DMI, a probe, or `--provider`).
    pub detected_by: Option<String>,
    /// What is watched, in one line.
    pub watching: Option<String>,
    /// What the metadata service says about this machine.
    pub instance: InstanceView,
    /// logind's `InhibitDelayMaxUSec` in seconds: how long kubelet can delay shutdown to drain.
    pub drain_budget_seconds: Option<u64>,
    /// Each metadata source with its last successful read and last error.
    pub sources: Vec<SourceView>,
    /// The notices listed now, each with nthd's decision.
    pub notices: Vec<NoticeView>,
    /// Power actions deferred to a later time.
    pub pending: Vec<PendingView>,
    /// The power action logind accepted in this run: the machine is going down.
    pub shutting_down: Option<ShutdownView>,
    /// Power actions taken or attempted, newest last (at most 16), from this boot's state file
    /// and this run.
    pub actions: Vec<ActionView>,
    /// The last error reading the metadata service, if there was one in this run.
    pub last_metadata_error: Option<ErrorView>,
    /// The last error talking to logind, if there was one in this run.
    pub last_logind_error: Option<ErrorView>,
    /// When this daemon started (RFC 3339).
    pub started_at: Option<String>,
    /// The last successful read of any metadata source (RFC 3339), refreshed at most every
    /// [`HEARTBEAT`] in the file.
    pub last_metadata_ok: Option<String>,
    /// How long nthd may go without a successful read before it counts as blind.
    pub blind_after_seconds: Option<u64>,
    /// Set while nthd cannot see notices: no read succeeded within `blind_after_seconds`, or
    /// one source keeps failing. `nthd status` and the NPD plugin then say "unknown".
    pub blind: Option<BlindView>,
    /// Optional features (webhooks, the metrics server, the metrics textfile) turned off by a
    /// setup error. nthd still watches and acts; `nthd status` says "unknown" while any is.
    #[serde(default)]
    pub extras_disabled: Vec<ExtraView>,
    /// Why nthd's own delay lock on shutdown cannot be held, so no drain report would be
    /// written; `null` while it is held (or before it was first tried).
    #[serde(default)]
    pub drain_lock_error: Option<String>,
    /// The drain report of the shutdown under way, once its drain ended.
    #[serde(default)]
    pub drain: Option<crate::drain::Report>,
    /// Settings that could not be used as given and fell back (a bad value, a skipped line of
    /// a settings file, a named file that cannot be read), since nthd started. nthd still
    /// watches and acts; `nthd status` and the NPD plugin say "degraded" while any is listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<DegradedView>,
}

/// A setting that fell back.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct DegradedView {
    /// The variable, or the settings file and line.
    pub setting: String,
    /// Why, what nthd uses instead, and the fix.
    pub message: String,
}

/// nthd cannot see notices.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct BlindView {
    /// The last successful read it concerns (RFC 3339), or `null` when there was none since
    /// nthd started.
    pub last_ok: Option<String>,
    /// Why, in one line, with the last error.
    pub reason: String,
}

/// An optional feature turned off by a setup error.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct ExtraView {
    /// `webhooks`, `metrics_listen` or `metrics_textfile`.
    pub name: String,
    /// The error, naming the file, URL origin or address and the fix.
    pub reason: String,
    /// Since when (RFC 3339).
    pub since: String,
}

/// The machine, as the metadata service describes it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct InstanceView {
    /// The instance id.
    pub id: Option<String>,
    /// The instance type or VM size.
    #[serde(rename = "type")]
    pub instance_type: Option<String>,
    /// The zone.
    pub zone: Option<String>,
    /// `spot`, `preemptible` or `on-demand`.
    pub lifecycle: Option<String>,
}

impl From<&Identity> for InstanceView {
    fn from(id: &Identity) -> InstanceView {
        InstanceView {
            id: id.instance_id.clone(),
            instance_type: id.instance_type.clone(),
            zone: id.zone.clone(),
            lifecycle: id.lifecycle.map(|l| l.name().to_string()),
        }
    }
}

impl InstanceView {
    /// The instance in one line (`i-0abc, m5.large, us-east-1a, spot`), or `None` when nothing
    /// is known.
    pub(crate) fn describe(&self) -> Option<String> {
        let parts: Vec<&str> = [&self.id, &self.instance_type, &self.zone, &self.lifecycle]
            .into_iter()
            .filter_map(|v| v.as_deref())
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// One metadata source.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct SourceView {
    /// The source, e.g. `aws/spot/instance-action`.
    pub name: String,
    /// The last successful read (RFC 3339), refreshed at most every [`HEARTBEAT`] in the file.
    pub last_ok: Option<String>,
    /// The last failed read, if the source failed since nthd started.
    pub last_error: Option<ErrorView>,
}

/// One listed notice and what nthd makes of it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct NoticeView {
    /// nthd's stable fingerprint of the notice.
    pub id: String,
    /// The kind, e.g. `spot-terminate`.
    pub kind: String,
    /// The source it was read from.
    pub source: String,
    /// The platform's own event id, if it has one.
    pub event_id: Option<String>,
    /// `active`, `canceled` or `completed`, as the platform says.
    pub status: String,
    /// When the platform will act (RFC 3339), if it says.
    pub deadline: Option<String>,
    /// A one-line summary.
    pub detail: String,
    /// The decision: `ignore`, `log`, `poweroff` or `reboot`.
    pub action: String,
    /// When: `now` or an RFC 3339 time.
    pub when: String,
    /// Why, naming the setting.
    pub reason: String,
    /// Whether nthd already acted on it (in this boot, or on its event id before).
    pub acted: bool,
}

/// A deferred power action.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct PendingView {
    /// The notice's fingerprint.
    pub notice_id: String,
    /// The notice's kind.
    pub kind: String,
    /// `poweroff` or `reboot`.
    pub action: String,
    /// When it fires (RFC 3339).
    pub at: String,
}

/// The shutdown under way.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct ShutdownView {
    /// The notice acted on.
    pub notice_id: String,
    /// `poweroff` or `reboot`.
    pub action: String,
}

/// One power action taken or attempted.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct ActionView {
    /// The notice's fingerprint.
    pub notice_id: String,
    /// The notice's kind, when known (records from the state file do not keep it).
    pub kind: Option<String>,
    /// `poweroff` or `reboot`.
    pub action: String,
    /// When (RFC 3339).
    pub at: String,
    /// `accepted`, `already_shutting_down`, `dry_run`, `failed`, or `started` (a record from
    /// the state file whose logind answer was not recorded).
    pub result: String,
    /// The error, for `failed`.
    pub error: Option<String>,
    /// logind's error name when logind refused the call, e.g.
    /// `org.freedesktop.login1.BlockedByInhibitorLock`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logind_error: Option<String>,
    /// The holders of block locks on shutdown that kept logind from acting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<crate::logind::BlockHolder>,
    /// A fire drill (`nthd simulate --yes`), not a notice from the platform.
    #[serde(default)]
    pub drill: bool,
}

/// An error and when it was last seen.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub(crate) struct ErrorView {
    /// When (RFC 3339).
    pub at: String,
    /// The message, which names the URL or bus method and the fix.
    pub message: String,
    /// Whether it still holds: false once the next attempt succeeded.
    pub current: bool,
}

impl Status {
    /// The file without the times that change on every poll, to tell a real change.
    fn without_times(&self) -> Status {
        let mut s = self.clone();
        s.written_at.clear();
        s.written_boottime_ms = None;
        for src in &mut s.sources {
            src.last_ok = None;
        }
        s.last_metadata_ok = None;
        s
    }

    /// When it was written, if the field parses.
    pub(crate) fn written(&self) -> Option<SystemTime> {
        crate::timefmt::parse_rfc3339(&self.written_at)
    }
}

/// What the daemon tells the tracker each time it writes: the planner and the loop's state.
pub(crate) struct Facts<'a> {
    pub(crate) planner: &'a Planner,
    pub(crate) budget: Option<Duration>,
    pub(crate) dry_run: bool,
    pub(crate) metadata_error: Option<&'a str>,
    pub(crate) logind_error: Option<&'a str>,
    /// Each optional feature, with the error that disabled it, if one did.
    pub(crate) extras: PerExtra<Option<&'a str>>,
}

/// What nthd can see of the metadata service.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Sight {
    /// Reads succeed: a notice would be seen.
    #[default]
    Seeing,
    /// No read at all succeeded within the bound.
    Blind,
    /// This source keeps failing.
    BlindTo(SourceId),
}

impl Sight {
    /// Whether a notice could be missed now.
    pub(crate) fn is_blind(self) -> bool {
        self != Sight::Seeing
    }
}

/// The daemon's side: collects what goes into the file and writes it when it changed.
pub(crate) struct Tracker {
    path: Option<PathBuf>,
    base: Status,
    /// Each source's last successful read (kept as a time: formatted only when the file is
    /// built, not on every poll) and last error.
    sources: BTreeMap<SourceId, (Option<Stamp>, Option<ErrorView>)>,
    written: Option<(Instant, Status)>,
    write_error: Option<String>,
    /// Something went in since the last build; without it, and without a change the daemon
    /// reports, [`Tracker::update`] costs one clock read until the heartbeat is due.
    dirty: bool,
    /// The errors and budget last built, to notice their change without a build.
    last_facts: (Option<String>, Option<String>, Option<Duration>),
    /// The extras' errors last built, and since when each holds.
    extras: PerExtra<Option<(String, SystemTime)>>,
    /// When this daemon started, and the newest successful read of any source.
    started: Stamp,
    last_read_ok: Option<Stamp>,
    /// Longest time without a successful read: overall, and for one failing source.
    blind_after: (Duration, Duration),
    /// The sight last built.
    blind: Sight,
}

/// A moment kept for health: measured on the monotonic clock, shown as the wall clock's.
#[derive(Clone, Copy, Debug)]
struct Stamp {
    mono: Instant,
    wall: SystemTime,
}

impl From<Moment> for Stamp {
    fn from(n: Moment) -> Stamp {
        Stamp {
            mono: n.mono,
            wall: n.wall,
        }
    }
}

fn shown(t: Option<Stamp>) -> Option<String> {
    t.map(|t| format_rfc3339(t.wall))
}

fn error_view(prev: Option<&ErrorView>, msg: Option<&str>, now: SystemTime) -> Option<ErrorView> {
    match (prev, msg) {
        (_, Some(m)) => Some(ErrorView {
            at: format_rfc3339(now),
            message: m.to_string(),
            current: true,
        }),
        (Some(p), None) => Some(ErrorView {
            current: false,
            ..p.clone()
        }),
        (None, None) => None,
    }
}

impl Tracker {
    /// A tracker writing to `path` (`None`: keep nothing), starting from this boot's recorded
    /// actions.
    pub(crate) fn new(path: Option<PathBuf>, records: &[crate::state::Record]) -> Tracker {
        let base = Status {
            schema: SCHEMA,
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            actions: records.iter().map(record_view).collect(),
            ..Status::default()
        };
        Tracker {
            path,
            base,
            sources: BTreeMap::new(),
            written: None,
            write_error: None,
            dirty: true,
            last_facts: (None, None, None),
            extras: Default::default(),
            started: Moment::now().into(),
            last_read_ok: None,
            blind_after: (BLIND_AFTER_MIN, BLIND_AFTER_MIN),
            blind: Sight::Seeing,
        }
    }

    /// How long without a successful read counts as blind: `all` for the metadata service as a
    /// whole, `source` for one failing source (slow sources are read less often).
    /// The settings that fell back at start ([`Status::degraded`]).
    pub(crate) fn set_degraded(&mut self, degraded: impl IntoIterator<Item = (String, String)>) {
        self.base.degraded = degraded
            .into_iter()
            .map(|(setting, message)| DegradedView { setting, message })
            .collect();
        self.dirty = true;
    }

    pub(crate) fn set_blind_after(&mut self, all: Duration, source: Duration) {
        self.blind_after = (all.max(BLIND_AFTER_MIN), source.max(all));
        self.dirty = true;
    }

    /// What nthd sees (as of the last [`Tracker::update`]), and how long ago the last
    /// successful read was.
    pub(crate) fn health(&self, now: Moment) -> (Sight, Option<Duration>) {
        let age = self
            .last_read_ok
            .map(|t| now.mono.saturating_duration_since(t.mono));
        (self.blind, age)
    }

    /// How long without a successful read counts as blind (overall).
    pub(crate) fn blind_after(&self) -> Duration {
        self.blind_after.0
    }

    /// Whether nthd can see notices now: cheap enough for every poll (no allocation).
    fn blindness(&self, now: Moment) -> Sight {
        let age = |t: Option<Stamp>| {
            now.mono
                .saturating_duration_since(t.unwrap_or(self.started).mono)
        };
        if age(self.last_read_ok) > self.blind_after.0 {
            return Sight::Blind;
        }
        self.sources
            .iter()
            .find(|(_, (ok, err))| {
                err.as_ref().is_some_and(|e| e.current) && age(*ok) > self.blind_after.1
            })
            .map_or(Sight::Seeing, |(s, _)| Sight::BlindTo(*s))
    }

    /// Whether something changed that the file does not show yet.
    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// The cloud is known.
    pub(crate) fn set_cloud(&mut self, cloud: Cloud, how: &str, watching: &str) {
        self.base.cloud = Some(cloud.name().to_string());
        self.base.detected_by = Some(how.to_string());
        self.base.watching = Some(watching.to_string());
        self.dirty = true;
    }

    /// The metadata service described the machine.
    pub(crate) fn set_identity(&mut self, id: &Identity) {
        self.base.instance = InstanceView::from(id);
        self.dirty = true;
    }

    /// Records which sources answered and which failed.
    pub(crate) fn observation(&mut self, obs: &Observation, now: Moment) {
        if !obs.fresh.is_empty() {
            self.last_read_ok = Some(now.into());
        }
        for s in &obs.fresh {
            let new = !self.sources.contains_key(s);
            let (last_ok, last_error) = self.sources.entry(*s).or_default();
            *last_ok = Some(now.into());
            if let Some(e) = last_error.as_mut().filter(|e| e.current) {
                e.current = false;
                self.dirty = true;
            }
            self.dirty |= new;
        }
        for e in &obs.errors {
            self.dirty = true;
            self.sources.entry(e.source).or_default().1 = Some(ErrorView {
                at: format_rfc3339(now.wall),
                message: e.error.to_string(),
                current: true,
            });
        }
    }

    /// Whether nthd's own delay lock is held (`None`) or why not.
    pub(crate) fn drain_lock(&mut self, error: Option<String>) {
        if self.base.drain_lock_error != error {
            self.base.drain_lock_error = error;
            self.dirty = true;
        }
    }

    /// Records a drain report.
    pub(crate) fn drain(&mut self, report: crate::drain::Report) {
        self.base.drain = Some(report);
        self.dirty = true;
    }

    /// Records a power action's result.
    pub(crate) fn action(&mut self, view: ActionView) {
        push_action(&mut self.base.actions, view);
        self.dirty = true;
    }

    /// Builds the file from the facts, and writes it when it changed or [`HEARTBEAT`] passed.
    /// `changed` says the planner's picture moved (it returned effects); without it, a build
    /// happens only when something else went in or the heartbeat is due.
    pub(crate) fn update(&mut self, f: &Facts<'_>, changed: bool, now: Moment) {
        let blind = self.blindness(now);
        let blind_moved = blind != self.blind;
        self.blind = blind;
        let Some(path) = self.path.clone() else {
            return;
        };
        let heartbeat = self
            .written
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= HEARTBEAT);
        // Compared in place: this runs on every poll, and must not allocate when idle.
        let (m, l, b) = &self.last_facts;
        let facts_moved = m.as_deref() != f.metadata_error
            || l.as_deref() != f.logind_error
            || *b != f.budget
            || self.extras_moved(f);
        if !(changed || self.dirty || heartbeat || facts_moved || blind_moved) {
            return;
        }
        self.take_extras(f, now.wall);
        self.dirty = false;
        self.last_facts = (
            f.metadata_error.map(str::to_string),
            f.logind_error.map(str::to_string),
            f.budget,
        );
        let status = self.build(f, now);
        let due = match &self.written {
            None => true,
            Some((at, prev)) => {
                at.elapsed() >= HEARTBEAT || prev.without_times() != status.without_times()
            }
        };
        if due {
            self.write(&path, status);
        }
    }

    /// Whether an extra's error differs from the one last built (compared in place).
    fn extras_moved(&self, f: &Facts<'_>) -> bool {
        self.extras
            .iter()
            .any(|(e, old)| old.as_ref().map(|(m, _)| m.as_str()) != *f.extras.get(e))
    }

    fn take_extras(&mut self, f: &Facts<'_>, now: SystemTime) {
        for (e, new) in f.extras.iter() {
            let slot = self.extras.get_mut(e);
            match (slot.as_ref(), new) {
                (Some((m, _)), Some(n)) if m == n => {}
                (_, Some(n)) => *slot = Some((n.to_string(), now)),
                (_, None) => *slot = None,
            }
        }
    }

    fn health_view(&self, f: &Facts<'_>, s: &mut Status) {
        s.started_at = Some(format_rfc3339(self.started.wall));
        s.last_metadata_ok = shown(self.last_read_ok);
        s.blind_after_seconds = Some(self.blind_after.0.as_secs());
        s.blind = self.blind_view(self.blind, f);
        s.extras_disabled = self
            .extras
            .iter()
            .filter_map(|(e, slot)| {
                slot.as_ref().map(|(reason, since)| ExtraView {
                    name: e.name().to_string(),
                    reason: reason.clone(),
                    since: format_rfc3339(*since),
                })
            })
            .collect();
    }

    fn blind_view(&self, sight: Sight, f: &Facts<'_>) -> Option<BlindView> {
        let err = f.metadata_error.unwrap_or("no answer yet");
        Some(match sight {
            Sight::Seeing => return None,
            Sight::Blind => BlindView {
                last_ok: shown(self.last_read_ok),
                reason: format!(
                    "no metadata read succeeded for over {}: {err}",
                    crate::timefmt::format_duration(self.blind_after.0)
                ),
            },
            Sight::BlindTo(src) => {
                let (ok, e) = &self.sources[&src];
                BlindView {
                    last_ok: shown(*ok),
                    reason: format!(
                        "{} not read for over {}: {}",
                        src.as_str(),
                        crate::timefmt::format_duration(self.blind_after.1),
                        e.as_ref().map_or(err, |e| e.message.as_str())
                    ),
                }
            }
        })
    }

    fn build(&mut self, f: &Facts<'_>, now: Moment) -> Status {
        let mut s = self.base.clone();
        self.health_view(f, &mut s);
        s.written_at = format_rfc3339(now.wall);
        s.written_boottime_ms = boottime().and_then(|b| u64::try_from(b.as_millis()).ok());
        s.dry_run = f.dry_run;
        s.drain_budget_seconds = f.budget.map(|b| b.as_secs());
        s.sources = self
            .sources
            .iter()
            .map(|(name, (ok, err))| SourceView {
                name: name.as_str().to_string(),
                last_ok: shown(*ok),
                last_error: err.clone(),
            })
            .collect();
        s.notices = f
            .planner
            .current()
            .into_iter()
            .map(|n| notice_view(f, n, now.wall))
            .collect();
        s.pending = f
            .planner
            .scheduled()
            .into_iter()
            .map(|(n, action, at)| PendingView {
                notice_id: n.id.to_string(),
                kind: n.kind.name().to_string(),
                action: action.name().to_string(),
                at: format_rfc3339(at),
            })
            .collect();
        s.shutting_down = f.planner.shutting_down().map(|(id, a)| ShutdownView {
            notice_id: id.to_string(),
            action: a.name().to_string(),
        });
        let prev = self.written.as_ref().map(|(_, p)| p);
        s.last_metadata_error = error_view(
            prev.and_then(|p| p.last_metadata_error.as_ref()),
            f.metadata_error,
            now.wall,
        );
        s.last_logind_error = error_view(
            prev.and_then(|p| p.last_logind_error.as_ref()),
            f.logind_error,
            now.wall,
        );
        s
    }

    /// Writes the file, keeping the fire drills' actions a drill added to it since the last
    /// write (see [`shared`]). While a drill holds the lock, it is left for the next update.
    fn write(&mut self, path: &Path, mut status: Status) {
        let _lock = match crate::files::DirLock::take(path, Duration::ZERO) {
            Ok(Some(lock)) => Some(lock),
            Ok(None) => {
                self.dirty = true;
                return;
            }
            Err(_) => None,
        };
        for view in shared::drill_actions(path) {
            if !self
                .base
                .actions
                .iter()
                .any(|a| a.notice_id == view.notice_id)
            {
                push_action(&mut self.base.actions, view.clone());
                push_action(&mut status.actions, view);
            }
        }
        let Ok(mut body) = serde_json::to_vec_pretty(&status) else {
            return;
        };
        body.push(b'\n');
        // 0644: `nthd status` runs as any user, NPD as root in its container. No fsync: the
        // file lives in /run and is rebuilt on every start.
        match crate::state::write_replace(path, &body, 0o644, false) {
            Ok(()) => {
                if self.write_error.take().is_some() {
                    tracing::info!("the status file {} is written again", path.display());
                }
                self.written = Some((Instant::now(), status));
            }
            Err(e) => {
                let msg = format!(
                    "cannot write the status file {}: {e}. `nthd status` and the \
                     node-problem-detector plugin cannot see this daemon; the packaged unit \
                     creates /run/nthd with RuntimeDirectory=nthd, or set NTHD_STATUS_FILE",
                    path.display()
                );
                if self.write_error.as_deref() != Some(&msg) {
                    tracing::warn!("{msg}");
                }
                self.write_error = Some(msg);
                // Try again at the next heartbeat, not on every poll.
                self.written = Some((Instant::now(), status));
            }
        }
    }
}

fn notice_view(f: &Facts<'_>, n: &Notice, now: SystemTime) -> NoticeView {
    let d = decide(f.planner.config(), n, now, f.budget);
    NoticeView {
        id: n.id.to_string(),
        kind: n.kind.name().to_string(),
        source: n.source.as_str().to_string(),
        event_id: n.event_id.clone(),
        status: match n.status {
            NoticeStatus::Active => "active",
            NoticeStatus::Canceled => "canceled",
            NoticeStatus::Completed => "completed",
        }
        .to_string(),
        deadline: n.deadline.map(format_rfc3339),
        detail: n.detail.clone(),
        action: d.action.name().to_string(),
        when: match d.when {
            When::Now => "now".to_string(),
            When::At(t) => format_rfc3339(t),
        },
        reason: d.reason,
        acted: f.planner.is_done(&n.id),
    }
}

fn record_view(r: &crate::state::Record) -> ActionView {
    let at = std::time::UNIX_EPOCH + Duration::from_secs(r.at_unix);
    ActionView {
        notice_id: r.id.to_string(),
        kind: None,
        action: r.action.clone(),
        at: format_rfc3339(at),
        result: match r.phase {
            crate::state::Phase::Done => "accepted",
            crate::state::Phase::Started => "started",
        }
        .to_string(),
        error: None,
        drill: r.id.is_drill(),
        ..ActionView::default()
    }
}

/// The status file's line for an action the executor carried out (or not).
pub(crate) fn action_view(rec: &crate::executor::ActionRecord) -> ActionView {
    use crate::executor::Outcome;
    let (result, error) = match &rec.outcome {
        Outcome::Accepted => ("accepted", None),
        Outcome::AlreadyShuttingDown => ("already_shutting_down", None),
        Outcome::DryRun => ("dry_run", None),
        Outcome::Failed(e) => ("failed", Some(e.to_string())),
    };
    let refusal = rec.outcome.refusal();
    ActionView {
        notice_id: rec.notice.id.to_string(),
        kind: Some(rec.notice.kind.name().to_string()),
        action: rec.action.name().to_string(),
        at: format_rfc3339(rec.at),
        result: result.to_string(),
        error,
        logind_error: refusal.map(|r| r.error.to_string()),
        blocked_by: refusal.map(|r| r.blocked_by()).unwrap_or_default(),
        drill: rec.drill(),
    }
}

/// Appends `view` to `actions`, keeping the newest [`MAX_ACTIONS`].
fn push_action(actions: &mut Vec<ActionView>, view: ActionView) {
    actions.push(view);
    if actions.len() > MAX_ACTIONS {
        actions.drain(..actions.len() - MAX_ACTIONS);
    }
}

/// Whether a notice calls for a power action nthd has not yet taken.
pub(crate) fn will_act(n: &NoticeView) -> bool {
    n.status == "active" && !n.acted && Action::parse(&n.action).is_some_and(Action::is_power)
}

#[cfg(test)]
mod tests;
