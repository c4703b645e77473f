//! Webhooks (src/webhook.rs) against a real local HTTP receiver: the CloudEvents body, stable
//! ids, retries and their limits, concurrency, secret headers, the probe and the Slack format.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod webhook_support;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use nthd::testing::notice::{
    Cloud, Identity, Lifecycle, Notice, NoticeId, NoticeKind, NoticeStatus, SourceId,
};
use nthd::testing::policy::{Action, Decision, PowerAction, When};
use nthd::testing::webhook::{
    parse_url, plain_http_warning, probe, probe_with_headers, ActionResult, Context, Event,
    ProbeOutcome, SecretHeaders, WebhookFormat, WebhookOptions, Webhooks,
};
use webhook_support::{Receiver, Script};

const T0: u64 = 1_800_000_000;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn notice(deadline: Option<SystemTime>) -> Notice {
    Notice {
        kind: NoticeKind::SpotTerminate,
        source: SourceId::new("aws/spot/instance-action"),
        id: NoticeId::from_parts(&["aws/spot/instance-action:terminate"]),
        event_id: None,
        deadline,
        status: NoticeStatus::Active,
        detail: "spot instance-action terminate at 2027-01-15T08:02:00Z".into(),
        raw: String::new(),
    }
}

fn context() -> Context {
    Context {
        hostname: "node-1".into(),
        cloud: Some(Cloud::Aws),
        identity: Identity {
            instance_id: Some("i-0123456789abcdef0".into()),
            instance_type: Some("m5.large".into()),
            zone: Some("us-east-1a".into()),
            lifecycle: Some(Lifecycle::Spot),
        },
    }
}

fn decision() -> Decision {
    Decision {
        action: Action::PowerOff,
        when: When::At(at(T0 + 90)),
        reason: "action-spot-terminate=poweroff".into(),
    }
}

fn opts(urls: &[String]) -> WebhookOptions {
    WebhookOptions {
        urls: urls.iter().map(|u| parse_url(u).unwrap()).collect(),
        backoff: Duration::from_millis(50),
        ..WebhookOptions::default()
    }
}

fn soon(secs: u64) -> Option<SystemTime> {
    Some(SystemTime::now() + Duration::from_secs(secs))
}

/// Captures this thread's log lines (the tests run on a current-thread runtime).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        let me = self.clone();
        let sub = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || me.clone())
            .finish();
        tracing::subscriber::set_default(sub)
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).to_string()
    }
}

#[tokio::test]
async fn cloudevents_structured_mode() {
    let r = Receiver::start(Script::Statuses(vec![200])).await;
    let w = Webhooks::start(&opts(&[r.url("/hook?token=x")]), context()).unwrap();
    w.send(Event::notice(&notice(Some(at(T0 + 120))), &decision()));
    w.drain(Duration::from_secs(10)).await;
    let got = r.all();
    assert_eq!(got.len(), 1);
    let req = &got[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/hook?token=x");
    assert_eq!(
        req.header("content-type"),
        Some("application/cloudevents+json")
    );
    let v = req.json();
    assert_eq!(v["specversion"], "1.0");
    assert_eq!(v["type"], "io.nthd.notice");
    assert_eq!(v["source"], "/nthd/node-1");
    assert_eq!(v["subject"], "i-0123456789abcdef0");
    assert_eq!(v["datacontenttype"], "application/json");
    assert_eq!(v["id"].as_str().unwrap().len(), 32);
    let time = v["time"].as_str().unwrap();
    let t = nthd::testing::timefmt::parse_rfc3339(time).expect("time is RFC 3339");
    assert!(
        t.elapsed().unwrap_or_default() < Duration::from_secs(60),
        "{time}"
    );
    let d = &v["data"];
    assert_eq!(d["cloud"], "aws");
    assert_eq!(d["instance_id"], "i-0123456789abcdef0");
    assert_eq!(d["instance_type"], "m5.large");
    assert_eq!(d["zone"], "us-east-1a");
    assert_eq!(d["lifecycle"], "spot");
    assert_eq!(d["notice"]["kind"], "spot-terminate");
    assert_eq!(d["notice"]["id"], "aws/spot/instance-action:terminate");
    assert_eq!(d["notice"]["event_id"], serde_json::Value::Null);
    assert_eq!(d["notice"]["deadline"], "2027-01-15T08:02:00Z");
    assert_eq!(d["notice"]["detail"], notice(None).detail);
    assert_eq!(d["decision"]["action"], "poweroff");
    assert_eq!(d["decision"]["at"], "2027-01-15T08:01:30Z");
    assert_eq!(d["decision"]["deferred"], true);
    assert!(d.get("result").is_none());
}

#[tokio::test]
async fn action_events_carry_the_result_and_the_context_at_send_time() {
    let r = Receiver::start(Script::Statuses(vec![200])).await;
    let w = Webhooks::start(&opts(&[r.url("/")]), Context::default()).unwrap();
    let n = notice(soon(60));
    w.send(Event::canceled(&n, "the platform withdrew the notice"));
    w.set_context(context());
    w.send(Event::action(
        &n,
        PowerAction::PowerOff,
        ActionResult::Failed("Access denied".into()),
    ));
    w.drain(Duration::from_secs(10)).await;
    let mut got: Vec<_> = r
        .all()
        .iter()
        .map(webhook_support::Received::json)
        .collect();
    got.sort_by_key(|v| v["type"].as_str().unwrap().to_string());
    assert_eq!(got[0]["type"], "io.nthd.action");
    assert_eq!(got[0]["subject"], "i-0123456789abcdef0");
    let res = &got[0]["data"]["result"];
    assert_eq!(
        (&res["action"], &res["outcome"], &res["error"]),
        (
            &"poweroff".into(),
            &"failed".into(),
            &"Access denied".into()
        )
    );
    assert_eq!(got[1]["type"], "io.nthd.canceled");
    assert!(got[1].get("subject").is_none(), "no instance id known yet");
    assert_eq!(got[1]["data"]["reason"], "the platform withdrew the notice");
}

#[tokio::test]
async fn the_same_notice_gets_the_same_id_after_a_restart() {
    let r = Receiver::start(Script::Statuses(vec![200])).await;
    for _ in 0..2 {
        // A new sender each time, as after a daemon restart; the notice is read afresh.
        let w = Webhooks::start(&opts(&[r.url("/")]), context()).unwrap();
        w.send(Event::notice(&notice(Some(at(T0 + 120))), &decision()));
        w.drain(Duration::from_secs(10)).await;
    }
    let ids: Vec<_> = r.all().iter().map(|q| q.json()["id"].clone()).collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1]);
}

#[tokio::test]
async fn retries_5xx_408_and_429_until_delivered() {
    let logs = Logs::default();
    let _g = logs.install();
    let r = Receiver::start(Script::Statuses(vec![503, 408, 429, 200])).await;
    let w = Webhooks::start(&opts(&[r.url("/")]), context()).unwrap();
    w.send(Event::notice(&notice(soon(120)), &decision()));
    w.drain(Duration::from_secs(20)).await;
    assert_eq!(r.count(), 4, "three failures, then the delivery");
    let ids: Vec<_> = r.all().iter().map(|q| q.json()["id"].clone()).collect();
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "a retry keeps the id");
    let text = logs.text();
    assert_eq!(
        text.matches("WARN").count(),
        1,
        "one warning per streak:\n{text}"
    );
    assert!(
        text.contains("INFO") && text.contains("delivering again"),
        "{text}"
    );
    assert!(text.contains("delivered io.nthd.notice"), "{text}");
}

#[tokio::test]
async fn a_4xx_is_not_retried() {
    let logs = Logs::default();
    let _g = logs.install();
    let r = Receiver::start(Script::Statuses(vec![404, 200])).await;
    let w = Webhooks::start(&opts(&[r.url("/T0/B0/SECRETPATH?sig=SECRETQ")]), context()).unwrap();
    w.send(Event::notice(&notice(soon(120)), &decision()));
    w.drain(Duration::from_secs(10)).await;
    assert_eq!(r.count(), 1);
    let text = logs.text();
    assert!(
        text.contains("HTTP 404") && text.contains("not retried"),
        "{text}"
    );
    assert!(
        text.contains(&format!("webhook http://127.0.0.1:{}:", r.port)),
        "{text}"
    );
    assert!(
        !text.contains("SECRET"),
        "the path and query are never logged:\n{text}"
    );
}

#[tokio::test]
async fn retries_stop_at_the_deadline() {
    let r = Receiver::start(Script::Statuses(vec![503])).await;
    let w = Webhooks::start(&opts(&[r.url("/")]), context()).unwrap();
    w.send(Event::notice(
        &notice(Some(SystemTime::now() + Duration::from_millis(1500))),
        &decision(),
    ));
    let start = Instant::now();
    w.drain(Duration::from_secs(30)).await;
    // Backoff 50 ms doubling: about 5 attempts in 1.5 s; retries stopped, drain returned early.
    let n = r.count();
    assert!((2..=12).contains(&n), "{n} attempts");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.count(), n, "no attempt after the deadline");
}

#[tokio::test]
async fn a_passed_deadline_still_gets_one_attempt() {
    let r = Receiver::start(Script::Statuses(vec![503])).await;
    let w = Webhooks::start(&opts(&[r.url("/")]), context()).unwrap();
    let past = SystemTime::now() - Duration::from_secs(60);
    w.send(Event::action(
        &notice(Some(past)),
        PowerAction::PowerOff,
        ActionResult::Accepted,
    ));
    w.drain(Duration::from_secs(10)).await;
    assert_eq!(r.count(), 1);
}

#[tokio::test]
async fn a_hanging_receiver_blocks_neither_send_nor_the_others() {
    let slow = Receiver::start(Script::Hang).await;
    let fast = Receiver::start(Script::Statuses(vec![200])).await;
    let mut o = opts(&[slow.url("/"), fast.url("/")]);
    o.attempt_timeout = Duration::from_secs(30);
    let w = Webhooks::start(&o, context()).unwrap();
    let n = notice(soon(300));
    let start = Instant::now();
    w.send(Event::notice(&n, &decision()));
    assert!(
        slow.wait_for(1, Duration::from_secs(10)).await,
        "the slow one got the request"
    );
    for _ in 0..5 {
        w.send(Event::action(
            &n,
            PowerAction::PowerOff,
            ActionResult::DryRun,
        ));
    }
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(
        fast.wait_for(6, Duration::from_secs(10)).await,
        "the fast receiver got every event while the slow one hangs ({} of 6)",
        fast.count()
    );
    let t = Instant::now();
    w.drain(Duration::from_millis(500)).await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "drain is bounded: {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn a_2xx_whose_body_stalls_is_delivered_once() {
    let logs = Logs::default();
    let _g = logs.install();
    let r = Receiver::start(Script::StallBody(200)).await;
    let mut o = opts(&[r.url("/")]);
    o.attempt_timeout = Duration::from_secs(2);
    let w = Webhooks::start(&o, context()).unwrap();
    w.send(Event::notice(&notice(soon(120)), &decision()));
    let start = Instant::now();
    w.drain(Duration::from_secs(8)).await;
    let took = start.elapsed();
    // Long enough for two attempt timeouts and a retry, had the body been waited for.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let text = logs.text();
    assert_eq!(r.count(), 1, "the status line said 200: no retry\n{text}");
    assert!(
        text.contains("delivered io.nthd.notice") && text.contains("HTTP 200, attempt 1"),
        "{text}"
    );
    assert!(!text.contains("WARN"), "{text}");
    assert!(
        took < Duration::from_secs(2),
        "the body was waited for past its bound: {took:?}"
    );
}

/// A port nothing listens on (connections are refused).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A flapping notice with a deadline weeks away (as AWS scheduled events have), one receiver
/// that accepts and never answers, one that refuses: every event still reaches the live one,
/// none of its attempts fails, and each dead one keeps only a few events, dropped with one
/// warning naming it.
///
/// The bounds are about starvation, not speed, so that a loaded or emulated machine passes as
/// a fast one does: a live URL held up behind the one that never answers would wait out an
/// attempt's 3 s for each of its 200 events (10 minutes), far past the 60 s allowed, and any
/// live attempt that took the whole 3 s would be a failure in the log.
#[tokio::test]
async fn dead_urls_never_starve_a_live_one() {
    let logs = Logs::default();
    let _g = logs.install();
    let hang = Receiver::start(Script::Hang).await;
    let refused = format!("http://127.0.0.1:{}/", closed_port());
    let live = Receiver::start(Script::Statuses(vec![200])).await;
    let mut o = opts(&[hang.url("/"), refused.clone(), live.url("/")]);
    o.attempt_timeout = Duration::from_secs(3);
    o.dead_after = Duration::from_millis(500);
    o.dead_queue = 6;
    let w = Webhooks::start(&o, context()).unwrap();
    const EVENTS: usize = 200;
    let far = soon(30 * 24 * 3600);
    for i in 0..EVENTS {
        let mut n = notice(far);
        n.id = NoticeId::from_parts(&["aws", "scheduled", &format!("instance-stop:{i}")]);
        w.send(Event::notice(&n, &decision()));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        live.wait_for(EVENTS, Duration::from_secs(60)).await,
        "the live receiver got {} of {EVENTS} events",
        live.count()
    );
    let mut ids: Vec<String> = live
        .all()
        .iter()
        .map(|q| q.json()["id"].to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), EVENTS, "every event, once");
    // The receiver counts an event when it arrives; the lane, once its answer is read: wait for
    // both dead lanes to be trimmed and the live one to have read its last answer.
    let settled = |p: &[usize]| p[0] <= 6 && p[1] <= 6 && p[2] == 0;
    let end = Instant::now() + Duration::from_secs(30);
    while !settled(&w.pending()) && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pending = w.pending();
    assert!(
        pending[0] <= 6 && pending[1] <= 6,
        "dead URLs' backlogs: {pending:?}"
    );
    assert_eq!(pending[2], 0, "{pending:?}");
    let dead = [
        format!("http://127.0.0.1:{}", hang.port),
        refused.trim_end_matches('/').to_string(),
    ];
    one_drop_warning_each_and_none_for_the_live_one(&logs.text(), &dead, live.port);
}

/// Each dead origin's backlog was trimmed with exactly one warning; the live one never warned.
fn one_drop_warning_each_and_none_for_the_live_one(text: &str, dead: &[String], live_port: u16) {
    for origin in dead {
        let drops = text
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("dropping the oldest"))
            .filter(|l| l.contains(&format!("webhook {origin}: ")))
            .count();
        assert_eq!(drops, 1, "one drop warning for {origin}:\n{text}");
    }
    let live_origin = format!("webhook http://127.0.0.1:{live_port}:");
    assert!(
        !text
            .lines()
            .any(|l| l.contains("WARN") && l.contains(&live_origin)),
        "the live URL never failed:\n{text}"
    );
}

#[tokio::test]
async fn retries_stop_at_the_retry_limit_when_the_deadline_is_weeks_away() {
    let logs = Logs::default();
    let _g = logs.install();
    let r = Receiver::start(Script::Statuses(vec![503])).await;
    let mut o = opts(&[r.url("/")]);
    o.retry_limit = Duration::from_millis(1500);
    let w = Webhooks::start(&o, context()).unwrap();
    w.send(Event::notice(&notice(soon(30 * 24 * 3600)), &decision()));
    let start = Instant::now();
    w.drain(Duration::from_secs(10)).await;
    let took = start.elapsed();
    let n = r.count();
    assert!((2..=12).contains(&n), "{n} attempts");
    assert!(took < Duration::from_secs(5), "retries went on: {took:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.count(), n, "no attempt after the limit");
    let text = logs.text();
    assert!(text.contains("for at most 1s"), "{text}");
}

#[tokio::test]
async fn send_returns_at_once() {
    let slow = Receiver::start(Script::Hang).await;
    let mut o = opts(&[slow.url("/")]);
    o.attempt_timeout = Duration::from_secs(30);
    o.queue = 4;
    let w = Webhooks::start(&o, context()).unwrap();
    let start = Instant::now();
    for i in 0..100 {
        let mut n = notice(soon(300));
        n.id = NoticeId::from_parts(&[&format!("n{i}")]);
        w.send(Event::notice(&n, &decision()));
    }
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}

fn headers_file(text: &str, mode: u32) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    f
}

#[tokio::test]
async fn secret_headers_are_sent_and_never_shown() {
    let logs = Logs::default();
    let _g = logs.install();
    let f = headers_file(
        "# token\nAuthorization: Bearer s3cr3t-token\nX-Tenant: blue\n",
        0o640,
    );
    let h = SecretHeaders::load(f.path(), nthd_testkit::effective_uid()).unwrap();
    assert!(!format!("{h:?}").contains("s3cr3t"), "{h:?}");
    let r = Receiver::start(Script::Statuses(vec![401])).await;
    let mut o = opts(&[r.url("/")]);
    o.headers_file = Some(f.path().to_path_buf());
    assert!(!format!("{o:?}").contains("s3cr3t"));
    let w = Webhooks::start_with_headers(&o, h.clone(), context()).unwrap();
    assert!(!format!("{w:?}").contains("s3cr3t"));
    w.send(Event::notice(&notice(soon(60)), &decision()));
    w.drain(Duration::from_secs(10)).await;
    let req = &r.all()[0];
    assert_eq!(req.header("authorization"), Some("Bearer s3cr3t-token"));
    assert_eq!(req.header("x-tenant"), Some("blue"));
    let probed = probe_with_headers(&o, h).await;
    assert_eq!(
        r.all()[1].header("authorization"),
        Some("Bearer s3cr3t-token")
    );
    let text = logs.text();
    assert!(
        text.contains("HTTP 401") && text.contains("--webhook-headers-file"),
        "{text}"
    );
    assert!(
        !text.contains("s3cr3t") && !format!("{probed:?}").contains("s3cr3t"),
        "{text}"
    );
}

#[tokio::test]
async fn secret_headers_over_plain_http_are_warned_about_once() {
    let logs = Logs::default();
    let _g = logs.install();
    let f = headers_file(
        "Authorization: Bearer s3cr3t-token\nX-Tenant: blue\n",
        0o600,
    );
    let me = nthd_testkit::effective_uid();
    let mut o = opts(&[
        "https://secure.example.com/hook".to_string(),
        "http://plain.example.com:8080/hook?key=QUERYSECRET".to_string(),
    ]);
    o.headers_file = Some(f.path().to_path_buf());
    let h = SecretHeaders::load(f.path(), me).unwrap();
    let warning = plain_http_warning(&o, &h).expect("a plain-http URL with secret headers");
    // The daemon's entry point (which wants the file owned by root) when the tests run as root.
    let w = if me == 0 {
        Webhooks::start(&o, context()).unwrap()
    } else {
        Webhooks::start_with_headers(&o, h, context()).unwrap()
    };
    w.drain(Duration::from_millis(100)).await;
    let text = logs.text();
    let warns: Vec<&str> = text.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warns.len(), 1, "one warning at start:\n{text}");
    assert!(warns[0].ends_with(&warning), "{text}");
    for want in [
        "webhook http://plain.example.com:8080:",
        "authorization, x-tenant",
        "unencrypted",
        "https://",
    ] {
        assert!(warning.contains(want), "{want:?} in {warning}");
    }
    for never in ["s3cr3t", "blue", "QUERYSECRET", "secure.example.com"] {
        assert!(!text.contains(never), "{never:?} in {text}");
    }
}

#[tokio::test]
async fn an_unsafe_headers_file_is_refused() {
    let me = nthd_testkit::effective_uid();
    let f = headers_file("Authorization: Bearer s3cr3t\n", 0o662);
    let e = SecretHeaders::load(f.path(), me).unwrap_err().to_string();
    let p = f.path().display().to_string();
    assert!(
        e.contains(&p) && e.contains("writable by group or others"),
        "{e}"
    );
    assert!(
        e.contains(&format!("chown root:nthd {p}; chmod 0640 {p}")),
        "{e}"
    );
    assert!(!e.contains("s3cr3t"));
    let f = headers_file("Authorization: Bearer s3cr3t\n", 0o600);
    let e = SecretHeaders::load(f.path(), me.wrapping_add(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("is owned by uid {me}")), "{e}");
    // The daemon's own entry point wants root as the owner.
    let mut o = opts(&["http://127.0.0.1:9/".to_string()]);
    o.headers_file = Some(f.path().to_path_buf());
    if me != 0 {
        let e = Webhooks::start(&o, context()).unwrap_err().to_string();
        assert!(e.contains("not root"), "{e}");
    } else {
        assert!(Webhooks::start(&o, context()).is_ok());
    }
}

#[tokio::test]
async fn probe_sends_the_abuse_protection_handshake() {
    let r = Receiver::start(Script::Statuses(vec![200])).await;
    let closed = webhook_support::Receiver::start(Script::Statuses(vec![200])).await;
    let closed_url = closed.url("/");
    drop(closed);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let results = probe(&opts(&[r.url("/x"), closed_url])).await;
    let req = &r.all()[0];
    assert_eq!(req.method, "OPTIONS");
    assert!(!req
        .header("webhook-request-origin")
        .unwrap_or("")
        .is_empty());
    assert_eq!(
        results[0].outcome,
        ProbeOutcome::Reachable {
            status: 200,
            allowed_origin: true
        }
    );
    assert!(results[0].reachable());
    let ProbeOutcome::Unreachable { cause, hint } = &results[1].outcome else {
        panic!("{:?}", results[1]);
    };
    assert_eq!(cause, "connection refused");
    assert!(hint.contains("IPAddressAllow="), "{hint}");
    let line = results[1].to_string();
    assert!(line.starts_with("webhook http://127.0.0.1:"), "{line}");
}

#[tokio::test]
async fn probe_names_dns_failures() {
    let results = probe(&opts(&["http://nthd-test.invalid/".to_string()])).await;
    let ProbeOutcome::Unreachable { cause, hint } = &results[0].outcome else {
        panic!("{:?}", results[0]);
    };
    assert!(cause.starts_with("cannot resolve the host"), "{cause}");
    assert!(hint.contains("DNS"), "{hint}");
}

#[test]
fn slack_format_golden() {
    let n = notice(Some(at(T0 + 120)));
    let cases = [
        Event::notice(&n, &decision()),
        Event::action(&n, PowerAction::PowerOff, ActionResult::Accepted),
        Event::action(
            &n,
            PowerAction::Reboot,
            ActionResult::Failed("Access denied".into()),
        ),
        Event::canceled(&n, "the notice is no longer listed"),
        Event::notice(
            &Notice {
                detail: "<!channel> & <http://x|y>".into(),
                ..n.clone()
            },
            &decision(),
        ),
    ];
    let mut got = Vec::new();
    for e in cases {
        let (ctype, body) = e.with_time(at(T0)).render(&context(), WebhookFormat::Slack);
        assert_eq!(ctype, "application/json");
        got.extend_from_slice(&body);
        got.push(b'\n');
    }
    let (_, body) = Event::notice(&n, &decision()).render(
        &Context {
            hostname: "node-2".into(),
            ..Context::default()
        },
        WebhookFormat::Slack,
    );
    got.extend_from_slice(&body);
    got.push(b'\n');
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/webhook-slack.jsonl"
    );
    if std::env::var_os("NTHD_BLESS").is_some() {
        std::fs::write(path, &got).unwrap();
    }
    let want =
        std::fs::read(path).expect("tests/golden/webhook-slack.jsonl (NTHD_BLESS=1 writes it)");
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
}

/// Slack reads `<…>` as a link, mention or command and `&` as the start of an entity; nthd
/// means none of them, so every `<`, `>` and `&` it sends is escaped.
#[test]
fn slack_text_escapes_what_slack_would_interpret() {
    let mut n = notice(Some(at(T0 + 120)));
    n.detail = "<!channel> & <http://x|y>".into();
    let mut ctx = context();
    ctx.identity.instance_type = Some("<@U0123>".into());
    let cases = [
        Event::notice(&n, &decision()),
        Event::action(
            &n,
            PowerAction::PowerOff,
            ActionResult::Failed("a <b> & c".into()),
        ),
        Event::canceled(&n, "<!here> withdrawn & gone"),
    ];
    for e in cases {
        let (_, body) = e.render(&ctx, WebhookFormat::Slack);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let text = v["text"].as_str().unwrap();
        assert!(
            text.ends_with(" — &lt;!channel&gt; &amp; &lt;http://x|y&gt;"),
            "{text}"
        );
        assert!(text.contains("&lt;@U0123&gt;"), "{text}");
        assert!(!text.contains(['<', '>']), "{text}");
        let unescaped = text
            .replace("&lt;", "")
            .replace("&gt;", "")
            .replace("&amp;", "");
        assert!(!unescaped.contains('&'), "a bare & in {text}");
    }
    let (_, body) = Event::action(
        &n,
        PowerAction::PowerOff,
        ActionResult::Failed("a <b> & c".into()),
    )
    .render(&ctx, WebhookFormat::Slack);
    assert!(
        String::from_utf8_lossy(&body).contains("failed: a &lt;b&gt; &amp; c"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (_, body) =
        Event::canceled(&n, "<!here> withdrawn & gone").render(&ctx, WebhookFormat::Slack);
    assert!(
        String::from_utf8_lossy(&body).contains("canceled: &lt;!here&gt; withdrawn &amp; gone"),
        "{}",
        String::from_utf8_lossy(&body)
    );
}

#[test]
fn cloudevents_golden() {
    let n = notice(Some(at(T0 + 120)));
    let (_, body) = Event::notice(&n, &decision())
        .with_time(at(T0))
        .render(&context(), WebhookFormat::CloudEvents);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/webhook-cloudevent.json"
    );
    if std::env::var_os("NTHD_BLESS").is_some() {
        std::fs::write(path, &body).unwrap();
    }
    let want =
        std::fs::read(path).expect("tests/golden/webhook-cloudevent.json (NTHD_BLESS=1 writes it)");
    assert_eq!(
        String::from_utf8_lossy(&body),
        String::from_utf8_lossy(&want)
    );
}
