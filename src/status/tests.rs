use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, SystemTime};

use super::command::{read, render, NpdCondition, ReadError, NPD_MAX_LINE};
use super::*;
use crate::notice::{Lifecycle, NoticeId, NoticeKind};
use crate::policy::PolicyConfig;

/// The verdict on nthd's own condition, `TerminationNotice`.
fn npd_verdict(read: &Result<Status, ReadError>, now: SystemTime) -> (u8, String) {
    super::command::npd_verdict(read, now, NpdCondition::TerminationNotice)
}

const SRC: SourceId = SourceId::new("aws/spot/instance-action");

fn notice(kind: NoticeKind, id: &str, deadline_in: u64) -> Notice {
    Notice {
        kind,
        source: SRC,
        id: NoticeId::from_parts(&[id]),
        event_id: None,
        deadline: Some(SystemTime::now() + Duration::from_secs(deadline_in)),
        status: NoticeStatus::Active,
        detail: format!("{} in {deadline_in}s", kind.name()),
        raw: String::new(),
    }
}

fn planner_with(notices: &[Notice]) -> Planner {
    let mut p = Planner::new(PolicyConfig::default());
    p.observe(
        notices,
        &[SRC],
        SystemTime::now(),
        Some(Duration::from_secs(300)),
    );
    p
}

fn facts(p: &Planner) -> Facts<'_> {
    Facts {
        planner: p,
        budget: Some(Duration::from_secs(300)),
        dry_run: false,
        metadata_error: None,
        logind_error: None,
        extras: PerExtra::default(),
    }
}

fn tracker(dir: &Path) -> (Tracker, PathBuf) {
    let path = dir.join("status.json");
    (Tracker::new(Some(path.clone()), &[]), path)
}

#[test]
fn the_file_is_world_readable_versioned_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path) = tracker(dir.path());
    t.set_cloud(Cloud::Aws, "set by --provider", "spot, rebalance");
    t.set_identity(&Identity {
        instance_id: Some("i-0abc".into()),
        instance_type: Some("m5.large".into()),
        zone: Some("us-east-1a".into()),
        lifecycle: Some(Lifecycle::Spot),
    });
    let p = planner_with(&[notice(NoticeKind::SpotTerminate, "n1", 120)]);
    t.observation(
        &Observation {
            fresh: vec![SRC],
            ..Observation::default()
        },
        Moment::now(),
    );
    t.update(&facts(&p), true, Moment::now());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    let s = read(&path).unwrap();
    assert_eq!(s.schema, SCHEMA);
    assert_eq!(s.cloud.as_deref(), Some("aws"));
    assert_eq!(s.instance.instance_type.as_deref(), Some("m5.large"));
    assert_eq!(s.instance.lifecycle.as_deref(), Some("spot"));
    assert_eq!(s.sources.len(), 1);
    assert!(s.sources[0].last_ok.is_some());
    assert_eq!(s.notices.len(), 1);
    assert_eq!(s.notices[0].kind, "spot-terminate");
    assert_eq!(s.notices[0].action, "poweroff");
    assert!(!s.notices[0].acted);
    assert_eq!(s.drain_budget_seconds, Some(300));
    // The raw JSON uses the documented key for the instance type.
    let raw = std::fs::read_to_string(&path).unwrap();
    assert!(raw.contains("\"type\": \"m5.large\""), "{raw}");
}

#[test]
fn it_is_rewritten_only_when_something_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path) = tracker(dir.path());
    let p = planner_with(&[]);
    let ok = Observation {
        fresh: vec![SRC],
        ..Observation::default()
    };
    t.observation(&ok, Moment::now());
    t.update(&facts(&p), true, Moment::now());
    assert!(path.exists());
    std::fs::remove_file(&path).unwrap();
    // Another successful read a second later: only last_ok moved, so no write.
    let later = Moment::now().after(Duration::from_secs(1));
    t.observation(&ok, later);
    t.update(&facts(&p), false, later);
    assert!(
        !path.exists(),
        "rewritten although nothing but times changed"
    );
    // Even when the daemon says the planner moved, equal content is not rewritten.
    t.update(&facts(&p), true, later);
    assert!(!path.exists(), "rewritten although the content is the same");
    // A notice appears: written at once.
    let p = planner_with(&[notice(NoticeKind::Rebalance, "r1", 600)]);
    t.update(&facts(&p), true, later);
    assert_eq!(read(&path).unwrap().notices[0].kind, "rebalance");
}

#[test]
fn errors_are_kept_after_they_clear() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path) = tracker(dir.path());
    let p = planner_with(&[]);
    let mut f = facts(&p);
    f.logind_error = Some("logind PowerOff: access denied");
    t.update(&f, false, Moment::now());
    let e = read(&path).unwrap().last_logind_error.unwrap();
    assert!(e.current && e.message.contains("access denied"));
    f.logind_error = None;
    t.update(&f, false, Moment::now());
    let e = read(&path).unwrap().last_logind_error.unwrap();
    assert!(
        !e.current,
        "a resolved error is still shown, marked resolved"
    );
}

#[test]
fn an_unwritable_path_does_not_stop_anything() {
    let (mut t, _) = tracker(Path::new("/nonexistent/nthd-test"));
    let p = planner_with(&[]);
    t.update(&facts(&p), true, Moment::now());
    assert!(t
        .write_error
        .as_deref()
        .unwrap()
        .contains("NTHD_STATUS_FILE"));
}

fn status_with(notices: Vec<NoticeView>) -> Status {
    let now = format_rfc3339(SystemTime::now());
    Status {
        schema: SCHEMA,
        written_at: now.clone(),
        last_metadata_ok: Some(now),
        notices,
        ..Status::default()
    }
}

fn view(kind: &str, action: &str, acted: bool) -> NoticeView {
    NoticeView {
        id: format!("{kind}-1"),
        kind: kind.into(),
        status: "active".into(),
        deadline: Some(format_rfc3339(SystemTime::now() + Duration::from_secs(120))),
        action: action.into(),
        when: "now".into(),
        acted,
        ..NoticeView::default()
    }
}

#[test]
fn npd_exit_codes_follow_the_notice() {
    let now = SystemTime::now();
    let missing = Err(ReadError::Missing("/run/nthd/status.json".into()));
    assert_eq!(npd_verdict(&missing, now).0, 2);
    assert_eq!(npd_verdict(&Ok(status_with(vec![])), now).0, 0);
    // A notice nthd only logs is not an interruption it will act on.
    let log_only = status_with(vec![view("rebalance", "log", false)]);
    assert_eq!(npd_verdict(&Ok(log_only), now).0, 0);
    let (code, line) = npd_verdict(
        &Ok(status_with(vec![view("spot-terminate", "poweroff", false)])),
        now,
    );
    assert_eq!(code, 1);
    assert!(
        line.starts_with("spot-terminate: poweroff now, deadline "),
        "{line}"
    );
    // Acted on in an earlier boot and not under way now: nothing pending.
    let acted = status_with(vec![view("scheduled-reboot", "reboot", true)]);
    assert_eq!(npd_verdict(&Ok(acted), now).0, 0);
    // Under way: still 1, until the machine is gone.
    let mut s = status_with(vec![view("spot-terminate", "poweroff", true)]);
    s.shutting_down = Some(ShutdownView {
        notice_id: "spot-terminate-1".into(),
        action: "poweroff".into(),
    });
    let (code, line) = npd_verdict(&Ok(s), now);
    assert_eq!(code, 1);
    assert!(line.contains("poweroff under way"), "{line}");
}

/// The verdict on `condition`.
fn on(condition: NpdCondition, s: &Status) -> (u8, String) {
    super::command::npd_verdict(&Ok(s.clone()), SystemTime::now(), condition)
}

/// `MaintenancePlanned` and `GracefulNodeShutdownInProgress` (KEP-5683): the first is True while
/// a notice nthd will act on is listed, naming the cloud and the kind; the second only once
/// logind accepted the action, and nthd's blindness does not make it unknown.
#[test]
fn the_kubernetes_lifecycle_conditions_follow_the_notice_and_the_shutdown() {
    use NpdCondition::{GracefulNodeShutdownInProgress as Gns, MaintenancePlanned as Mp};
    let mut s = status_with(vec![view("scheduled-stop", "poweroff", false)]);
    s.cloud = Some("aws".into());
    let (code, line) = on(Mp, &s);
    assert_eq!(code, 1);
    assert!(
        line.starts_with("aws scheduled-stop: poweroff now"),
        "{line}"
    );
    assert_eq!(
        on(Gns, &s),
        (0, "nthd has asked logind for no shutdown".into())
    );
    let log_only = status_with(vec![view("rebalance", "log", false)]);
    assert_eq!(
        on(Mp, &log_only),
        (0, "no interruption notice listed".into())
    );

    s.shutting_down = Some(ShutdownView {
        notice_id: "scheduled-stop-1".into(),
        action: "poweroff".into(),
    });
    s.blind = Some(BlindView {
        last_ok: None,
        reason: "no read succeeded".into(),
    });
    let (code, line) = on(Gns, &s);
    assert_eq!(code, 1, "blind, but it knows what logind accepted: {line}");
    assert!(line.contains("poweroff for scheduled-stop"), "{line}");
    assert_eq!(on(Mp, &s).0, 1, "planned until the machine is gone");
    let mut blind = status_with(vec![]);
    blind.blind = s.blind.clone();
    assert_eq!(on(Mp, &blind).0, 2, "blind: it cannot vouch for no notice");
    assert_eq!(on(Gns, &blind).0, 0);
}

/// The conditions Karpenter's providers read: Azure's `PreemptionScheduled` with the message its
/// parser takes the deadline from (`Preempt Scheduled: <RFC 1123 GMT>.`), GCP's
/// `GCESpotPreempting`; each True for its own cloud's notice only, whatever nthd's action.
#[test]
fn the_karpenter_conditions_carry_the_notice_as_their_providers_read_it() {
    use NpdCondition::{GceSpotPreempting as Gce, PreemptionScheduled as Azure};
    let mut preempt = view("azure-preempt", "log", false);
    preempt.deadline = Some("2016-09-19T18:29:47Z".into());
    let s = status_with(vec![preempt.clone()]);
    let (code, line) = on(Azure, &s);
    assert_eq!(code, 1);
    assert!(
        line.starts_with("Preempt Scheduled: Mon, 19 Sep 2016 18:29:47 GMT. "),
        "{line}"
    );
    assert!(line.len() <= NPD_MAX_LINE, "{line}");
    assert_eq!(on(Gce, &s), (0, "no GCP preemption notice listed".into()));
    preempt.deadline = None;
    let started = on(Azure, &status_with(vec![preempt]));
    assert!(started.1.starts_with("Preempt Started."), "{started:?}");
    let reboot = status_with(vec![view("azure-reboot", "poweroff", false)]);
    assert_eq!(
        on(Azure, &reboot),
        (0, "no Azure Preempt notice listed".into())
    );

    let gcp = status_with(vec![view("gcp-preempt", "poweroff", false)]);
    let (code, line) = on(Gce, &gcp);
    assert_eq!(code, 1);
    assert!(line.starts_with("GCP instance/preempted is TRUE"), "{line}");
    let mut gone = view("gcp-preempt", "poweroff", false);
    gone.status = "canceled".into();
    assert_eq!(on(Gce, &status_with(vec![gone])).0, 0);
}

#[test]
fn npd_says_unknown_for_a_stale_or_foreign_file() {
    let now = SystemTime::now();
    let mut s = status_with(vec![view("spot-terminate", "poweroff", false)]);
    s.written_at = format_rfc3339(now - STALE_AFTER - Duration::from_secs(1));
    let (code, line) = npd_verdict(&Ok(s), now);
    assert_eq!(code, 2);
    assert!(line.contains("stale"), "{line}");
    // Written 200 s ago on the boot's clock: stale, though the wall clock (stepped back since)
    // makes written_at look fresh; and fresh on the boot's clock though the wall clock stepped
    // forward past STALE_AFTER.
    let boot_ms = u64::try_from(boottime().unwrap().as_millis()).unwrap();
    let mut s = status_with(vec![]);
    s.written_boottime_ms = Some(boot_ms - 200_000);
    let (code, line) = npd_verdict(&Ok(s.clone()), now);
    assert_eq!(code, 2, "{line}");
    assert!(line.contains("stale: written 3m2"), "{line}");
    s.written_boottime_ms = Some(boot_ms);
    let ahead = now + STALE_AFTER + Duration::from_secs(60);
    assert_eq!(npd_verdict(&Ok(s), ahead).0, 0);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.json");
    std::fs::write(&p, "{\"schema\": 2}").unwrap();
    assert_eq!(npd_verdict(&read(&p), now).0, 2);
    std::fs::write(&p, "<html>").unwrap();
    assert!(matches!(read(&p), Err(ReadError::Invalid { .. })));
}

#[test]
fn the_npd_line_fits_80_characters() {
    let now = SystemTime::now();
    let mut v = view("gcp-terminate-maintenance", "poweroff", false);
    v.when = format_rfc3339(now + Duration::from_secs(86_400 * 3));
    v.deadline = Some(format_rfc3339(now + Duration::from_secs(86_400 * 3 + 600)));
    let many = vec![v.clone(), v.clone(), v];
    let (code, line) = npd_verdict(&Ok(status_with(many)), now);
    assert_eq!(code, 1);
    assert!(line.len() <= NPD_MAX_LINE, "{} bytes: {line}", line.len());
    assert!(
        line.starts_with("gcp-terminate-maintenance: poweroff at "),
        "{line}"
    );
}

#[test]
fn a_long_multibyte_line_is_cut_at_80_bytes_on_a_character_boundary() {
    let now = SystemTime::now();
    // An invalid file's message names its path: make that long and multi-byte.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("é".repeat(60));
    std::fs::write(&p, "not json").unwrap();
    let (code, line) = npd_verdict(&read(&p), now);
    assert_eq!(code, 2);
    assert!(line.len() <= NPD_MAX_LINE, "{} bytes: {line}", line.len());
    assert!(line.ends_with("..."), "{line}");
    // A written_at that does not parse reads as stale, never as fresh.
    let mut s = status_with(vec![]);
    s.written_at = "garbage".into();
    assert_eq!(npd_verdict(&Ok(s), now).0, 2);
}

#[test]
fn the_screen_names_what_matters() {
    let now = SystemTime::now();
    let mut s = status_with(vec![view("spot-terminate", "poweroff", false)]);
    s.cloud = Some("aws".into());
    s.instance.id = Some("i-0abc".into());
    s.last_metadata_error = Some(ErrorView {
        at: format_rfc3339(now),
        message: "GET http://169.254.169.254/...: timed out".into(),
        current: true,
    });
    let screen = render(&s, now);
    for want in [
        "cloud:      aws",
        "i-0abc",
        "spot-terminate [active]",
        "decision: poweroff now",
        "metadata error (now",
    ] {
        assert!(screen.contains(want), "missing {want:?} in\n{screen}");
    }
}

fn read_at(
    t: &mut Tracker,
    fresh: Vec<SourceId>,
    errors: Vec<crate::provider::SourceError>,
    at: Moment,
) {
    t.observation(
        &Observation {
            fresh,
            errors,
            ..Observation::default()
        },
        at,
    );
}

fn unreachable(src: SourceId) -> crate::provider::SourceError {
    crate::provider::SourceError {
        source: src,
        error: crate::imds::ImdsError::Connect {
            url: "http://169.254.169.254/latest/meta-data/spot/instance-action".into(),
            reason: "Network unreachable".into(),
            advice: "",
        },
    }
}

/// A tracker blind after 30 s (60 s for one source) that has just read `sources`, with no
/// notice: it sees.
fn seeing(dir: &Path, sources: Vec<SourceId>) -> (Tracker, PathBuf, Planner, Moment) {
    let (mut t, path) = tracker(dir);
    t.set_blind_after(Duration::from_secs(30), Duration::from_secs(60));
    let p = planner_with(&[]);
    let t0 = Moment::now();
    read_at(&mut t, sources, vec![], t0);
    t.update(&facts(&p), true, t0);
    (t, path, p, t0)
}

#[test]
fn a_daemon_that_cannot_read_the_metadata_service_is_unknown_not_all_clear() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path, p, t0) = seeing(dir.path(), vec![SRC]);
    assert_eq!(
        npd_verdict(&read(&path), t0.wall).0,
        0,
        "it sees: all clear"
    );
    // 20 s of failures: a hiccup, still within the bound.
    let t1 = t0.after(Duration::from_secs(20));
    read_at(&mut t, vec![], vec![unreachable(SRC)], t1);
    let mut f = facts(&p);
    f.metadata_error = Some("http://169.254.169.254/: Network unreachable");
    t.update(&f, false, t1);
    assert_eq!(npd_verdict(&read(&path), t1.wall).0, 0);
    // Past 30 s without a successful read: blind, and the file says so at once.
    let t2 = t0.after(Duration::from_secs(31));
    t.update(&f, false, t2);
    let st = read(&path).unwrap();
    let b = st.blind.as_ref().expect("blind is in the file");
    assert!(b.reason.contains("Network unreachable"), "{}", b.reason);
    let (code, line) = npd_verdict(&Ok(st.clone()), t2.wall);
    assert_eq!(code, 2, "{line}");
    assert!(line.starts_with("unknown: nthd is blind"), "{line}");
    assert!(line.len() <= NPD_MAX_LINE);
    assert!(render(&st, t2.wall).contains("BLIND:"));
    // A read succeeds again: all clear again.
    let t3 = t2.after(Duration::from_secs(1));
    read_at(&mut t, vec![SRC], vec![], t3);
    t.update(&facts(&p), false, t3);
    assert_eq!(npd_verdict(&read(&path), t3.wall).0, 0);
}

#[test]
fn one_source_that_keeps_failing_is_blindness_too() {
    let dir = tempfile::tempdir().unwrap();
    let slow = SourceId::new("aws/events/maintenance/scheduled");
    let (mut t, path, p, t0) = seeing(dir.path(), vec![SRC, slow]);
    // The fast source keeps answering, the slow one fails for 61 s.
    for i in 1..=61 {
        read_at(
            &mut t,
            vec![SRC],
            vec![unreachable(slow)],
            t0.after(Duration::from_secs(i)),
        );
    }
    let at = t0.after(Duration::from_secs(61));
    t.update(&facts(&p), false, at);
    let st = read(&path).unwrap();
    let b = st.blind.expect("blind to one source");
    assert!(
        b.reason
            .starts_with("aws/events/maintenance/scheduled not read"),
        "{}",
        b.reason
    );
}

#[test]
fn no_read_at_all_since_start_is_blindness() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path) = tracker(dir.path());
    let p = planner_with(&[]);
    let start = Moment::now();
    t.update(&facts(&p), true, start);
    // Before the first read, nthd cannot vouch for anything: unknown, not "all clear".
    let (code, line) = npd_verdict(&read(&path), start.wall);
    assert_eq!(code, 2, "{line}");
    assert_eq!(line, "unknown: nothing read yet since nthd started");
    let later = start.after(BLIND_AFTER_MIN + Duration::from_secs(2));
    t.update(&facts(&p), false, later);
    let (code, line) = npd_verdict(&read(&path), later.wall);
    assert_eq!(code, 2, "{line}");
    assert!(line.starts_with("unknown: nthd is blind"), "{line}");
}

/// Blindness is measured on the monotonic clock: an NTP step backwards while nthd cannot read
/// the metadata service (here an hour) keeps it blind, and the metrics' age keeps growing.
#[test]
fn a_clock_step_backwards_keeps_nthd_blind() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path, p, t0) = seeing(dir.path(), vec![SRC]);
    let mut f = facts(&p);
    f.metadata_error = Some("http://169.254.169.254/: Network unreachable");
    let blind_at = t0.after(Duration::from_secs(31));
    read_at(&mut t, vec![], vec![unreachable(SRC)], blind_at);
    t.update(&f, false, blind_at);
    assert!(read(&path).unwrap().blind.is_some());
    // The wall clock steps back an hour; 10 s pass on the monotonic clock, still no read.
    let stepped = Moment {
        wall: t0.wall - Duration::from_secs(3600),
        mono: blind_at.mono + Duration::from_secs(10),
    };
    read_at(&mut t, vec![], vec![unreachable(SRC)], stepped);
    t.update(&f, false, stepped);
    let (blind, age) = t.health(stepped);
    assert_eq!(blind, Sight::Blind, "the step cleared blindness");
    assert_eq!(age, Some(Duration::from_secs(41)));
    let st = read(&path).unwrap();
    assert!(st.blind.is_some(), "the file lost blind after the step");
    assert_eq!(npd_verdict(&Ok(st), stepped.wall).0, 2);
}

#[test]
fn a_disabled_extra_is_in_the_file_and_makes_the_verdict_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path) = tracker(dir.path());
    let p = planner_with(&[]);
    let now = Moment::now();
    read_at(&mut t, vec![SRC], vec![], now);
    let mut f = facts(&p);
    f.extras.webhooks =
        Some("the webhook headers file /etc/nthd/h is readable by others (mode 0644)");
    t.update(&f, true, now);
    let st = read(&path).unwrap();
    assert_eq!(st.extras_disabled.len(), 1);
    assert_eq!(st.extras_disabled[0].name, "webhooks");
    let (code, line) = npd_verdict(&Ok(st.clone()), now.wall);
    assert_eq!(code, 2);
    assert!(line.starts_with("unknown: webhooks disabled: "), "{line}");
    assert!(render(&st, now.wall).contains("DISABLED:   webhooks"));
    // A notice nthd will act on still says 1: the condition that matters most wins.
    let p2 = planner_with(&[notice(NoticeKind::SpotTerminate, "n1", 120)]);
    let mut f2 = facts(&p2);
    f2.extras.webhooks = f.extras.webhooks;
    t.update(&f2, true, now);
    assert_eq!(npd_verdict(&read(&path), now.wall).0, 1);
    // Fixed: the file no longer lists it.
    t.update(&facts(&p), true, now);
    assert!(read(&path).unwrap().extras_disabled.is_empty());
}

/// A setting that fell back at start is in the file for as long as nthd runs, and makes
/// `nthd status` and the NPD verdict say degraded; a notice nthd acts on still wins.
#[test]
fn a_setting_that_fell_back_is_in_the_file_and_makes_the_verdict_degraded() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path) = tracker(dir.path());
    t.set_degraded([
        (
            "NTHD_DRY_RUN".to_string(),
            "NTHD_DRY_RUN=\"maybe\" cannot be used".to_string(),
        ),
        (
            "/etc/default/nthd line 4".to_string(),
            "line 4: a NUL byte".to_string(),
        ),
    ]);
    let p = planner_with(&[]);
    let now = Moment::now();
    read_at(&mut t, vec![SRC], vec![], now);
    t.update(&facts(&p), true, now);
    let st = read(&path).unwrap();
    assert_eq!(st.degraded.len(), 2);
    let (code, line) = npd_verdict(&Ok(st.clone()), now.wall);
    assert_eq!(code, 2);
    assert_eq!(
        line,
        "unknown: degraded: NTHD_DRY_RUN fell back (+1 more); see nthd check"
    );
    assert!(render(&st, now.wall).contains("DEGRADED:   NTHD_DRY_RUN=\"maybe\""));
    let p2 = planner_with(&[notice(NoticeKind::SpotTerminate, "n1", 120)]);
    t.update(&facts(&p2), true, now);
    assert_eq!(npd_verdict(&read(&path), now.wall).0, 1);
    // Nothing fell back: no field at all in the file.
    let dir2 = tempfile::tempdir().unwrap();
    let (mut t2, path2) = tracker(dir2.path());
    read_at(&mut t2, vec![SRC], vec![], now);
    t2.update(&facts(&p), true, now);
    let text = std::fs::read_to_string(&path2).unwrap();
    assert!(!text.contains("degraded"), "{text}");
    assert_eq!(npd_verdict(&read(&path2), now.wall).0, 0);
}

/// `nthd status --npd` runs as root (NPD's), with a 5 s timeout, and user nthd owns the status
/// directory: whatever is planted there instead of a status file (a FIFO, a link to a valid
/// file, a directory, a valid file over 1 MiB, a socket) makes it say "unknown" and why, at
/// once.
#[test]
fn a_trap_at_the_status_path_is_unknown_at_once() {
    use crate::files::tests::{within_5s, TRAPS};
    let valid = serde_json::to_vec(&status_with(vec![])).unwrap();
    for trap in TRAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status.json");
        let (want, _listener) = trap.plant(&path, &valid);
        let p = path.clone();
        let got = within_5s(&format!("reading a {trap:?}"), move || read(&p));
        let e = match &got {
            Err(e @ ReadError::Unreadable(_)) => e.to_string(),
            other => panic!("{trap:?}: {other:?}"),
        };
        let fix = format!("; move it away: mv {0} {0}.bad", path.display());
        assert!(e.contains(want) && e.ends_with(&fix), "{trap:?}: {e}");
        let (code, line) = npd_verdict(&got, SystemTime::now());
        let word = want.split(',').next().unwrap();
        assert!(
            code == 2 && line.starts_with("unknown: ") && line.contains(word.trim()),
            "{trap:?}: {code} {line}"
        );
    }
}

fn drill_view(id: &str) -> ActionView {
    ActionView {
        notice_id: id.to_string(),
        kind: Some("spot-terminate".into()),
        action: "poweroff".into(),
        at: format_rfc3339(SystemTime::now()),
        result: "accepted".into(),
        error: None,
        drill: true,
        ..ActionView::default()
    }
}

/// A drill (its own process) adds its action to the daemon's file, marked as a drill; the
/// daemon keeps it in every later write, and nothing is written where there is no file.
#[test]
fn a_drill_is_listed_and_the_daemon_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path) = tracker(dir.path());
    let view = drill_view("simulate/spot-terminate/1-2-0");
    assert_eq!(shared::add_drill_action(&path, view.clone()), Ok(false));
    assert!(!path.exists(), "a drill created the status file");

    let p = planner_with(&[]);
    t.update(&facts(&p), true, Moment::now());
    assert_eq!(shared::add_drill_action(&path, view.clone()), Ok(true));
    let read_actions = || read(&path).unwrap().actions;
    assert_eq!(read_actions(), vec![view.clone()]);
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o644
    );

    // The daemon's next write (a new notice) keeps the drill, and lists its own action after.
    let n = notice(NoticeKind::SpotTerminate, "aws/spot/terminate", 120);
    let p = planner_with(std::slice::from_ref(&n));
    let mut real = drill_view("aws/spot/terminate");
    real.drill = false;
    t.action(real.clone());
    t.update(&facts(&p), true, Moment::now());
    assert_eq!(read_actions(), vec![real, view]);
    let body = std::fs::read_to_string(&path).unwrap();
    assert!(
        body.contains("\"drill\": true"),
        "no action marked a drill: {body}"
    );
    assert!(body.contains("\"drill\": false"), "no real action: {body}");
}

/// While a drill holds the lock, the daemon leaves its write for the next update.
#[test]
fn the_daemon_does_not_write_over_a_drill_under_way() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path) = tracker(dir.path());
    let lock = crate::files::DirLock::take(&path, Duration::ZERO)
        .unwrap()
        .expect("free");
    let p = planner_with(&[]);
    t.update(&facts(&p), true, Moment::now());
    assert!(!path.exists(), "written under the drill's lock");
    drop(lock);
    t.update(&facts(&p), false, Moment::now());
    assert!(path.exists(), "not written once the lock was released");
}

#[test]
fn the_drain_report_and_a_missing_lock_reach_the_file_and_the_screen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, path) = tracker(dir.path());
    let p = planner_with(&[]);
    t.drain_lock(Some("logind refused nthd's delay lock".into()));
    t.update(&facts(&p), false, Moment::now());
    let s = read(&path).unwrap();
    assert_eq!(
        s.drain_lock_error.as_deref(),
        Some("logind refused nthd's delay lock")
    );
    assert!(render(&s, SystemTime::now()).contains("no drain report: logind refused"));
    let report: crate::drain::Report = serde_json::from_value(serde_json::json!({
        "started": "2026-11-28T06:00:00Z", "held_s": 28.0, "budget_s": 30.0,
        "outcome": "budget_exhausted", "holders": [], "pods_left": ["default/slow-1"],
        "notice": null
    }))
    .unwrap();
    t.drain_lock(None);
    t.drain(report.clone());
    t.update(&facts(&p), false, Moment::now());
    let s = read(&path).unwrap();
    assert_eq!(s.drain.as_ref(), Some(&report));
    assert_eq!(s.drain_lock_error, None);
    let screen = render(&s, SystemTime::now());
    assert!(
        screen.contains("drained:    drain budget exhausted") && screen.contains("default/slow-1"),
        "{screen}"
    );
}
