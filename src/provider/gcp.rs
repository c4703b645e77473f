//! Google Compute Engine metadata server (`/computeMetadata/v1/`, header `Metadata-Flavor: Google`).
//!
//! Two keys are watched:
//! - `instance/preempted` (`TRUE`/`FALSE`): a Spot/preemptible VM is being reclaimed. It turns
//!   TRUE as the ACPI soft-off starts (hard-off 30 s later), or 120 s before it on VMs created
//!   with `scheduling.preemptionNoticeDuration`;
//! - `instance/maintenance-event` (`NONE`, `MIGRATE_ON_HOST_MAINTENANCE`,
//!   `TERMINATE_ON_HOST_MAINTENANCE`): host maintenance, about 60 s ahead.
//!
//! # Long-poll structure
//!
//! The metadata server supports hanging GETs: `?wait_for_change=true&last_etag=E&timeout_sec=N`
//! answers as soon as the value's ETag differs from `E` (at once if it already does), or after
//! `N` seconds with the unchanged value. Each key has its own request slot, and both slots are
//! in flight at the same time, each request on a thread of its own
//! ([`ImdsClient::get_later`]) that hands its answer to the provider's channel.
//! [`Gcp::observe`] returns as soon as *either* request completes; the other request is **not**
//! dropped: it stays in its slot and the next `observe()` keeps waiting on it. So a change on
//! either key is reported within one round trip, and no request is thrown away (nor re-issued)
//! because the other key changed. Every request carries the last ETag seen, so a change that
//! happened while no request was pending is answered at once by the next one.
//!
//! Request sequence per key:
//! 1. A plain GET first (on the very first `observe()`, which waits for both plain reads), so a
//!    notice that was set before nthd started is seen at once.
//! 2. Then long-polls with the ETag of the last answer. The per-request timeout is the wait
//!    plus a few seconds (the client's request timeout plus one second, at least two).
//! 3. Failures (timeouts, connection resets, 5xx, malformed bodies) re-arm the long-poll with the
//!    last good ETag after `retry_interval`, however many came before: a preemption that is
//!    flagged as a burst of faults ends is seen within one `retry_interval` of it. Only a 429
//!    (the server throttles) re-arms after an exponential backoff starting at `retry_interval`.
//!    The ETag is not advanced on a malformed answer, so the same answer is read again (and
//!    reported) after the delay instead of being waited past.
//! 4. An answer whose ETag equals the one sent (the server's timeout, or an ETag reset) is
//!    followed by a plain re-read to pick up a fresh ETag. If that answer came back early (well
//!    before `timeout_sec`), the server is not honouring `wait_for_change`: the re-read waits
//!    for the backoff, which grows while this repeats, so nthd never busy-loops. Answers with a
//!    *changed* ETag are re-armed at once, unless more than [`QUICK_LIMIT`] of them in a row came
//!    back immediately (a server inventing ETags), which also backs off.
//! 5. An answer without a usable ETag makes that key fall back to plain GETs every
//!    `retry_interval` (logged once) until an answer carries an ETag again.
//!
//! A 404 on either key is treated as "no notice" (logged once): both keys exist on every GCE VM,
//! so this only happens on look-alike metadata servers.
//!
//! # Maintenance start
//!
//! While `maintenance-event` is TERMINATE_ON_HOST_MAINTENANCE, `instance/upcoming-maintenance`
//! gives the notice its deadline (the window's start). It is read when the event appears and
//! again every slow poll interval ([`Timings::slow_poll`]) while it stays listed: `observe()` also returns
//! when that re-read falls due, so a window Google moves moves the deferred power-off with it,
//! even while both long-polls are still waiting.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant, SystemTime};

use http::Method;

use super::identity::{last_segment, Reads};
use super::{
    cap_raw, Cloud, Identity, Notice, NoticeKind, NoticeStatus, Observation, Provider, SourceError,
    Timings,
};
use crate::imds::{status_error, ImdsClient, ImdsError, Reply};
use crate::logging::clean_id;
use crate::notice::{Lifecycle, NoticeId, SourceId};
use crate::timefmt;
use crate::timings::Backoff;

/// How long before a deferred action the maintenance start is read once more: time for the
/// answer to reach the planner, which then moves the action with a moved window.
pub const RECHECK_LEAD: Duration = Duration::from_secs(3);

/// Path of the preemption flag (`TRUE` or `FALSE`).
pub const PREEMPTED_PATH: &str = "/computeMetadata/v1/instance/preempted";
/// Path of the host maintenance event (`NONE`, `MIGRATE_ON_HOST_MAINTENANCE` or
/// `TERMINATE_ON_HOST_MAINTENANCE`).
pub const MAINTENANCE_PATH: &str = "/computeMetadata/v1/instance/maintenance-event";
/// When the maintenance starts, on machine families that announce it (at least 7 days ahead
/// for scheduled maintenance): read when `maintenance-event` turns to TERMINATE, then every
/// slow poll interval ([`Timings::slow_poll`]) while it stays so.
pub const UPCOMING_PATH: &str = "/computeMetadata/v1/instance/upcoming-maintenance";
/// Path of the numeric instance id.
pub const INSTANCE_ID_PATH: &str = "/computeMetadata/v1/instance/id";
/// Path of the machine type (`projects/123/machineTypes/e2-medium`).
pub const MACHINE_TYPE_PATH: &str = "/computeMetadata/v1/instance/machine-type";
/// Path of the zone (`projects/123/zones/us-central1-a`).
pub const ZONE_PATH: &str = "/computeMetadata/v1/instance/zone";
/// Path of the provisioning model (`SPOT` or `STANDARD`).
pub const PROVISIONING_MODEL_PATH: &str =
    "/computeMetadata/v1/instance/scheduling/provisioning-model";
/// Path of the preemptible flag (`TRUE` or `FALSE`), read when the provisioning model is not
/// given.
pub const PREEMPTIBLE_PATH: &str = "/computeMetadata/v1/instance/scheduling/preemptible";

const SRC_PREEMPTED: SourceId = SourceId::new("gcp/instance/preempted");
const SRC_MAINTENANCE: SourceId = SourceId::new("gcp/instance/maintenance-event");

/// Header names must be lowercase for `ImdsClient::send`.
const FLAVOR: (&str, &str) = ("metadata-flavor", "Google");

/// How many immediately-answered long-polls with a changed ETag in a row are taken at face value
/// before nthd starts backing off.
pub(crate) const QUICK_LIMIT: u32 = 3;

/// The longest `timeout_sec` nthd asks for.
pub(crate) const MAX_WAIT_SECS: u64 = 300;

/// The longest ETag nthd sends back; longer ones are treated as missing.
const MAX_ETAG: usize = 256;

/// The outcome of one request, with the moment it was actually sent.
struct Attempt {
    issued: Instant,
    result: Result<Reply, ImdsError>,
}

/// A request in a key's slot (possibly still waiting for its start time); its answer comes on
/// the provider's channel.
struct InFlight {
    long_poll: bool,
    sent_etag: Option<String>,
}

/// Where the requests in flight hand in their answers: the key's index and the attempt.
type Answers = (Sender<(usize, Attempt)>, Receiver<(usize, Attempt)>);

type Parser = fn(&str, &str) -> Result<Option<Notice>, ImdsError>;

/// One watched key.
struct Key {
    source: SourceId,
    path: &'static str,
    parse: Parser,
    /// ETag of the last good answer.
    etag: Option<String>,
    /// Whether the next request long-polls (needs `etag`) or is a plain GET.
    long_poll: bool,
    /// The next request is not sent before this.
    not_before: Instant,
    backoff: Backoff,
    /// Long-polls in a row that came back immediately.
    quick: u32,
    /// The last long-poll came back early with the same ETag: do not reset the backoff on the
    /// plain re-read that follows, so a repeat keeps growing the delay.
    suspect: bool,
    last: Vec<Notice>,
    inflight: Option<InFlight>,
    warned_no_etag: bool,
    warned_404: bool,
}

impl Key {
    fn new(source: SourceId, path: &'static str, parse: Parser, opts: &Timings) -> Key {
        Key {
            source,
            path,
            parse,
            etag: None,
            long_poll: false,
            not_before: Instant::now(),
            backoff: Backoff::new(opts.poll),
            quick: 0,
            suspect: false,
            last: Vec::new(),
            inflight: None,
            warned_no_etag: false,
            warned_404: false,
        }
    }

    /// Puts the next request in the slot, on a thread that waits for `not_before` and hands the
    /// answer to `tx` as key `i`'s.
    fn arm(
        &mut self,
        client: &ImdsClient,
        (i, tx): (usize, &Sender<(usize, Attempt)>),
        wait_secs: u64,
        lp_timeout: Duration,
    ) {
        let long_poll = self.long_poll && self.etag.is_some();
        let (path, timeout, sent_etag) = match (&self.etag, long_poll) {
            (Some(etag), true) => (
                format!(
                    "{}?wait_for_change=true&last_etag={}&timeout_sec={wait_secs}",
                    self.path,
                    percent_encode(etag)
                ),
                Some(lp_timeout),
                Some(etag.clone()),
            ),
            _ => (self.path.to_string(), None, None),
        };
        let done = tx.clone();
        let sent = client.get_later(
            path,
            &[FLAVOR],
            timeout,
            self.not_before,
            move |issued, result| {
                let _ = done.send((i, Attempt { issued, result }));
            },
        );
        if let Err(result) = sent {
            let issued = Instant::now();
            let _ = tx.send((
                i,
                Attempt {
                    issued,
                    result: Err(result),
                },
            ));
        }
        self.inflight = Some(InFlight {
            long_poll,
            sent_etag,
        });
    }

    /// Turns a reply into this key's notices and the answer's usable ETag.
    fn interpret(
        &mut self,
        url: &str,
        reply: Reply,
    ) -> Result<(Vec<Notice>, Option<String>), ImdsError> {
        let etag = usable_etag(reply.etag.as_deref());
        match reply.status {
            200 => Ok(((self.parse)(url, &reply.body)?.into_iter().collect(), etag)),
            404 => {
                if !self.warned_404 {
                    tracing::warn!(
                        "{url} answered 404; every GCE VM has this key, so this may not be the \
                         GCP metadata server. Treating it as no notice"
                    );
                    self.warned_404 = true;
                }
                Ok((Vec::new(), etag))
            }
            _ => Err(reply.status_error(url.to_string())),
        }
    }
}

/// What `instance/upcoming-maintenance` said about the TERMINATE notice now listed.
#[derive(Clone, Copy, Debug)]
struct Upcoming {
    /// The start of the maintenance; `None`: nothing announced, so power off at once.
    start: Option<SystemTime>,
    /// When it is read again.
    next_read: Instant,
}

/// The GCP provider.
pub struct Gcp {
    client: ImdsClient,
    opts: Timings,
    keys: [Key; 2],
    answers: Answers,
    /// Set while a TERMINATE notice is listed, from its first read on.
    upcoming: Option<Upcoming>,
    /// The daemon's next deferred power action, and the last one the maintenance start was read
    /// again for.
    action: (Option<SystemTime>, Option<SystemTime>),
    /// When `instance/preempted` was first seen TRUE, while it stays so.
    preempted_since: Option<SystemTime>,
}

impl Gcp {
    /// A provider that reads through `client`. Nothing is read before the first `observe()`.
    pub fn new(client: ImdsClient, opts: &Timings) -> Gcp {
        let keys = [
            Key::new(SRC_PREEMPTED, PREEMPTED_PATH, parse_preempted, opts),
            Key::new(
                SRC_MAINTENANCE,
                MAINTENANCE_PATH,
                parse_maintenance_event,
                opts,
            ),
        ];
        Gcp {
            client,
            opts: *opts,
            keys,
            answers: mpsc::channel(),
            upcoming: None,
            action: (None, None),
            preempted_since: None,
        }
    }

    /// With a preemption notice set (`NTHD_GCP_PREEMPTION_NOTICE`, the VM's
    /// `scheduling.preemptionNoticeDuration`), the notice's deadline is the ACPI soft-off: that
    /// long after `instance/preempted` was first seen TRUE. Without one, the soft-off is now and
    /// the notice has no deadline (acted on at once).
    fn add_preemption_deadline(&mut self, obs: &mut Observation) {
        let listed = obs.notices.iter().any(|n| n.kind == NoticeKind::GcpPreempt);
        if !listed {
            self.preempted_since = None;
            return;
        }
        let notice = self.opts.gcp_notice;
        if notice.is_zero() {
            return;
        }
        let since = *self.preempted_since.get_or_insert_with(SystemTime::now);
        for n in &mut obs.notices {
            if n.kind == NoticeKind::GcpPreempt {
                n.deadline = Some(since + notice);
                n.detail = format!(
                    "instance/preempted is TRUE: the VM is preempted; its {} notice \
                     (NTHD_GCP_PREEMPTION_NOTICE) puts the ACPI soft-off at {}",
                    timefmt::format_duration(notice),
                    timefmt::format_rfc3339(since + notice)
                );
            }
        }
    }

    /// When the maintenance start is read next: every slow poll interval, and once more
    /// [`RECHECK_LEAD`] before a deferred action runs; `None` while no TERMINATE is listed.
    fn next_upcoming_read(&self) -> Option<Instant> {
        let u = self.upcoming?;
        let before_action = match self.action {
            (Some(at), done) if done != Some(at) => {
                let left = at.duration_since(SystemTime::now()).unwrap_or_default();
                Some(Instant::now() + left.saturating_sub(RECHECK_LEAD))
            }
            _ => None,
        };
        Some(before_action.map_or(u.next_read, |t| t.min(u.next_read)))
    }

    /// Gives a TERMINATE_ON_HOST_MAINTENANCE notice the maintenance's start as its deadline,
    /// from `instance/upcoming-maintenance`, read when the notice appears and again every
    /// slow poll interval ([`Timings::slow_poll`]) while it is listed. It comes about 60 s ahead on most
    /// VMs but about an hour ahead on GPU VMs; with the start known, the policy powers off at
    /// the last safe moment instead of throwing that hour away. Without one: at once.
    fn add_maintenance_start(&mut self, obs: &mut Observation) {
        let listed = obs
            .notices
            .iter()
            .any(|n| n.kind == NoticeKind::GcpTerminateMaintenance);
        if !listed {
            self.upcoming = None;
            return;
        }
        if self
            .next_upcoming_read()
            .is_none_or(|t| t <= Instant::now())
        {
            self.action.1 = self.action.0;
            let (client, interval) = (self.client.clone(), self.opts.slow_poll);
            self.upcoming = Some(read_upcoming(client, self.upcoming, interval));
        }
        let start = self.upcoming.and_then(|u| u.start);
        for n in &mut obs.notices {
            if n.kind == NoticeKind::GcpTerminateMaintenance {
                n.deadline = start;
                if let Some(t) = start {
                    n.detail = format!(
                        "instance/maintenance-event is TERMINATE_ON_HOST_MAINTENANCE; \
                         instance/upcoming-maintenance says it starts at {}",
                        timefmt::format_rfc3339(t)
                    );
                }
            }
        }
    }

    /// The first of: either key's request answering, or the re-read of
    /// `instance/upcoming-maintenance` falling due (`None`). Both slots must be armed.
    fn first_answer(&mut self) -> Option<(usize, Attempt)> {
        let answers = &self.answers.1;
        match self.next_upcoming_read() {
            // While a TERMINATE is listed, back at least every second: a power-off the daemon
            // defers meanwhile reaches `action_due` in time to read the window once more.
            Some(t) => answers.recv_timeout(
                t.saturating_duration_since(Instant::now())
                    .min(Duration::from_secs(1)),
            ),
            None => answers.recv().map_err(|_| RecvTimeoutError::Disconnected),
        }
        .ok()
    }

    /// After key `first` answered, the other key: waits for a plain read that is due (the first
    /// observation reads both), picks up a long-poll only if it has already answered, else
    /// leaves it in flight.
    fn finish_other(&mut self, first: usize, obs: &mut Observation) {
        let k = &self.keys[1 - first];
        let wait = k
            .inflight
            .as_ref()
            .is_some_and(|f| !f.long_poll && k.not_before <= Instant::now());
        let answer = match wait {
            true => self.answers.1.recv().ok(),
            false => self.answers.1.try_recv().ok(),
        };
        if let Some((i, attempt)) = answer {
            self.finish(i, attempt, obs);
        }
    }

    /// `timeout_sec` for long-polls: no maximum is documented, so at most 300 s (Google's own
    /// guest agent uses 60 s).
    fn wait_secs(&self) -> u64 {
        self.opts.gcp_wait.as_secs().clamp(1, MAX_WAIT_SECS)
    }

    /// The client-side timeout of one long-poll: the wait plus a few seconds.
    fn long_poll_timeout(&self) -> Duration {
        let slack = (self.client.options().request_timeout + Duration::from_secs(1))
            .clamp(Duration::from_secs(2), Duration::from_secs(10));
        Duration::from_secs(self.wait_secs()) + slack
    }

    /// A long-poll answer that came back faster than this did not wait.
    fn early_threshold(&self) -> Duration {
        (Duration::from_secs(self.wait_secs()) / 2).min(Duration::from_secs(1))
    }

    /// Records one completed request of key `i` and schedules its next one.
    fn finish(&mut self, i: usize, attempt: Attempt, obs: &mut Observation) {
        let now = Instant::now();
        let early_threshold = self.early_threshold();
        let retry = self.opts.poll;
        let url = self.client.url(self.keys[i].path);
        let k = &mut self.keys[i];
        let Some(inflight) = k.inflight.take() else {
            return;
        };
        let elapsed = now.saturating_duration_since(attempt.issued);
        let (notices, etag) = match attempt.result.and_then(|reply| k.interpret(&url, reply)) {
            Ok(x) => x,
            Err(error) => return k.failed(&url, error, now, retry, obs),
        };
        k.last = notices;
        obs.fresh.push(k.source);
        let Some(etag) = etag else {
            let imdsd = self.client.access() == crate::imds::Access::Imdsd;
            return k.without_etag(&url, retry, now, imdsd);
        };
        if k.warned_no_etag && k.etag.is_none() {
            tracing::info!("{url} sends ETags again; long-polling it");
            k.warned_no_etag = false;
        }
        let unchanged = inflight.sent_etag.as_deref() == Some(etag.as_str());
        k.etag = Some(etag);
        if !inflight.long_poll {
            // A plain read: long-poll from here on.
            if !k.suspect {
                k.backoff.reset();
            }
            k.long_poll = true;
            k.not_before = now;
            return;
        }
        k.after_long_poll(&url, unchanged, elapsed < early_threshold, now);
    }
}

impl Key {
    /// A failed read is re-armed (as a long-poll when an ETag is known) `retry` after it; a
    /// throttled one (429) after the backoff. A `Retry-After` the service sent lengthens either,
    /// up to the backoff's ceiling.
    fn failed(
        &mut self,
        url: &str,
        error: ImdsError,
        now: Instant,
        retry: Duration,
        obs: &mut Observation,
    ) {
        let delay = match (error.is_throttled(), error.retry_after()) {
            (true, asked) => self.backoff.next_delay_asked(asked),
            (false, Some(asked)) => retry.max(asked.min(self.backoff.ceiling())),
            (false, None) => retry,
        };
        tracing::debug!(
            "{url}: {error}; retrying in {}",
            timefmt::format_duration(delay)
        );
        self.not_before = now + delay;
        obs.errors.push(SourceError {
            source: self.source,
            error,
        });
    }

    /// An answer without a usable ETag: plain polling every `retry` until ETags come back.
    /// Through systemd-imdsd there are no ETags at all (its interface passes bodies only).
    fn without_etag(&mut self, url: &str, retry: Duration, now: Instant, imdsd: bool) {
        if !self.warned_no_etag && imdsd {
            tracing::warn!(
                "{url} is read through systemd-imdsd, which passes no ETag, so nthd cannot \
                 long-poll it (no wait_for_change): polling it every {} instead",
                timefmt::format_duration(retry)
            );
            self.warned_no_etag = true;
        } else if !self.warned_no_etag {
            tracing::warn!(
                "{url} answered without a usable ETag; polling it every {} instead of \
                 long-polling",
                timefmt::format_duration(retry)
            );
            self.warned_no_etag = true;
        }
        self.etag = None;
        self.long_poll = false;
        self.quick = 0;
        self.backoff.reset();
        self.not_before = now + retry;
    }

    /// Schedules the next read after a long-poll answered, `early` when it did not wait.
    fn after_long_poll(&mut self, url: &str, unchanged: bool, early: bool, now: Instant) {
        self.quick = if early {
            self.quick.saturating_add(1)
        } else {
            0
        };
        if unchanged {
            // The server's timeout, or an ETag reset: re-read the value plainly for a fresh
            // ETag. If it did not wait at all, it ignores wait_for_change: back off.
            self.long_poll = false;
            if early {
                let delay = self.backoff.next_delay();
                tracing::debug!(
                    "{url} answered a long-poll at once with the same ETag; re-reading in {}",
                    timefmt::format_duration(delay)
                );
                self.suspect = true;
                self.not_before = now + delay;
            } else {
                self.suspect = false;
                self.backoff.reset();
                self.not_before = now;
            }
            return;
        }
        // A change: re-arm at once, unless the server keeps answering immediately.
        self.long_poll = true;
        if self.quick > QUICK_LIMIT {
            let delay = self.backoff.next_delay();
            tracing::debug!(
                "{url} answered {} long-polls in a row at once; next one in {}",
                self.quick,
                timefmt::format_duration(delay)
            );
            self.not_before = now + delay;
        } else {
            if !early {
                self.suspect = false;
                self.backoff.reset();
            }
            self.not_before = now;
        }
    }
}

/// An ETag nthd can send back in `last_etag`, if the answer carried one.
fn usable_etag(e: Option<&str>) -> Option<String> {
    let e = e?.trim();
    if e.is_empty() || e.len() > MAX_ETAG || !e.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    Some(e.to_string())
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Checks that a plain-text value is one short printable token.
fn token_value<'a>(url: &str, body: &'a str, what: &str) -> Result<&'a str, ImdsError> {
    let v = body.trim();
    if v.is_empty() || v.len() > 64 || !v.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ImdsError::malformed(url, format!("expected {what}"), body));
    }
    Ok(v)
}

/// Parses `instance/preempted`: `TRUE` is a notice, `FALSE` none. Anything else is malformed
/// (neither acted on nor taken as "no notice": the last known state is kept).
pub fn parse_preempted(url: &str, body: &str) -> Result<Option<Notice>, ImdsError> {
    let v = token_value(url, body, "TRUE or FALSE")?;
    if v.eq_ignore_ascii_case("FALSE") {
        return Ok(None);
    }
    if !v.eq_ignore_ascii_case("TRUE") {
        return Err(ImdsError::malformed(url, "expected TRUE or FALSE", body));
    }
    Ok(Some(Notice {
        kind: NoticeKind::GcpPreempt,
        source: SRC_PREEMPTED,
        id: NoticeId::new(Cloud::Gcp, &["preempted"]),
        event_id: None,
        deadline: None,
        status: NoticeStatus::Active,
        detail: "instance/preempted is TRUE: the VM is being preempted (the ACPI soft-off is \
                 starting, or starts within 120 s with a preemption notice; hard-off 30 s after \
                 it)"
        .into(),
        raw: cap_raw(body),
    }))
}

/// Parses `instance/maintenance-event`. `NONE` is no notice; values nthd does not know become
/// [`NoticeKind::Unknown`] (logged, never acted on by default).
pub fn parse_maintenance_event(url: &str, body: &str) -> Result<Option<Notice>, ImdsError> {
    let v = token_value(url, body, "a maintenance event such as NONE")?;
    let kind = match v {
        "NONE" => return Ok(None),
        "TERMINATE_ON_HOST_MAINTENANCE" => NoticeKind::GcpTerminateMaintenance,
        "MIGRATE_ON_HOST_MAINTENANCE" => NoticeKind::GcpMigrate,
        other => {
            let v = crate::logging::clean(other, 64);
            crate::logging::warn_limited(&format!("gcp-maintenance {v}"), || {
                format!("unknown maintenance-event \"{v}\" at {url}; treating it as unknown")
            });
            NoticeKind::Unknown
        }
    };
    Ok(Some(Notice {
        kind,
        source: SRC_MAINTENANCE,
        id: NoticeId::new(Cloud::Gcp, &["maintenance-event", &clean_id(v)]),
        event_id: None,
        deadline: None,
        status: NoticeStatus::Active,
        detail: format!("instance/maintenance-event is {v} (host maintenance in about 60 seconds)"),
        raw: cap_raw(body),
    }))
}

/// Reads the maintenance's start (again; `before` is the last read). A failed first read means
/// "at once", as before any answer; a failed re-read keeps the start read before, since the
/// event is still listed and a flaky read is no news.
fn read_upcoming(client: ImdsClient, before: Option<Upcoming>, interval: Duration) -> Upcoming {
    let url = client.url(UPCOMING_PATH);
    let start = match fetch_upcoming(client) {
        Ok(start) => {
            if let Some(b) = before.filter(|b| b.start != start) {
                tracing::info!(
                    "{url}: the maintenance now starts {} (was {})",
                    describe_start(start),
                    describe_start(b.start)
                );
            }
            start
        }
        Err(e) => match before {
            None => {
                tracing::warn!("{e}; powering off at once for the maintenance");
                None
            }
            Some(b) => {
                crate::logging::warn_limited("gcp-upcoming-reread", || {
                    format!("{e}; keeping the maintenance start read before")
                });
                b.start
            }
        },
    };
    Upcoming {
        start,
        next_read: Instant::now() + interval,
    }
}

/// Reads the start of the announced maintenance (`None`: nothing announced).
fn fetch_upcoming(client: ImdsClient) -> Result<Option<SystemTime>, ImdsError> {
    let url = client.url(UPCOMING_PATH);
    let reply = client.send(Method::GET, UPCOMING_PATH, &[FLAVOR], None, None)?;
    parse_upcoming_maintenance(&url, reply.status, &reply.body)
}

/// A maintenance start for the log.
fn describe_start(start: Option<SystemTime>) -> String {
    match start {
        Some(t) => format!("at {}", timefmt::format_rfc3339(t)),
        None => "at no announced time".into(),
    }
}

/// Parses `instance/upcoming-maintenance`: the start of the announced maintenance window
/// (`window_start_time`, else `latest_window_start_time`), or `None` when nothing is announced:
/// `{ }`, a 404, or `{"error": "no notifications have been received yet..."}` on machine types
/// without it. A maintenance already `ONGOING` has no time left to wait for. Public for the
/// `gcp_upcoming` fuzz target.
pub fn parse_upcoming_maintenance(
    url: &str,
    status: u16,
    body: &str,
) -> Result<Option<SystemTime>, ImdsError> {
    match status {
        200 => {}
        404 => return Ok(None),
        s => return Err(status_error(url.to_string(), s)),
    }
    let v: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| ImdsError::malformed(url, format!("not JSON: {e}"), body))?;
    let Some(o) = v.as_object() else {
        return Err(ImdsError::malformed(url, "not a JSON object", body));
    };
    if o.contains_key("error") {
        return Ok(None);
    }
    let field = |k: &str| o.get(k).and_then(serde_json::Value::as_str);
    if field("maintenance_status").is_some_and(|s| s.eq_ignore_ascii_case("ONGOING")) {
        return Ok(None);
    }
    let Some(text) = field("window_start_time").or_else(|| field("latest_window_start_time"))
    else {
        return Ok(None);
    };
    timefmt::parse_any(text)
        .map(Some)
        .ok_or_else(|| ImdsError::malformed(url, "window_start_time is not an RFC 3339 time", body))
}

/// The lifecycle a `scheduling/provisioning-model` value names: `SPOT` or `STANDARD`; anything
/// else (a model nthd does not know) is unknown.
pub(crate) fn parse_provisioning_model(value: &str) -> Option<Lifecycle> {
    match value {
        "SPOT" => Some(Lifecycle::Spot),
        "STANDARD" => Some(Lifecycle::OnDemand),
        _ => None,
    }
}

/// The lifecycle a `scheduling/preemptible` value names (older VMs without a provisioning
/// model): `TRUE` is a preemptible VM, `FALSE` a regular one.
pub(crate) fn parse_preemptible(value: &str) -> Option<Lifecycle> {
    match value {
        "TRUE" => Some(Lifecycle::Preemptible),
        "FALSE" => Some(Lifecycle::OnDemand),
        _ => None,
    }
}

/// One identity value of a key whose answer is a resource path: its last segment.
fn identity_segment(client: &ImdsClient, reads: &mut Reads, path: &str) -> Option<String> {
    let url = client.url(path);
    let r = client.get(path, &[FLAVOR]);
    let body = reads.body(&url, r)?;
    reads.check(&url, last_segment(&body))
}

/// `scheduling/provisioning-model`, else (no usable answer) `scheduling/preemptible`.
fn identity_lifecycle(client: &ImdsClient, reads: &mut Reads) -> Option<Lifecycle> {
    match reads.get(client, PROVISIONING_MODEL_PATH, &[FLAVOR]) {
        Some(model) => parse_provisioning_model(&model),
        None => reads
            .get(client, PREEMPTIBLE_PATH, &[FLAVOR])
            .and_then(|v| parse_preemptible(&v)),
    }
}

impl Provider for Gcp {
    const CLOUD: Cloud = Cloud::Gcp;

    fn describe(&self) -> String {
        format!(
            "GCP metadata server at {}: long-polling instance/preempted and \
             instance/maintenance-event (wait {}, retry after {}); \
             instance/upcoming-maintenance every {} while a TERMINATE maintenance is listed",
            self.client.base(),
            timefmt::format_duration(Duration::from_secs(self.wait_secs())),
            timefmt::format_duration(self.opts.poll),
            timefmt::format_duration(self.opts.slow_poll),
        )
    }

    fn observe(&mut self) -> Observation {
        let mut obs = Observation::default();
        let wait_secs = self.wait_secs();
        let lp_timeout = self.long_poll_timeout();
        for (i, k) in self.keys.iter_mut().enumerate() {
            if k.inflight.is_none() {
                k.arm(&self.client, (i, &self.answers.0), wait_secs, lp_timeout);
            }
        }
        // Whichever key answers first; or only the maintenance start is re-read (no key
        // answered, both stay in flight).
        if let Some((first, attempt)) = self.first_answer() {
            self.finish(first, attempt, &mut obs);
            self.finish_other(first, &mut obs);
        }
        for k in &self.keys {
            obs.notices.extend(k.last.iter().cloned());
        }
        self.add_maintenance_start(&mut obs);
        self.add_preemption_deadline(&mut obs);
        obs
    }

    fn next_due(&self) -> Instant {
        // A long-polling key is always due (its not_before has passed); otherwise the earliest
        // retry time, or the re-read of the maintenance start.
        self.keys
            .iter()
            .map(|k| k.not_before)
            .chain(self.next_upcoming_read())
            .min()
            .unwrap_or_else(Instant::now)
    }

    fn action_due(&mut self, at: Option<SystemTime>) {
        self.action.0 = at;
    }

    /// Reads `instance/id`, `instance/machine-type` and `instance/zone` (their last path
    /// segment) and the lifecycle, one after the other, with plain GETs outside the long-polls.
    fn identity(&mut self) -> Result<Identity, ImdsError> {
        let mut reads = Reads::default();
        let c = &self.client;
        let id = Identity {
            instance_id: reads.get(c, INSTANCE_ID_PATH, &[FLAVOR]),
            instance_type: identity_segment(c, &mut reads, MACHINE_TYPE_PATH),
            zone: identity_segment(c, &mut reads, ZONE_PATH),
            lifecycle: identity_lifecycle(c, &mut reads),
        };
        reads.finish(id, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "http://metadata/x";

    /// How long `key` waits before its next request, after each of `n` failures with `error`.
    fn delays_after_failures(key: &mut Key, error: &ImdsError, n: usize) -> Vec<Duration> {
        let retry = Timings::defaults(Cloud::Gcp).poll;
        let mut obs = Observation::default();
        (0..n)
            .map(|_| {
                let now = Instant::now();
                key.failed(U, error.clone(), now, retry, &mut obs);
                key.not_before.saturating_duration_since(now)
            })
            .collect()
    }

    fn preempted_key() -> Key {
        Key::new(
            SRC_PREEMPTED,
            PREEMPTED_PATH,
            parse_preempted,
            &Timings::defaults(Cloud::Gcp),
        )
    }

    #[test]
    fn a_failed_long_poll_is_re_armed_within_the_retry_interval_however_many_failed() {
        let retry = Timings::defaults(Cloud::Gcp).poll;
        for error in [
            status_error(U.into(), 503),
            ImdsError::malformed(U, "expected TRUE or FALSE", "MAYBE"),
            ImdsError::Timeout {
                url: U.into(),
                timeout: Duration::from_secs(63),
            },
        ] {
            let mut k = preempted_key();
            let d = delays_after_failures(&mut k, &error, 12);
            assert!(d.iter().all(|d| *d == retry), "{error}: {d:?}");
        }
        // Throttled: backs off (1, 2, 4, 5 s less jitter).
        let mut k = preempted_key();
        let d = delays_after_failures(&mut k, &status_error(U.into(), 429), 4);
        assert!(d[3] >= Duration::from_secs(4), "{d:?}");
    }

    #[test]
    fn same_etag_answered_at_once_still_backs_off_between_failures() {
        // A server that ignores wait_for_change, with failures in between: the failures are
        // retried at the retry interval, and the early answers keep growing the delay.
        let mut k = preempted_key();
        let mut early = Vec::new();
        for _ in 0..5 {
            let now = Instant::now();
            k.after_long_poll(U, true, true, now);
            early.push(k.not_before.saturating_duration_since(now));
            delays_after_failures(&mut k, &status_error(U.into(), 503), 2);
        }
        assert!(early[0] <= Duration::from_secs(1), "{early:?}");
        assert!(early[3] >= Duration::from_secs(4), "{early:?}");
    }

    #[test]
    fn lifecycles() {
        assert_eq!(parse_provisioning_model("SPOT"), Some(Lifecycle::Spot));
        assert_eq!(
            parse_provisioning_model("STANDARD"),
            Some(Lifecycle::OnDemand)
        );
        assert_eq!(parse_provisioning_model("FLEX_START"), None);
        assert_eq!(parse_preemptible("TRUE"), Some(Lifecycle::Preemptible));
        assert_eq!(parse_preemptible("FALSE"), Some(Lifecycle::OnDemand));
        assert_eq!(parse_preemptible("yes"), None);
    }

    #[test]
    fn upcoming_maintenance_every_shape() {
        let t = |s: &str| timefmt::parse_any(s).unwrap();
        let full = r#"{"can_reschedule": "false", "latest_window_start_time": "2026-12-01T10:30:00Z", "maintenance_reasons": ["HARDWARE_UPDATE"], "maintenance_status": "PENDING", "type": "SCHEDULED", "window_end_time": "2026-12-01T14:00:00Z", "window_start_time": "2026-12-01T10:00:00Z"}"#;
        assert_eq!(
            parse_upcoming_maintenance(U, 200, full).unwrap(),
            Some(t("2026-12-01T10:00:00Z"))
        );
        let latest_only = r#"{"latest_window_start_time": "2026-12-01T10:30:00Z", "maintenance_status": "PENDING", "type": "UNSCHEDULED"}"#;
        assert_eq!(
            parse_upcoming_maintenance(U, 200, latest_only).unwrap(),
            Some(t("2026-12-01T10:30:00Z"))
        );
        let ongoing =
            r#"{"maintenance_status": "ONGOING", "window_start_time": "2026-12-01T10:00:00Z"}"#;
        assert_eq!(parse_upcoming_maintenance(U, 200, ongoing).unwrap(), None);
        assert_eq!(parse_upcoming_maintenance(U, 200, "{ }").unwrap(), None);
        assert_eq!(
            parse_upcoming_maintenance(U, 404, "Not Found").unwrap(),
            None
        );
        let none_yet = r#"{"error": "no notifications have been received yet, try again later"}"#;
        assert_eq!(parse_upcoming_maintenance(U, 200, none_yet).unwrap(), None);
        for bad in ["", "[]", "<html>", r#"{"window_start_time": "soon"}"#] {
            assert!(parse_upcoming_maintenance(U, 200, bad).is_err(), "{bad:?}");
        }
        assert!(parse_upcoming_maintenance(U, 503, "").is_err());
    }

    #[test]
    fn preempted_values() {
        let n = parse_preempted(U, "TRUE").unwrap().unwrap();
        assert_eq!(n.kind, NoticeKind::GcpPreempt);
        assert_eq!(n.id, "gcp/preempted");
        assert_eq!(n.source, SRC_PREEMPTED);
        assert!(n.deadline.is_none());
        assert_eq!(n.status, NoticeStatus::Active);
        assert_eq!(parse_preempted(U, "TRUE\n").unwrap().unwrap().id, n.id);
        assert_eq!(parse_preempted(U, "true").unwrap().unwrap().id, n.id);
        assert!(parse_preempted(U, "FALSE").unwrap().is_none());
        assert!(parse_preempted(U, " FALSE\n").unwrap().is_none());
        for bad in [
            "",
            "\n",
            "YES",
            "TRUE FALSE",
            "<html>",
            "1",
            &"T".repeat(100),
        ] {
            assert!(parse_preempted(U, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn maintenance_values() {
        assert!(parse_maintenance_event(U, "NONE").unwrap().is_none());
        assert!(parse_maintenance_event(U, "NONE\n").unwrap().is_none());
        let t = parse_maintenance_event(U, "TERMINATE_ON_HOST_MAINTENANCE")
            .unwrap()
            .unwrap();
        assert_eq!(t.kind, NoticeKind::GcpTerminateMaintenance);
        assert_eq!(t.id, "gcp/maintenance-event/TERMINATE_ON_HOST_MAINTENANCE");
        assert_eq!(t.source, SRC_MAINTENANCE);
        let m = parse_maintenance_event(U, "MIGRATE_ON_HOST_MAINTENANCE")
            .unwrap()
            .unwrap();
        assert_eq!(m.kind, NoticeKind::GcpMigrate);
        assert_ne!(m.id, t.id);
        let u = parse_maintenance_event(U, "SEVERE_WEATHER_ON_HOST")
            .unwrap()
            .unwrap();
        assert_eq!(u.kind, NoticeKind::Unknown);
        assert_eq!(u.id, "gcp/maintenance-event/SEVERE_WEATHER_ON_HOST");
        // Values are case-sensitive: a lowercase variant is unknown, never a power action.
        assert_eq!(
            parse_maintenance_event(U, "terminate_on_host_maintenance")
                .unwrap()
                .unwrap()
                .kind,
            NoticeKind::Unknown
        );
        for bad in ["", "  ", "two words", "\u{0}", &"X".repeat(65)] {
            assert!(parse_maintenance_event(U, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parsers_are_total() {
        for body in ["é", "\u{feff}TRUE", "TRUE\r\n\r\n", "{}", "[", "\u{0}\u{1}"] {
            let _ = parse_preempted(U, body);
            let _ = parse_maintenance_event(U, body);
        }
    }

    #[test]
    fn etags() {
        assert_eq!(usable_etag(Some("abc123")).as_deref(), Some("abc123"));
        assert_eq!(usable_etag(Some(" \"q\" ")).as_deref(), Some("\"q\""));
        assert!(usable_etag(None).is_none());
        assert!(usable_etag(Some("")).is_none());
        assert!(usable_etag(Some("a b")).is_none());
        assert!(usable_etag(Some(&"e".repeat(MAX_ETAG + 1))).is_none());
        assert_eq!(percent_encode("0aF-._~"), "0aF-._~");
        assert_eq!(percent_encode("\"a&b=c\""), "%22a%26b%3Dc%22");
    }

    #[test]
    fn timeouts_follow_the_wait() {
        let client = ImdsClient::new("http://127.0.0.1:1", Default::default()).unwrap();
        let g = Gcp::new(client.clone(), &Timings::defaults(Cloud::Gcp));
        assert_eq!(g.wait_secs(), 60);
        assert_eq!(g.long_poll_timeout(), Duration::from_secs(63));
        assert_eq!(g.early_threshold(), Duration::from_secs(1));
        let g = Gcp::new(
            client,
            &Timings {
                gcp_wait: Duration::from_millis(10),
                poll: Duration::from_millis(10),
                ..Timings::defaults(Cloud::Gcp)
            },
        );
        assert_eq!(g.wait_secs(), 1, "timeout_sec is at least 1");
        assert_eq!(g.early_threshold(), Duration::from_millis(500));
        assert!(
            g.next_due() <= Instant::now(),
            "the first read is due at once"
        );
    }
}
