//! `nthd status [--json | --npd]`: reads the daemon's status file, as any user.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use super::{will_act, NoticeView, Status, SCHEMA, STALE_AFTER};
use crate::files;
use crate::timefmt::{format_duration, parse_rfc3339, relative};

/// node-problem-detector's default `max_output_length` (bytes): the plugin line never exceeds it.
pub(crate) const NPD_MAX_LINE: usize = 80;

/// The exit status for "unknown": nthd cannot vouch for the node (as NPD's plugin status 2).
const UNKNOWN: u8 = 2;

/// Why the file could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// No file: the daemon is not running, or has not written yet.
    #[error(
        "{0} does not exist: nthd is not running, or has not written its status yet. Check with: \
         systemctl status nthd"
    )]
    Missing(String),
    /// It could not be read, or is not a regular file of at most 1 MiB (`nthd status --npd`
    /// runs as root, and user nthd owns the directory: see [`files::read_untrusted`]).
    #[error("{}", .0.with_fix())]
    Unreadable(files::ReadError),
    /// It is not a status file this nthd understands.
    #[error("{path} is not a valid status file: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// Reads and checks the file.
pub(crate) fn read(path: &Path) -> Result<Status, ReadError> {
    let p = path.display().to_string();
    let body = match files::read_untrusted(path) {
        Ok(b) => b,
        Err(e) if e.is_missing() => return Err(ReadError::Missing(p)),
        Err(e) => return Err(ReadError::Unreadable(e)),
    };
    let invalid = |reason: String| ReadError::Invalid {
        path: p.clone(),
        reason,
    };
    let s: Status = serde_json::from_slice(&body).map_err(|e| invalid(e.to_string()))?;
    if s.schema != SCHEMA {
        return Err(invalid(format!(
            "schema {} (this nthd reads schema {SCHEMA}); run the nthd that wrote it",
            s.schema
        )));
    }
    Ok(s)
}

/// How old the file is, or `None` when its time does not parse (treated as stale). Measured on
/// the boot's monotonic clock when the file has its time there (a wall-clock step then changes
/// nothing), else on the wall clock.
fn age(s: &Status, now: SystemTime) -> Option<Duration> {
    let boot = super::boottime().map(|b| b.as_millis());
    if let (Some(written), Some(boot)) = (s.written_boottime_ms, boot) {
        // Later than now: not this boot's clock (a time namespace); fall back to the wall clock.
        if u128::from(written) <= boot {
            let ms = u64::try_from(boot - u128::from(written)).unwrap_or(u64::MAX);
            return Some(Duration::from_millis(ms));
        }
    }
    s.written()
        .map(|t| now.duration_since(t).unwrap_or(Duration::ZERO))
}

fn stale(s: &Status, now: SystemTime) -> Option<String> {
    match age(s, now) {
        Some(a) if a <= STALE_AFTER => None,
        Some(a) => Some(format!(
            "status is stale: written {} ago, nthd is not running or stuck",
            format_duration(a)
        )),
        None => Some("status file has no valid written_at".to_string()),
    }
}

/// The node condition one `nthd status --npd=CONDITION` run reports: one NPD rule each
/// (docs/observability.md, "The NPD plugin").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum NpdCondition {
    /// nthd's own `TerminationNotice`: a notice nthd will act on is listed, or its action is
    /// under way.
    #[default]
    TerminationNotice,
    /// Kubernetes' `MaintenancePlanned` (KEP-5683): the same facts, the cloud named.
    MaintenancePlanned,
    /// Kubernetes' `GracefulNodeShutdownInProgress` (KEP-5683): logind accepted nthd's power
    /// action, so kubelet's Graceful Node Shutdown is draining.
    GracefulNodeShutdownInProgress,
    /// `PreemptionScheduled` (reason `SpotEvictionIncoming`), which Karpenter's Azure provider
    /// reads: Azure lists a Preempt event for this VM.
    PreemptionScheduled,
    /// `GCESpotPreempting`, which Karpenter's GCP provider reads: `instance/preempted` is TRUE.
    GceSpotPreempting,
}

/// The node-problem-detector verdict on `condition`: the exit code (0 False, 1 True, 2 Unknown)
/// and one line of at most [`NPD_MAX_LINE`] characters.
pub(crate) fn npd_verdict(
    read: &Result<Status, ReadError>,
    now: SystemTime,
    condition: NpdCondition,
) -> (u8, String) {
    let s = match read {
        Ok(s) => s,
        Err(ReadError::Missing(_)) => {
            return (2, "unknown: no status file, nthd not running".into())
        }
        Err(e) => return (2, cap(&format!("unknown: {e}"))),
    };
    if let Some(why) = stale(s, now) {
        return (2, cap(&format!("unknown: {why}")));
    }
    let listed = |kind: &str| {
        s.notices
            .iter()
            .find(|n| n.kind == kind && n.status == "active")
    };
    let found = match condition {
        NpdCondition::TerminationNotice => acting_line(s, now),
        NpdCondition::MaintenancePlanned => acting_line(s, now)
            .map(|line| format!("{} {line}", s.cloud.as_deref().unwrap_or("cloud"))),
        NpdCondition::GracefulNodeShutdownInProgress => return shutdown_verdict(s),
        NpdCondition::PreemptionScheduled => listed("azure-preempt").map(azure_preempt_line),
        NpdCondition::GceSpotPreempting => listed("gcp-preempt").map(|n| {
            let by = short(n.deadline.as_deref(), now);
            format!("GCP instance/preempted is TRUE; the soft-off comes by {by}")
        }),
    };
    if let Some(line) = found {
        return (1, cap(&line));
    }
    match blind_or_disabled(s) {
        Some(why) => (2, cap(&format!("unknown: {why}"))),
        None => (0, false_line(condition).to_string()),
    }
}

/// The line of a condition found False.
fn false_line(condition: NpdCondition) -> &'static str {
    match condition {
        NpdCondition::TerminationNotice => "no interruption pending",
        NpdCondition::MaintenancePlanned => "no interruption notice listed",
        NpdCondition::GracefulNodeShutdownInProgress => "nthd has asked logind for no shutdown",
        NpdCondition::PreemptionScheduled => "no Azure Preempt notice listed",
        NpdCondition::GceSpotPreempting => "no GCP preemption notice listed",
    }
}

/// `GracefulNodeShutdownInProgress`: whether logind accepted nthd's power action. nthd knows
/// that however the metadata reads go, so blindness does not make it unknown.
fn shutdown_verdict(s: &Status) -> (u8, String) {
    match &s.shutting_down {
        Some(sd) => {
            let kind = s.notices.iter().find(|n| n.id == sd.notice_id);
            let kind = kind.map_or("a notice", |n| n.kind.as_str());
            let line = format!(
                "logind accepted {} for {kind}; kubelet's shutdown drain runs",
                sd.action
            );
            (1, cap(&line))
        }
        None => (
            0,
            false_line(NpdCondition::GracefulNodeShutdownInProgress).to_string(),
        ),
    }
}

/// The message Karpenter's Azure provider parses: `Preempt Scheduled: <NotBefore>.`, the time
/// in RFC 1123 GMT as Azure gives it (`Preempt Started.` when there is none).
fn azure_preempt_line(n: &NoticeView) -> String {
    let not_before = n
        .deadline
        .as_deref()
        .and_then(crate::timefmt::parse_rfc3339);
    match not_before {
        Some(t) => format!(
            "Preempt Scheduled: {}. Read by nthd from Scheduled Events.",
            crate::timefmt::format_rfc1123(t)
        ),
        None => "Preempt Started. Read by nthd from Scheduled Events.".to_string(),
    }
}

/// Why the file, though fresh, cannot vouch for "no interruption pending": nthd has read
/// nothing yet since it started, it is blind, an extra is disabled, or a setting fell back.
fn blind_or_disabled(s: &Status) -> Option<String> {
    if let Some(b) = &s.blind {
        return Some(format!("nthd is blind: {}", b.reason));
    }
    if s.last_metadata_ok.is_none() {
        return Some("nothing read yet since nthd started".to_string());
    }
    if let Some(e) = s.extras_disabled.first() {
        return Some(format!("{} disabled: {}", e.name, e.reason));
    }
    s.degraded.first().map(|d| {
        let more = match s.degraded.len() {
            1 => String::new(),
            n => format!(" (+{} more)", n - 1),
        };
        format!("degraded: {} fell back{more}; see nthd check", d.setting)
    })
}

/// The line, when the action is under way or a notice nthd will act on is listed (the
/// condition is True).
fn acting_line(s: &Status, now: SystemTime) -> Option<String> {
    if let Some(sd) = &s.shutting_down {
        let kind = s
            .notices
            .iter()
            .find(|n| n.id == sd.notice_id)
            .map(|n| (n.kind.as_str(), n.deadline.as_deref()));
        let (kind, deadline) = kind.unwrap_or(("notice", None));
        let line = format!(
            "{kind}: {} under way, deadline {}",
            sd.action,
            short(deadline, now)
        );
        return Some(line);
    }
    let mut acting: Vec<&NoticeView> = s.notices.iter().filter(|n| will_act(n)).collect();
    acting.sort_by(|a, b| a.deadline.cmp(&b.deadline));
    match acting.first() {
        Some(n) => {
            let when = if n.when == "now" {
                "now".to_string()
            } else {
                format!("at {}", short(Some(&n.when), now))
            };
            let more = match acting.len() {
                1 => String::new(),
                k => format!(" (+{})", k - 1),
            };
            let line = format!(
                "{}: {} {when}, deadline {}{more}",
                n.kind,
                n.action,
                short(n.deadline.as_deref(), now)
            );
            Some(line)
        }
        None => None,
    }
}

/// An RFC 3339 time without the date when it is today, to fit NPD's 80 bytes.
fn short(t: Option<&str>, now: SystemTime) -> String {
    let Some(t) = t else {
        return "none".to_string();
    };
    let today = crate::timefmt::format_rfc3339(now);
    match (t.get(..10), today.get(..10)) {
        (Some(d), Some(now)) if d == now && t.len() > 11 => t[11..].to_string(),
        _ => t.to_string(),
    }
}

/// At most [`NPD_MAX_LINE`] bytes: NPD cuts the output at bytes, so a multi-byte character
/// must not straddle the cut. A longer line ends in `...`.
fn cap(s: &str) -> String {
    if s.len() <= NPD_MAX_LINE {
        return s.to_string();
    }
    let mut end = NPD_MAX_LINE - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// `nthd status`: 0 when the file is fresh and nthd can see; 2 ("unknown", the reason on
/// stderr) when it is missing, unreadable or stale, when nthd is blind, when an extra is
/// disabled, or when a setting fell back. With `--npd`, the plugin's exit codes and line instead.
pub(crate) fn status_command(
    path: &Path,
    json: bool,
    npd: Option<NpdCondition>,
) -> anyhow::Result<ExitCode> {
    let now = SystemTime::now();
    let read = read(path);
    if let Some(condition) = npd {
        let (code, line) = npd_verdict(&read, now, condition);
        println!("{line}");
        return Ok(ExitCode::from(code));
    }
    let s = match read {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nthd status: unknown: {e}");
            return Ok(ExitCode::from(UNKNOWN));
        }
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", render(&s, now));
    }
    match stale(&s, now).or_else(|| blind_or_disabled(&s)) {
        Some(why) => {
            eprintln!("nthd status: unknown: {why}");
            Ok(ExitCode::from(UNKNOWN))
        }
        None => Ok(ExitCode::SUCCESS),
    }
}

fn ago(t: &str, now: SystemTime) -> String {
    match parse_rfc3339(t) {
        Some(at) => format!("{t} ({})", relative(at, now)),
        None => t.to_string(),
    }
}

/// The human screen.
pub(crate) fn render(s: &Status, now: SystemTime) -> String {
    let mut o = String::new();
    let dry = if s.dry_run { ", DRY RUN" } else { "" };
    let _ = writeln!(
        o,
        "nthd {} (pid {}{dry}), status written {}",
        s.version,
        s.pid,
        ago(&s.written_at, now)
    );
    render_head(&mut o, s);
    render_health(&mut o, s, now);
    render_sources(&mut o, s, now);
    render_notices(&mut o, s, now);
    render_actions(&mut o, s, now);
    for (what, e) in [
        ("metadata", &s.last_metadata_error),
        ("logind", &s.last_logind_error),
    ] {
        if let Some(e) = e {
            let state = if e.current { "now" } else { "last, resolved" };
            let _ = writeln!(
                o,
                "{what} error ({state}, {}): {}",
                ago(&e.at, now),
                e.message
            );
        }
    }
    o
}

fn render_head(o: &mut String, s: &Status) {
    let cloud = match (&s.cloud, &s.detected_by) {
        (Some(c), Some(how)) => format!("{c} ({how})"),
        (Some(c), None) => c.clone(),
        _ => "not detected yet".to_string(),
    };
    let _ = writeln!(o, "cloud:      {cloud}");
    let instance = s
        .instance
        .describe()
        .unwrap_or_else(|| "unknown".to_string());
    let _ = writeln!(o, "instance:   {instance}");
    if let Some(w) = &s.watching {
        let _ = writeln!(o, "watching:   {w}");
    }
    let budget = s.drain_budget_seconds.map_or_else(
        || "unknown (logind not read)".to_string(),
        |b| {
            format!(
                "{} (logind InhibitDelayMaxUSec)",
                format_duration(Duration::from_secs(b))
            )
        },
    );
    let _ = writeln!(o, "drain time: {budget}");
    if let Some(why) = &s.drain_lock_error {
        let _ = writeln!(o, "no drain report: {why}");
    }
    if let Some(d) = &s.drain {
        let _ = writeln!(o, "drained:    {} (began {})", d.sentence(), d.started);
    }
}

/// Blindness and disabled extras, first: they say what the rest of the screen cannot vouch for.
fn render_health(o: &mut String, s: &Status, now: SystemTime) {
    let seen = match &s.last_metadata_ok {
        Some(t) => format!("last successful read {}", ago(t, now)),
        None => "no successful read yet".to_string(),
    };
    match &s.blind {
        Some(b) => {
            let _ = writeln!(o, "BLIND:      {} ({seen})", b.reason);
        }
        None => {
            let _ = writeln!(o, "seeing:     {seen}");
        }
    }
    for e in &s.extras_disabled {
        let _ = writeln!(
            o,
            "DISABLED:   {} since {}: {}",
            e.name,
            ago(&e.since, now),
            e.reason
        );
    }
    for d in &s.degraded {
        let _ = writeln!(o, "DEGRADED:   {}", d.message);
    }
}

fn render_sources(o: &mut String, s: &Status, now: SystemTime) {
    let _ = writeln!(o, "sources:");
    if s.sources.is_empty() {
        let _ = writeln!(o, "  none read yet");
    }
    for src in &s.sources {
        let ok = src.last_ok.as_deref().map_or_else(
            || "never read".to_string(),
            |t| format!("last ok {}", ago(t, now)),
        );
        let err = match &src.last_error {
            Some(e) if e.current => format!("; FAILING: {}", e.message),
            _ => String::new(),
        };
        let _ = writeln!(o, "  {:<40} {ok}{err}", src.name);
    }
}

fn render_notices(o: &mut String, s: &Status, now: SystemTime) {
    if let Some(sd) = &s.shutting_down {
        let _ = writeln!(
            o,
            "SHUTTING DOWN: logind accepted {} for {}; kubelet is draining",
            sd.action, sd.notice_id
        );
    }
    let _ = writeln!(o, "notices:");
    if s.notices.is_empty() {
        let _ = writeln!(o, "  none");
    }
    for n in &s.notices {
        let deadline = n.deadline.as_deref().map_or_else(
            || "no deadline given".to_string(),
            |d| format!("deadline {}", ago(d, now)),
        );
        let done = if n.acted { ", already acted on" } else { "" };
        let _ = writeln!(o, "  {} [{}] {deadline}: {}", n.kind, n.status, n.detail);
        let when = if n.when == "now" {
            "now".to_string()
        } else {
            format!("at {}", ago(&n.when, now))
        };
        let _ = writeln!(o, "    decision: {} {when} ({}){done}", n.action, n.reason);
    }
    for p in &s.pending {
        let _ = writeln!(
            o,
            "pending:    {} for {} at {}",
            p.action,
            p.kind,
            ago(&p.at, now)
        );
    }
}

fn render_actions(o: &mut String, s: &Status, now: SystemTime) {
    if s.actions.is_empty() {
        let _ = writeln!(o, "actions:    none");
        return;
    }
    let _ = writeln!(o, "actions:");
    for a in &s.actions {
        let err = a
            .error
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        let kind = a.kind.as_deref().unwrap_or("notice");
        let _ = writeln!(
            o,
            "  {} {} for {kind} {}: {}{err}",
            ago(&a.at, now),
            a.action,
            a.notice_id,
            a.result
        );
    }
}
