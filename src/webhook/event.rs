//! The events nthd sends, and their two renderings: CloudEvents 1.0 structured mode and a
//! one-line Slack/Teams message.

use std::fmt::Write as _;
use std::time::SystemTime;

use serde::Serialize;

use super::WebhookFormat;
use crate::logind::BlockHolder;
use crate::notice::{Cloud, Identity, Notice, NoticeStatus};
use crate::policy::{Action, Decision, PowerAction, When};
use crate::timefmt::format_rfc3339;

/// Who sends the events: the host, and what the metadata service says about it. The daemon
/// updates it ([`super::Webhooks::set_context`]) once the cloud and identity are known; each
/// event carries the context of the moment it was sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// The host name (CloudEvents `source` is `/nthd/<hostname>`).
    pub hostname: String,
    /// The cloud, once detected.
    pub cloud: Option<Cloud>,
    /// The instance, as far as known.
    pub identity: Identity,
}

impl Context {
    /// A context with this machine's host name and nothing else known yet.
    pub fn for_this_host() -> Context {
        Context {
            hostname: hostname(),
            ..Context::default()
        }
    }
}

/// This machine's host name (`gethostname(2)`), or `localhost` if it has none.
pub(crate) fn hostname() -> String {
    let uname = rustix::system::uname();
    let name = uname.nodename().to_string_lossy();
    let name: String = name.chars().filter(char::is_ascii_graphic).collect();
    if name.is_empty() {
        "localhost".to_string()
    } else {
        name
    }
}

/// The CloudEvents `type` of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// `io.nthd.notice`: a notice was announced, with what nthd will do about it.
    Notice,
    /// `io.nthd.action`: nthd asked logind to power off or reboot, and what came of it.
    Action,
    /// `io.nthd.canceled`: a scheduled or pending action will not happen.
    Canceled,
    /// `io.nthd.drained`: how a shutdown's drain went (any shutdown, nthd's or not).
    Drained,
}

impl EventType {
    /// The CloudEvents `type` attribute.
    pub fn name(self) -> &'static str {
        match self {
            EventType::Notice => "io.nthd.notice",
            EventType::Action => "io.nthd.action",
            EventType::Canceled => "io.nthd.canceled",
            EventType::Drained => "io.nthd.drained",
        }
    }
}

/// What came of a power action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActionResult {
    /// logind accepted the request.
    Accepted,
    /// logind refused it, or could not be reached; the error, for the receiver.
    Failed(String),
    /// `--dry-run`: nothing was asked.
    DryRun,
}

impl ActionResult {
    fn name(&self) -> &'static str {
        match self {
            ActionResult::Accepted => "accepted",
            ActionResult::Failed(_) => "failed",
            ActionResult::DryRun => "dry-run",
        }
    }
}

/// One event, built by the daemon from a notice; rendered when it is sent.
#[derive(Clone, Debug)]
pub struct Event {
    ty: EventType,
    /// The notice it is about; `None` only for a drain report of a shutdown nthd did not ask
    /// for.
    notice: Option<Notice>,
    time: SystemTime,
    /// Notice events: the decided action and when (`None` = now).
    decision: Option<(Action, Option<SystemTime>, String)>,
    /// Action events.
    result: Option<(PowerAction, ActionResult)>,
    /// Action events that logind refused: its error name and the block lock holders.
    refusal: Option<(String, Vec<BlockHolder>)>,
    /// Canceled events.
    reason: Option<String>,
    /// Drained events.
    drain: Option<Box<crate::drain::Report>>,
}

impl Event {
    fn new(ty: EventType, n: &Notice) -> Event {
        Event {
            ty,
            notice: Some(n.clone()),
            time: SystemTime::now(),
            decision: None,
            result: None,
            refusal: None,
            reason: None,
            drain: None,
        }
    }

    /// `io.nthd.drained`: the drain report `r`; `n` is the notice the shutdown followed, if
    /// it was nthd's.
    pub(crate) fn drained(r: &crate::drain::Report, n: Option<&Notice>) -> Event {
        Event {
            ty: EventType::Drained,
            notice: n.cloned(),
            time: SystemTime::now(),
            decision: None,
            result: None,
            refusal: None,
            reason: None,
            drain: Some(Box::new(r.clone())),
        }
    }

    /// `io.nthd.notice`: `n` was announced, and the policy decided `d`.
    pub fn notice(n: &Notice, d: &Decision) -> Event {
        let at = match d.when {
            When::Now => None,
            When::At(t) => Some(t),
        };
        let mut e = Event::new(EventType::Notice, n);
        e.decision = Some((d.action, at, d.reason.clone()));
        e
    }

    /// `io.nthd.action`: nthd asked for `action` because of `n`, with `result`.
    pub fn action(n: &Notice, action: PowerAction, result: ActionResult) -> Event {
        let mut e = Event::new(EventType::Action, n);
        e.result = Some((action, result));
        e
    }

    /// The same action event, with logind's refusal (`data.result.logind_error` and
    /// `blocked_by`); not part of the id.
    pub(crate) fn with_refusal(mut self, refusal: Option<crate::logind::Refusal<'_>>) -> Event {
        self.refusal = refusal.map(|r| (r.error.to_string(), r.blocked_by()));
        self
    }

    /// `io.nthd.canceled`: what `n` called for will not happen, because of `reason`.
    pub fn canceled(n: &Notice, reason: &str) -> Event {
        let mut e = Event::new(EventType::Canceled, n);
        e.reason = Some(reason.to_string());
        e
    }

    /// The same event, stamped with `time` instead of the moment it was built (for tests and
    /// replays: `time` is not part of the id).
    pub fn with_time(mut self, time: SystemTime) -> Event {
        self.time = time;
        self
    }

    /// The CloudEvents type.
    pub fn event_type(&self) -> EventType {
        self.ty
    }

    /// The notice it is about (none for the drain report of a shutdown nthd did not ask for).
    pub fn notice_ref(&self) -> Option<&Notice> {
        self.notice.as_ref()
    }

    /// Until when delivery is retried: the notice's deadline, if it has one.
    pub(crate) fn deadline(&self) -> Option<SystemTime> {
        self.notice.as_ref().and_then(|n| n.deadline)
    }

    fn is_drill(&self) -> bool {
        self.notice.as_ref().is_some_and(Notice::is_drill)
    }

    /// The CloudEvents `id`: the same for the same event about the same notice on the same
    /// host, across daemon restarts, so receivers deduplicate retries and re-announcements.
    /// It is the first 128 bits of a SHA-256 of the host name, the notice's stable id, the
    /// type and, for action events, the action and its outcome, in hex.
    pub fn id(&self, ctx: &Context) -> String {
        let about = match (&self.drain, &self.notice) {
            // One report per shutdown: the moment it began tells them apart.
            (Some(d), _) => format!("shutdown {}", d.started),
            (None, Some(n)) => n.id.to_string(),
            (None, None) => String::new(),
        };
        let mut key = format!(
            "nthd-event-v1\n{}\n{about}\n{}",
            ctx.hostname,
            self.ty.name()
        );
        if let Some((action, result)) = &self.result {
            let _ = write!(key, "\n{}\n{}", action.name(), result.name());
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
        digest.as_ref()[..16]
            .iter()
            .fold(String::with_capacity(32), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            })
    }

    /// The request body and its content type in `format`.
    pub fn render(&self, ctx: &Context, format: WebhookFormat) -> (&'static str, Vec<u8>) {
        match format {
            WebhookFormat::CloudEvents => ("application/cloudevents+json", self.cloudevent(ctx)),
            WebhookFormat::Slack => ("application/json", self.slack(ctx)),
        }
    }

    fn cloudevent(&self, ctx: &Context) -> Vec<u8> {
        let ce = CloudEvent {
            specversion: "1.0",
            id: self.id(ctx),
            source: source(&ctx.hostname),
            ty: self.ty.name(),
            subject: ctx.identity.instance_id.as_deref(),
            time: format_rfc3339(self.time),
            datacontenttype: "application/json",
            nthddrill: self.is_drill().then_some(true),
            data: self.data(ctx),
        };
        serde_json::to_vec(&ce).expect("an event always serializes")
    }

    fn data<'a>(&'a self, ctx: &'a Context) -> Data<'a> {
        Data {
            hostname: &ctx.hostname,
            cloud: ctx.cloud.map(Cloud::name),
            instance_id: ctx.identity.instance_id.as_deref(),
            instance_type: ctx.identity.instance_type.as_deref(),
            zone: ctx.identity.zone.as_deref(),
            lifecycle: ctx.identity.lifecycle.map(crate::notice::Lifecycle::name),
            notice: self
                .notice
                .as_ref()
                .filter(|_| self.drain.is_none())
                .map(|n| NoticeData {
                    kind: n.kind.name(),
                    id: n.id.as_str(),
                    event_id: n.event_id.as_deref(),
                    source: n.source.as_str(),
                    status: status_name(n.status),
                    deadline: n.deadline.map(format_rfc3339),
                    detail: &n.detail,
                }),
            drain: self.drain.as_deref(),
            decision: self
                .decision
                .as_ref()
                .map(|(action, at, reason)| DecisionData {
                    action: action.name(),
                    at: format_rfc3339(at.unwrap_or(self.time)),
                    deferred: at.is_some(),
                    reason,
                }),
            result: self.result.as_ref().map(|(action, r)| ResultData {
                action: action.name(),
                outcome: r.name(),
                error: match r {
                    ActionResult::Failed(e) => Some(e),
                    _ => None,
                },
                logind_error: self.refusal.as_ref().map(|(e, _)| e.as_str()),
                blocked_by: self.refusal.as_ref().map_or(&[], |(_, h)| h.as_slice()),
            }),
            reason: self.reason.as_deref(),
            drill: self.is_drill(),
        }
    }

    /// One line: host, instance, kind, deadline, then the decision, result or reason.
    fn slack_text(&self, ctx: &Context) -> String {
        let id = &ctx.identity;
        let drill = if self.is_drill() { "[fire drill] " } else { "" };
        let mut s = format!("{drill}nthd on {}", ctx.hostname);
        let facts: Vec<&str> = [
            ctx.cloud.map(Cloud::name),
            id.instance_id.as_deref(),
            id.instance_type.as_deref(),
            id.zone.as_deref(),
            id.lifecycle.map(crate::notice::Lifecycle::name),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !facts.is_empty() {
            let _ = write!(s, " ({})", facts.join(", "));
        }
        if let Some(d) = &self.drain {
            let _ = write!(s, ": {}", d.sentence());
            return s;
        }
        let Some(n) = &self.notice else {
            return s;
        };
        let _ = write!(s, ": {} notice", n.kind.name());
        if let Some(d) = n.deadline {
            let _ = write!(s, ", deadline {}", format_rfc3339(d));
        }
        if let Some((action, at, _)) = &self.decision {
            let _ = match at {
                Some(t) => write!(s, "; decision: {action} at {}", format_rfc3339(*t)),
                None => write!(s, "; decision: {action} now"),
            };
        }
        if let Some((action, r)) = &self.result {
            let _ = match r {
                ActionResult::Failed(e) => write!(s, "; {action} failed: {e}"),
                ActionResult::Accepted => write!(s, "; {action} accepted by logind"),
                ActionResult::DryRun => write!(s, "; {action} not asked (dry run)"),
            };
        }
        if let Some(r) = &self.reason {
            let _ = write!(s, "; canceled: {r}");
        }
        let _ = write!(s, " — {}", n.detail);
        s
    }

    /// The whole line is escaped: every piece of it (the metadata service's names, the notice's
    /// detail, logind's error) is text, never a Slack link, mention or command.
    fn slack(&self, ctx: &Context) -> Vec<u8> {
        let text = slack_escape(&self.slack_text(ctx));
        serde_json::to_vec(&serde_json::json!({ "text": text }))
            .expect("a string always serializes")
    }
}

/// Slack's "Escaping text": `&`, `<` and `>` are control characters in a message (`<!channel>`
/// notifies everyone, `<http://x|y>` is a link), so text that means them literally carries
/// `&amp;`, `&lt;` and `&gt;` instead.
fn slack_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// The CloudEvents `source`: `/nthd/<hostname>`, a URI reference; characters outside the
/// unreserved set are percent-encoded.
fn source(hostname: &str) -> String {
    let mut s = String::from("/nthd/");
    for b in hostname.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            s.push(b as char);
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s
}

fn status_name(s: NoticeStatus) -> &'static str {
    match s {
        NoticeStatus::Active => "active",
        NoticeStatus::Canceled => "canceled",
        NoticeStatus::Completed => "completed",
    }
}

#[derive(Serialize)]
struct CloudEvent<'a> {
    specversion: &'static str,
    id: String,
    source: String,
    #[serde(rename = "type")]
    ty: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject: Option<&'a str>,
    time: String,
    datacontenttype: &'static str,
    /// Extension attribute: `true` on a fire drill's events (`nthd simulate --yes`), absent
    /// otherwise, so a router can filter drills out without reading `data`.
    #[serde(skip_serializing_if = "Option::is_none")]
    nthddrill: Option<bool>,
    data: Data<'a>,
}

#[derive(Serialize)]
struct Data<'a> {
    hostname: &'a str,
    cloud: Option<&'static str>,
    instance_id: Option<&'a str>,
    instance_type: Option<&'a str>,
    zone: Option<&'a str>,
    lifecycle: Option<&'static str>,
    /// Absent only in drained events, whose report carries its own `notice` (with
    /// `seconds_left`, or `null` when the shutdown was not nthd's).
    #[serde(skip_serializing_if = "Option::is_none")]
    notice: Option<NoticeData<'a>>,
    /// Drained events: the report's fields (`started`, `held_s`, `budget_s`, `outcome`,
    /// `holders`, `pods_left` or `pods_left_unknown`, `notice`) at the top of `data`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    drain: Option<&'a crate::drain::Report>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<DecisionData<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<ResultData<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    /// `true` on a fire drill's events, absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    drill: bool,
}

#[derive(Serialize)]
struct NoticeData<'a> {
    kind: &'static str,
    id: &'a str,
    event_id: Option<&'a str>,
    source: &'static str,
    status: &'static str,
    deadline: Option<String>,
    detail: &'a str,
}

#[derive(Serialize)]
struct DecisionData<'a> {
    action: &'static str,
    at: String,
    deferred: bool,
    reason: &'a str,
}

#[derive(Serialize)]
struct ResultData<'a> {
    action: &'static str,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a String>,
    /// logind's error name when it refused, e.g. `org.freedesktop.login1.BlockedByInhibitorLock`.
    #[serde(skip_serializing_if = "Option::is_none")]
    logind_error: Option<&'a str>,
    /// The holders of block locks on shutdown (`who`, `why`, `pid`, `uid`, `mode`).
    #[serde(skip_serializing_if = "<[BlockHolder]>::is_empty")]
    blocked_by: &'a [BlockHolder],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notice::{Lifecycle, NoticeKind, SourceId};
    use std::time::Duration;

    fn notice(id: &str) -> Notice {
        Notice {
            kind: NoticeKind::SpotTerminate,
            source: SourceId::new("aws/spot/instance-action"),
            id: crate::notice::NoticeId::from_parts(&[id]),
            event_id: None,
            deadline: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)),
            status: NoticeStatus::Active,
            detail: "spot terminate".into(),
            raw: String::new(),
        }
    }

    fn ctx(host: &str) -> Context {
        Context {
            hostname: host.into(),
            cloud: Some(Cloud::Aws),
            identity: Identity {
                instance_id: Some("i-0abc".into()),
                lifecycle: Some(Lifecycle::Spot),
                ..Identity::default()
            },
        }
    }

    #[test]
    fn ids_are_stable_and_distinct() {
        let n = notice("aws-spot-1");
        let c = ctx("node-1");
        let a = Event::canceled(&n, "gone").id(&c);
        let b = Event::canceled(&n, "other reason").with_time(SystemTime::UNIX_EPOCH);
        assert_eq!(a, b.id(&c), "time and reason are not part of the id");
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        let ok = Event::action(&n, PowerAction::PowerOff, ActionResult::Accepted).id(&c);
        let failed = Event::action(&n, PowerAction::PowerOff, ActionResult::Failed("x".into()));
        let mut ids = vec![a.clone(), ok, failed.id(&c), b.id(&ctx("node-2"))];
        ids.push(Event::canceled(&notice("aws-spot-2"), "").id(&c));
        let n_ids = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n_ids, "{ids:?}");
    }

    /// A drill's events carry the `nthddrill` extension attribute and `data.drill`; a real
    /// notice's carry neither (the schema only grows).
    #[test]
    fn a_drill_is_marked_and_a_real_notice_is_not() {
        let c = ctx("node-1");
        let json = |n: &Notice| {
            let e = Event::action(n, PowerAction::PowerOff, ActionResult::Accepted);
            let (_, body) = e.render(&c, WebhookFormat::CloudEvents);
            let slack = String::from_utf8(e.render(&c, WebhookFormat::Slack).1).unwrap();
            (
                serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
                slack,
            )
        };
        let (real, slack) = json(&notice("aws-spot-1"));
        assert!(real.get("nthddrill").is_none() && real["data"].get("drill").is_none());
        assert!(!slack.contains("drill"), "{slack}");
        let mut drill = notice("simulate/spot-terminate/1-2-0");
        drill.source = crate::notice::DRILL_SOURCE;
        let (v, slack) = json(&drill);
        assert_eq!(v["nthddrill"], serde_json::json!(true), "{v}");
        assert_eq!(v["data"]["drill"], serde_json::json!(true), "{v}");
        assert!(slack.contains("[fire drill] nthd on node-1"), "{slack}");
    }

    #[test]
    fn slack_escape_covers_its_three_characters_only() {
        assert_eq!(
            slack_escape("<!channel> & <http://x|y> — \"é\" *b*"),
            "&lt;!channel&gt; &amp; &lt;http://x|y&gt; — \"é\" *b*"
        );
        assert_eq!(
            slack_escape("&amp;"),
            "&amp;amp;",
            "already-escaped text stays literal"
        );
    }

    #[test]
    fn source_is_a_uri_reference() {
        assert_eq!(source("node-1.example"), "/nthd/node-1.example");
        assert_eq!(source("a b/c"), "/nthd/a%20b%2Fc");
    }

    #[test]
    fn this_host_has_a_name() {
        let h = hostname();
        assert!(
            !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()),
            "{h:?}"
        );
    }

    fn report(notice: serde_json::Value) -> crate::drain::Report {
        serde_json::from_value(serde_json::json!({
            "started": "2026-11-28T06:00:00Z", "held_s": 5.1, "budget_s": 30.0,
            "outcome": "released", "pods_left": [],
            "holders": [{"who": "kubelet", "why": "drain", "pid": 8, "uid": 0,
                         "released_s": 5.1}],
            "notice": notice
        }))
        .unwrap()
    }

    #[test]
    fn a_drained_event_carries_the_report_at_the_top_of_data() {
        let r = report(serde_json::Value::Null);
        let e = Event::drained(&r, None);
        let (ctype, body) = e.render(&ctx("node-1"), WebhookFormat::CloudEvents);
        assert_eq!(ctype, "application/cloudevents+json");
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["type"], "io.nthd.drained");
        assert_eq!(v["subject"], "i-0abc");
        let d = &v["data"];
        assert_eq!(
            (d["outcome"].as_str(), d["held_s"].as_f64()),
            (Some("released"), Some(5.1))
        );
        assert_eq!(d["budget_s"], 30.0);
        assert_eq!(d["pods_left"], serde_json::json!([]));
        assert_eq!(d["holders"][0]["who"], "kubelet");
        assert!(d["notice"].is_null(), "not nthd's shutdown: {d}");
        assert_eq!(d["hostname"], "node-1");
        // One report per shutdown: the same shutdown gives the same id, another another.
        let again = Event::drained(&r, None).id(&ctx("node-1"));
        assert_eq!(e.id(&ctx("node-1")), again);
        let mut later = r.clone();
        later.started = "2026-11-28T07:00:00Z".into();
        assert_ne!(Event::drained(&later, None).id(&ctx("node-1")), again);
    }

    #[test]
    fn a_drained_event_names_the_notice_it_followed_and_escapes_slack() {
        let n = notice("aws-spot-1");
        let followed = serde_json::json!({"kind": "spot-terminate", "id": n.id.to_string(),
            "action": "poweroff", "deadline": null, "seconds_left": 115.0});
        let mut r = report(followed);
        r.holders[0].who = "kubelet<!channel>".into();
        let e = Event::drained(&r, Some(&n));
        let (_, body) = e.render(&ctx("node-1"), WebhookFormat::CloudEvents);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["data"]["notice"]["seconds_left"], 115.0);
        assert_eq!(v["data"]["notice"]["kind"], "spot-terminate");
        assert!(
            v["data"]["notice"].get("detail").is_none(),
            "the report's notice, once"
        );
        assert_eq!(
            e.deadline(),
            n.deadline,
            "retried until the notice's deadline"
        );
        let (_, body) = e.render(&ctx("node-1"), WebhookFormat::Slack);
        let text = serde_json::from_slice::<serde_json::Value>(&body).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            text.contains("drain released after 5.1 s of the 30.0 s budget"),
            "{text}"
        );
        assert!(text.contains("kubelet&lt;!channel&gt;"), "{text}");
    }

    /// `logind_error` and `blocked_by` appear only on an action logind refused; the id does not
    /// change with them.
    #[test]
    fn a_refused_action_names_loginds_error_and_the_holders() {
        let (n, c) = (notice("aws-spot-1"), ctx("node-1"));
        let failed = || ActionResult::Failed("logind refused PowerOff".into());
        let plain = Event::action(&n, PowerAction::PowerOff, failed());
        let data = |e: &Event| {
            let body = e.render(&c, WebhookFormat::CloudEvents).1;
            serde_json::from_slice::<serde_json::Value>(&body).unwrap()["data"]["result"].clone()
        };
        let r = data(&plain);
        assert!(
            r.get("logind_error").is_none() && r.get("blocked_by").is_none(),
            "{r}"
        );
        let holder = crate::logind::Inhibitor {
            what: "shutdown".into(),
            who: "backup-agent".into(),
            why: "nightly backup".into(),
            mode: "block".into(),
            uid: 0,
            pid: 812,
        };
        let holders = [holder];
        let refusal = crate::logind::Refusal {
            error: "org.freedesktop.login1.BlockedByInhibitorLock",
            holders: &holders,
        };
        let refused =
            Event::action(&n, PowerAction::PowerOff, failed()).with_refusal(Some(refusal));
        let r = data(&refused);
        assert_eq!(
            r["logind_error"],
            "org.freedesktop.login1.BlockedByInhibitorLock"
        );
        assert_eq!(
            r["blocked_by"],
            serde_json::json!([{"who": "backup-agent", "why": "nightly backup", "pid": 812,
                                "uid": 0, "mode": "block"}])
        );
        assert_eq!(refused.id(&c), plain.id(&c));
    }
}
