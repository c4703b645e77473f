//! Cloud providers: each turns its metadata service's answers into typed [`Notice`]s.
//!
//! One file per cloud, all behind the [`Provider`] trait. The base URL and the HTTP client are
//! injected through each constructor so tests can point them at a mock. Providers are
//! synchronous: every method blocks its thread until its reads are done (the daemon calls them
//! on its metadata reader thread, the commands on a thread of their own).

pub(crate) mod alibaba;
pub(crate) mod aws;
pub(crate) mod azure;
pub(crate) mod detect;
pub(crate) mod gcp;
mod identity;
pub(crate) mod tencent;

use std::time::{Duration, Instant, SystemTime};

pub(crate) use crate::timings::{self, Timings};
use detect::Detection;

use crate::imds::{ClientOptions, ImdsClient, ImdsError};
// For the provider modules (`use super::...`).
use crate::notice::{
    cap_raw, Cloud, Identity, Notice, NoticeKind, NoticeStatus, SourceId, MAX_DETAIL,
};

/// What the providers need from the settings, already validated (`Options::provider_settings`).
#[derive(Clone, Debug)]
pub struct ProviderSettings {
    /// `--provider`; `None` means detect.
    pub cloud: Option<Cloud>,
    /// `--imds-endpoint`; `None` means the cloud's own.
    pub endpoint: Option<String>,
    /// The metadata HTTP client's settings.
    pub client: ClientOptions,
    /// The timing settings as given (`--poll-interval`, `--slow-poll-interval`, `--gcp-wait`,
    /// `--aws-rebalance-boost` and the request timeout); [`timings::Set::resolve`] makes the
    /// plan on a cloud.
    pub timings: timings::Set,
    /// `--aws-ipv6`: use AWS's IPv6 endpoint.
    pub aws_ipv6: bool,
    /// `--aws-imdsv1`: allow IMDSv1 when the IMDSv2 token request is refused.
    pub aws_imdsv1: bool,
}

impl ProviderSettings {
    /// Every timing on `cloud`: the plan ([`timings::Set::resolve`]).
    pub fn timings(&self, cloud: Cloud) -> Timings {
        self.timings.resolve(cloud)
    }

    /// The metadata base URL used on `cloud`.
    pub(crate) fn endpoint_for(&self, cloud: Cloud) -> String {
        match cloud {
            Cloud::Aws => aws::endpoint(self.endpoint.as_deref(), self.aws_ipv6),
            c => self
                .endpoint
                .clone()
                .unwrap_or_else(|| c.default_endpoint().to_string()),
        }
    }
}

/// Builds the provider for `cloud`.
pub(crate) fn build(cloud: Cloud, s: &ProviderSettings) -> Result<AnyProvider, ImdsError> {
    let client = ImdsClient::new(&s.endpoint_for(cloud), s.client.clone())?;
    Ok(build_with(cloud, client, s))
}

/// The provider for `cloud` on `client` (a clone keeps seeing how its reads go: `access()`).
pub(crate) fn build_with(cloud: Cloud, client: ImdsClient, s: &ProviderSettings) -> AnyProvider {
    let t = s.timings(cloud);
    match cloud {
        Cloud::Aws => AnyProvider::Aws(aws::Aws::new(
            client,
            aws::AwsOptions {
                allow_imdsv1: s.aws_imdsv1,
                ..aws::AwsOptions::from_timings(&t)
            },
        )),
        Cloud::Gcp => AnyProvider::Gcp(gcp::Gcp::new(client, &t)),
        Cloud::Azure => AnyProvider::Azure(azure::Azure::new(client, &t)),
        Cloud::Alibaba => AnyProvider::Alibaba(alibaba::Alibaba::new(client, &t)),
        Cloud::Tencent => AnyProvider::Tencent(tencent::Tencent::new(client, &t)),
    }
}

/// Finds the cloud: the explicit `--provider`, else detection.
pub(crate) fn resolve_cloud(s: &ProviderSettings) -> Result<Detection, detect::DetectError> {
    if let Some(cloud) = s.cloud {
        return Ok(Detection {
            cloud,
            how: "set by --provider / NTHD_PROVIDER".into(),
        });
    }
    let imdsd = s.client.imdsd_route(&s.client.imdsd_root);
    detect::detect(
        &detect::Dmi::system(),
        imdsd.as_ref(),
        s.endpoint.as_deref(),
        Duration::from_secs(1),
        s.client.sandbox.clone(),
    )
}

/// An error from one source during one observation.
#[derive(Debug)]
pub struct SourceError {
    /// The source that failed.
    pub source: SourceId,
    /// How it failed.
    pub error: ImdsError,
}

/// What one observation saw.
#[derive(Debug, Default)]
pub struct Observation {
    /// Every notice currently known, including the last known state of sources not read this
    /// time (or that failed this time).
    pub notices: Vec<Notice>,
    /// Sources read successfully this time: for them, a notice absent from `notices` is gone.
    pub fresh: Vec<SourceId>,
    /// The sources that failed this time; their notices in `notices` are the last known ones.
    pub errors: Vec<SourceError>,
}

impl Observation {
    /// Whether every source read this time answered (the provider tests' usual check).
    pub fn ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The equal errors merged, in first-seen order: one failing token request is one error,
    /// not one per source that needed the token.
    pub(crate) fn grouped_errors(&self) -> Vec<(Vec<SourceId>, &ImdsError)> {
        let mut out: Vec<(Vec<SourceId>, &ImdsError)> = Vec::new();
        for e in &self.errors {
            match out.iter_mut().find(|(_, m)| **m == e.error) {
                Some((sources, _)) => sources.push(e.source),
                None => out.push((vec![e.source], &e.error)),
            }
        }
        out
    }
}

/// One cloud's metadata service.
pub trait Provider: Send {
    /// The cloud this provider reads.
    const CLOUD: Cloud;

    /// A one-line description of what is watched, for logs and STATUS=.
    fn describe(&self) -> String;

    /// Reads every source that is due and returns what is known. Errors go in the observation,
    /// never out of it: a provider keeps its last good answer for a failing source. Providers
    /// that long-poll may take up to their wait timeout to return.
    fn observe(&mut self) -> Observation;

    /// When `observe` should be called next.
    fn next_due(&self) -> Instant;

    /// Whether a first answer is still on its way, and `observe` returned without it (Azure's
    /// first Scheduled Events call can take two minutes). `nthd once` keeps observing until it
    /// is not; the daemon does not need to.
    fn first_answer_pending(&self) -> bool {
        false
    }

    /// Reads what the metadata service says about this machine (instance id, type, zone,
    /// lifecycle). Best effort: a field the cloud does not give, or whose read failed, is left
    /// `None`; the error is returned only when nothing at all could be read.
    fn identity(&mut self) -> Result<Identity, ImdsError> {
        Ok(Identity::default())
    }

    /// Tells the platform to go ahead with events nthd acted on (Azure); a no-op elsewhere.
    fn acknowledge(&mut self, _event_ids: &[String]) -> Result<usize, ImdsError> {
        Ok(0)
    }

    /// The daemon's next deferred power action is due at `at`: a provider whose notice's
    /// deadline can move without the notice changing (GCP's maintenance window) reads it again
    /// just before, so the action moves with it. A no-op elsewhere.
    fn action_due(&mut self, _at: Option<SystemTime>) {}
}

/// What the daemon asks of the metadata reader thread between its polls, so that every read the
/// daemon needs is made there, on the provider's own client and token.
pub(crate) enum Request {
    /// Tell the platform to go ahead with these events ([`Provider::acknowledge`]); the count
    /// acknowledged goes back.
    Acknowledge(
        Vec<String>,
        tokio::sync::oneshot::Sender<Result<usize, ImdsError>>,
    ),
    /// A read with AWS's IMDSv2 token source (the Auto Scaling credentials); it is given
    /// `None` where the provider is not AWS's, or not yet built.
    WithToken(TokenRead),
}

/// A read made on the reader thread with AWS's token source.
pub(crate) type TokenRead = Box<dyn FnOnce(Option<&mut aws::Imdsv2>) + Send>;

impl Request {
    /// Answers it with `provider`'s client and token; before there is a provider, nothing is
    /// acknowledged and there is no token source.
    pub(crate) fn answer(self, provider: Option<&mut AnyProvider>) {
        match self {
            Request::Acknowledge(ids, reply) => {
                let _ = reply.send(provider.map_or(Ok(0), |p| p.acknowledge(&ids)));
            }
            Request::WithToken(read) => read(provider.and_then(AnyProvider::imdsv2)),
        }
    }
}

/// Static dispatch over the five providers.
pub(crate) enum AnyProvider {
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

/// The [`Provider`] methods, on whichever provider this is.
impl AnyProvider {
    pub(crate) fn describe(&self) -> String {
        each!(self, p => p.describe())
    }
    /// Every notice's summary is cleaned here, once for all clouds: it holds metadata text
    /// (Azure's Description, AWS codes) that reaches logs, STATUS= and terminals.
    pub(crate) fn observe(&mut self) -> Observation {
        let mut obs = each!(self, p => p.observe());
        for n in &mut obs.notices {
            n.detail = crate::logging::clean(&n.detail, MAX_DETAIL);
        }
        obs
    }
    pub(crate) fn next_due(&self) -> Instant {
        each!(self, p => p.next_due())
    }
    pub(crate) fn first_answer_pending(&self) -> bool {
        each!(self, p => p.first_answer_pending())
    }
    pub(crate) fn identity(&mut self) -> Result<Identity, ImdsError> {
        each!(self, p => p.identity())
    }
    pub(crate) fn acknowledge(&mut self, ids: &[String]) -> Result<usize, ImdsError> {
        each!(self, p => p.acknowledge(ids))
    }
    /// AWS's IMDSv2 token source, on AWS.
    pub(crate) fn imdsv2(&mut self) -> Option<&mut aws::Imdsv2> {
        match self {
            AnyProvider::Aws(a) => Some(a.imdsv2()),
            _ => None,
        }
    }
    pub(crate) fn action_due(&mut self, at: Option<SystemTime>) {
        each!(self, p => p.action_due(at));
    }
}

/// How a source is read again after a failed read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pace {
    /// A notice with a short lead time (a spot notice, Azure's Scheduled Events): after an
    /// error or a timeout the next read is at the next grid point, never more than one interval
    /// after the failure, so a notice that appears as a burst of faults ends is read within an
    /// interval. A request timeout already spaces reads of a stalled service. Only HTTP 429
    /// (the service throttles) backs off.
    Urgent,
    /// A notice with minutes or days of lead time: a failed read backs off exponentially from
    /// the interval (to 5 intervals, between 5 s and 60 s).
    Slow,
}

/// Per-source poll bookkeeping shared by the interval-polling providers.
#[derive(Debug)]
pub(crate) struct SourceState {
    pub name: SourceId,
    pub interval: std::time::Duration,
    pace: Pace,
    /// Successful reads are scheduled on a grid of `interval` from here. Sources built with the
    /// same anchor fall due together, so a slow source shares the fast source's wakeup instead
    /// of drifting off it by the time each read takes.
    anchor: Instant,
    pub next: Instant,
    pub backoff: crate::timings::Backoff,
    pub last: Vec<Notice>,
}

impl SourceState {
    pub(crate) fn new(
        name: SourceId,
        interval: std::time::Duration,
        pace: Pace,
        start: Instant,
    ) -> Self {
        SourceState {
            name,
            interval,
            pace,
            anchor: start,
            next: start,
            backoff: crate::timings::Backoff::new(interval),
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

    pub(crate) fn due(&self, now: Instant) -> bool {
        self.next <= now
    }

    /// Changes the interval from now on (the next read comes at most one new interval away).
    /// The grid keeps its anchor, so a source sped up and slowed down again still falls due
    /// with the others.
    pub(crate) fn set_interval(&mut self, interval: std::time::Duration, now: Instant) {
        self.interval = interval;
        self.backoff = crate::timings::Backoff::new(interval);
        self.next = self.next.min(self.next_on_grid(now));
    }

    /// The observation of a provider with this one source: the read made now (`None` when it
    /// was not due), recorded, plus the last known notices.
    pub(crate) fn observation(
        &mut self,
        result: Option<Result<Vec<Notice>, ImdsError>>,
    ) -> Observation {
        let mut obs = Observation::default();
        if let Some(result) = result {
            self.record(Instant::now(), result, &mut obs);
        }
        obs.notices.extend(self.last.iter().cloned());
        obs
    }

    /// Records the outcome of one read and schedules the next one.
    pub(crate) fn record(
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
                self.retry_after(now, &error);
                obs.errors.push(SourceError {
                    source: self.name,
                    error,
                });
            }
        }
    }

    /// Schedules the read after one that failed with `error` at `now`, as the source's
    /// [`Pace`] says: an urgent source at the next grid point unless throttled, anything else
    /// after the backoff; never sooner than a `Retry-After` asked for, within the backoff's
    /// ceiling.
    pub(crate) fn retry_after(&mut self, now: Instant, error: &ImdsError) {
        self.next = match (self.pace, error.retry_after()) {
            (Pace::Urgent, None) if !error.is_throttled() => self.next_on_grid(now),
            // The wait the service asked for, within the ceiling of this source's backoff.
            (Pace::Urgent, Some(asked)) if !error.is_throttled() => self
                .next_on_grid(now)
                .max(now + asked.min(self.backoff.ceiling())),
            (_, asked) => now + self.backoff.next_delay_asked(asked),
        };
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

/// A notice parser: the URL (for messages) and the body.
pub(crate) type ParseTime = fn(&str, &str) -> Result<Notice, ImdsError>;

/// The one source of the Alibaba and Tencent providers: a spot termination time at `path`,
/// absent (404) until the instance is being reclaimed, polled every interval.
pub(crate) struct TerminationTime {
    client: ImdsClient,
    path: &'static str,
    parse: ParseTime,
    source: SourceState,
}

impl TerminationTime {
    pub(crate) fn new(
        client: ImdsClient,
        (id, path): (SourceId, &'static str),
        parse: ParseTime,
        t: &Timings,
    ) -> TerminationTime {
        TerminationTime {
            client,
            path,
            parse,
            source: SourceState::new(id, t.poll, Pace::Urgent, Instant::now()),
        }
    }

    pub(crate) fn client(&self) -> &ImdsClient {
        &self.client
    }

    /// Reads the time when it is due, through `get` (a GET of the path on the client, with a
    /// token or without), and returns what is known.
    pub(crate) fn observe(
        &mut self,
        get: impl FnOnce(&ImdsClient, &str) -> Result<crate::imds::Reply, ImdsError>,
    ) -> Observation {
        let read = || {
            let reply = get(&self.client, self.path)?;
            let url = self.client.url(self.path);
            match reply.status {
                404 => Ok(Vec::new()),
                200 => (self.parse)(&url, &reply.body).map(|n| vec![n]),
                _ => Err(reply.status_error(url)),
            }
        };
        let result = self.source.due(Instant::now()).then(read);
        self.source.observation(result)
    }

    pub(crate) fn next_due(&self) -> Instant {
        self.source.next
    }

    /// What is read and how often, for `describe`.
    pub(crate) fn every(&self) -> String {
        format!(
            "spot termination-time every {}",
            crate::timefmt::format_duration(self.source.interval)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notice::RAW_CAP;
    use std::time::Duration;

    #[test]
    fn sources_with_one_anchor_fall_due_together() {
        let t0 = Instant::now();
        let mut fast = SourceState::new(
            SourceId::new("fast"),
            Duration::from_secs(1),
            Pace::Urgent,
            t0,
        );
        let mut slow = SourceState::new(
            SourceId::new("slow"),
            Duration::from_secs(3),
            Pace::Slow,
            t0,
        );
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

    const URL: &str = "http://169.254.169.254/latest/meta-data/spot/instance-action";

    fn status(status: u16) -> ImdsError {
        crate::imds::status_error(URL.into(), status)
    }

    /// One of each fault a metadata service shows: 5xx, a garbage body, a stall (timeout), a
    /// broken connection, a refused token, a forbidden read.
    fn faults() -> Vec<ImdsError> {
        vec![
            status(500),
            status(503),
            ImdsError::malformed(URL, "invalid spot instance-action JSON", "{\"action\": ter"),
            ImdsError::Timeout {
                url: URL.into(),
                timeout: Duration::from_secs(2),
            },
            ImdsError::Connect {
                url: URL.into(),
                reason: "connection reset by peer".into(),
                advice: "",
            },
            ImdsError::TokenRefused {
                url: URL.into(),
                status: 403,
            },
            status(403),
        ]
    }

    /// Feeds `n` failed reads with `error`, each finishing `late` after the read was due, and
    /// returns the delay each one left before the next read.
    fn delays(s: &mut SourceState, error: &ImdsError, n: usize, late: Duration) -> Vec<Duration> {
        let mut obs = Observation::default();
        (0..n)
            .map(|_| {
                let now = s.next + late;
                s.record(now, Err(error.clone()), &mut obs);
                s.next.saturating_duration_since(now)
            })
            .collect()
    }

    #[test]
    fn an_urgent_source_is_read_again_within_one_interval_after_any_fault_but_429() {
        let i = Duration::from_secs(1);
        for fault in faults() {
            for late in [Duration::ZERO, Duration::from_millis(500), i * 2 + i / 3] {
                let mut s = SourceState::new(SRC, i, Pace::Urgent, Instant::now());
                let d = delays(&mut s, &fault, 20, late);
                assert!(
                    d.iter().all(|d| !d.is_zero() && *d <= i),
                    "{fault}: reads finishing {late:?} late, next read in {d:?}"
                );
                // Still on the grid, so never faster than once an interval: a fault that
                // answers at once is read once an interval.
                if late.is_zero() {
                    assert!(d.iter().all(|d| *d == i), "{fault}: {d:?}");
                }
            }
        }
    }

    #[test]
    fn an_urgent_source_backs_off_when_throttled_and_not_after_other_faults() {
        let i = Duration::from_secs(1);
        let mut s = SourceState::new(SRC, i, Pace::Urgent, Instant::now());
        let d = delays(&mut s, &status(429), 5, Duration::ZERO);
        // 1, 2, 4, 5, 5 s, less up to 20% jitter.
        for (d, want) in d.iter().zip([1, 2, 4, 5, 5]) {
            let want = Duration::from_secs(want);
            assert!(*d >= want.mul_f64(0.79) && *d <= want, "{d:?}");
        }
        // A 500 between the 429s is retried at the next grid point, within an interval.
        let d = delays(&mut s, &status(500), 1, Duration::ZERO)[0];
        assert!(!d.is_zero() && d <= i, "{d:?}");
        // A good read, and the throttling starts again from one interval.
        let mut obs = Observation::default();
        let now = s.next;
        s.record(now, Ok(Vec::new()), &mut obs);
        assert!(delays(&mut s, &status(429), 1, Duration::ZERO)[0] <= i);
    }

    /// `Retry-After` on a 429 or a 503: the next read comes no sooner than asked, and never
    /// later than the source's backoff ceiling (5 s for a 1 s source, 60 s for a 20 s one).
    #[test]
    fn a_retry_after_is_honoured_up_to_the_sources_ceiling() {
        // The error the client makes of such an answer.
        let asked = |status: u16, secs: u64| {
            let reply = crate::imds::Reply {
                status,
                body: String::new(),
                etag: None,
                retry_after: Some(Duration::from_secs(secs)),
            };
            reply.status_error(URL.into())
        };
        for (pace, i, ceiling) in [(Pace::Urgent, 1, 5), (Pace::Slow, 20, 60)] {
            let i = Duration::from_secs(i);
            for status in [429, 503] {
                let mut s = SourceState::new(SRC, i, pace, Instant::now());
                let d = delays(&mut s, &asked(status, 3), 1, Duration::ZERO)[0];
                assert!(
                    d >= Duration::from_secs(3) && d <= i.max(Duration::from_secs(3)),
                    "{pace:?} {status}: {d:?}"
                );
                let d = delays(&mut s, &asked(status, 3600), 3, Duration::ZERO);
                assert!(
                    d.iter().all(|d| *d == Duration::from_secs(ceiling)),
                    "{pace:?} {status}: {d:?}"
                );
            }
        }
        // Elsewhere (a 500), the header is not a throttle: an urgent source stays on its grid.
        let mut s = SourceState::new(SRC, Duration::from_secs(1), Pace::Urgent, Instant::now());
        let d = delays(&mut s, &asked(500, 30), 1, Duration::ZERO)[0];
        assert!(d <= Duration::from_secs(1), "{d:?}");
    }

    #[test]
    fn a_slow_source_still_backs_off() {
        let i = Duration::from_secs(20);
        for fault in faults().iter().chain([&status(429)]) {
            let mut s = SourceState::new(SRC, i, Pace::Slow, Instant::now());
            let d = delays(&mut s, fault, 5, Duration::ZERO);
            // 20, 40, 60, 60, 60 s, less up to 20% jitter.
            assert!(d[1] >= i * 2 * 79 / 100, "{fault}: {d:?}");
            assert!(
                d[2..].iter().all(|d| *d >= i * 3 * 79 / 100),
                "{fault}: {d:?}"
            );
            assert!(
                d.iter().all(|d| *d <= Duration::from_secs(60)),
                "{fault}: {d:?}"
            );
        }
    }

    const SRC: SourceId = SourceId::new("aws/spot/instance-action");

    #[test]
    fn raw_cap_respects_char_boundaries() {
        let s = "é".repeat(RAW_CAP);
        let c = cap_raw(&s);
        assert!(c.len() <= RAW_CAP + '…'.len_utf8());
        assert!(c.ends_with('…'));
        assert_eq!(cap_raw("short"), "short");
    }
}
