//! AWS EC2 instance metadata (IMDSv2).
//!
//! Four sources, each polled at a rate that fits its lead time:
//! - `spot/instance-action` (2 minutes ahead, best effort): every poll interval;
//! - `autoscaling/target-lifecycle-state`: every 3 poll intervals;
//! - `events/recommendations/rebalance` (10–20 minutes ahead): every
//!   [`REBALANCE_READ_INTERVAL`] while the rebalance boost is on, so that the boost starts
//!   within 5 s of the recommendation; every slow poll interval when it is off (or when that is
//!   shorter);
//! - `events/maintenance/scheduled` (days ahead): every slow poll interval.
//!
//! After a failed read, spot is read again at its next interval (only a 429 backs it off); the
//! other three back off exponentially ([`super::Pace`]).
//!
//! Sources due at the same instant (they share one grid) are read together, each on its own
//! kept connection, so their answers share a wakeup. The session token is cached and refreshed
//! before it expires; a 401 drops it and the read is retried once with a new one. nthd never
//! falls back to IMDSv1 on its own.

use std::time::{Duration, Instant};

use serde::Deserialize;

use super::Timings;
use super::{
    cap_raw, earliest, gather, identity, Cloud, Identity, Notice, NoticeKind, NoticeStatus,
    Observation, Pace, Provider, SourceState,
};
use crate::imds::{
    get_all_with_token, get_with_token, ImdsClient, ImdsError, Reply, TokenAnswer, TokenCache,
    TokenSource,
};
use crate::logging::{clean, clean_id, warn_limited};
use crate::notice::{Lifecycle, NoticeId, SourceId};
use crate::timefmt;
use crate::timings::ASG_POLLS;

pub(crate) const TOKEN_PATH: &str = "/latest/api/token";
/// Path of the spot instance-action notice.
pub const SPOT_PATH: &str = "/latest/meta-data/spot/instance-action";
/// Path of the rebalance recommendation.
pub const REBALANCE_PATH: &str = "/latest/meta-data/events/recommendations/rebalance";
/// Path of the scheduled events list.
pub const SCHEDULED_PATH: &str = "/latest/meta-data/events/maintenance/scheduled";
/// Path of the Auto Scaling target lifecycle state.
pub const ASG_PATH: &str = "/latest/meta-data/autoscaling/target-lifecycle-state";
/// Path of the instance id (`i-0123456789abcdef0`).
pub const INSTANCE_ID_PATH: &str = "/latest/meta-data/instance-id";
/// Path of the instance type (`m5.large`).
pub const INSTANCE_TYPE_PATH: &str = "/latest/meta-data/instance-type";
/// Path of the availability zone (`us-east-1a`).
pub const ZONE_PATH: &str = "/latest/meta-data/placement/availability-zone";
/// Path of the purchasing option (`spot`, `on-demand` or `scheduled`).
pub const LIFE_CYCLE_PATH: &str = "/latest/meta-data/instance-life-cycle";

/// The four sources' paths, in the order they are read.
pub const SOURCE_PATHS: [&str; 4] = [
    AwsSource::ALL[0].path(),
    AwsSource::ALL[1].path(),
    AwsSource::ALL[2].path(),
    AwsSource::ALL[3].path(),
];

/// One of the four AWS notice sources: where it is read, its id, how often and how its answer
/// is parsed, all here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AwsSource {
    /// `spot/instance-action`, every poll interval.
    Spot,
    /// `autoscaling/target-lifecycle-state`, every 3 poll intervals.
    Asg,
    /// `events/recommendations/rebalance` ([`AwsOptions::rebalance_interval`]).
    Rebalance,
    /// `events/maintenance/scheduled`, every slow poll interval.
    Scheduled,
}

impl AwsSource {
    /// Every source, in the order they are read (and their declaration order: a source's
    /// state is kept at `source as usize`).
    pub(crate) const ALL: [AwsSource; 4] = [
        AwsSource::Spot,
        AwsSource::Asg,
        AwsSource::Rebalance,
        AwsSource::Scheduled,
    ];

    /// Its metadata path.
    pub(crate) const fn path(self) -> &'static str {
        match self {
            AwsSource::Spot => SPOT_PATH,
            AwsSource::Asg => ASG_PATH,
            AwsSource::Rebalance => REBALANCE_PATH,
            AwsSource::Scheduled => SCHEDULED_PATH,
        }
    }

    /// Its id in logs, the status file and metrics labels.
    pub(crate) const fn id(self) -> SourceId {
        SourceId::new(match self {
            AwsSource::Spot => "aws/spot/instance-action",
            AwsSource::Asg => "aws/autoscaling/target-lifecycle-state",
            AwsSource::Rebalance => "aws/events/recommendations/rebalance",
            AwsSource::Scheduled => "aws/events/maintenance/scheduled",
        })
    }

    /// How often it is read, from the plan's intervals in `opts`.
    fn interval(self, opts: &AwsOptions) -> Duration {
        match self {
            AwsSource::Spot => opts.poll_interval,
            AwsSource::Asg => opts.poll_interval * ASG_POLLS,
            AwsSource::Rebalance => opts.rebalance_interval(),
            AwsSource::Scheduled => opts.slow_poll_interval,
        }
    }

    /// How a failed read is retried: spot at its next interval, the others backing off.
    fn pace(self) -> Pace {
        match self {
            AwsSource::Spot => Pace::Urgent,
            _ => Pace::Slow,
        }
    }

    /// Its notices in a 200 answer read from `url`.
    fn parse(self, url: &str, body: &str) -> Result<Vec<Notice>, ImdsError> {
        match self {
            AwsSource::Spot => parse_spot(url, body).map(|n| vec![n]),
            AwsSource::Asg => Ok(parse_asg(url, body)?.into_iter().collect()),
            AwsSource::Rebalance => parse_rebalance(url, body).map(|n| vec![n]),
            AwsSource::Scheduled => parse_scheduled(url, body),
        }
    }
}

const SRC_SPOT: SourceId = AwsSource::Spot.id();
const SRC_REBALANCE: SourceId = AwsSource::Rebalance.id();
const SRC_SCHEDULED: SourceId = AwsSource::Scheduled.id();
const SRC_ASG: SourceId = AwsSource::Asg.id();

pub(crate) use crate::timings::{BOOST_MAX, REBALANCE_READ_INTERVAL};

/// The IPv6 endpoint, for IPv6-only subnets.
pub(crate) const IPV6_ENDPOINT: &str = "http://[fd00:ec2::254]";

/// How nthd talks to AWS IMDS.
#[derive(Clone, Debug)]
pub struct AwsOptions {
    /// How often spot is read; the Auto Scaling state is read every 3 of these.
    pub poll_interval: Duration,
    /// How often the scheduled events are read, and the rebalance recommendation when the
    /// boost is off ([`AwsOptions::rebalance_interval`]).
    pub slow_poll_interval: Duration,
    /// Allow plain IMDSv1 reads when the token PUT is refused.
    pub allow_imdsv1: bool,
    /// Requested token lifetime (1..=21600 s).
    pub token_ttl: Duration,
    /// While a rebalance recommendation is listed, spot is read this often (`None`: never
    /// faster than `poll_interval`). A recommendation usually comes 10-20 minutes before the
    /// interruption notice, so those minutes are when detection speed pays.
    pub rebalance_boost: Option<Duration>,
    /// The boost ends after this long even if the recommendation stays listed.
    pub boost_max: Duration,
}

impl Default for AwsOptions {
    /// The plan's defaults on AWS.
    fn default() -> Self {
        AwsOptions::from_timings(&Timings::defaults(Cloud::Aws))
    }
}

impl AwsOptions {
    /// The options with the plan's intervals (IMDSv1 off).
    pub fn from_timings(t: &Timings) -> AwsOptions {
        AwsOptions {
            poll_interval: t.poll,
            slow_poll_interval: t.slow_poll,
            allow_imdsv1: false,
            token_ttl: TOKEN_TTL,
            rebalance_boost: t.rebalance_boost,
            boost_max: BOOST_MAX,
        }
    }

    /// Whether a rebalance recommendation makes spot reads faster at all.
    fn boosts(&self) -> bool {
        self.rebalance_boost.is_some_and(|b| b < self.poll_interval)
    }

    /// How often the rebalance recommendation is read: every [`REBALANCE_READ_INTERVAL`] when
    /// it boosts spot reads (a shorter slow poll interval still wins), else every slow poll
    /// interval, since nothing but the log would see it sooner.
    pub fn rebalance_interval(&self) -> Duration {
        match self.boosts() {
            true => self.slow_poll_interval.min(REBALANCE_READ_INTERVAL),
            false => self.slow_poll_interval,
        }
    }
}

/// The IMDSv2 token lifetime nthd asks for: the longest AWS gives (6 hours).
pub(crate) const TOKEN_TTL: Duration = Duration::from_secs(21600);

/// IMDSv2 for one reader: its token, and the IMDSv1 mode the user may allow
/// (`NTHD_AWS_IMDSV1`). AWS's provider reads through one, and so do the Auto Scaling
/// credentials (`asg/credentials.rs`).
#[derive(Debug)]
pub(crate) struct Imdsv2 {
    client: ImdsClient,
    token: TokenCache,
    allow_v1: bool,
    /// Set once the token PUT was refused and IMDSv1 was allowed.
    v1_mode: bool,
}

impl Imdsv2 {
    /// Tokens of `ttl` for reads through `client`.
    pub(crate) fn new(client: ImdsClient, allow_v1: bool, ttl: Duration) -> Imdsv2 {
        Imdsv2 {
            token: TokenCache::new(TOKEN_PATH, "x-aws-ec2-metadata-token-ttl-seconds", ttl),
            client,
            allow_v1,
            v1_mode: false,
        }
    }

    /// The client the reads go through.
    pub(crate) fn client(&self) -> &ImdsClient {
        &self.client
    }

    /// Whether the reads go without a token, as the user allowed.
    fn v1_mode(&self) -> bool {
        self.v1_mode
    }

    /// The token to send, or `None` in the IMDSv1 mode the user allowed.
    fn fetch_token(&mut self) -> Result<Option<String>, ImdsError> {
        match self.token.get(&self.client)? {
            TokenAnswer::Token(t) => {
                if self.v1_mode {
                    tracing::info!(
                        "IMDSv2 token PUT {} works again; leaving IMDSv1 mode",
                        self.client.url(TOKEN_PATH)
                    );
                    self.v1_mode = false;
                }
                Ok(Some(t))
            }
            // 403: IMDSv2 disabled or hop limit; 404/405: an IMDSv1-only endpoint.
            TokenAnswer::Refused { url, status } if self.allow_v1 => {
                if !self.v1_mode {
                    tracing::warn!("IMDSv2 token PUT {url} answered HTTP {status}; using IMDSv1 as NTHD_AWS_IMDSV1 allows");
                    self.v1_mode = true;
                }
                Ok(None)
            }
            TokenAnswer::Refused { url, status } => Err(ImdsError::TokenRefused { url, status }),
        }
    }
}

impl TokenSource for Imdsv2 {
    const HEADER: &'static str = "x-aws-ec2-metadata-token";

    fn client(&self) -> &ImdsClient {
        &self.client
    }

    fn token(&mut self) -> Result<Option<String>, ImdsError> {
        self.fetch_token()
    }

    /// IMDSv2 answers 401 to an expired or unknown token.
    fn rejects(&self, status: u16) -> bool {
        status == 401
    }

    fn drop_token(&mut self) {
        self.token.clear();
    }
}

/// The AWS provider.
pub struct Aws {
    opts: AwsOptions,
    imds: Imdsv2,
    /// Each source's state, at `source as usize` ([`Aws::state`]).
    sources: Vec<SourceState>,
    /// When the rebalance recommendation now listed was first seen (the boost's start).
    rebalance_since: Option<Instant>,
}

#[derive(Deserialize)]
struct SpotAction {
    action: String,
    #[serde(default)]
    time: Option<String>,
}

#[derive(Deserialize)]
struct Rebalance {
    #[serde(rename = "noticeTime", default)]
    notice_time: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
struct ScheduledEvent {
    #[serde(default)]
    code: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    event_id: Option<String>,
    #[serde(default)]
    not_before: Option<String>,
    #[serde(default)]
    not_after: Option<String>,
    #[serde(default)]
    not_before_deadline: Option<String>,
    #[serde(default)]
    state: String,
}

impl Aws {
    /// A provider that reads through `client`. Nothing is read before the first `observe()`.
    pub fn new(client: ImdsClient, opts: AwsOptions) -> Aws {
        let now = Instant::now();
        let sources = AwsSource::ALL
            .into_iter()
            .map(|s| SourceState::new(s.id(), s.interval(&opts), s.pace(), now))
            .collect();
        Aws {
            imds: Imdsv2::new(client, opts.allow_imdsv1, opts.token_ttl),
            opts,
            sources,
            rebalance_since: None,
        }
    }

    /// The token source, for reads the daemon asks the reader thread to make with it.
    pub(crate) fn imdsv2(&mut self) -> &mut Imdsv2 {
        &mut self.imds
    }

    /// Whether spot is read at the boosted rate now.
    pub fn boosted(&self) -> bool {
        self.state(AwsSource::Spot).interval != self.opts.poll_interval
    }

    /// What is known of `source`.
    fn state(&self, source: AwsSource) -> &SourceState {
        &self.sources[source as usize]
    }

    /// What is known of `source`, to update.
    fn state_mut(&mut self, source: AwsSource) -> &mut SourceState {
        &mut self.sources[source as usize]
    }

    /// Reads spot faster while a rebalance recommendation is listed, for at most
    /// [`AwsOptions::boost_max`]; back to the normal interval when it goes or time is up.
    fn adjust_boost(&mut self, now: Instant) {
        let Some(boost) = self.opts.rebalance_boost else {
            return;
        };
        let listed = self
            .state(AwsSource::Rebalance)
            .last
            .iter()
            .any(|n| n.kind == NoticeKind::Rebalance);
        self.rebalance_since = match (listed, self.rebalance_since) {
            (false, _) => None,
            (true, None) => Some(now),
            (true, since) => since,
        };
        let on = self
            .rebalance_since
            .is_some_and(|t| now.duration_since(t) < self.opts.boost_max);
        let normal = self.opts.poll_interval;
        let want = if on { boost.min(normal) } else { normal };
        if self.state(AwsSource::Spot).interval == want {
            return;
        }
        match on {
            true => tracing::info!(
                "a rebalance recommendation is listed: reading spot every {} for up to {}",
                timefmt::format_duration(boost),
                timefmt::format_duration(self.opts.boost_max)
            ),
            false => tracing::info!(
                "reading spot every {} again",
                timefmt::format_duration(self.opts.poll_interval)
            ),
        }
        self.state_mut(AwsSource::Spot).set_interval(want, now);
    }

    /// How many IMDSv2 tokens were fetched so far.
    pub fn tokens_fetched(&self) -> u64 {
        self.imds.token.fetched()
    }

    /// GET with the token; a 401 drops it and the read is retried once ([`get_with_token`]).
    fn get(&mut self, path: &str) -> Result<Reply, ImdsError> {
        get_with_token(&mut self.imds, path)
    }

    /// Reads the sources due now together ([`get_all_with_token`]), so
    /// their answers wake nthd once rather than once each (docs/performance.md, "CPU per
    /// metadata request"), and records each result.
    fn read_due(&mut self, due: &[AwsSource], obs: &mut Observation) {
        let paths: Vec<&str> = due.iter().map(|s| s.path()).collect();
        let replies = match get_all_with_token(&mut self.imds, &paths) {
            Ok(r) => r,
            Err(e) => return self.token_failed(due, &e, obs),
        };
        for (&source, reply) in due.iter().zip(replies) {
            let result = reply.and_then(|r| parse_reply(self.imds.client(), source, &r));
            self.state_mut(source).record(Instant::now(), result, obs);
        }
    }

    /// No token: the first source due carries the error. A refused token fails every source
    /// the same way, so the others are only put back, to be reported once; any other failure
    /// (a timeout, a broken answer) is recorded for each of them without asking again. Each
    /// source is retried at its own [`Pace`]: spot at its next interval, so the token PUT is
    /// never asked more often than spot is read; the slower sources back off.
    fn token_failed(&mut self, due: &[AwsSource], e: &ImdsError, obs: &mut Observation) {
        let now = Instant::now();
        let refused = matches!(e, ImdsError::TokenRefused { .. });
        for (n, &s) in due.iter().enumerate() {
            let source = self.state_mut(s);
            if n > 0 && refused {
                source.retry_after(now, e);
            } else {
                source.record(now, Err(e.clone()), obs);
            }
        }
    }
}

/// What a source's answer says: nothing listed (404), its notices (200), or an error. The URL
/// is spelled out only when an answer needs it, not for the usual 404 of every poll.
fn parse_reply(
    client: &ImdsClient,
    source: AwsSource,
    reply: &Reply,
) -> Result<Vec<Notice>, ImdsError> {
    if reply.status == 404 {
        return Ok(Vec::new());
    }
    let url = client.url(source.path());
    match reply.status {
        200 => source.parse(url.as_str(), &reply.body),
        _ => Err(reply.status_error(url)),
    }
}

/// Parses `spot/instance-action`. Unknown actions become [`NoticeKind::Unknown`] (logged,
/// never acted on by default). The fingerprint is the action, never the time: some endpoints
/// recompute `time` on every request.
pub fn parse_spot(url: &str, body: &str) -> Result<Notice, ImdsError> {
    let v: SpotAction = serde_json::from_str(body).map_err(|e| {
        ImdsError::malformed(url, format!("invalid spot instance-action JSON: {e}"), body)
    })?;
    let action = v.action.trim().to_ascii_lowercase();
    let kind = match action.as_str() {
        "terminate" => NoticeKind::SpotTerminate,
        "stop" => NoticeKind::SpotStop,
        "hibernate" => NoticeKind::SpotHibernate,
        _ => {
            let a = clean(&v.action, 64);
            warn_limited(&format!("aws-spot-action {a}"), || {
                format!("unknown spot instance-action \"{a}\" at {url}; treating it as unknown")
            });
            NoticeKind::Unknown
        }
    };
    let deadline = v.time.as_deref().and_then(timefmt::parse_any);
    if let (Some(t), None) = (&v.time, deadline) {
        let t = clean(t, 64);
        warn_limited(&format!("aws-spot-time {t}"), || {
            format!("spot instance-action time \"{t}\" at {url} does not parse; acting as if it were now")
        });
    }
    Ok(Notice {
        kind,
        source: SRC_SPOT,
        // Unknown actions get their own id space: sanitizing must never turn one into the
        // fingerprint of a recognised action (found by fuzzing: "ter minate").
        id: match kind {
            NoticeKind::Unknown => {
                NoticeId::new(Cloud::Aws, &["spot", "unknown", &clean_id(&action)])
            }
            _ => NoticeId::new(Cloud::Aws, &["spot", &action]),
        },
        event_id: None,
        deadline,
        status: NoticeStatus::Active,
        detail: format!(
            "spot instance-action {} at {}",
            v.action,
            v.time.as_deref().unwrap_or("(no time)")
        ),
        raw: cap_raw(body),
    })
}

/// Parses `events/recommendations/rebalance`. A recommendation has no deadline, and its
/// fingerprint is fixed: `noticeTime` may be recomputed on every request.
pub fn parse_rebalance(url: &str, body: &str) -> Result<Notice, ImdsError> {
    let v: Rebalance = serde_json::from_str(body)
        .map_err(|e| ImdsError::malformed(url, format!("invalid rebalance JSON: {e}"), body))?;
    Ok(Notice {
        kind: NoticeKind::Rebalance,
        source: SRC_REBALANCE,
        id: NoticeId::new(Cloud::Aws, &["rebalance"]),
        event_id: None,
        deadline: None,
        status: NoticeStatus::Active,
        detail: format!(
            "rebalance recommendation issued {}",
            v.notice_time.as_deref().unwrap_or("(no time)")
        ),
        raw: cap_raw(body),
    })
}

/// Parses `autoscaling/target-lifecycle-state`. `InService` is no notice.
pub fn parse_asg(url: &str, body: &str) -> Result<Option<Notice>, ImdsError> {
    let state = body.trim();
    if state.is_empty() || state.len() > 64 || !state.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ImdsError::malformed(
            url,
            "expected a lifecycle state such as InService",
            body,
        ));
    }
    let kind = match state {
        "InService" => return Ok(None),
        "Terminated" | "Warmed:Terminated" => NoticeKind::AsgTerminate,
        _ => NoticeKind::AsgOther,
    };
    Ok(Some(Notice {
        kind,
        source: SRC_ASG,
        id: NoticeId::new(Cloud::Aws, &["asg", &clean_id(state)]),
        event_id: None,
        deadline: None,
        status: NoticeStatus::Active,
        detail: format!("Auto Scaling target lifecycle state {state}"),
        raw: cap_raw(body),
    }))
}

/// Parses `events/maintenance/scheduled`: a JSON array, possibly empty.
pub fn parse_scheduled(url: &str, body: &str) -> Result<Vec<Notice>, ImdsError> {
    let events: Vec<ScheduledEvent> = serde_json::from_str(body).map_err(|e| {
        ImdsError::malformed(url, format!("invalid scheduled-events JSON: {e}"), body)
    })?;
    Ok(events.iter().map(|ev| scheduled_notice(url, ev)).collect())
}

fn scheduled_notice(url: &str, ev: &ScheduledEvent) -> Notice {
    let code = ev.code.trim().to_ascii_lowercase();
    let deadline = ev.not_before.as_deref().and_then(timefmt::parse_any);
    if let (Some(nb), None) = (&ev.not_before, deadline) {
        let nb = clean(nb, 64);
        warn_limited(&format!("aws-notbefore {nb}"), || {
            format!("scheduled event NotBefore \"{nb}\" at {url} does not parse")
        });
    }
    let event_id = ev
        .event_id
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let id = match &event_id {
        Some(e) => NoticeId::new(Cloud::Aws, &["scheduled", &clean_id(e)]),
        None => NoticeId::new(
            Cloud::Aws,
            &[
                "scheduled",
                &clean_id(&code),
                &clean_id(ev.not_before.as_deref().unwrap_or("")),
            ],
        ),
    };
    let raw = serde_json::json!({
        "Code": ev.code, "EventId": event_id, "NotBefore": ev.not_before,
        "NotAfter": ev.not_after, "NotBeforeDeadline": ev.not_before_deadline,
        "State": ev.state, "Description": ev.description,
    });
    Notice {
        kind: scheduled_kind(url, &code, &ev.code),
        source: SRC_SCHEDULED,
        id,
        event_id,
        deadline,
        status: scheduled_status(url, &ev.state),
        detail: format!(
            "scheduled event {} ({}) {} not before {}",
            ev.code,
            ev.state,
            ev.event_id.as_deref().unwrap_or("(no id)"),
            ev.not_before.as_deref().unwrap_or("(unset)")
        ),
        raw: cap_raw(&raw.to_string()),
    }
}

/// The kind of a scheduled event `Code` (`code` is it trimmed and lowercased).
fn scheduled_kind(url: &str, code: &str, as_sent: &str) -> NoticeKind {
    match code {
        "instance-stop" | "instance-retirement" => NoticeKind::ScheduledStop,
        "instance-reboot" | "system-reboot" => NoticeKind::ScheduledReboot,
        "system-maintenance" => NoticeKind::ScheduledMaintenance,
        _ => {
            let c = clean(as_sent, 64);
            warn_limited(&format!("aws-code {c}"), || {
                format!("unknown scheduled event code \"{c}\" at {url}; treating it as unknown")
            });
            NoticeKind::Unknown
        }
    }
}

/// A scheduled event's `State`; an unknown one is taken as active.
fn scheduled_status(url: &str, state: &str) -> NoticeStatus {
    match state.trim().to_ascii_lowercase().as_str() {
        "canceled" | "cancelled" => NoticeStatus::Canceled,
        "completed" => NoticeStatus::Completed,
        "active" | "" => NoticeStatus::Active,
        other => {
            let st = clean(other, 64);
            warn_limited(&format!("aws-state {st}"), || {
                format!("unknown scheduled event state \"{st}\" at {url}; treating it as active")
            });
            NoticeStatus::Active
        }
    }
}

/// The lifecycle an `instance-life-cycle` value names. `scheduled` (Scheduled Reserved
/// Instances, retired) and anything else are unknown: nthd does not guess a billing model.
pub(crate) fn parse_life_cycle(value: &str) -> Option<Lifecycle> {
    match value {
        "spot" => Some(Lifecycle::Spot),
        "on-demand" => Some(Lifecycle::OnDemand),
        _ => None,
    }
}

/// The identity keys, read one after the other with the token.
const IDENTITY: identity::Paths = identity::Paths {
    instance_id: INSTANCE_ID_PATH,
    instance_type: INSTANCE_TYPE_PATH,
    zone: ZONE_PATH,
    lifecycle: Some((LIFE_CYCLE_PATH, parse_life_cycle)),
};

impl Provider for Aws {
    const CLOUD: Cloud = Cloud::Aws;

    fn describe(&self) -> String {
        format!(
            "AWS IMDS{} at {}: spot every {}{}, ASG every {}, rebalance recommendation every {}, scheduled events every {}",
            if self.imds.v1_mode() { "v1" } else { "v2" },
            self.imds.client().base(),
            timefmt::format_duration(self.opts.poll_interval),
            match self.opts.rebalance_boost {
                Some(b) => format!(" (every {} after a rebalance recommendation)", timefmt::format_duration(b)),
                None => String::new(),
            },
            timefmt::format_duration(AwsSource::Asg.interval(&self.opts)),
            timefmt::format_duration(self.opts.rebalance_interval()),
            timefmt::format_duration(self.opts.slow_poll_interval),
        )
    }

    fn observe(&mut self) -> Observation {
        let mut obs = Observation::default();
        let now = Instant::now();
        let due: Vec<AwsSource> = AwsSource::ALL
            .into_iter()
            .filter(|&s| self.state(s).due(now))
            .collect();
        if !due.is_empty() {
            self.read_due(&due, &mut obs);
        }
        self.adjust_boost(Instant::now());
        gather(&self.sources, &mut obs);
        obs
    }

    fn next_due(&self) -> Instant {
        earliest(&self.sources)
    }

    fn identity(&mut self) -> Result<Identity, ImdsError> {
        let client = self.imds.client().clone();
        IDENTITY.read(&client, |path| self.get(path))
    }
}

/// Convenience used by `nthd once` and tests: the endpoint for the options given.
pub(crate) fn endpoint(explicit: Option<&str>, ipv6: bool) -> String {
    match explicit {
        Some(e) => e.to_string(),
        None if ipv6 => IPV6_ENDPOINT.to_string(),
        None => Cloud::Aws.default_endpoint().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::imds::status_error;
    use std::time::UNIX_EPOCH;

    const U: &str = "http://imds/x";

    #[test]
    fn spot_actions() {
        let n = parse_spot(U, r#"{"action":"terminate","time":"2017-09-18T08:22:00Z"}"#).unwrap();
        assert_eq!(n.kind, NoticeKind::SpotTerminate);
        assert_eq!(n.id, "aws/spot/terminate");
        assert_eq!(
            n.deadline,
            Some(UNIX_EPOCH + Duration::from_secs(1_505_722_920))
        );
        let n2 = parse_spot(U, r#"{"action":"terminate","time":"2017-09-18T08:23:00Z"}"#).unwrap();
        assert_eq!(n.id, n2.id, "the fingerprint must not depend on time");
        assert_eq!(
            parse_spot(U, r#"{"action":"stop","time":"2017-09-18T08:22:00Z"}"#)
                .unwrap()
                .kind,
            NoticeKind::SpotStop
        );
        assert_eq!(
            parse_spot(U, r#"{"action":"hibernate","time":"x"}"#)
                .unwrap()
                .kind,
            NoticeKind::SpotHibernate
        );
        let u = parse_spot(
            U,
            r#"{"action":"evaporate","time":"2017-09-18T08:22:00Z","extra":1}"#,
        )
        .unwrap();
        assert_eq!(u.kind, NoticeKind::Unknown);
        let spaced = parse_spot(
            U,
            r#"{"action":"ter minate","time":"2017-09-18T08:22:00Z"}"#,
        )
        .unwrap();
        assert_eq!(spaced.kind, NoticeKind::Unknown);
        assert_ne!(
            spaced.id, n.id,
            "an unknown action never shares a recognised action's id"
        );
        assert!(parse_spot(U, "{}").is_err());
        assert!(parse_spot(U, "terminate").is_err());
        assert!(parse_spot(U, r#"{"action":5}"#).is_err());
        let bad_time = parse_spot(U, r#"{"action":"terminate","time":"soon"}"#).unwrap();
        assert_eq!(bad_time.kind, NoticeKind::SpotTerminate);
        assert!(bad_time.deadline.is_none());
    }

    #[test]
    fn asg_states() {
        assert!(parse_asg(U, "InService").unwrap().is_none());
        assert!(parse_asg(U, "InService\n").unwrap().is_none());
        assert_eq!(
            parse_asg(U, "Terminated").unwrap().unwrap().kind,
            NoticeKind::AsgTerminate
        );
        assert_eq!(
            parse_asg(U, "Warmed:Terminated").unwrap().unwrap().kind,
            NoticeKind::AsgTerminate
        );
        for s in [
            "Standby",
            "Detached",
            "Warmed:Hibernated",
            "Warmed:Running",
            "Warmed:Stopped",
            "Pending",
        ] {
            assert_eq!(
                parse_asg(U, s).unwrap().unwrap().kind,
                NoticeKind::AsgOther,
                "{s}"
            );
        }
        assert!(parse_asg(U, "").is_err());
        assert!(parse_asg(U, "two words").is_err());
        assert!(parse_asg(U, &"x".repeat(100)).is_err());
    }

    #[test]
    fn scheduled_events() {
        let body = r#"[
          {"NotBefore":"21 Jan 2019 09:00:43 GMT","Code":"system-reboot","Description":"scheduled reboot","EventId":"instance-event-0d59937288b749b32","NotAfter":"21 Jan 2019 09:17:23 GMT","State":"active"},
          {"NotBefore":"22 Jan 2019 09:00:43 GMT","Code":"instance-stop","EventId":"instance-event-1","State":"active","NotBeforeDeadline":"25 Jan 2019 09:00:43 GMT"},
          {"NotBefore":"22 Jan 2019 09:00:43 GMT","Code":"instance-retirement","EventId":"instance-event-2","State":"canceled"},
          {"NotBefore":"22 Jan 2019 09:00:43 GMT","Code":"system-maintenance","EventId":"instance-event-3","State":"completed"},
          {"NotBefore":"22 Jan 2019 09:00:43 GMT","Code":"instance-reboot","EventId":"instance-event-4","State":"active"},
          {"NotBefore":"garbage","Code":"volcano","State":"active","Surprise":true}
        ]"#;
        let n = parse_scheduled(U, body).unwrap();
        assert_eq!(n.len(), 6);
        assert_eq!(n[0].kind, NoticeKind::ScheduledReboot);
        assert_eq!(
            n[0].event_id.as_deref(),
            Some("instance-event-0d59937288b749b32")
        );
        assert_eq!(n[0].id, "aws/scheduled/instance-event-0d59937288b749b32");
        assert_eq!(
            n[0].deadline,
            Some(UNIX_EPOCH + Duration::from_secs(1_548_061_243))
        );
        assert_eq!(n[1].kind, NoticeKind::ScheduledStop);
        assert_eq!(n[2].kind, NoticeKind::ScheduledStop);
        assert_eq!(n[2].status, NoticeStatus::Canceled);
        assert_eq!(n[3].kind, NoticeKind::ScheduledMaintenance);
        assert_eq!(n[3].status, NoticeStatus::Completed);
        assert_eq!(n[4].kind, NoticeKind::ScheduledReboot);
        assert_eq!(n[5].kind, NoticeKind::Unknown);
        assert!(n[5].deadline.is_none());
        assert!(n[5].event_id.is_none());
        assert!(parse_scheduled(U, "[]").unwrap().is_empty());
        assert!(parse_scheduled(U, "{}").is_err());
        assert!(parse_scheduled(U, "[").is_err());
    }

    #[test]
    fn endpoints() {
        assert_eq!(endpoint(None, false), "http://169.254.169.254");
        assert_eq!(endpoint(None, true), "http://[fd00:ec2::254]");
        assert_eq!(
            endpoint(Some("http://127.0.0.1:1"), true),
            "http://127.0.0.1:1"
        );
    }

    #[test]
    fn life_cycles() {
        assert_eq!(parse_life_cycle("spot"), Some(Lifecycle::Spot));
        assert_eq!(parse_life_cycle("on-demand"), Some(Lifecycle::OnDemand));
        for other in ["scheduled", "SPOT", "", "capacity-block"] {
            assert_eq!(parse_life_cycle(other), None, "{other}");
        }
    }

    #[test]
    fn rebalance_is_read_every_4s_only_while_it_boosts_spot() {
        let secs = Duration::from_secs;
        let d = AwsOptions::default();
        assert_eq!(d.rebalance_interval(), secs(4));
        let off = AwsOptions {
            rebalance_boost: None,
            ..AwsOptions::default()
        };
        assert_eq!(off.rebalance_interval(), secs(20), "boost off: slow poll");
        let no_faster = AwsOptions {
            rebalance_boost: Some(secs(2)),
            ..AwsOptions::default()
        };
        assert_eq!(
            no_faster.rebalance_interval(),
            secs(20),
            "a boost slower than spot's pace"
        );
        let short_slow = AwsOptions {
            slow_poll_interval: secs(2),
            ..AwsOptions::default()
        };
        assert_eq!(
            short_slow.rebalance_interval(),
            secs(2),
            "a shorter slow poll wins"
        );
    }

    /// What each source has left before its next read, after `token_failed` at `now`.
    fn waits(aws: &Aws, now: Instant) -> Vec<Duration> {
        aws.sources
            .iter()
            .map(|s| s.next.saturating_duration_since(now))
            .collect()
    }

    #[test]
    fn without_a_token_spot_is_read_again_at_its_interval_and_the_slow_sources_back_off() {
        let client = ImdsClient::new("http://127.0.0.1:9", Default::default()).unwrap();
        let url = client.url(TOKEN_PATH);
        let i = Duration::from_secs(1);
        for e in [
            ImdsError::TokenRefused {
                url: url.clone(),
                status: 403,
            },
            status_error(url.clone(), 500),
            ImdsError::Timeout {
                url: url.clone(),
                timeout: Duration::from_secs(2),
            },
        ] {
            let mut aws = Aws::new(client.clone(), AwsOptions::default());
            let all = AwsSource::ALL;
            let mut obs = Observation::default();
            for _ in 0..6 {
                aws.token_failed(&all, &e, &mut obs);
            }
            let now = Instant::now();
            let w = waits(&aws, now);
            // Spot: the token PUT is asked again at the next interval, not sooner.
            assert!(w[0] <= i, "{e}: {w:?}");
            // ASG (3 s), rebalance (4 s), scheduled (20 s) back off to 15, 20 and 60 s.
            let floor = [0, 12, 16, 48].map(Duration::from_secs);
            assert!(
                w[1..].iter().zip(&floor[1..]).all(|(w, f)| w >= f),
                "{e}: {w:?}"
            );
            // A refused token is reported once per read, by the first source due.
            let refused = matches!(e, ImdsError::TokenRefused { .. });
            assert_eq!(obs.errors.len(), if refused { 6 } else { 24 }, "{e}");
        }
    }

    #[test]
    fn a_throttled_token_request_backs_spot_off() {
        let client = ImdsClient::new("http://127.0.0.1:9", Default::default()).unwrap();
        let e = status_error(client.url(TOKEN_PATH), 429);
        let mut aws = Aws::new(client, AwsOptions::default());
        let mut obs = Observation::default();
        for _ in 0..4 {
            aws.token_failed(&[AwsSource::Spot], &e, &mut obs);
        }
        let w = waits(&aws, Instant::now());
        assert!(w[0] >= Duration::from_secs(3), "{w:?}");
    }

    #[test]
    fn each_source_keeps_its_id_path_and_parser() {
        for (i, s) in AwsSource::ALL.into_iter().enumerate() {
            assert_eq!(s as usize, i, "ALL is in declaration order");
            assert_eq!(SOURCE_PATHS[i], s.path());
            assert_eq!(
                s.id().as_str(),
                format!("aws/{}", s.path().trim_start_matches("/latest/meta-data/"))
            );
        }
        let url = "http://169.254.169.254";
        let spot = r#"{"action":"terminate","time":"2030-01-01T00:00:00Z"}"#;
        assert_eq!(
            AwsSource::Spot.parse(url, spot).unwrap()[0].source,
            SRC_SPOT
        );
        assert!(AwsSource::Scheduled.parse(url, "[]").unwrap().is_empty());
        assert!(AwsSource::Rebalance.parse(url, "{").is_err());
        let o = AwsOptions::default();
        let intervals = AwsSource::ALL.map(|s| s.interval(&o));
        let secs = Duration::from_secs;
        assert_eq!(intervals, [secs(1), secs(3), secs(4), secs(20)]);
    }

    #[test]
    fn ids_are_one_bounded_word() {
        assert_eq!(clean_id("a b\nc"), "abc");
        assert_eq!(clean_id("x\u{1b}[2J\u{202e}é"), "x[2J");
        assert_eq!(clean_id(&"x".repeat(500)).len(), 128);
    }

    #[test]
    fn aws_reads_a_spot_notice_through_imdsd_without_a_token() {
        use crate::imds::imdsd::tests::{client, fake_imdsd};
        let dir = tempfile::tempdir().unwrap();
        let spot = r#"{"action":"terminate","time":"2099-01-01T00:00:00Z"}"#;
        let (sock, calls) = fake_imdsd(dir.path(), &[("/meta-data/spot/instance-action", spot)]);
        let mut p = Aws::new(client(&sock, dir.path()), AwsOptions::default());
        let obs = p.observe();
        assert!(obs.errors.is_empty(), "{:?}", obs.errors);
        let kinds: Vec<_> = obs.notices.iter().map(|n| n.kind).collect();
        assert_eq!(kinds, [crate::notice::NoticeKind::SpotTerminate]);
        assert!(calls
            .lock()
            .unwrap()
            .iter()
            .all(|c| c["parameters"]["key"] != "/api/token"));
    }
}
