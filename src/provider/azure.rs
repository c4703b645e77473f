//! Azure Scheduled Events (`/metadata/scheduledevents`, header `Metadata: true`).
//!
//! The document is polled every `poll_interval` (nthd's default on Azure is 500 ms: evictions can
//! come in under 10 s, and Azure's IMDS allows about 5 requests/s per VM). It
//! lists the events of every VM in the same availability set or scale set, so nthd acts only on
//! events whose `Resources` name this VM, compared case-insensitively. The name comes from
//! `/metadata/instance/compute/name` and is read once, then cached; until that read works it is
//! retried with a backoff on every observation.
//!
//! # While the VM name is unknown
//!
//! Events are then attributed to no VM: nthd never acts on them, not even when an event lists
//! exactly one resource, because a single-resource event is just as likely to be for a sibling
//! VM (events of a scale set usually name one instance each). Each such event is logged once at
//! warn, and it produces no notice (not even an `unknown` one: a user who set
//! `--action-unknown=poweroff` must not power off for another VM). This loses no notice in
//! practice: the name lives on the same service that just answered, the events stay in the
//! document until they start, and the next observation after the name read succeeds
//! re-evaluates them with their real kind (Preempt gives at least 30 s, the others minutes).
//!
//! # The first request
//!
//! The first Scheduled Events call can take up to two minutes while the platform enables the
//! service for the VM. That request gets a long timeout ([`FIRST_REQUEST_TIMEOUT`]) until the
//! service has answered once. It is kept in flight across observations: `observe()` returns
//! after at most [`FIRST_REQUEST_PATIENCE`] with a timeout error (nothing is "fresh", so nothing
//! is declared gone) and the next call keeps waiting on the same request. This keeps the
//! daemon's watchdog fed, which a two-minute `observe()` would not.
//!
//! # Acknowledgement
//!
//! [`Provider::acknowledge`] POSTs `{"StartRequests":[{"EventId":...}]}` for the ids that are
//! both asked for and listed for this VM in the last document nthd read. It never acknowledges
//! an event it did not see for this VM: acknowledging lets the platform go ahead for every
//! resource an event lists.

use std::collections::HashSet;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use http::Method;
use serde_json::{Map, Value};

use super::identity::{clean_value, Reads};
use super::{
    cap_raw, Cloud, Identity, Notice, NoticeKind, NoticeStatus, Observation, Pace, Provider,
    SourceError, SourceState, Timings,
};
use crate::imds::{ImdsClient, ImdsError, Reply};
use crate::logging::clean_id;
use crate::logging::{clean, warn_limited};
use crate::notice::{Lifecycle, NoticeId, SourceId};
use crate::timefmt;
use crate::timings::Backoff;

/// Path (without the query) of the Scheduled Events document.
pub const EVENTS_PATH: &str = "/metadata/scheduledevents";
/// The Scheduled Events API version nthd speaks.
pub(crate) const EVENTS_API_VERSION: &str = "2020-07-01";
/// Path (without the query) of this VM's name.
pub const NAME_PATH: &str = "/metadata/instance/compute/name";
/// Path (without the query) of the VM's compute metadata (`vmId`, `vmSize`, `location`, `zone`,
/// `priority`).
pub const COMPUTE_PATH: &str = "/metadata/instance/compute";
/// The instance metadata API version nthd asks for.
pub(crate) const INSTANCE_API_VERSION: &str = "2021-02-01";

const SRC_EVENTS: SourceId = SourceId::new("azure/scheduledevents");
const SRC_NAME: SourceId = SourceId::new("azure/instance/compute/name");

/// Header names must be lowercase for `ImdsClient::send`.
const METADATA: (&str, &str) = ("metadata", "true");

pub(crate) use crate::timings::AZURE_FIRST_REQUEST_TIMEOUT as FIRST_REQUEST_TIMEOUT;
/// How long one `observe()` waits for that slow first request before it returns (the request
/// stays in flight).
pub(crate) const FIRST_REQUEST_PATIENCE: Duration = Duration::from_secs(10);

/// The longest EventId kept as the platform's id (longer ones are only fingerprinted).
const MAX_EVENT_ID: usize = 256;

/// One event of the document, leniently extracted (missing or mistyped fields are empty).
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduledEvent {
    /// `EventId`, if it is a usable string.
    pub event_id: Option<String>,
    /// `EventType`, e.g. `Preempt` or `Reboot`.
    pub event_type: String,
    /// `ResourceType`, e.g. `VirtualMachine`.
    pub resource_type: String,
    /// `Resources`: the names of the VMs the event is for.
    pub resources: Vec<String>,
    /// `EventStatus`: `Scheduled` or `Started`.
    pub event_status: String,
    /// RFC 1123, empty once the event has started.
    pub not_before: String,
    /// `Description`, the platform's summary.
    pub description: String,
    /// `EventSource`: who started the event (`Platform` or `User`).
    pub event_source: String,
    /// `DurationInSeconds`: how long the interruption is expected to last (`-1` when unknown).
    pub duration_secs: Option<i64>,
    /// The event's JSON, capped.
    pub raw: String,
}

/// The Scheduled Events document.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// `DocumentIncarnation`, which goes up whenever the events change.
    pub incarnation: Option<i64>,
    /// `Events`, in the document's order.
    pub events: Vec<ScheduledEvent>,
}

/// Whom an event is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    ThisVm,
    OtherVm,
    /// This VM's name is not known yet and the event names resources.
    Unknown,
}

fn str_field(o: &Map<String, Value>, key: &str) -> String {
    o.get(key)
        .and_then(Value::as_str)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Parses the Scheduled Events document. The top level must be an object with an `Events`
/// array of objects; inside an event, unknown fields are ignored and missing or mistyped ones
/// are left empty.
pub fn parse_document(url: &str, body: &str) -> Result<Document, ImdsError> {
    let v: Value = serde_json::from_str(body).map_err(|e| {
        ImdsError::malformed(url, format!("invalid Scheduled Events JSON: {e}"), body)
    })?;
    let obj = v
        .as_object()
        .ok_or_else(|| ImdsError::malformed(url, "expected a JSON object", body))?;
    let events = obj
        .get("Events")
        .and_then(Value::as_array)
        .ok_or_else(|| ImdsError::malformed(url, "no \"Events\" array", body))?;
    let incarnation = obj.get("DocumentIncarnation").and_then(Value::as_i64);
    let mut out = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        let o = e.as_object().ok_or_else(|| {
            ImdsError::malformed(url, format!("Events[{i}] is not an object"), body)
        })?;
        let event_id = o
            .get("EventId")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| {
                !s.is_empty() && s.len() <= MAX_EVENT_ID && s.bytes().all(|b| b.is_ascii_graphic())
            })
            .map(str::to_string);
        if event_id.is_none() {
            let shown = clean(&e.to_string(), 200);
            warn_limited(&format!("azure-no-eventid {shown}"), || {
                format!("Scheduled Event {i} at {url} has no usable EventId: {shown}")
            });
        }
        let resources = match o.get("Resources") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_string()],
            _ => Vec::new(),
        };
        out.push(ScheduledEvent {
            event_id,
            event_type: str_field(o, "EventType"),
            resource_type: str_field(o, "ResourceType"),
            resources,
            event_status: str_field(o, "EventStatus"),
            not_before: str_field(o, "NotBefore"),
            description: str_field(o, "Description"),
            event_source: str_field(o, "EventSource"),
            duration_secs: o.get("DurationInSeconds").and_then(Value::as_i64),
            raw: cap_raw(&e.to_string()),
        });
    }
    Ok(Document {
        incarnation,
        events: out,
    })
}

/// Parses the plain-text answer of `/metadata/instance/compute/name`.
pub fn parse_vm_name(url: &str, body: &str) -> Result<String, ImdsError> {
    let name = body.trim();
    if name.is_empty()
        || name.len() > 256
        || name.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(ImdsError::malformed(url, "expected a VM name", body));
    }
    Ok(name.to_string())
}

/// The identity in the answer of `/metadata/instance/compute`: `vmId`, `vmSize`, the zone as
/// `location-zone` (`westeurope-1`) or just `location` when `zone` is empty (a VM outside
/// availability zones), and `priority` (`Spot` or `Regular`; empty or unknown is `None`). A
/// field that is missing, not a string or not clean is `None`; the document must be a JSON
/// object.
pub(crate) fn parse_compute(url: &str, body: &str) -> Result<Identity, ImdsError> {
    let v: Value = serde_json::from_str(body)
        .map_err(|e| ImdsError::malformed(url, format!("invalid compute JSON: {e}"), body))?;
    let o = v
        .as_object()
        .ok_or_else(|| ImdsError::malformed(url, "expected a JSON object", body))?;
    let field = |k: &str| o.get(k).and_then(Value::as_str).map(str::trim);
    let zone = match (field("location"), field("zone")) {
        (Some(loc), None | Some("")) => clean_value(loc),
        (Some(loc), Some(z)) if clean_value(loc).is_some() => clean_value(&format!("{loc}-{z}")),
        _ => None,
    };
    let lifecycle = field("priority").and_then(|p| {
        if p.eq_ignore_ascii_case("Spot") {
            Some(Lifecycle::Spot)
        } else if p.eq_ignore_ascii_case("Regular") {
            Some(Lifecycle::OnDemand)
        } else {
            None
        }
    });
    Ok(Identity {
        instance_id: field("vmId").and_then(clean_value),
        instance_type: field("vmSize").and_then(clean_value),
        zone,
        lifecycle,
    })
}

/// Whether `ev` is for the VM called `vm` (`None`: not known yet).
pub(crate) fn target(ev: &ScheduledEvent, vm: Option<&str>) -> Target {
    match vm {
        Some(vm) if ev.resources.iter().any(|r| r.eq_ignore_ascii_case(vm)) => Target::ThisVm,
        Some(_) => Target::OtherVm,
        None if ev.resources.is_empty() => Target::OtherVm,
        None => Target::Unknown,
    }
}

/// The notice for an event of this VM. Unknown event types become [`NoticeKind::Unknown`];
/// unknown statuses are taken as active.
pub(crate) fn to_notice(url: &str, ev: &ScheduledEvent) -> Notice {
    let kind = event_kind(url, &ev.event_type);
    match ev.event_status.to_ascii_lowercase().as_str() {
        "scheduled" | "started" => {}
        _ => {
            let st = clean(&ev.event_status, 64);
            warn_limited(&format!("azure-status {st}"), || {
                format!("unknown Scheduled Event status \"{st}\" at {url}; treating it as active")
            });
        }
    }
    let id = match &ev.event_id {
        Some(e) => NoticeId::new(Cloud::Azure, &[&clean_id(e)]),
        None => NoticeId::new(
            Cloud::Azure,
            &[
                "noid",
                &clean_id(&ev.event_type),
                &clean_id(&ev.resources.join(",")),
            ],
        ),
    };
    Notice {
        kind,
        source: SRC_EVENTS,
        id,
        event_id: ev.event_id.clone(),
        deadline: not_before(url, &ev.not_before),
        status: NoticeStatus::Active,
        detail: describe(ev),
        raw: ev.raw.clone(),
    }
}

fn event_kind(url: &str, event_type: &str) -> NoticeKind {
    match event_type.to_ascii_lowercase().as_str() {
        "preempt" => NoticeKind::AzurePreempt,
        "terminate" => NoticeKind::AzureTerminate,
        "reboot" => NoticeKind::AzureReboot,
        "redeploy" => NoticeKind::AzureRedeploy,
        "freeze" => NoticeKind::AzureFreeze,
        _ => {
            let t = clean(event_type, 64);
            warn_limited(&format!("azure-type {t}"), || {
                format!("unknown Scheduled Event type \"{t}\" at {url}; treating it as unknown")
            });
            NoticeKind::Unknown
        }
    }
}

/// `NotBefore`: empty means now; one that does not parse is warned about and taken as now.
fn not_before(url: &str, value: &str) -> Option<std::time::SystemTime> {
    if value.is_empty() {
        return None;
    }
    let d = timefmt::parse_any(value);
    if d.is_none() {
        let nb = clean(value, 64);
        warn_limited(&format!("azure-notbefore {nb}"), || {
            format!(
                "Scheduled Event NotBefore \"{nb}\" at {url} does not parse; acting as if it \
                 were now"
            )
        });
    }
    d
}

/// The notice's one-line summary.
fn describe(ev: &ScheduledEvent) -> String {
    let or = |v: &str, empty: &'static str| -> String {
        if v.is_empty() {
            empty.to_string()
        } else {
            v.to_string()
        }
    };
    let when = match ev.not_before.is_empty() {
        true => "now".to_string(),
        false => format!("not before {}", ev.not_before),
    };
    let mut detail = format!(
        "Scheduled Event {} {} ({}) for {} {when}",
        or(&ev.event_type, "(no type)"),
        ev.event_id.as_deref().unwrap_or("(no id)"),
        or(&ev.event_status, "no status"),
        ev.resources.join(", "),
    );
    if !ev.description.is_empty() {
        detail.push_str(&format!(": {}", ev.description));
    }
    if !ev.event_source.is_empty() {
        detail.push_str(&format!(" (source {})", ev.event_source));
    }
    if let Some(d) = ev.duration_secs.filter(|d| *d >= 0) {
        detail.push_str(&format!(" (lasting {d}s)"));
    }
    detail
}

/// The notices a Scheduled Events answer holds for the VM called `vm` (`None`: name not known,
/// so no event is attributed to this VM). Pure: what the provider does on each read, minus the
/// logging and the bookkeeping for [`Provider::acknowledge`].
pub fn parse_events(url: &str, body: &str, vm: Option<&str>) -> Result<Vec<Notice>, ImdsError> {
    let doc = parse_document(url, body)?;
    Ok(doc
        .events
        .iter()
        .filter(|ev| target(ev, vm) == Target::ThisVm)
        .map(|ev| to_notice(url, ev))
        .collect())
}

/// The first Scheduled Events call, on a thread of its own: when it was sent, and where its
/// answer comes.
type FirstCall = (Instant, Receiver<Result<Reply, ImdsError>>);

/// The Azure provider.
pub struct Azure {
    client: ImdsClient,
    poll_interval: Duration,
    vm_name: Option<String>,
    name_next: Instant,
    name_backoff: Backoff,
    events: SourceState,
    /// The service has answered a Scheduled Events request once (any HTTP status).
    answered: bool,
    /// The first Scheduled Events call, waited on across observations.
    inflight: Option<FirstCall>,
    /// EventIds listed for this VM in the last document read.
    seen: Vec<String>,
    /// Events already warned about while the VM name was unknown.
    warned_unattributed: HashSet<String>,
    told_first_call: bool,
}

impl Azure {
    /// Reads the VM's name, with backoff on failure.
    fn refresh_name(&mut self, obs: &mut Observation) {
        match self.read_name() {
            Ok(()) => self.name_backoff.reset(),
            Err(error) => {
                self.name_next = Instant::now() + self.name_backoff.next_delay();
                obs.errors.push(SourceError {
                    source: SRC_NAME,
                    error,
                });
            }
        }
    }

    /// Reads the events, or goes on waiting for the first call: Azure may take up to two
    /// minutes to answer it, and meanwhile each poll waits only a short while on the same
    /// request, which runs on a thread of its own so as never to hold the reader.
    fn read_events(&mut self, obs: &mut Observation, now: Instant) {
        let r = match self.answered {
            true => self.client.get(&Self::events_path(), &[METADATA]),
            false => match self.first_call() {
                Some(r) => r,
                None => return self.still_waiting(obs, now),
            },
        };
        self.inflight = None;
        if r.is_ok() {
            self.answered = true;
        }
        let r = r.and_then(|reply| self.interpret(reply));
        self.events.record(Instant::now(), r, obs);
    }

    /// The first call's answer, waited for [`FIRST_REQUEST_PATIENCE`] (the call is sent first
    /// if it is not in flight); `None` while it has not come.
    fn first_call(&mut self) -> Option<Result<Reply, ImdsError>> {
        if self.inflight.is_none() {
            let (tx, rx) = std::sync::mpsc::channel();
            let timeout = Some(FIRST_REQUEST_TIMEOUT);
            let path = Self::events_path();
            let send = move |_, reply| drop(tx.send(reply));
            if let Err(e) = self
                .client
                .get_later(path, &[METADATA], timeout, Instant::now(), send)
            {
                return Some(Err(e));
            }
            self.inflight = Some((Instant::now(), rx));
        }
        let (_, rx) = self.inflight.as_ref()?;
        match rx.recv_timeout(FIRST_REQUEST_PATIENCE) {
            Ok(r) => Some(r),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Err(ImdsError::Client(
                "the first Scheduled Events call was lost".into(),
            ))),
        }
    }

    /// The first call has not answered yet: say so once, and count this poll as a timeout.
    fn still_waiting(&mut self, obs: &mut Observation, now: Instant) {
        let since = self.inflight.as_ref().map_or(now, |(t, _)| *t);
        if !self.told_first_call {
            tracing::info!(
                "the first Scheduled Events call can take up to 2 minutes while Azure enables \
                 the service for this VM; still waiting"
            );
            self.told_first_call = true;
        }
        obs.errors.push(SourceError {
            source: SRC_EVENTS,
            error: ImdsError::Timeout {
                url: self.client.url(&Self::events_path()),
                timeout: since.elapsed(),
            },
        });
    }

    /// A provider that reads through `client`. Nothing is read before the first `observe()`.
    pub fn new(client: ImdsClient, timings: &Timings) -> Azure {
        let now = Instant::now();
        Azure {
            events: SourceState::new(SRC_EVENTS, timings.poll, Pace::Urgent, now),
            name_backoff: Backoff::new(timings.poll),
            name_next: now,
            client,
            poll_interval: timings.poll,
            vm_name: None,
            answered: false,
            inflight: None,
            seen: Vec::new(),
            warned_unattributed: HashSet::new(),
            told_first_call: false,
        }
    }

    /// This VM's name, once read.
    pub fn vm_name(&self) -> Option<&str> {
        self.vm_name.as_deref()
    }

    fn events_path() -> String {
        format!("{EVENTS_PATH}?api-version={EVENTS_API_VERSION}")
    }

    fn read_name(&mut self) -> Result<(), ImdsError> {
        let path = format!("{NAME_PATH}?api-version={INSTANCE_API_VERSION}&format=text");
        let url = self.client.url(&path);
        let reply = self.client.get(&path, &[METADATA])?;
        match reply.status {
            200 => {
                let name = parse_vm_name(&url, &reply.body)?;
                tracing::info!("this VM is {name:?}; acting only on Scheduled Events for it");
                self.vm_name = Some(name);
                Ok(())
            }
            _ => Err(reply.status_error(url)),
        }
    }

    /// Turns the document into this VM's notices and remembers their EventIds.
    fn select(&mut self, url: &str, doc: &Document) -> Vec<Notice> {
        let mut notices = Vec::new();
        let mut seen = Vec::new();
        for ev in &doc.events {
            let id = ev.event_id.as_deref().unwrap_or("(no id)");
            match target(ev, self.vm_name.as_deref()) {
                Target::ThisVm => {
                    notices.push(to_notice(url, ev));
                    if let Some(e) = &ev.event_id {
                        seen.push(e.clone());
                    }
                }
                Target::OtherVm => tracing::debug!(
                    "Scheduled Event {} {id} is for {:?}, not this VM ({}); ignoring it",
                    ev.event_type,
                    ev.resources,
                    self.vm_name.as_deref().unwrap_or("name unknown"),
                ),
                Target::Unknown => {
                    let key = format!("{id}/{}", ev.resources.join(","));
                    if self.warned_unattributed.len() < 1024 && self.warned_unattributed.insert(key)
                    {
                        tracing::warn!(
                            "Scheduled Event {} {id} for [{}] is not acted on: this VM's name \
                             is not known yet ({} cannot be read); nthd retries and \
                             re-evaluates the event once it can",
                            clean(&ev.event_type, 64),
                            clean(&ev.resources.join(", "), 200),
                            self.client.url(NAME_PATH),
                        );
                    }
                }
            }
        }
        self.seen = seen;
        notices
    }

    fn interpret(&mut self, reply: Reply) -> Result<Vec<Notice>, ImdsError> {
        let url = self.client.url(&Self::events_path());
        match reply.status {
            200 => {
                let doc = parse_document(&url, &reply.body)?;
                Ok(self.select(&url, &doc))
            }
            _ => Err(reply.status_error(url)),
        }
    }
}

impl Provider for Azure {
    const CLOUD: Cloud = Cloud::Azure;

    fn describe(&self) -> String {
        // The daemon keeps the first description for STATUS=, so it says nothing that is only
        // true before the first read.
        format!(
            "Azure Scheduled Events at {} every {}, acting only on events for this VM",
            self.client.base(),
            timefmt::format_duration(self.poll_interval),
        )
    }

    fn observe(&mut self) -> Observation {
        let mut obs = Observation::default();
        let now = Instant::now();
        if self.vm_name.is_none() && self.name_next <= now {
            self.refresh_name(&mut obs);
        }
        if self.inflight.is_some() || self.events.due(Instant::now()) {
            self.read_events(&mut obs, now);
        }
        obs.notices.extend(self.events.last.iter().cloned());
        obs
    }

    fn next_due(&self) -> Instant {
        if self.inflight.is_some() {
            return Instant::now();
        }
        self.events.next
    }

    fn first_answer_pending(&self) -> bool {
        self.inflight.is_some() && !self.answered
    }

    /// One GET of `/metadata/instance/compute` ([`parse_compute`]).
    fn identity(&mut self) -> Result<Identity, ImdsError> {
        let path = format!("{COMPUTE_PATH}?api-version={INSTANCE_API_VERSION}");
        let url = self.client.url(&path);
        let mut reads = Reads::default();
        let r = self.client.get(&path, &[METADATA]);
        let id = match reads.body(&url, r).map(|body| parse_compute(&url, &body)) {
            Some(Ok(id)) => id,
            Some(Err(e)) => return Err(e),
            None => Identity::default(),
        };
        reads.finish(id, &self.client)
    }

    fn acknowledge(&mut self, event_ids: &[String]) -> Result<usize, ImdsError> {
        let mut ack: Vec<String> = Vec::new();
        for id in event_ids {
            if ack.contains(id) {
                continue;
            }
            if self.seen.contains(id) {
                ack.push(id.clone());
            } else {
                tracing::warn!(
                    "not acknowledging Scheduled Event {id}: it is not listed for this VM in \
                     the last document nthd read"
                );
            }
        }
        if ack.is_empty() {
            return Ok(0);
        }
        let body = serde_json::json!({
            "StartRequests": ack.iter().map(|id| serde_json::json!({ "EventId": id })).collect::<Vec<_>>(),
        })
        .to_string();
        let path = Self::events_path();
        let reply = self
            .client
            .send(Method::POST, &path, &[METADATA], Some(body), None)?;
        if !reply.is_success() {
            return Err(reply.status_error(self.client.url(&path)));
        }
        tracing::info!(
            "acknowledged Scheduled Event(s) {} (StartRequests)",
            ack.join(", ")
        );
        Ok(ack.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    const U: &str = "http://imds/metadata/scheduledevents";

    fn doc_with(events: &str) -> String {
        format!(r#"{{"DocumentIncarnation": 3, "Events": [{events}]}}"#)
    }

    fn event(id: &str, kind: &str, resources: &str, status: &str, nb: &str) -> String {
        format!(
            r#"{{"EventId":"{id}","EventType":"{kind}","ResourceType":"VirtualMachine","Resources":{resources},"EventStatus":"{status}","NotBefore":"{nb}","Description":"d","EventSource":"Platform","DurationInSeconds":-1}}"#
        )
    }

    #[test]
    fn compute_identity() {
        let doc = |zone: &str, priority: &str| {
            format!(
                r#"{{"vmId":"02aab8a4-74ef-476e-8182-f6d2ba4166a6","vmSize":"Standard_D4s_v5",
                    "location":"westeurope","zone":"{zone}","priority":"{priority}","name":"vm"}}"#
            )
        };
        let id = parse_compute(U, &doc("1", "Spot")).unwrap();
        assert_eq!(
            id.instance_id.as_deref(),
            Some("02aab8a4-74ef-476e-8182-f6d2ba4166a6")
        );
        assert_eq!(id.instance_type.as_deref(), Some("Standard_D4s_v5"));
        assert_eq!(id.zone.as_deref(), Some("westeurope-1"));
        assert_eq!(id.lifecycle, Some(Lifecycle::Spot));
        let id = parse_compute(U, &doc("", "Regular")).unwrap();
        assert_eq!(id.zone.as_deref(), Some("westeurope"));
        assert_eq!(id.lifecycle, Some(Lifecycle::OnDemand));
        assert_eq!(parse_compute(U, &doc("1", "")).unwrap().lifecycle, None);
        assert_eq!(
            parse_compute(U, &doc("1", "Eventual")).unwrap().lifecycle,
            None
        );
        // A hostile zone spoils the zone only; mistyped fields are missing, not errors.
        let id = parse_compute(U, &doc("<b>1</b>", "Spot")).unwrap();
        assert_eq!(id.zone, None);
        assert_eq!(id.instance_type.as_deref(), Some("Standard_D4s_v5"));
        let id = parse_compute(U, r#"{"vmId":5,"zone":"1","vmSize":"a\nb"}"#).unwrap();
        assert!(id.is_empty(), "{id:?}");
        assert!(parse_compute(U, "[]").is_err());
        assert!(parse_compute(U, "<html>").is_err());
    }

    /// A document with event `A`, a Preempt of vm1 scheduled at Microsoft's example time, and
    /// then `other`.
    fn doc_preempt_a_and(other: &str) -> String {
        let a = event(
            "A",
            "Preempt",
            r#"["vm1"]"#,
            "Scheduled",
            "Mon, 19 Sep 2016 18:29:47 GMT",
        );
        doc_with(&[a, other.to_string()].join(","))
    }

    #[test]
    fn documents() {
        let body = doc_preempt_a_and(&event("B", "Reboot", r#"["vm2","vm3"]"#, "Started", ""));
        let d = parse_document(U, &body).unwrap();
        assert_eq!(d.incarnation, Some(3));
        assert_eq!(d.events.len(), 2);
        assert_eq!(d.events[0].event_id.as_deref(), Some("A"));
        assert_eq!(d.events[0].resources, vec!["vm1"]);
        assert_eq!(d.events[1].resources, vec!["vm2", "vm3"]);
        assert_eq!(d.events[0].duration_secs, Some(-1));
        assert!(
            parse_document(U, r#"{"DocumentIncarnation":0,"Events":[]}"#)
                .unwrap()
                .events
                .is_empty()
        );
        // Unknown and mistyped fields are tolerated.
        let odd = parse_document(
            U,
            r#"{"Events":[{"EventId":5,"EventType":"Freeze","Resources":"vm1","NotBefore":null,"Extra":{"a":1}}],"New":true}"#,
        )
        .unwrap();
        assert_eq!(odd.incarnation, None);
        assert_eq!(odd.events[0].event_id, None);
        assert_eq!(odd.events[0].resources, vec!["vm1"]);
        assert_eq!(odd.events[0].not_before, "");
        for bad in [
            "",
            "[]",
            "{}",
            r#"{"Events":null}"#,
            r#"{"Events":{}}"#,
            r#"{"Events":[1]}"#,
            "{\"Events\":[",
            "<html>",
        ] {
            assert!(parse_document(U, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn event_types_and_statuses() {
        for (t, k) in [
            ("Preempt", NoticeKind::AzurePreempt),
            ("Terminate", NoticeKind::AzureTerminate),
            ("Reboot", NoticeKind::AzureReboot),
            ("Redeploy", NoticeKind::AzureRedeploy),
            ("Freeze", NoticeKind::AzureFreeze),
            ("freeze", NoticeKind::AzureFreeze),
            ("LiveMigrate", NoticeKind::Unknown),
            // Spot rebalance recommendations ("Spot Plus" preview) have no documented
            // EventType (docs/clouds.md, Azure): whatever name one comes under is unknown, so it is
            // logged and, with the defaults, neither acted on nor acknowledged.
            ("SpotRebalanceRecommendation", NoticeKind::Unknown),
            ("", NoticeKind::Unknown),
        ] {
            let d = parse_document(
                U,
                &doc_with(&event("E-1", t, r#"["vm1"]"#, "Scheduled", "")),
            )
            .unwrap();
            let n = to_notice(U, &d.events[0]);
            assert_eq!(n.kind, k, "{t}");
            assert_eq!(n.id, "azure/E-1");
            assert_eq!(n.event_id.as_deref(), Some("E-1"));
            assert_eq!(n.status, NoticeStatus::Active);
            assert_eq!(n.source, SRC_EVENTS);
        }
        for s in ["Scheduled", "Started", "Whatever"] {
            let d =
                parse_document(U, &doc_with(&event("E", "Preempt", r#"["vm1"]"#, s, ""))).unwrap();
            let n = to_notice(U, &d.events[0]);
            assert_eq!(n.status, NoticeStatus::Active);
            assert!(n.detail.contains(s), "{}", n.detail);
        }
    }

    #[test]
    fn not_before() {
        let d = parse_document(
            U,
            &doc_with(&event(
                "E",
                "Reboot",
                r#"["vm1"]"#,
                "Scheduled",
                "Mon, 19 Sep 2016 18:29:47 GMT",
            )),
        )
        .unwrap();
        let n = to_notice(U, &d.events[0]);
        assert_eq!(
            n.deadline,
            Some(UNIX_EPOCH + Duration::from_secs(1_474_309_787))
        );
        // Started: empty NotBefore means now. The fingerprint stays the same.
        let started = parse_document(
            U,
            &doc_with(&event("E", "Reboot", r#"["vm1"]"#, "Started", "")),
        )
        .unwrap();
        let s = to_notice(U, &started.events[0]);
        assert!(s.deadline.is_none());
        assert_eq!(s.id, n.id);
        let garbage = parse_document(
            U,
            &doc_with(&event("E", "Reboot", r#"["vm1"]"#, "Scheduled", "soon")),
        )
        .unwrap();
        assert!(to_notice(U, &garbage.events[0]).deadline.is_none());
    }

    #[test]
    fn targets() {
        let d = parse_document(
            U,
            &doc_with(
                &[
                    event("A", "Preempt", r#"["VM1"]"#, "Scheduled", ""),
                    event("B", "Preempt", r#"["vm2"]"#, "Scheduled", ""),
                    event("C", "Preempt", r#"[]"#, "Scheduled", ""),
                    event("D", "Preempt", r#"["vm2","vm1"]"#, "Scheduled", ""),
                ]
                .join(","),
            ),
        )
        .unwrap();
        let t: Vec<_> = d.events.iter().map(|e| target(e, Some("vm1"))).collect();
        assert_eq!(
            t,
            [
                Target::ThisVm,
                Target::OtherVm,
                Target::OtherVm,
                Target::ThisVm
            ]
        );
        let t: Vec<_> = d.events.iter().map(|e| target(e, None)).collect();
        assert_eq!(
            t,
            [
                Target::Unknown,
                Target::Unknown,
                Target::OtherVm,
                Target::Unknown
            ]
        );
        // A prefix or substring is not a match.
        let t: Vec<_> = d.events.iter().map(|e| target(e, Some("vm"))).collect();
        assert!(t.iter().all(|t| *t == Target::OtherVm));
    }

    #[test]
    fn vm_names() {
        assert_eq!(parse_vm_name(U, "vm1\n").unwrap(), "vm1");
        assert_eq!(parse_vm_name(U, "myScaleSet_2").unwrap(), "myScaleSet_2");
        for bad in ["", " \n", "a b", "a\u{0}", &"x".repeat(300)] {
            assert!(parse_vm_name(U, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ids_without_event_id_are_stable() {
        let a = parse_document(U, r#"{"Events":[{"EventType":"Preempt","Resources":["vm1"],"NotBefore":"Mon, 19 Sep 2016 18:29:47 GMT"}]}"#).unwrap();
        let b = parse_document(
            U,
            r#"{"Events":[{"EventType":"Preempt","Resources":["vm1"],"NotBefore":""}]}"#,
        )
        .unwrap();
        let (na, nb) = (to_notice(U, &a.events[0]), to_notice(U, &b.events[0]));
        assert_eq!(na.id, nb.id);
        assert!(na.event_id.is_none());
        assert_eq!(na.kind, NoticeKind::AzurePreempt);
    }

    #[test]
    fn parse_events_filters_on_this_vm() {
        let body = doc_with(
            &[
                event("A", "Preempt", r#"["vm1"]"#, "Scheduled", ""),
                event("B", "Terminate", r#"["vm2"]"#, "Scheduled", ""),
            ]
            .join(","),
        );
        let n = parse_events(U, &body, Some("VM1")).unwrap();
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].event_id.as_deref(), Some("A"));
        assert!(parse_events(U, &body, None).unwrap().is_empty());
        assert!(parse_events(U, &body, Some("vm3")).unwrap().is_empty());
        assert!(parse_events(U, "{", Some("vm1")).is_err());
    }

    #[test]
    fn mutated_documents_never_panic() {
        let base = doc_preempt_a_and(&event("B", "Freeze", r#"["vm1","vm2"]"#, "Started", ""))
            .into_bytes();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..5000 {
            let mut b = base.clone();
            for _ in 0..(next() % 4 + 1) {
                let i = (next() % b.len() as u64) as usize;
                match next() % 3 {
                    0 => b[i] = (next() % 256) as u8,
                    1 => {
                        b.remove(i);
                    }
                    _ => b.insert(i, br#"{}[]",:0\u0"#[(next() % 11) as usize]),
                }
            }
            let s = String::from_utf8_lossy(&b);
            let _ = parse_events(U, &s, Some("vm1"));
            let _ = parse_events(U, &s, None);
        }
    }

    #[test]
    fn parsers_are_total() {
        for body in [
            "é",
            "null",
            "1",
            "\"x\"",
            "{\"Events\":[{}]}",
            &"[".repeat(10_000),
        ] {
            if let Ok(d) = parse_document(U, body) {
                for e in &d.events {
                    let _ = to_notice(U, e);
                    let _ = target(e, None);
                }
            }
            let _ = parse_vm_name(U, body);
        }
    }
}
